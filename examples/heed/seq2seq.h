// The pieces of `heed seq2seq` that `heed attention` and the tests share: options, batching with
// padding masks, greedy decoding, and the checkpoint.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "nn/attention.h"
#include "nn/safetensors.h"
#include "nn/transformer.h"
#include "optim/adam.h"
#include "options.h"
#include "seq2seq_tasks.h"

namespace heed::cli {

/// Longest source or target (+1 for BOS/EOS) a seq2seq model handles.
inline constexpr int64_t kSeq2SeqMaxLen = 48;

/// `heed seq2seq`'s options (defaults: seq2seq_option_table()'s).
struct Seq2SeqOptions {
  std::string task;
  int64_t seed{};
  int64_t max_iters{};  ///< -1: the task's default (seq2seq_default_iters)
  std::string out;
  int64_t batch_size{};
  int64_t d_model{}, n_head{}, n_layer{};  ///< d_model: the width, flag --n-embd as train's
  double lr{};
  double min_lr{};              ///< -1: lr / 20
  int64_t warmup_iters{};       ///< -1: a tenth of max_iters, at most 200
  int64_t lr_decay_iters{};     ///< -1: max_iters
  int64_t test_examples{};
  int64_t eval_interval{};
  int64_t threads{};
};
const OptionTable<Seq2SeqOptions>& seq2seq_option_table();
/// Replaces the "task's default" values (-1) of max_iters and the schedule by what they mean for
/// `o.task` (a run records the result, so --resume keeps its schedule whatever --max-iters says).
void resolve_seq2seq_defaults(Seq2SeqOptions& o);
/// Checks resolved options: the task, every range, --n-embd divisible by --n-head, the held-out
/// count, --min-lr <= --lr < ... and --lr-decay-iters > --warmup-iters (UsageError naming the flag).
void validate_seq2seq(const Seq2SeqOptions& o);
/// Training iterations when --max-iters is not given: copy 1000, reverse 2000, dates 1500.
int64_t seq2seq_default_iters(const std::string& task);
/// The sizes a seq2seq model may have (flags and checkpoints alike).
inline constexpr int64_t kSeq2SeqMaxWidth = 4096, kSeq2SeqMaxLayers = 64;

struct Seq2SeqBatch {
  int64_t B = 0, Ts = 0, Tt = 0;
  std::vector<int32_t> src, tgt_in, tgt_out;  // (B, Ts), (B, Tt), (B, Tt); padded with Seq2SeqVocab::pad
  nn::KeyPaddingMask src_mask, tgt_mask;
};

nn::EncoderDecoderOptions seq2seq_model_options(const Seq2SeqOptions& o);
/// The optimizer of a seq2seq run over `model`'s parameters: AdamW at --lr, betas (0.9, 0.98) as
/// the Transformer paper's, weight decay 0.01 on matrices and embeddings (`heed seq2seq` and the
/// fuzz target of its --resume build it here, so that a state restores into the same optimizer).
optim::AdamW seq2seq_optimizer(nn::EncoderDecoder& model, const Seq2SeqOptions& o);
/// Pads a batch: source ids, BOS + target as decoder input, target + EOS as decoder output.
Seq2SeqBatch make_batch(const std::vector<Example>& examples);
/// Greedy decoding of a batch of sources (at most `max_out` characters each).
std::vector<std::string> greedy_decode(nn::EncoderDecoder& model, const std::vector<std::string>& sources,
                                       int64_t max_out);

/// What one `heed seq2seq` invocation asks beyond the options.
struct Seq2SeqRequest {
  Seq2SeqOptions options;
  bool resume = false;     ///< continue the run in --out
  bool overwrite = false;  ///< start over in an --out that holds a seq2seq run
  std::set<std::string> from_command_line;  ///< names of the options given as flags
};

/// Trains and scores (see seq2seq.cpp).
int run_seq2seq(const Seq2SeqRequest& request);

}  // namespace heed::cli
