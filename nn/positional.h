// heed::nn: position information for transformers. The fixed sinusoids of "Attention Is All You
// Need" (no parameters) and GPT's learned table (nanoGPT's wpe).
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "nn/module.h"

namespace heed {
class Generator;
}

namespace heed::nn {

/// PE[pos, 2i] = sin(pos / 10000^(2i / d_model)), PE[pos, 2i + 1] = cos(same angle).
class SinusoidalPositionalEncoding : public Module {
 public:
  /// Precomputes the table for positions [0, max_len) (in float64, with a float32 copy).
  SinusoidalPositionalEncoding(int64_t d_model, int64_t max_len);

  /// x (..., T, d_model) -> x + PE[:T] in x's dtype; throws if T > max_len or the width differs.
  Tensor forward(const Tensor& x);

  /// The table [max_len, d_model] in `dtype` (not a parameter; never trained).
  const Tensor& table(DType dtype = DType::f32) const { return dtype == DType::f64 ? pe64_ : pe32_; }

  int64_t d_model() const { return d_model_; }
  int64_t max_len() const { return max_len_; }

 private:
  int64_t d_model_;
  int64_t max_len_;
  Tensor pe64_, pe32_;
};

/// A learned table of position vectors (GPT-2's wpe): forward(T) gives rows 0..T-1.
class LearnedPositionalEmbedding : public Module {
 public:
  /// weight [max_len, dim] drawn normal(0, 1) as nn.Embedding, from `gen` (null: the default
  /// generator).
  LearnedPositionalEmbedding(int64_t max_len, int64_t dim, Generator* gen = nullptr);

  /// (T, dim): the first T rows (a differentiable view); throws if T < 1 or T > max_len.
  Tensor forward(int64_t T);

  /// normal(0, 1) for "weight".
  void reset_parameter(const std::string& name, Tensor& t, Generator& gen) override;

  int64_t max_len() const { return max_len_; }

  Tensor weight;  ///< [max_len, dim], registered as "weight"

 private:
  int64_t max_len_;
};

}  // namespace heed::nn
