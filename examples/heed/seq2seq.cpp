// `heed seq2seq`: trains the encoder-decoder Transformer on a generated character task with
// source key-padding masks and teacher forcing, then measures exact match of greedy decoding on
// held-out examples. Its last line is {"task": ..., "exact_match": X, "examples": N}.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/autograd.h"
#include "core/ops.h"
#include "nn/safetensors.h"
#include "nn/transformer.h"
#include "optim/adam.h"
#include "optim/clip.h"
#include "optim/schedule.h"
#include "run_state.h"
#include "seq2seq.h"
#include "seq2seq_tasks.h"

namespace heed::cli {

using nlohmann::json;
namespace fs = std::filesystem;


nn::EncoderDecoderOptions seq2seq_model_options(const Seq2SeqOptions& o) {
  nn::EncoderDecoderOptions m;
  m.src_vocab = Seq2SeqVocab::size;
  m.tgt_vocab = Seq2SeqVocab::size;
  m.d_model = o.d_model;
  m.n_head = o.n_head;
  m.d_ff = 4 * o.d_model;
  m.n_encoder_layers = o.n_layer;
  m.n_decoder_layers = o.n_layer;
  m.max_len = kSeq2SeqMaxLen;
  m.dropout = 0.0;
  m.norm = nn::NormPlacement::pre;
  m.seed = o.seed;
  return m;
}


Seq2SeqBatch make_batch(const std::vector<Example>& examples) {
  Seq2SeqBatch b;
  b.B = static_cast<int64_t>(examples.size());
  b.Ts = 1;
  b.Tt = 1;
  for (const auto& e : examples) {
    b.Ts = std::max<int64_t>(b.Ts, static_cast<int64_t>(e.source.size()));
    b.Tt = std::max<int64_t>(b.Tt, static_cast<int64_t>(e.target.size()) + 1);  // +1: BOS in, EOS out
  }
  HEED_CHECK(b.Ts <= kSeq2SeqMaxLen && b.Tt <= kSeq2SeqMaxLen, "seq2seq: example longer than ", kSeq2SeqMaxLen);
  b.src.assign(b.B * b.Ts, Seq2SeqVocab::pad);
  b.tgt_in.assign(b.B * b.Tt, Seq2SeqVocab::pad);
  b.tgt_out.assign(b.B * b.Tt, Seq2SeqVocab::pad);
  std::vector<int64_t> src_len, tgt_len;
  for (int64_t i = 0; i < b.B; ++i) {
    const auto& e = examples[i];
    for (size_t j = 0; j < e.source.size(); ++j) b.src[i * b.Ts + j] = Seq2SeqVocab::id(e.source[j]);
    b.tgt_in[i * b.Tt] = Seq2SeqVocab::bos;
    for (size_t j = 0; j < e.target.size(); ++j) {
      b.tgt_in[i * b.Tt + j + 1] = Seq2SeqVocab::id(e.target[j]);
      b.tgt_out[i * b.Tt + j] = Seq2SeqVocab::id(e.target[j]);
    }
    b.tgt_out[i * b.Tt + e.target.size()] = Seq2SeqVocab::eos;
    src_len.push_back(static_cast<int64_t>(e.source.size()));
    tgt_len.push_back(static_cast<int64_t>(e.target.size()) + 1);
  }
  b.src_mask = nn::padding_mask_from_lengths(src_len, b.Ts);
  b.tgt_mask = nn::padding_mask_from_lengths(tgt_len, b.Tt);
  return b;
}

std::vector<std::string> greedy_decode(nn::EncoderDecoder& model, const std::vector<std::string>& sources,
                                       int64_t max_out) {
  NoGradGuard no_grad;
  std::vector<Example> ex;
  for (const auto& s : sources) ex.push_back({s, ""});
  Seq2SeqBatch b = make_batch(ex);
  Tensor memory = model.encode(b.src, b.B, b.Ts, &b.src_mask);
  std::vector<std::vector<int32_t>> out(b.B, std::vector<int32_t>{Seq2SeqVocab::bos});
  std::vector<bool> done(b.B, false);
  for (int64_t step = 0; step < max_out; ++step) {
    const int64_t Tt = step + 1;
    std::vector<int32_t> tgt(b.B * Tt);
    for (int64_t i = 0; i < b.B; ++i) std::copy(out[i].begin(), out[i].end(), tgt.begin() + i * Tt);
    Tensor logits = model.decode(tgt, b.B, Tt, memory, nullptr, &b.src_mask);  // (B, Tt, V)
    Tensor last = slice(logits, 1, Tt - 1, Tt).contiguous();
    const std::vector<float> v = last.to_vector<float>();
    const int64_t V = logits.size(-1);
    bool all = true;
    for (int64_t i = 0; i < b.B; ++i) {
      const float* row = v.data() + i * V;
      const int32_t next = done[i] ? Seq2SeqVocab::pad : static_cast<int32_t>(std::max_element(row, row + V) - row);
      if (next == Seq2SeqVocab::eos) done[i] = true;
      out[i].push_back(next);
      all = all && done[i];
    }
    if (all) break;
  }
  std::vector<std::string> result;
  for (auto& ids : out) {
    std::string s;
    for (size_t j = 1; j < ids.size() && ids[j] != Seq2SeqVocab::eos && ids[j] != Seq2SeqVocab::pad; ++j)
      s += Seq2SeqVocab::chr(ids[j]);
    result.push_back(s);
  }
  return result;
}

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

void save_seq2seq(const std::string& path, const nn::EncoderDecoder& model, const Seq2SeqOptions& o) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (auto& [name, t] : model.named_parameters()) tensors.emplace_back(name, t);
  json cfg = {{"task", o.task}, {"d_model", o.d_model}, {"n_head", o.n_head}, {"n_layer", o.n_layer},
              {"seed", std::to_string(o.seed)}};
  nn::save_safetensors(path, tensors, {{"seq2seq", cfg.dump()}, {"format", "pt"}});
}

