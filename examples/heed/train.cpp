// `heed train` and `heed bench`: nanoGPT's shakespeare_char recipe (AdamW with weight decay on
// 2-D tensors, linear warm-up then cosine decay, gradient clipping, random batches), with atomic
// checkpoints, an exact --resume, a clean stop on SIGINT/SIGTERM, and an op profile.
//
// run_train goes through its phases in order, each a function below: the options of the run
// (resolve_options), its directory (RunDirectory, run_dir.h), the corpus (load_corpus), the start
// (start_fresh / start_resumed), the training loop (train_loop) and the closing sample.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <limits>
#include <optional>
#include <sstream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "config_file.h"
#include "core/autocast.h"
#include "core/autograd.h"
#include "core/cpu.h"
#include "core/ops.h"
#include "core/parallel.h"
#include "core/tuning.h"
#include "corpus.h"
#include "data_parallel.h"
#include "dist/param_checksum.h"
#include "dist/runtime.h"
#include "io.h"
#include "load_model.h"
#include "nn/gpt.h"
#include "nn/gpt_checkpoint.h"
#include "nn/safetensors.h"
#include "optim/adam.h"
#include "precision.h"
#include "profile.h"
#include "progress_line.h"
#include "resources.h"
#include "run_dir.h"
#include "stop.h"
#include "train_options.h"
#include "train_state.h"
#include "train_step.h"

namespace heed::cli {

using nlohmann::json;
namespace fs = std::filesystem;

void apply_threads(int64_t threads) {
  // Under mpirun, --threads 0 gives each process of this host its share of the cores.
  const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN) / processes_on_this_host();
  set_num_threads(threads > 0 ? static_cast<int>(threads) : static_cast<int>(std::max(1L, cpus)));
}

std::string default_corpus_path() {
  for (const char* p : {HEED_SOURCE_DIR "/data/tinyshakespeare.txt", "data/tinyshakespeare.txt"})
    if (fs::exists(p)) return p;
  return HEED_SOURCE_DIR "/data/tinyshakespeare.txt";
}

namespace {

// ------------------------------------------------------------------------------------------
// The corpus

struct Corpus {
  Vocab vocab;
  std::vector<int32_t> train, val;
};

// What a corpus costs per byte of its file: the bytes, the code points (4 bytes each, at most one
// per byte), the ids and the two splits (4 bytes each).
constexpr double kCorpusBytesPerByte = 13.0;

// `fixed`: the vocabulary of the model being fine-tuned (a character of the text outside it is an
// error naming the character and its byte offset), else the text's own.
Corpus load_corpus(const std::string& path, int64_t block_size, const Vocab* fixed = nullptr) {
  std::u32string text;
  {
    const std::string bytes = read_input_file(path, kCorpusBytesPerByte);
    HEED_CHECK(!bytes.empty(), path, ": the corpus is empty");
    text = decode_utf8(bytes, path);
  }
  Corpus c;
  c.vocab = fixed ? *fixed : Vocab::from_text(text);
  std::vector<int32_t> ids = c.vocab.encode(text, path);
  text = {};
  const size_t n_train = static_cast<size_t>(double(ids.size()) * 0.9);  // nanoGPT's 90/10 split
  c.train.assign(ids.begin(), ids.begin() + n_train);
  c.val.assign(ids.begin() + n_train, ids.end());
  for (auto [name, split] : {std::pair{"train", &c.train}, std::pair{"val", &c.val}})
    HEED_CHECK(static_cast<int64_t>(split->size()) > block_size + 1, path, ": the ", name, " split has ",
               split->size(), " characters (of ", ids.size(), " in all), too few for --block-size ", block_size,
               " (needs more than ", block_size + 1, ")");
  return c;
}

// The size flags, as a refusal names them.
std::string size_flags(const TrainOptions& o) {
  return "--n-layer " + std::to_string(o.n_layer) + " --n-embd " + std::to_string(o.n_embd) + " --n-head " +
         std::to_string(o.n_head) + " --block-size " + std::to_string(o.block_size) + " --batch-size " +
         std::to_string(o.batch_size) + (o.grad_accum > 1 ? " --grad-accum " + std::to_string(o.grad_accum) : "");
}

// The memory reading --data takes; a file too large on its own is the file's fault, named as such
// (exit 1), before the flags are blamed for the sum.
double corpus_memory(const std::string& data) {
  const double size = double(regular_file_size(data));
  require_memory(kCorpusBytesPerByte * size, "--data " + data + " (" + format_bytes(size) + ")", false);
  return kCorpusBytesPerByte * size;
}

// Refuses options whose model and batch would not fit, for a vocabulary of `vocab` characters:
// the model with one micro-batch's activations, and the ids of the whole step's batch (inputs and
// targets, int32, --grad-accum micro-batches drawn at once).
void check_training_memory(const TrainOptions& o, int64_t vocab, double more = 0) {
  const double step_ids_bytes = 2.0 * 4.0 * double(o.grad_accum) * double(o.batch_size) * double(o.block_size);
  require_memory(gpt_training_bytes(gpt_config(o, vocab), o.batch_size) + step_ids_bytes + more,
                 "the model and batch (" + size_flags(o) + ")", true);
}

// ------------------------------------------------------------------------------------------
// The model, its optimizer and its batches

class Trainer {
 public:
  /// `world`: the processes sharing the run (one without mpirun).
  Trainer(const TrainOptions& o, Corpus corpus, dist::Communicator& world)
      : o_(o),
        world_(world),
        corpus_(std::move(corpus)),
        data_gen_(static_cast<uint64_t>(o.seed)),
        model_(std::make_shared<nn::GPT>(gpt_config(o, corpus_.vocab.size()), static_cast<uint64_t>(o.seed))),
        opt_(optim::param_groups_nanogpt(model_->named_parameters(), o.weight_decay), o.lr, o.beta1, o.beta2),
        step_(*model_, opt_, {o.lr, o.min_lr, o.warmup_iters, o.lr_decay_iters}, o.grad_clip) {
    model_->train();
    if (needs_data_parallel(world, o.grad_accum))
      parallel_ = std::make_unique<DataParallelStep>(*model_, world, o.grad_accum, o.overlap);
  }

