// The pieces of `heed seq2seq` that `heed attention` and the tests share: options, batching with
// padding masks, greedy decoding, and the checkpoint.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "nn/attention.h"
#include "nn/safetensors.h"
#include "nn/transformer.h"
#include "seq2seq_tasks.h"

namespace heed::cli {

/// Longest source or target (+1 for BOS/EOS) a seq2seq model handles.
inline constexpr int64_t kSeq2SeqMaxLen = 48;

struct Seq2SeqOptions {
  std::string task;
  uint64_t seed = 1;
  int64_t max_iters = -1;  // -1: the task's default
  std::string out;
  int64_t batch_size = 64;
  int64_t d_model = 128, n_head = 4, n_layer = 2;
  double lr = 1e-3;
  int64_t test_examples = 1000;
  int64_t log_interval = 250;
  int threads = 0;
};

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
void save_seq2seq(const std::string& path, const nn::EncoderDecoder& model, const Seq2SeqOptions& o);
/// Builds the model described by a seq2seq checkpoint's metadata and loads its weights.
std::shared_ptr<nn::EncoderDecoder> load_seq2seq(const nn::SafetensorsFile& file, const std::string& what,
                                                 Seq2SeqOptions& o);

int run_seq2seq(const Seq2SeqOptions& o);

}  // namespace heed::cli