std::shared_ptr<nn::EncoderDecoder> load_seq2seq(const nn::SafetensorsFile& file, const std::string& what,
                                                 Seq2SeqOptions& o) {
  auto it = file.metadata.find("seq2seq");
  HEED_CHECK(it != file.metadata.end(), what, ": not a seq2seq checkpoint (no \"seq2seq\" metadata)");
  json cfg = json::parse(it->second, nullptr, false);
  try {
    o.task = cfg.at("task");
    o.d_model = cfg.at("d_model");
    o.n_head = cfg.at("n_head");
    o.n_layer = cfg.at("n_layer");
  } catch (const std::exception& e) {
    detail::fail(what, ": bad \"seq2seq\" metadata (", e.what(), ")");
  }
  HEED_CHECK(o.d_model > 0 && o.n_head > 0 && o.n_layer > 0 && o.d_model % o.n_head == 0 && o.d_model <= 4096 &&
                 o.n_layer <= 64,
             what, ": bad \"seq2seq\" metadata sizes");
  auto model = std::make_shared<nn::EncoderDecoder>(seq2seq_model_options(o));
  std::map<std::string, Tensor> by_name(file.tensors.begin(), file.tensors.end());
  NoGradGuard no_grad;
  for (auto& [name, t] : model->named_parameters()) {
    auto f = by_name.find(name);
    HEED_CHECK(f != by_name.end(), what, ": missing tensor '", name, "'");
    HEED_CHECK(f->second.shape() == t.shape(), what, ": tensor '", name, "' has shape ", to_string(f->second.shape()),
               ", expected ", to_string(t.shape()));
    t.copy_(f->second);
  }
  HEED_CHECK(by_name.size() == model->named_parameters().size(), what, ": unexpected extra tensors");
  model->eval();
  return model;
}

