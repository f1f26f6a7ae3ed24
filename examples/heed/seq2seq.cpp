// `heed seq2seq`: trains the encoder-decoder Transformer on a generated character task with
// source key-padding masks and teacher forcing (the training step is train's, train_step.h), then
// measures exact match of greedy decoding on held-out examples. Its last line is
// {"task": ..., "exact_match": X, "examples": N}. A stop signal saves the model trained so far
// (with --out) and exits 128+N.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "commands.h"
#include "core/autograd.h"
#include "core/ops.h"
#include "io.h"
#include "nn/safetensors.h"
#include "nn/transformer.h"
#include "optim/adam.h"
#include "profile.h"
#include "resources.h"
#include "run_dir.h"
#include "seq2seq.h"
#include "seq2seq_checkpoint.h"
#include "seq2seq_state.h"
#include "seq2seq_tasks.h"
#include "stop.h"
#include "train_options.h"
#include "train_state.h"
#include "train_step.h"

namespace heed::cli {

using nlohmann::json;
namespace fs = std::filesystem;


// Fraction of the examples whose greedy decoding equals the target.
// Decoding stops one character past the longest target of a chunk: an output that long without
// an end token is wrong whatever follows, so the score is that of unbounded decoding.
static double exact_match(nn::EncoderDecoder& model, const std::vector<Example>& test) {
  const int64_t n = static_cast<int64_t>(test.size());
  int64_t right = 0;
  for (int64_t i = 0; i < n; i += 250) {
    std::vector<std::string> src;
    int64_t longest = 0;
    for (int64_t j = i; j < std::min<int64_t>(n, i + 250); ++j) {
      src.push_back(test[j].source);
      longest = std::max<int64_t>(longest, static_cast<int64_t>(test[j].target.size()));
    }
    auto got = greedy_decode(model, src, std::min<int64_t>(longest + 1, kSeq2SeqMaxLen - 1));
    for (size_t j = 0; j < got.size(); ++j) right += got[j] == test[i + j].target;
  }
  return double(right) / double(n);
}

// Mean teacher-forced cross-entropy per target token (EOS included) over `examples`.
static double mean_loss(nn::EncoderDecoder& model, const std::vector<Example>& examples) {
  NoGradGuard no_grad;
  double total = 0;
  int64_t tokens = 0;
  for (size_t i = 0; i < examples.size(); i += 250) {
    check_stop();
    std::vector<Example> chunk(examples.begin() + i, examples.begin() + std::min(examples.size(), i + 250));
    Seq2SeqBatch b = make_batch(chunk);
    Tensor logits = model.forward(b.src, b.B, b.Ts, b.tgt_in, b.Tt, &b.src_mask, &b.tgt_mask);
    int64_t n = 0;
    for (int32_t t : b.tgt_out) n += t != Seq2SeqVocab::pad;
    total += cross_entropy(reshape(logits, {b.B * b.Tt, Seq2SeqVocab::size}), b.tgt_out, Seq2SeqVocab::pad).item() *
             double(n);
    tokens += n;
  }
  return total / double(tokens);
}

namespace {

// Peak bytes of a seq2seq run: a fixed 200 MiB (the process, the tasks' tables, and the caching
// allocator's blocks of the many sequence lengths), weights, gradients, moments and a checkpoint
// being written; per example of a batch the activations of the encoder and decoder at the longest
// lengths; a scoring chunk of up to 250 examples decoded greedily; and the held-out set (two
// strings and a set entry each). Fitted to the peak RSS of 8 runs of the dates task (d_model
// 64-512, 1-6 layers, batch 8-512: 270 MiB to 3.7 GiB), which it exceeds by 6-77 %.
double seq2seq_bytes(const Seq2SeqOptions& o) {
  const double P = seq2seq_parameters(o.d_model, o.n_layer);
  const double T = double(kSeq2SeqMaxLen), d = double(o.d_model), h = double(o.n_head), L = double(o.n_layer);
  const double V = Seq2SeqVocab::size;
  const double per_example = 4.0 * (2 * L * T * 24 * d + 1.3 * L * h * 3 * T * T + 4 * T * V);
  const double chunk = double(std::min<int64_t>(250, o.test_examples));
  const double scoring = chunk * 4.0 * T * (28 * d * L + 3 * V);
  return 200.0 * (1 << 20) + 28 * P + double(o.batch_size) * per_example + scoring + 256.0 * double(o.test_examples);
}

}  // namespace

int run_seq2seq(const Seq2SeqRequest& req) {
  if (req.resume && req.overwrite) throw UsageError("--resume and --overwrite contradict each other: choose one");
  if (req.resume && req.options.out.empty()) throw UsageError("--resume needs --out, the run directory to continue");
  Seq2SeqOptions o = req.options;
  o.out = o.out.empty() ? o.out : absolute_path(o.out);  // as train's: a/../b is b
  if (!req.resume) {
    if (o.task.empty()) throw UsageError("--task is required: copy, reverse or dates (or --resume --out DIR)");
    try {
      check_task(o.task);
    } catch (const Error& e) {
      throw UsageError(e.what());
    }
    resolve_seq2seq_defaults(o);
    validate_seq2seq(o);
    require_memory(seq2seq_bytes(o), "--n-embd " + std::to_string(o.d_model) + " --n-layer " +
                                         std::to_string(o.n_layer) + " --n-head " + std::to_string(o.n_head) +
                                         " --batch-size " + std::to_string(o.batch_size) + " --examples " +
                                         std::to_string(o.test_examples),
                   true);
  }
  std::unique_ptr<RunDirectory> run_dir;
  if (!o.out.empty())
    run_dir = std::make_unique<RunDirectory>(
        o.out, RunKind::seq2seq, req.resume ? OutMode::resume : req.overwrite ? OutMode::overwrite : OutMode::fresh,
        "heed seq2seq");

  // The state to continue from, validated, and the options it records.
  nn::SafetensorsFile state;
  Seq2SeqStateRecord record;
  const std::string what_state = o.out.empty() ? std::string() : seq2seq_state_path(o.out);
  if (req.resume) {
    if (!fs::exists(what_state))
      throw UsageError("--resume: no seq2seq training state in --out " + o.out + " (" + what_state +
                       " does not exist; runs of heed before --resume saved none)");
    {
      const ExitAtOnceOnStop only_reading;
      const std::string bytes = read_input_file(what_state, 3.0);
      state = nn::parse_safetensors(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), what_state);
    }
    record = read_seq2seq_state(state, what_state);
    o = resumed_options(seq2seq_option_table(), req.options, record.options, req.from_command_line, what_state);
    o.out = absolute_path(o.out);
    check_ranges(seq2seq_option_table(), o);
    if (o.max_iters < record.iter)
      throw UsageError("--max-iters " + std::to_string(o.max_iters) + ": the run in " + o.out + " has done " +
                       std::to_string(record.iter) + " iterations already");
    require_memory(seq2seq_bytes(o), "the run in " + o.out, true);
  }
  apply_threads(o.threads);

