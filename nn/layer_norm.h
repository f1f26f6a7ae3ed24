// heed::nn: layer normalisation over the last axis (PyTorch's nn.LayerNorm over one dim).
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "nn/module.h"

namespace heed::nn {

class LayerNorm : public Module {
 public:
  /// weight [dim] = 1 and bias [dim] = 0; bias undefined when !bias, both undefined when
  /// !elementwise_affine (nanoGPT's LayerNorm(ndim, bias=False) is bias = false).
  explicit LayerNorm(int64_t dim, double eps = 1e-5, bool elementwise_affine = true, bool bias = true);

  /// x (..., dim) -> same shape, normalised over the last axis.
  Tensor forward(const Tensor& x);

  /// Ones for "weight", zeros for "bias" (no randomness).
  void reset_parameter(const std::string& name, Tensor& t, Generator& gen) override;

  int64_t dim() const { return dim_; }
  double eps() const { return eps_; }

  Tensor weight;  ///< [dim], "weight"; undefined when !elementwise_affine
  Tensor bias;    ///< [dim], "bias"; undefined when !bias or !elementwise_affine

 private:
  int64_t dim_;
  double eps_;
};

}  // namespace heed::nn