  /// Starts from `from`'s weights (--init-from; same architecture); the optimizer's moments stay zero.
  void init_weights(nn::GPT& from) {
    NoGradGuard no_grad;
    auto source = from.named_parameters();
    auto target = model_->named_parameters();
    HEED_CHECK(source.size() == target.size(), "--init-from: the checkpoint's model has ", source.size(),
               " parameters, the run's ", target.size());
    for (size_t i = 0; i < target.size(); ++i) {
      HEED_CHECK(source[i].first == target[i].first, "--init-from: parameter ", source[i].first, " where ",
                 target[i].first, " was expected");
      target[i].second.copy_(source[i].second);
    }
  }

  nn::GPT& model() { return *model_; }
  const Corpus& corpus() const { return corpus_; }
  int64_t iter() const { return iter_; }
  double lr_at(int64_t it) const { return step_.schedule().at(it); }
  void set_profiler(Profiler* p) { step_.set_profiler(p); }
  /// Whether this process writes the run's files and prints (rank 0).
  bool writes() const { return world_.rank() == 0; }
  /// The gradient reduction's times of the last step (null in a plain run).
  const dist::ReducerTimes* reduction_times() const { return parallel_ ? &parallel_->last_times() : nullptr; }

  /// One optimisation step; returns the loss. Throws on a non-finite loss or gradient norm, and
  /// dist::Stopped when a stop signal abandons a data-parallel step (the state is then the step's start).
  double step() {
    if (parallel_) {
      const Generator::State at_start = data_gen_.state();
      const int64_t B = o_.batch_size, T = o_.block_size;
      const double loss = step_.run_with_gradients(
          iter_, [&] { sample_batch(corpus_.train, o_.grad_accum * B, T, data_gen_, x_, y_); },  // the global batch
          [&] {
            return parallel_->gradients(x_, y_, B, T, data_gen_, at_start,
                                        [&](const std::vector<int32_t>& xi, const std::vector<int32_t>& yi) {
                                          return model_->loss(xi, yi, B, T);
                                        });
          });
      ++iter_;
      return loss;
    }
    const double loss = step_.run(
        iter_, [&] { sample_batch(corpus_.train, o_.batch_size, o_.block_size, data_gen_, x_, y_); },
        [&] { return model_->loss(x_, y_, o_.batch_size, o_.block_size); });
    ++iter_;
    return loss;
  }

