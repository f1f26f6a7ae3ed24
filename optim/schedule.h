// heed::optim: learning-rate schedules, as functions of the iteration (call set_lr before step()).
#pragma once

#include <cstdint>

namespace heed::optim {

/// The same rate at every iteration.
double constant_lr(int64_t it, double lr);

/// nanoGPT's get_lr: linear warm-up lr*(it+1)/(warmup_iters+1) while it < warmup_iters, cosine
/// decay from lr to min_lr until it == decay_iters, then min_lr. Throws heed::Error unless
/// 0 <= warmup_iters < decay_iters.
double cosine_lr(int64_t it, double lr, double min_lr, int64_t warmup_iters, int64_t decay_iters);

}  // namespace heed::optim
