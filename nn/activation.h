// heed::nn: activation functions as modules (no parameters).
#pragma once

#include "core/ops.h"
#include "core/tensor.h"
#include "nn/module.h"

namespace heed::nn {

enum class Activation { gelu, relu };

/// Applies `act` elementwise (heed::gelu, exact erf form, or heed::relu).
Tensor apply_activation(Activation act, const Tensor& x);

/// GELU, as torch.nn.GELU(approximate): the exact 0.5 x (1 + erf(x / sqrt 2)) by default, or with
/// GeluApproximation::tanh the tanh form, nn.GELU(approximate="tanh") (GPT-2's gelu_new).
class GELU : public Module {
 public:
  explicit GELU(GeluApproximation approximate = GeluApproximation::none) : approximate_(approximate) {}
  /// Elementwise GELU.
  Tensor forward(const Tensor& x);
  GeluApproximation approximate() const { return approximate_; }

 private:
  GeluApproximation approximate_;
};

/// max(x, 0), as torch.nn.ReLU().
class ReLU : public Module {
 public:
  /// Elementwise ReLU.
  Tensor forward(const Tensor& x);
};

/// x sigmoid(x), as torch.nn.SiLU() (a SwiGLU's gate: silu(w1 x) * (w3 x)).
class SiLU : public Module {
 public:
  Tensor forward(const Tensor& x);
};

/// 1 / (1 + e^-x), as torch.nn.Sigmoid().
class Sigmoid : public Module {
 public:
  Tensor forward(const Tensor& x);
};

/// tanh(x), as torch.nn.Tanh().
class Tanh : public Module {
 public:
  Tensor forward(const Tensor& x);
};

/// torch.nn.Softplus(beta, threshold): heed::softplus.
class Softplus : public Module {
 public:
  explicit Softplus(double beta = 1.0, double threshold = 20.0) : beta_(beta), threshold_(threshold) {}
  Tensor forward(const Tensor& x);

 private:
  double beta_, threshold_;
};

/// torch.nn.LeakyReLU(negative_slope): heed::leaky_relu.
class LeakyReLU : public Module {
 public:
  explicit LeakyReLU(double negative_slope = 0.01) : negative_slope_(negative_slope) {}
  Tensor forward(const Tensor& x);

 private:
  double negative_slope_;
};

/// torch.nn.ELU(alpha): heed::elu.
class ELU : public Module {
 public:
  explicit ELU(double alpha = 1.0) : alpha_(alpha) {}
  Tensor forward(const Tensor& x);

 private:
  double alpha_;
};

}  // namespace heed::nn