  /// Mean loss over eval_iters random batches of each split (nanoGPT's estimate_loss), or
  /// nothing if a stop signal arrives in the middle. With keep_sampler, the batch sampler is left
  /// as it was (the evaluation draws no batch that training will miss). on_batch(done, total)
  /// is called before each batch (progress on a terminal).
  bool estimate_loss(double& train_loss, double& val_loss, bool keep_sampler = false,
                     const std::function<void(int64_t, int64_t)>& on_batch = {}) {
    NoGradGuard no_grad;
    model_->eval();
    // An interrupted evaluation must leave the sampler as it was, so that --resume redoes it
    // with the same batches an uninterrupted run would draw.
    const Generator::State before = data_gen_.state();
    double out[2];
    const std::vector<int32_t>* splits[2] = {&corpus_.train, &corpus_.val};
    bool done = true;
    if (world_.size() > 1) {
      // Every process draws every batch and computes its share; all first check that they
      // still train one model (a mismatch is an error that ends the job).
      try {
        dist::require_same_parameters(world_, model_->named_parameters());
        for (int s = 0; s < 2; ++s)
          out[s] = shared_mean_loss(
              world_, o_.eval_iters,
              [&](int64_t) { sample_batch(*splits[s], o_.batch_size, o_.block_size, data_gen_, x_, y_); },
              [&](int64_t) { return model_->loss(x_, y_, o_.batch_size, o_.block_size).item(); });
      } catch (const dist::Stopped&) {
        done = false;
      }
    }
    for (int s = 0; s < 2 && done && world_.size() == 1; ++s) {
      double total = 0;
      for (int64_t k = 0; k < o_.eval_iters; ++k) {
        if (g_stop_signal) {
          done = false;
          break;
        }
        if (on_batch) on_batch(s * o_.eval_iters + k, 2 * o_.eval_iters);
        sample_batch(*splits[s], o_.batch_size, o_.block_size, data_gen_, x_, y_);
        total += model_->loss(x_, y_, o_.batch_size, o_.block_size).item();
      }
      out[s] = total / double(o_.eval_iters);
    }
    model_->train();
    if (!done || keep_sampler) data_gen_.set_state(before);
    train_loss = out[0];
    val_loss = out[1];
    return done;
  }

  /// Writes train_state.safetensors, then model.safetensors (refusing a diverged model).
  void save(const std::string& dir, bool eval_done, double elapsed, const json& last_eval, double best_val_loss) {
    step_.require_finite_weights(iter_);
    TrainStateRecord r;
    r.iter = iter_;
    r.eval_done = eval_done;
    r.options = o_;
    r.vocab_utf8 = encode_utf8(corpus_.vocab.chars());
    r.elapsed_s = elapsed;
    r.last_eval = last_eval;
    r.best_val_loss = best_val_loss;
    save_train_state(state_path(dir), *model_, opt_, data_gen_, r);
    nn::save_gpt_checkpoint(model_path(dir), *model_, r.vocab_utf8, {{"iter", std::to_string(iter_)}});
  }

  /// Writes best.safetensors (--keep-best), atomically, with the evaluation that made it the best.
  void save_best(const std::string& dir, double val_loss) {
    step_.require_finite_weights(iter_);
    std::ostringstream loss;
    loss.precision(17);
    loss << val_loss;
    nn::save_gpt_checkpoint(best_model_path(dir), *model_, encode_utf8(corpus_.vocab.chars()),
                            {{"iter", std::to_string(iter_)}, {"val_loss", loss.str()}});
  }

  /// Restores what save() wrote (the model was built from the state's options).
  void restore(const nn::SafetensorsFile& file, const TrainStateRecord& record, const std::string& what) {
    restore_train_state(file, record, *model_, opt_, data_gen_, what);
    iter_ = record.iter;
  }

 private:
  TrainOptions o_;
  dist::Communicator& world_;
  Corpus corpus_;
  Generator data_gen_;
  std::shared_ptr<nn::GPT> model_;
  optim::AdamW opt_;
  TrainingStep step_;
  std::unique_ptr<DataParallelStep> parallel_;  // with --grad-accum above 1 or under mpirun
  std::vector<int32_t> x_, y_;
  int64_t iter_ = 0;
};

// Progress on standard output. A failed write does not stop training at once: it is remembered,
// and the loop saves a checkpoint and ends the run with the error.
class Progress {
 public:
  void print(const std::string& text) {
    if (!error_.empty()) return;
    try {
      write_stdout(text);
    } catch (const OutputError& e) {
      error_ = e.what();
    }
  }
  const std::string& error() const { return error_; }

