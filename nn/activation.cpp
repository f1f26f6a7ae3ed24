#include "nn/activation.h"

#include "core/ops.h"

namespace heed::nn {

Tensor apply_activation(Activation act, const Tensor& x) {
  switch (act) {
    case Activation::gelu: return gelu(x);
    case Activation::relu: return relu(x);
  }
  HEED_CHECK(false, "apply_activation: unknown activation ", static_cast<int>(act));
  return Tensor();
}

Tensor GELU::forward(const Tensor& x) { return gelu(x, approximate_); }

Tensor ReLU::forward(const Tensor& x) { return relu(x); }

Tensor SiLU::forward(const Tensor& x) { return silu(x); }

Tensor Sigmoid::forward(const Tensor& x) { return sigmoid(x); }

Tensor Tanh::forward(const Tensor& x) { return tanh(x); }

Tensor Softplus::forward(const Tensor& x) { return softplus(x, beta_, threshold_); }

Tensor LeakyReLU::forward(const Tensor& x) { return leaky_relu(x, negative_slope_); }

Tensor ELU::forward(const Tensor& x) { return elu(x, alpha_); }

}  // namespace heed::nn
