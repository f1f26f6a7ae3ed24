#include "nn/init.h"

namespace heed::nn::init {

Tensor& normal_(Tensor& t, double std, Generator& gen, double mean) {
  t.copy_(Tensor::randn(t.shape(), gen, std, mean, t.dtype()));
  return t;
}

Tensor& uniform_(Tensor& t, double lo, double hi, Generator& gen) {
  t.copy_(Tensor::rand(t.shape(), gen, lo, hi, t.dtype()));
  return t;
}

Tensor& zeros_(Tensor& t) {
  t.fill_(0.0);
  return t;
}

Tensor& ones_(Tensor& t) {
  t.fill_(1.0);
  return t;
}

}  // namespace heed::nn::init
