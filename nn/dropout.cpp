#include "nn/dropout.h"

#include "core/ops.h"

namespace heed::nn {

Dropout::Dropout(double p, std::optional<uint64_t> seed) : p_(p), gen_(seed_or_draw(seed)) {
  HEED_CHECK(p >= 0.0 && p < 1.0, "Dropout: p must be in [0, 1), got ", p);
}

Tensor Dropout::forward(const Tensor& x) {
  if (!is_training() || p_ == 0.0) return x;
  return dropout(x, p_, gen_);
}

}  // namespace heed::nn