  const double start = now_s() - record.elapsed_s;
  Seq2SeqData data(o.task, o.test_examples, static_cast<uint64_t>(o.seed));
  nn::EncoderDecoder model(seq2seq_model_options(o));
  model.train();
  optim::AdamW opt = seq2seq_optimizer(model, o);
  TrainingStep step(model, opt, {o.lr, o.min_lr, o.warmup_iters, o.lr_decay_iters}, 1.0);
  if (run_dir) run_dir->begin_writing();  // --overwrite clears the old run only now, with nothing left to refuse this one
  double interval_loss = 0;
  int64_t interval_steps = 0, it = 0;
  const std::string log_file = o.out.empty() ? std::string() : log_path(o.out);
  if (req.resume) {
    restore_seq2seq_state(state, record, model, opt, data.gen, what_state);
    state = {};
    it = record.iter;
    interval_loss = record.interval_loss;
    interval_steps = record.interval_steps;
    truncate_log(log_file, it + 1);  // the report at `it` came before the state that follows it
    write_stdout("resuming " + o.out + " at iteration " + std::to_string(it) + " of " + std::to_string(o.max_iters) +
                 "\n");
  }
  {
    std::ostringstream head;
    head << "heed seq2seq " << o.task << ": " << model.num_parameters() << " parameters (n_embd " << o.d_model << ", "
         << o.n_head << " heads, " << o.n_layer << "+" << o.n_layer << " layers), " << data.test.size()
         << " held-out examples, " << o.max_iters << " iterations of " << o.batch_size << ", lr " << o.lr << "\n";
    write_stdout(head.str());
  }
  // Progress is measured on (a part of) the held-out set; nothing is decided by it.
  const std::vector<Example> val(data.test.begin(), data.test.begin() + std::min<size_t>(500, data.test.size()));
  std::vector<Example> batch(o.batch_size);
  Seq2SeqBatch b;
  // Saves what training has (refusing a diverged model): the state first, then the model, each
  // atomically, so a stop or a crash keeps the work done and --resume continues it.
  auto save = [&](int64_t done) {
    if (o.out.empty()) return;
    step.require_finite_weights(done);
    Seq2SeqStateRecord r;
    r.iter = done;
    r.options = o;
    r.interval_loss = interval_loss;
    r.interval_steps = interval_steps;
    r.elapsed_s = now_s() - start;
    save_seq2seq_state(what_state, model, opt, data.gen, r);
    save_seq2seq(model_path(o.out), model, o);
    try {
      if (std::filesystem::exists(log_file)) write_loss_plot({log_file}, plot_path(o.out));
    } catch (const Stopped&) {  // a log over 16 MiB read while stopping: the model is what counts
    }
  };
  for (; it < o.max_iters; ++it) {
    if (g_stop_signal) {
      save(it);
      write_stdout("stopped by signal " + std::to_string(g_stop_signal) + " at iteration " + std::to_string(it) +
                   (o.out.empty() ? std::string() : "; saved in " + o.out + " (continue with --resume)") + "\n");
      return 128 + g_stop_signal;
    }
    const double l = step.run(
        it,
        [&] {
          for (auto& e : batch) e = data.train_example();
          b = make_batch(batch);
        },
        [&] {
          Tensor logits = model.forward(b.src, b.B, b.Ts, b.tgt_in, b.Tt, &b.src_mask, &b.tgt_mask);
          return cross_entropy(reshape(logits, {b.B * b.Tt, Seq2SeqVocab::size}), b.tgt_out, Seq2SeqVocab::pad);
        });
    interval_loss += l;
    ++interval_steps;
    if ((it + 1) % o.eval_interval == 0 || it + 1 == o.max_iters) {
      model.eval();
      double vl = 0, em = 0;
      try {
        vl = mean_loss(model, val);
        em = exact_match(model, val);
      } catch (const Stopped&) {  // the progress report was cut short: training is what counts
        model.train();
        continue;  // the loop's next check of the signal saves and stops
      }
      model.train();
      const double tl = interval_loss / double(interval_steps);
      interval_loss = 0;
      interval_steps = 0;
      char line[256];
      std::snprintf(line, sizeof line,
                    "iter %lld: train loss %.4f, val loss %.4f, exact match %.3f (%zu held-out), elapsed %.1fs\n",
                    (long long)(it + 1), tl, vl, em, val.size(), now_s() - start);
      write_stdout(line);
      if (!log_file.empty()) {
        const json entry = {{"iter", it + 1}, {"train_loss", std::round(tl * 1e4) / 1e4},
                            {"val_loss", std::round(vl * 1e4) / 1e4}, {"exact_match", em},
                            {"elapsed_s", std::round((now_s() - start) * 100) / 100}};
        append_line(log_file, entry.dump());
        save(it + 1);
      }
    }
  }
  model.eval();
  save(it);  // before scoring: a stop while scoring keeps the trained model
  if (!o.out.empty())
    write_stdout("saved " + model_path(o.out) + ", " + log_file + " and loss.svg\n");
  const double em = exact_match(model, data.test);
  const double wall = now_s() - start;
  // a few examples, then the summary as the last line
  const size_t n_shown = std::min<size_t>(3, data.test.size());
  std::vector<std::string> sources;
  for (size_t i = 0; i < n_shown; ++i) sources.push_back(data.test[i].source);
  const auto shown = greedy_decode(model, sources, kSeq2SeqMaxLen - 1);
  std::string tail;
  for (size_t i = 0; i < n_shown; ++i) {
    char line[256];
    std::snprintf(line, sizeof line, "  %-30s -> %-24s (expected %s)\n", data.test[i].source.c_str(), shown[i].c_str(),
                  data.test[i].target.c_str());
    tail += line;
  }
  char done[96];
  std::snprintf(done, sizeof done, "%lld iterations, wall time %.1fs\n", (long long)o.max_iters, wall);
  tail += done;
  const json summary = {{"task", o.task}, {"exact_match", em}, {"examples", data.test.size()}};
  write_stdout(tail + summary.dump() + "\n");
  return 0;
}

}  // namespace heed::cli
