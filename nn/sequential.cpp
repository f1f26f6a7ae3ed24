#include "nn/sequential.h"

namespace heed::nn {

Functional::Functional(std::function<Tensor(const Tensor&)> fn) : fn_(std::move(fn)) {
  HEED_CHECK(fn_ != nullptr, "Functional: the function is empty");
}

Tensor Functional::forward(const Tensor& x) { return fn_(x); }

Tensor Sequential::forward(const Tensor& x) {
  Tensor out = x;
  for (const auto& step : steps_) out = step.forward(out);
  return out;
}

size_t Sequential::index(int64_t i) const {
  const auto n = static_cast<int64_t>(steps_.size());
  HEED_CHECK(i >= -n && i < n, "Sequential: step ", i, " out of range for ", n, " steps");
  return static_cast<size_t>(i < 0 ? i + n : i);
}

}  // namespace heed::nn