 private:
  std::string error_;
};

// ------------------------------------------------------------------------------------------
// Phase 1: the options of this run

struct Start {
  TrainOptions options;
  OutMode mode = OutMode::fresh;
};

// Applies the rules of --config and --resume that do not need the run directory, makes paths
// absolute and validates everything (usage errors before anything is touched).
Start resolve_options(const TrainRequest& req) {
  Start s;
  s.options = req.options;
  TrainOptions& o = s.options;
  if (req.resume && req.overwrite) throw UsageError("--resume and --overwrite contradict each other: choose one");
  s.mode = req.resume ? OutMode::resume : req.overwrite ? OutMode::overwrite : OutMode::fresh;
  // --config repeats a run, never into the run it recorded unless told to.
  if (req.from_config.count("out") && !req.resume && !req.overwrite)
    throw UsageError("--config " + req.config + " records the run in " + o.out +
                     ": give --out DIR for the new run (or --resume to continue that one, --overwrite to start it over)");
  // nanoGPT's config files say init_from = 'scratch' | 'resume' | 'gpt2...': its words, not paths
  // (a file of that name is still reachable as ./scratch).
  if (o.init_from == "scratch") o.init_from.clear();
  if (o.init_from == "resume")
    throw UsageError("--init-from resume: nanoGPT's init_from = 'resume' is heed's --resume (continue the run in --out)");
  if (o.init_from.rfind("gpt2", 0) == 0 && !fs::exists(o.init_from))
    throw UsageError("--init-from " + o.init_from + ": heed does not download GPT-2 weights; give a checkpoint file");
  for (const auto& opt : train_option_table()) {
    if (!opt.is_path) continue;
    std::string p = std::get<std::string>(opt.get(o));
    if (p.empty()) continue;
    p = absolute_path(p);
    // config.toml (TOML) and the checkpoint (JSON) record paths as UTF-8 text.
    if (!is_utf8(p)) throw UsageError("--" + opt.flag + " " + p + ": the path is not valid UTF-8, which a run cannot record");
    opt.set(o, p);
  }
  if (o.data.empty()) o.data = default_corpus_path();
  validate(o);
  if (!req.resume || req.from_command_line.count("data") || req.from_config.count("data"))
    regular_file_size(o.data);  // a missing file, a directory, a FIFO or a device: refused before --out is touched
  for (const std::string& file : run_files(o.out)) {
    if (same_file(o.data, file))
      throw UsageError("--data " + o.data + " is one of the files the run writes into --out " + o.out);
    if (!o.init_from.empty() && same_file(o.init_from, file))
      throw UsageError("--init-from " + o.init_from + " is one of the files the run writes into --out " + o.out +
                       ": fine-tune into another directory (the source checkpoint is never written)");
  }
  if (!req.resume && o.init_from.empty()) check_training_memory(o, 1);  // absurd sizes go before any file is touched
  return s;
}

// --init-from: the checkpoint's architecture replaces the flags' (a flag given with another value is
// refused, naming every such flag); the recipe stays the run's own.
void take_architecture(const TrainRequest& req, TrainOptions& o, const nn::GPTConfig& c) {
  TrainOptions from = o;
  from.n_layer = c.n_layer, from.n_head = c.n_head, from.n_embd = c.n_embd, from.block_size = c.block_size;
  from.bias = c.bias;
  std::string contradictions;
  for (const char* name : kArchitectureOptions) {
    const Option<TrainOptions>* opt = find_option(train_option_table(), name);
    const bool named = req.from_command_line.count(name) || req.from_config.count(name);
    if (named && opt->get(o) != opt->get(from))
      contradictions += (contradictions.empty() ? "" : ", ") + std::string("--") + opt->flag + " " +
                        format_value(opt->get(o)) + " (the checkpoint's is " + format_value(opt->get(from)) + ")";
    opt->set(o, opt->get(from));
  }
  if (!contradictions.empty())
    throw UsageError(contradictions + ": --init-from " + o.init_from +
                     " fine-tunes the checkpoint's architecture (leave these flags out)");
  validate(o);
}

// ------------------------------------------------------------------------------------------
// Phase 4: the training loop

struct LoopState {
  double start = 0;         // now_s() when the run (its first part) began
  bool eval_done = false;   // the evaluation at the current iteration ran
  json last_eval;           // its log line
  double best_val_loss = std::numeric_limits<double>::infinity();  // --keep-best: best.safetensors's
  int64_t saved_iter = -1;  // the iteration of the last complete checkpoint on disk (-1: none)
  // config.toml's text, written with this process's first checkpoint (a run killed before its
  // first checkpoint leaves no files behind, so running it again needs no --overwrite).
  std::string config;
};

int train_loop(const TrainOptions& o, Trainer& trainer, LoopState& s, Progress& progress, Profiler& profiler) {
  // mpirun hands its ranks a pseudo-terminal whatever its own output is: plain lines there.
  const bool tty = ::isatty(STDOUT_FILENO) && !dist::launched_by_mpirun();
  const int64_t tokens_per_iter = o.grad_accum * o.batch_size * o.block_size;
  const int64_t first_iter = trainer.iter();
  // An error that ends the run (divergence, a failed save) says which checkpoint is kept.
  auto stop_with = [&](const std::string& what) {
    detail::fail(what, s.saved_iter < 0 ? std::string("; no checkpoint was saved")
                                        : "; the checkpoint of iteration " + std::to_string(s.saved_iter) + " in " +
                                              o.out + " is kept");
  };
  auto save = [&](bool done) {
    if (!trainer.writes()) {  // rank 0 saves for every process
      s.saved_iter = trainer.iter();
      return;
    }
    try {
      trainer.save(o.out, done, now_s() - s.start, s.last_eval, s.best_val_loss);
      if (!s.config.empty()) write_file_atomically(config_path(o.out), s.config);
      s.config.clear();
    } catch (const Error& e) {  // a full disk, or a diverged model that must not replace a good one
      stop_with(e.what());
    }
    s.saved_iter = trainer.iter();
  };
  double train_time = 0;
  int exit_code = 0;
  while (true) {
    const int64_t it = trainer.iter();
    if (g_stop_signal) {
      save(s.eval_done);
      progress.print(std::string(tty ? "\n" : "") + "stopped by signal " + std::to_string(g_stop_signal) +
                     " at iteration " + std::to_string(it) + "; checkpoint saved in " + o.out +
                     " (continue with --resume)\n");
      exit_code = 128 + g_stop_signal;
      break;
    }
    if (!progress.error().empty()) {
      save(s.eval_done);
      detail::fail(progress.error(), "; the checkpoint of iteration ", it, " is saved in ", o.out,
                   " (continue with --resume)");
    }
    if ((it % o.eval_interval == 0 || it == o.max_iters) && !s.eval_done) {
      double tl, vl;
      // The extra evaluation at a --max-iters off the eval interval must not move the sampler: a
      // run extended from there with --resume then draws the batches an uninterrupted run draws.
      auto show = [&](int64_t done, int64_t total) {  // on a terminal, redrawn in place
        if (tty) progress.print("\r\033[K" + fit_progress_line({{"evaluating at iter " + std::to_string(it), 0},
                                                                 {std::to_string(done) + "/" + std::to_string(total) +
                                                                      " batches", 1}},
                                                                terminal_columns()));
      };
      if (!trainer.estimate_loss(tl, vl, /*keep_sampler=*/it % o.eval_interval != 0, show))
        continue;  // interrupted: the loop saves and stops
      if (!std::isfinite(tl) || !std::isfinite(vl))
        stop_with("training diverged: the evaluation loss is " + std::to_string(std::isfinite(tl) ? vl : tl) +
                  " at iteration " + std::to_string(it));
      s.last_eval = {{"iter", it},
                     {"train_loss", std::round(tl * 1e4) / 1e4},
                     {"val_loss", std::round(vl * 1e4) / 1e4},
                     {"lr", trainer.lr_at(it)},
                     {"elapsed_s", std::round((now_s() - s.start) * 100) / 100}};
      s.eval_done = true;
      if (o.keep_best && vl < s.best_val_loss) {
        // Before the state that records it: a crash in between redoes this evaluation on --resume,
        // which finds the same loss and writes the same file.
        if (trainer.writes()) {
          try {
            trainer.save_best(o.out, vl);
          } catch (const Error& e) {
            stop_with(e.what());
          }
        }
        s.best_val_loss = vl;
      }
      save(true);
      if (trainer.writes()) {
        append_line(log_path(o.out), s.last_eval.dump());
        write_loss_plot({log_path(o.out)}, plot_path(o.out));
      }
      char line[128];
      std::snprintf(line, sizeof line, "%seval iter %lld: train loss %.4f, val loss %.4f\n", tty ? "\r\033[K" : "",
                    (long long)it, tl, vl);
      progress.print(line);
    }
    if (it >= o.max_iters) break;
    const double t0 = now_s();
    double loss = 0;
    try {
      loss = trainer.step();
    } catch (const dist::Stopped&) {
      continue;  // a stop signal abandoned the step: the loop saves the state it started from
    } catch (const Error& e) {  // a non-finite loss or gradient
      stop_with(e.what());
    }
    s.eval_done = false;
    train_time += now_s() - t0;
    const int64_t done = trainer.iter() - first_iter;
    const double tok_s = done * tokens_per_iter / std::max(train_time, 1e-9);
    const double remaining = (o.max_iters - trainer.iter()) * (train_time / done);
    // The batch's loss in log.jsonl (heed plot draws it under the evaluations); rank 0 alone writes.
    if (trainer.writes() && it % o.log_interval == 0) {
      const nlohmann::json entry = {{"iter", it},
                                    {"loss", std::round(loss * 1e4) / 1e4},
                                    {"lr", trainer.lr_at(it)},
                                    {"tok_s", std::round(tok_s)},
                                    {"elapsed_s", std::round((now_s() - s.start) * 100) / 100}};
      try {
        append_line(log_path(o.out), entry.dump());
      } catch (const Error& e) {  // a full disk: the checkpoint of the last evaluation is kept
        stop_with(e.what());
      }
    }
    char line[256];
    if (tty) {
      progress.print("\r\033[K" + train_progress_line(trainer.iter(), o.max_iters, loss, trainer.lr_at(it), tok_s,
                                                      now_s() - s.start, remaining, terminal_columns()));
    } else if (it % o.log_interval == 0) {
      std::snprintf(line, sizeof line, "iter %lld: loss %.4f, lr %.2e, %.0f tok/s, elapsed %s, remaining %s\n",
                    (long long)it, loss, trainer.lr_at(it), tok_s, format_duration(now_s() - s.start).c_str(),
                    format_duration(remaining).c_str());
      progress.print(line);
    }
  }
  if (o.profile) {
    std::fflush(stdout);
    profiler.print(stdout, train_time, trainer.iter() - first_iter);
  }
  return exit_code;
}

// Phase 5: a short sample from the trained model (stops at a signal; the checkpoint is saved).
void closing_sample(const TrainOptions& o, Trainer& trainer) {
  write_stdout("sample:\n");
  const Vocab& vocab = trainer.corpus().vocab;
  Generator gen(static_cast<uint64_t>(o.seed));
  nn::GenerateOptions g{.max_new_tokens = o.sample_tokens, .temperature = 0.8, .top_k = 200, .generator = &gen};
  g.on_token = [&](int64_t, int32_t id) {
    write_stdout_token(vocab.decode(id));
    check_stop();
    return true;
  };
  trainer.model().generate({vocab.start_id()}, g);
  write_stdout("\n");
}

}  // namespace

