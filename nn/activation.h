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

}  // namespace heed::nn
