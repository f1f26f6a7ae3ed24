// The pieces of `heed seq2seq` that `heed attention`, the checkpoint loader, the fuzz target and
// the tests share (seq2seq.h): the options table, the model's options, batches with padding
// masks, and greedy decoding.
#include <algorithm>
#include <limits>

#include "core/autograd.h"
#include "commands.h"
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
      {"task", "task", {}, &S::task, std::string(), {}, "copy, reverse or dates (required, except with --resume)"},
      {"seed", "seed", {}, &S::seed, int64_t(1337), {0, inf}, "random seed (data, initialisation)"},
      {"max-iters", "max_iters", {}, &S::max_iters, int64_t(-1), {1, double(kMaxIters)},
       "training iterations (-1: the task's default, copy 1000, reverse 2000, dates 1500)", Role::length},
      {"out", "out", {"out_dir"}, &S::out, std::string(), {},
       "run directory: model.safetensors (for heed attention), seq2seq_state.safetensors (for --resume), "
       "log.jsonl, loss.svg",
       Role::local, true},
      {"batch-size", "batch_size", {}, &S::batch_size, int64_t(64), {1, double(1 << 20)}, "examples per batch"},
      {"n-embd", "n_embd", {"d-model", "d_model"}, &S::d_model, int64_t(128), {1, double(kSeq2SeqMaxWidth)},
       "model width, d_model (divisible by --n-head; --d-model is another name for it)"},
      {"n-head", "n_head", {}, &S::n_head, int64_t(4), {1, double(kSeq2SeqMaxWidth)}, "attention heads"},
      {"n-layer", "n_layer", {}, &S::n_layer, int64_t(2), {1, double(kSeq2SeqMaxLayers)},
       "encoder layers (and as many decoder layers)"},
      {"lr", "lr", {"learning_rate"}, &S::lr, 2e-3, {0, inf, true}, "peak learning rate"},
      {"min-lr", "min_lr", {}, &S::min_lr, -1.0, {-1, inf},
       "final learning rate of the cosine decay (-1: --lr / 20)", Role::recipe, false, false, true},
      {"warmup-iters", "warmup_iters", {}, &S::warmup_iters, int64_t(-1), {-1, double(kMaxIters)},
       "linear warm-up steps (-1: a tenth of --max-iters, at most 200)", Role::recipe, false, false, true},
      {"lr-decay-iters", "lr_decay_iters", {}, &S::lr_decay_iters, int64_t(-1), {-1, double(kMaxIters)},
       "step at which the cosine decay reaches --min-lr (-1: --max-iters)", Role::recipe, false, false, true},
      {"examples", "examples", {}, &S::test_examples, int64_t(1000), {1, inf},
       "held-out test examples (at most half of the task's distinct sources)"},
      {"eval-interval", "eval_interval", {"log-interval", "log_interval"}, &S::eval_interval, int64_t(250),
       {1, double(kMaxIters)},
       "report the losses and exact match, and checkpoint, every N iterations (--log-interval is another name)"},
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

void resolve_seq2seq_defaults(Seq2SeqOptions& o) {
  if (o.max_iters == -1) o.max_iters = seq2seq_default_iters(o.task);
  if (o.warmup_iters == -1) o.warmup_iters = std::min<int64_t>(200, o.max_iters / 10);
  if (o.lr_decay_iters == -1) o.lr_decay_iters = std::max<int64_t>(o.max_iters, o.warmup_iters + 1);
  if (o.min_lr == -1) o.min_lr = o.lr * 0.05;
}

void validate_seq2seq(const Seq2SeqOptions& o) {
  try {
    check_task(o.task);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  check_ranges(seq2seq_option_table(), o);
  if (o.d_model % o.n_head)
    throw UsageError("--n-embd " + std::to_string(o.d_model) + " is not divisible by --n-head " +
                     std::to_string(o.n_head));
  if (double(o.test_examples) > max_held_out(o.task))
    throw UsageError("--examples " + std::to_string(o.test_examples) + ": the " + o.task + " task has " +
                     format_value(total_source_count(o.task)) + " distinct sources, of which at most " +
                     format_value(max_held_out(o.task)) + " can be held out");
  if (o.min_lr < 0 || o.min_lr > o.lr)
    throw UsageError("--min-lr " + format_value(o.min_lr) + ": must be in [0, --lr " + format_value(o.lr) + "]");
  if (o.warmup_iters < 0 || o.lr_decay_iters <= o.warmup_iters)
    throw UsageError("--lr-decay-iters " + std::to_string(o.lr_decay_iters) + ": must be greater than --warmup-iters " +
                     std::to_string(o.warmup_iters));
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

optim::AdamW seq2seq_optimizer(nn::EncoderDecoder& model, const Seq2SeqOptions& o) {
  return optim::AdamW(optim::param_groups_nanogpt(model.named_parameters(), 0.01), o.lr, 0.9, 0.98);
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
  std::vector<Example> ex;
  for (const auto& s : sources) ex.push_back({s, ""});
  Seq2SeqBatch b = make_batch(ex);
  // The library's cached decoder: the encoder memory and cross-attention keys and values once,
  // one position per step. A row ends at its end token.
  nn::GenerateOptions g{.max_new_tokens = max_out, .temperature = 0.0};
  g.stop_tokens = {Seq2SeqVocab::eos};
  g.on_token = [](int64_t, int32_t) {
    check_stop();
    return true;
  };
  std::vector<std::vector<int32_t>> out = model.generate(b.src, b.B, b.Ts, Seq2SeqVocab::bos, g, &b.src_mask);
  for (auto& ids : out) ids.insert(ids.begin(), Seq2SeqVocab::bos);
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
