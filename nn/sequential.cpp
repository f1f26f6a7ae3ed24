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

std::shared_ptr<Module> Sequential::operator[](size_t i) const {
  HEED_CHECK(i < steps_.size(), "Sequential: step ", i, " out of range for ", steps_.size(), " steps");
  return steps_[i].module;
}

}  // namespace heed::nn
