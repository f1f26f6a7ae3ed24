// heed::nn: the fully connected layer, y = x W^T + b (PyTorch's nn.Linear, same weight layout).
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "nn/module.h"

namespace heed {
class Generator;
}

namespace heed::nn {

class Linear : public Module {
 public:
  /// weight [out, in] and bias [out] drawn uniform(-1/sqrt(in), 1/sqrt(in)) as PyTorch, weight
  /// first, from `gen`, or from the default generator when null (heed::manual_seed): two
  /// default-built layers differ, and the same program builds the same ones every run.
  Linear(int64_t in_features, int64_t out_features, bool bias = true, Generator* gen = nullptr);

  /// x (..., in) -> (..., out).
  Tensor forward(const Tensor& x);

  /// uniform(-1/sqrt(in), 1/sqrt(in)) for "weight" and "bias" (torch's reset_parameters).
  void reset_parameter(const std::string& name, Tensor& t, Generator& gen) override;

  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }

  Tensor weight;  ///< [out, in], registered as "weight"
  Tensor bias;    ///< [out], registered as "bias"; undefined when built with bias = false

 private:
  int64_t in_features_;
  int64_t out_features_;
};

}  // namespace heed::nn
