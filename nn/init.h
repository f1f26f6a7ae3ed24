// heed::nn: in-place parameter initialisers (torch.nn.init), run outside autograd. Each keeps the
// tensor's shape, dtype and storage, so every handle and tied alias sees the new values.
#pragma once

#include "core/random.h"
#include "core/tensor.h"

namespace heed::nn::init {

/// Fills `t` with normal(mean, std) samples from `gen`; returns t.
Tensor& normal_(Tensor& t, double std, Generator& gen, double mean = 0.0);
/// Fills `t` with uniform [lo, hi) samples from `gen`; returns t.
Tensor& uniform_(Tensor& t, double lo, double hi, Generator& gen);
/// Fills `t` with zeros; returns t.
Tensor& zeros_(Tensor& t);
/// Fills `t` with ones; returns t.
Tensor& ones_(Tensor& t);

}  // namespace heed::nn::init

namespace heed::nn {
// Also reachable as nn::normal_(...) etc.
using init::normal_;
using init::ones_;
using init::uniform_;
using init::zeros_;
}  // namespace heed::nn
