// The pieces of `heed seq2seq` that `heed attention` and the tests share: options, batching with
// padding masks, greedy decoding, and the checkpoint.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "nn/attention.h"
#include "nn/safetensors.h"
#include "nn/transformer.h"
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
  int64_t d_model{}, n_head{}, n_layer{};
  double lr{};
  int64_t test_examples{};
  int64_t log_interval{};
  int64_t threads{};
};
const OptionTable<Seq2SeqOptions>& seq2seq_option_table();
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
/// Pads a batch: source ids, BOS + target as decoder input, target + EOS as decoder output.
Seq2SeqBatch make_batch(const std::vector<Example>& examples);
/// Greedy decoding of a batch of sources (at most `max_out` characters each).
std::vector<std::string> greedy_decode(nn::EncoderDecoder& model, const std::vector<std::string>& sources,
                                       int64_t max_out);

/// Trains and scores (see seq2seq.cpp); `overwrite` lets --out replace a seq2seq run there.
int run_seq2seq(const Seq2SeqOptions& o, bool overwrite);

}  // namespace heed::cli
