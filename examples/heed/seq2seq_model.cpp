// The pieces of `heed seq2seq` that `heed attention`, the checkpoint loader, the fuzz target and
// the tests share (seq2seq.h): the options table, the model's options, batches with padding
// masks, and greedy decoding.
#include <algorithm>
#include <limits>

#include "core/autograd.h"
#include "core/ops.h"
#include "seq2seq.h"
#include "stop.h"
#include "train_options.h"

namespace heed::cli {

namespace {

using S = Seq2SeqOptions;

OptionTable<S> make_seq2seq_table() {
  const double inf = std::numeric_limits<double>::infinity();
  return {
      {"task", "task", {}, &S::task, std::string(), {}, "copy, reverse or dates", Role::recipe, false, true},
      {"seed", "seed", {}, &S::seed, int64_t(1), {0, inf}, "random seed (data, initialisation)"},
      {"max-iters", "max_iters", {}, &S::max_iters, int64_t(-1), {1, double(kMaxIters)},
       "training iterations (-1: the task's default, copy 1000, reverse 2000, dates 1500)", Role::length},
      {"out", "out", {"out_dir"}, &S::out, std::string(), {},
       "run directory for model.safetensors, log.jsonl and loss.svg (for heed attention)", Role::local, true},
      {"batch-size", "batch_size", {}, &S::batch_size, int64_t(64), {1, double(1 << 20)}, "examples per batch"},
      {"d-model", "d_model", {}, &S::d_model, int64_t(128), {1, double(kSeq2SeqMaxWidth)},
       "model width (divisible by --n-head)"},
      {"n-head", "n_head", {}, &S::n_head, int64_t(4), {1, double(kSeq2SeqMaxWidth)}, "attention heads"},
      {"n-layer", "n_layer", {}, &S::n_layer, int64_t(2), {1, double(kSeq2SeqMaxLayers)},
       "encoder layers (and as many decoder layers)"},
      {"lr", "lr", {"learning_rate"}, &S::lr, 1e-3, {0, inf, true}, "peak learning rate"},
      {"examples", "examples", {}, &S::test_examples, int64_t(1000), {1, inf},
       "held-out test examples (at most half of the task's distinct sources)"},
      {"log-interval", "log_interval", {}, &S::log_interval, int64_t(250), {1, double(kMaxIters)},
       "report every N iterations", Role::local},
      {"threads", "threads", {}, &S::threads, int64_t(0), {0, double(kMaxThreads)}, "threads (0: all cores)",
       Role::local},
  };
}

}  // namespace

const OptionTable<Seq2SeqOptions>& seq2seq_option_table() {
  static const OptionTable<Seq2SeqOptions> table = make_seq2seq_table();
  return table;
}

int64_t seq2seq_default_iters(const std::string& task) {
  return task == "copy" ? 1000 : task == "reverse" ? 2000 : 1500;
}

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
    check_stop();
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

}  // namespace heed::cli
