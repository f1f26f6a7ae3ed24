// A user-defined op and layer, written outside heed against its installed headers:
// RMSNorm (Zhang & Sennrich, 2019), y = x / sqrt(mean(x^2) + eps) * weight over the last axis.
#pragma once

#include <heed/core/heed.h>
#include <heed/nn/module.h>

/// The op: a fused forward kernel and its backward, recorded with heed::record.
heed::Tensor rms_norm(const heed::Tensor& x, const heed::Tensor& weight, double eps = 1e-6);

/// The layer: owns "weight" (ones), normalises the last axis of size `dim`.
class RMSNorm : public heed::nn::Module {
 public:
  explicit RMSNorm(int64_t dim, double eps = 1e-6);
  heed::Tensor forward(const heed::Tensor& x) const { return rms_norm(x, weight, eps_); }
  heed::Tensor weight;

 private:
  double eps_;
};
