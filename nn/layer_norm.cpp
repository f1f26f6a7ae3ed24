#include "nn/layer_norm.h"

#include "core/ops.h"

namespace heed::nn {

LayerNorm::LayerNorm(int64_t dim, double eps, bool elementwise_affine, bool has_bias) : dim_(dim), eps_(eps) {
  HEED_CHECK(dim > 0, "LayerNorm: dim must be positive, got ", dim);
  HEED_CHECK(eps > 0.0, "LayerNorm: eps must be positive, got ", eps);
  if (elementwise_affine) {
    register_parameter("weight", weight, Tensor::ones({dim}));
    if (has_bias) register_parameter("bias", bias, Tensor::zeros({dim}));
  }
}

void LayerNorm::reset_parameter(const std::string& name, Tensor& t, Generator&) {
  t.fill_(name == "weight" ? 1.0 : 0.0);
}

Tensor LayerNorm::forward(const Tensor& x) {
  HEED_CHECK(x.dim() >= 1 && x.size(-1) == dim_, "LayerNorm: input ", to_string(x.shape()),
             " does not end in dim ", dim_);
  return layer_norm(x, weight, bias, eps_);
}

}  // namespace heed::nn