namespace {

// heed train on the processes of `world` (one without mpirun; rank 0 alone owns --out).
int train_on(const TrainRequest& req, dist::Communicator& world) {
  Start start = resolve_options(req);
  TrainOptions o = start.options;
  needs_data_parallel(world, o.grad_accum);  // refused before --out is touched
  // --init-from: the model to fine-tune, read (and its architecture checked) before --out is touched.
  std::optional<LoadedModel> init;
  if (!req.resume && !o.init_from.empty()) {
    init = load_model(o.init_from, "--init-from");
    take_architecture(req, o, init->model->config());
  }
  const bool writer = world.rank() == 0;
  std::optional<RunDirectory> run_dir;
  if (writer) run_dir.emplace(o.out, RunKind::gpt, start.mode, "heed train");

  // The state to continue from, validated, and the options it records.
  nn::SafetensorsFile state;
  TrainStateRecord record;
  const std::string what_state = state_path(o.out);
  if (req.resume) {
    if (!fs::exists(what_state))
      throw UsageError("--resume: no training state in --out " + o.out + " (" + what_state + " does not exist)");
    {
      const ExitAtOnceOnStop only_reading;  // nothing written yet; the library's parsing never polls a stop
      const std::string bytes = read_input_file(what_state, 3.0);
      state = nn::parse_safetensors(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), what_state);
    }
    record = read_train_state(state, what_state);
    std::set<std::string> named = req.from_command_line;
    named.insert(req.from_config.begin(), req.from_config.end());
    o = resumed_options(train_option_table(), o, record.options, named, what_state);
  }
  const AutocastBF16 autocast(precision_is_bf16(o.precision));  // the run's, recorded with its recipe
  apply_threads(o.threads);