int run_seq2seq(const Seq2SeqOptions& flags) {
  Seq2SeqOptions o = flags;
  try {
    check_task(o.task);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  if (o.max_iters < 0) o.max_iters = o.task == "copy" ? 1000 : o.task == "reverse" ? 2000 : 1500;
  if (o.max_iters < 1) throw UsageError("--max-iters must be at least 1");
  if (o.batch_size < 1) throw UsageError("--batch-size must be at least 1");
  if (o.d_model < 1 || o.n_head < 1 || o.d_model % o.n_head) throw UsageError("--d-model must be a positive multiple of --n-head");
  if (o.n_layer < 1) throw UsageError("--n-layer must be at least 1");
  if (!(o.lr > 0)) throw UsageError("--lr must be positive");
  if (o.test_examples < 1) throw UsageError("--examples must be at least 1");
  if (o.log_interval < 1) throw UsageError("--log-interval must be at least 1");
  if (!o.out.empty()) prepare_out_dir(o.out);
  apply_threads(o.threads);

  const double start = now_s();
  Seq2SeqData data(o.task, o.test_examples, o.seed);
  nn::EncoderDecoder model(seq2seq_model_options(o));
  model.train();
  optim::AdamW opt(optim::param_groups_nanogpt(model.named_parameters(), 0.01), o.lr, 0.9, 0.98);
  auto params = model.parameters();
  std::printf("heed seq2seq %s: %lld parameters (d_model %lld, %lld heads, %lld+%lld layers), %lld held-out "
              "examples, %lld iterations of %lld, lr %g\n",
              o.task.c_str(), (long long)model.num_parameters(), (long long)o.d_model, (long long)o.n_head,
              (long long)o.n_layer, (long long)o.n_layer, (long long)data.test.size(), (long long)o.max_iters,
              (long long)o.batch_size, o.lr);
  std::fflush(stdout);
  // Progress is measured on (a part of) the held-out set; nothing is decided by it.
  const std::vector<Example> val(data.test.begin(), data.test.begin() + std::min<size_t>(500, data.test.size()));
  std::string log_file;
  if (!o.out.empty()) {
    log_file = log_path(o.out);
    std::error_code ec;
    fs::remove(log_file, ec);  // a fresh run starts a fresh log
  }
  const int64_t warmup = std::min<int64_t>(200, o.max_iters / 10);
  std::vector<Example> batch(o.batch_size);
  double interval_loss = 0;
  int64_t interval_steps = 0;
  for (int64_t it = 0; it < o.max_iters; ++it) {
    opt.set_lr(optim::cosine_lr(it, o.lr, o.lr * 0.05, warmup, o.max_iters));
    for (auto& e : batch) e = data.train_example();
    Seq2SeqBatch b = make_batch(batch);
    Tensor logits = model.forward(b.src, b.B, b.Ts, b.tgt_in, b.Tt, &b.src_mask, &b.tgt_mask);
    Tensor loss = cross_entropy(reshape(logits, {b.B * b.Tt, Seq2SeqVocab::size}), b.tgt_out, Seq2SeqVocab::pad);
    const double l = loss.item();
    HEED_CHECK(std::isfinite(l), "seq2seq: the loss is ", l, " at iteration ", it);
    loss.backward();
    optim::clip_grad_norm(params, 1.0);
    opt.step();
    model.zero_grad();
    interval_loss += l;
    ++interval_steps;
    if ((it + 1) % o.log_interval == 0 || it + 1 == o.max_iters) {
      model.eval();
      const double vl = mean_loss(model, val);
      const double em = exact_match(model, val);
      model.train();
      const double tl = interval_loss / double(interval_steps);
      interval_loss = 0;
      interval_steps = 0;
      std::printf("iter %lld: train loss %.4f, val loss %.4f, exact match %.3f (%zu held-out), elapsed %.1fs\n",
                  (long long)(it + 1), tl, vl, em, val.size(), now_s() - start);
      std::fflush(stdout);
      if (!log_file.empty()) {
        const json entry = {{"iter", it + 1}, {"train_loss", std::round(tl * 1e4) / 1e4},
                            {"val_loss", std::round(vl * 1e4) / 1e4}, {"exact_match", em},
                            {"elapsed_s", std::round((now_s() - start) * 100) / 100}};
        append_line(log_file, entry.dump());
      }
    }
  }
  model.eval();
  const double em = exact_match(model, data.test);
  const double wall = now_s() - start;
  if (!o.out.empty()) {
    const std::string path = model_path(o.out);
    save_seq2seq(path, model, o);
    write_loss_plot({log_file}, (fs::path(o.out) / "loss.svg").string());
    std::printf("saved %s, %s and loss.svg\n", path.c_str(), log_file.c_str());
  }
  // a few examples, then the summary as the last line
  const size_t n_shown = std::min<size_t>(3, data.test.size());
  std::vector<std::string> sources;
  for (size_t i = 0; i < n_shown; ++i) sources.push_back(data.test[i].source);
  const auto shown = greedy_decode(model, sources, kSeq2SeqMaxLen - 1);
  for (size_t i = 0; i < n_shown; ++i)
    std::printf("  %-30s -> %-24s (expected %s)\n", data.test[i].source.c_str(), shown[i].c_str(),
                data.test[i].target.c_str());
  std::printf("%lld iterations, wall time %.1fs\n", (long long)o.max_iters, wall);
  json summary = {{"task", o.task}, {"exact_match", em}, {"examples", data.test.size()}};
  std::printf("%s\n", summary.dump().c_str());
  return 0;
}

}  // namespace heed::cli
