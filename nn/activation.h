// heed::nn: activation functions as modules (no parameters).
#pragma once

#include "core/tensor.h"
#include "nn/module.h"

namespace heed::nn {

enum class Activation { gelu, relu };

/// Applies `act` elementwise (heed::gelu, exact erf form, or heed::relu).
Tensor apply_activation(Activation act, const Tensor& x);

/// The exact GELU, 0.5 x (1 + erf(x / sqrt 2)), as torch.nn.GELU().
class GELU : public Module {
 public:
  /// Elementwise GELU.
  Tensor forward(const Tensor& x);
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

}  // namespace heed::nn