  // Reading the corpus and building the model write nothing and poll no stop (encoding and copying
  // a 111 MB corpus took about 2 s here): a stop there ends heed at once.
  std::optional<ExitAtOnceOnStop> only_reading(std::in_place);
  // The corpus, then the memory the whole run needs.
  const double corpus_bytes = corpus_memory(o.data);
  check_training_memory(o, 1, corpus_bytes);
  // A fine-tuning run keeps its checkpoint's vocabulary (recorded in its state on --resume).
  std::optional<Vocab> fixed_vocab;
  if (init) fixed_vocab = init->vocab;
  if (req.resume && !o.init_from.empty()) fixed_vocab = Vocab(decode_utf8(record.vocab_utf8, what_state));
  Corpus corpus = load_corpus(o.data, o.block_size, fixed_vocab ? &*fixed_vocab : nullptr);
  check_training_memory(o, corpus.vocab.size());
  if (req.resume)
    HEED_CHECK(record.vocab_utf8 == encode_utf8(corpus.vocab.chars()), o.data,
               ": the corpus's vocabulary differs from the one the run in ", o.out, " was trained on");
  Trainer trainer(o, std::move(corpus), world);
  if (init) {
    trainer.init_weights(*init->model);
    init.reset();
  }
  if (req.resume) {
    trainer.restore(state, record, what_state);  // still only reading (a 100M-parameter state: seconds)
    state = {};
  }
  only_reading.reset();
  if (run_dir) run_dir->begin_writing();  // --overwrite clears the old run only now, with nothing left to refuse this one
  LoopState loop;
  if (req.resume) {
    loop.eval_done = record.eval_done;
    loop.last_eval = record.last_eval;
    loop.best_val_loss = record.best_val_loss;
    loop.saved_iter = trainer.iter();
    // Lines past the checkpoint (written before a crash) go; the eval at the resume iteration,
    // if it happened, is logged again from the state.
    if (writer) {
      truncate_log(log_path(o.out), trainer.iter());
      if (loop.eval_done) append_line(log_path(o.out), loop.last_eval.dump());
    }
  }
  loop.start = now_s() - record.elapsed_s;
  // The effective options, so the run can be repeated (heed train --config DIR/config.toml).
  loop.config = config_toml(train_option_table(), o,
                                    std::string(kRunConfigTitle) + "\n"
                                    "Repeat it: heed train --config THIS_FILE --out NEW_DIR\n"
                                    "Continue it: heed train --config THIS_FILE --resume");

