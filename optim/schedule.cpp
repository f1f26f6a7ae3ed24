#include "optim/schedule.h"

#include <cmath>
#include <numbers>

#include "core/check.h"

namespace heed::optim {

double constant_lr(int64_t, double lr) { return lr; }

double cosine_lr(int64_t it, double lr, double min_lr, int64_t warmup_iters, int64_t decay_iters) {
  // decay_iters == warmup_iters would make the ratio 0/0 at it == warmup_iters.
  HEED_CHECK(warmup_iters >= 0 && decay_iters > warmup_iters, "cosine_lr: need 0 <= warmup_iters < decay_iters, got ",
             warmup_iters, " and ", decay_iters);
  // Kept literally as the reference script's lr_at (including (it+1)/(warmup+1), which never
  // reaches lr during warm-up), so heed and PyTorch runs share every step's rate.
  if (it < warmup_iters) return lr * static_cast<double>(it + 1) / static_cast<double>(warmup_iters + 1);
  if (it > decay_iters) return min_lr;
  const double ratio = static_cast<double>(it - warmup_iters) / static_cast<double>(decay_iters - warmup_iters);
  return min_lr + 0.5 * (1.0 + std::cos(std::numbers::pi * ratio)) * (lr - min_lr);
}

}  // namespace heed::optim
