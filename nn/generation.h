// heed::nn: autoregressive generation, as nanoGPT's GPT.generate: each step takes the logits of
// the last position, divides them by the temperature, keeps the top k, and draws the next token
// from their softmax (temperature 0: the argmax, greedy). GPT::generate and
// EncoderDecoder::generate take these options:
//
//   Generator gen(1337);
//   std::vector<int32_t> out = model.generate(prompt, {.max_new_tokens = 500, .temperature = 0.8,
//                                                      .top_k = 200, .generator = &gen});
//
// Both use a KV cache (nn/kv_cache.h): inside the context window a new token costs one position.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace heed {
class Generator;
}

namespace heed::nn {

struct GenerateOptions {
  int64_t max_new_tokens = 100;
  double temperature = 1.0;        ///< divides the logits; 0: greedy (argmax, no draw)
  int64_t top_k = 0;               ///< sample among the k largest logits (0 or >= vocab: all)
  Generator* generator = nullptr;  ///< draws the samples; none: heed::default_generator()
  /// Stop after generating any of these tokens (it is part of the output).
  std::vector<int32_t> stop_tokens = {};
  /// Stop once the generated tokens end with one of these sequences (it is part of the output).
  std::vector<std::vector<int32_t>> stop_sequences = {};
  /// Called after each generated token with its batch row (0 for GPT) and id; returning false
  /// stops the generation (of every row).
  std::function<bool(int64_t row, int32_t token)> on_token = {};
  /// false: recompute the whole context for every token, as nanoGPT (for comparison and tests).
  bool use_cache = true;
};

/// The next token from one row of logits, as described above: heed::multinomial(weights, 1) over
/// the kept logits' softmax weights, so `gen` draws one uniform number unless temperature is 0.
/// Throws on an empty row, a negative temperature or a NaN logit (multinomial's error).
int32_t sample_token(std::vector<double> logits, double temperature, int64_t top_k, Generator& gen);

/// Whether generated token sequence `out` just hit one of options' stop conditions.
bool reached_stop(const std::vector<int32_t>& out, const GenerateOptions& options);

}  // namespace heed::nn