  Progress progress;
  if (!req.resume && !o.init_from.empty()) progress.print("fine-tuning " + o.init_from + "\n");
  if (req.resume)
    progress.print("resuming " + o.out + " at iteration " + std::to_string(trainer.iter()) + " of " +
                   std::to_string(o.max_iters) + "\n");
  char head[256];
  std::snprintf(head, sizeof head,
                "heed train: %lld parameters, vocab %lld, %zu train / %zu val characters, %lld tokens per iteration",
                (long long)trainer.model().num_params(false), (long long)trainer.corpus().vocab.size(),
                trainer.corpus().train.size(), trainer.corpus().val.size(),
                (long long)(o.grad_accum * o.batch_size * o.block_size));
  progress.print(std::string(head) + (world.size() > 1 ? " on " + std::to_string(world.size()) + " processes" : "") +
                 "\n");

  Profiler profiler;
  if (o.profile) trainer.set_profiler(&profiler);
  const int exit_code = train_loop(o, trainer, loop, progress, profiler);
  if (exit_code != 0) return exit_code;
  if (!progress.error().empty()) throw OutputError(progress.error());
  write_stdout("done: " + std::to_string(trainer.iter()) + " iterations in " + format_duration(now_s() - loop.start) +
               "; checkpoint " + model_path(o.out) + "\n");
  if (o.sample_tokens > 0 && writer) {
    try {
      closing_sample(o, trainer);
    } catch (const Stopped& e) {
      write_stdout("\nstopped by signal " + std::to_string(e.signal) + " during the closing sample; the checkpoint of "
                   "iteration " + std::to_string(trainer.iter()) + " is saved in " + o.out + "\n");
      return 128 + e.signal;
    }
  }
  return 0;
}

// ------------------------------------------------------------------------------------------

}  // namespace

int run_train(const TrainRequest& req) {
  return on_processes([&](dist::Communicator& world) { return train_on(req, world); });
}

// ------------------------------------------------------------------------------------------

namespace {

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// heed bench on the processes of `world`: rank 0 prints the job's figures.
int bench_on(const TrainOptions& flags, dist::Communicator& world) {
  TrainOptions o = flags;
  if (o.data.empty()) o.data = default_corpus_path();
  validate(o, bench_option_table());
  needs_data_parallel(world, o.grad_accum);
  check_training_memory(o, 1, corpus_memory(o.data));
  const AutocastBF16 autocast(precision_is_bf16(o.precision));
  apply_threads(o.threads);
  std::optional<ExitAtOnceOnStop> only_reading(std::in_place);  // as in train: nothing written, no stop polled
  Corpus corpus = load_corpus(o.data, o.block_size);
  check_training_memory(o, corpus.vocab.size());
  Trainer trainer(o, std::move(corpus), world);
  only_reading.reset();
  const int warmup = 3;
  std::vector<double> times, reduce_in_backward, reduce_after_backward;
  Profiler profiler;
  for (int64_t i = 0; i < warmup + o.bench_iters; ++i) {
    check_stop();
    if (i == warmup && o.profile) trainer.set_profiler(&profiler);
    const double t0 = now_s();
    trainer.step();
    if (i < warmup) continue;
    times.push_back(now_s() - t0);
    if (const dist::ReducerTimes* r = trainer.reduction_times()) {
      reduce_in_backward.push_back(r->in_backward);
      reduce_after_backward.push_back(r->after_backward + r->finish);
    }
  }
  if (o.profile) {
    double total = 0;
    for (double t : times) total += t;
    profiler.print(stderr, total, o.bench_iters);
  }
  const double median = median_of(times);
  std::sort(times.begin(), times.end());
  // The job's tokens: every process's micro-batches.
  // Times to 0.1 us: a tiny model's step takes tens of microseconds, and tokens/s must follow from them.
  auto ms = [](double s) { return std::round(s * 1e7) / 1e4; };
  // Model FLOPs per iteration as nanoGPT's estimate_mfu counts them (PaLM appendix B; the
  // attention products over the whole T x T square), so MFU compares with PyTorch's figures;
  // the peaks are this CPU's, measured now, per core, times the threads of every process.
  const double T = double(o.block_size), tokens = double(o.grad_accum * o.batch_size) * T;
  const double flops = (6.0 * double(trainer.model().num_params(true)) + 12.0 * double(o.n_layer * o.n_embd) * T) * tokens;
  const double gflops = flops / median / 1e9;
  const CpuPeaks& peaks = cpu_peaks();
  const double cores = double(num_threads()) * double(world.size());
  auto mfu = [&](double peak) { return peak > 0 ? json(std::round(gflops / (peak * cores) * 1e3) / 1e3) : json(); };
  json out = {{"ms_per_iter", ms(median)},
              {"tokens_per_s", std::round(tokens / median * 10) / 10},
              {"params", trainer.model().num_params(false)},
              {"ms_per_iter_min", ms(times.front())},
              {"ms_per_iter_max", ms(times.back())},
              {"iters", o.bench_iters},
              {"precision", o.precision},
              {"threads", num_threads()},
              {"flops_per_iter", flops},
              {"gflops", std::round(gflops * 10) / 10},
              {"mfu_fp32_peak", mfu(peaks.fp32_fma_gflops)},
              {"mfu_bf16_peak", mfu(peaks.bf16_gflops())},
              {"cpu", json::parse(cpu_json())},
              {"tuning", json::parse(tuning_json())}};  // the work splits derived for this CPU
  if (world.size() > 1 || o.grad_accum > 1) {
    out["processes"] = world.size();
    out["grad_accum"] = o.grad_accum;
  }
  if (world.size() > 1) {  // rank 0's gradient reduction per step: during backward (overlapped), after it
    out["reduce_ms_in_backward"] = ms(median_of(reduce_in_backward));
    out["reduce_ms_after_backward"] = ms(median_of(reduce_after_backward));
  }
  write_stdout(out.dump() + "\n");
  return 0;
}

}  // namespace

int run_bench(const TrainOptions& flags) {
  return on_processes([&](dist::Communicator& world) { return bench_on(flags, world); });
}

}  // namespace heed::cli
