#include "core/gradcheck.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "core/autograd.h"
#include "core/ops.h"
#include "core/random.h"

namespace heed {

std::string GradcheckResult::report() const {
  std::ostringstream os;
  os.precision(10);
  os << "gradcheck " << (ok ? "passed" : "FAILED") << ": " << checked << " elements, max abs error "
     << max_abs_error << ", max rel error " << max_rel_error;
  if (input >= 0) {
    os << "; worst at input " << input << " index " << to_string(index) << ": analytic " << analytic
       << ", numeric " << numeric;
  }
  return os.str();
}

GradcheckResult gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& opt) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    HEED_CHECK(inputs[i].dtype() == DType::f64, "gradcheck: input ", i, " is ",
               dtype_name(inputs[i].dtype()), "; finite differences need float64 inputs");
    // Only a leaf keeps its gradient: an op's output would read as an analytic gradient of zero,
    // a failure that blames the function instead of the input.
    HEED_CHECK(!inputs[i].grad_fn(), "gradcheck: input ", i, " is the output of ", inputs[i].grad_fn()->name(),
               ", not a leaf, so no gradient is kept for it; pass a leaf (x.detach().requires_grad_()) and apply ",
               inputs[i].grad_fn()->name(), " inside the function");
  }

  // The fixed weighting r, drawn once from the output's shape.
  Tensor r;
  auto loss = [&](const std::vector<Tensor>& in) {
    Tensor y = fn(in);
    HEED_CHECK(y.dtype() == DType::f64, "gradcheck: the function returned ", dtype_name(y.dtype()),
               "; it must compute in float64");
    if (!r.defined()) {
      Generator gen(opt.seed ^ 0x5eedULL);
      r = Tensor::rand(y.shape(), gen, 0.5, 1.5, DType::f64);  // away from 0: every output counts
    }
    return sum(mul(y, r));
  };

  // Analytic: one backward of L gives r^T J for every input at once.
  for (const auto& x : inputs) const_cast<Tensor&>(x).zero_grad();
  Tensor l = loss(inputs);
  l.backward();
  std::vector<Tensor> analytic;
  for (const auto& x : inputs) analytic.push_back(x.requires_grad() ? x.grad() : Tensor());
  for (const auto& x : inputs) const_cast<Tensor&>(x).zero_grad();

  GradcheckResult res;
  double worst_excess = -std::numeric_limits<double>::infinity();
  NoGradGuard no_grad;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    if (!x.requires_grad()) continue;
    double* base = static_cast<double*>(x.storage()->data());
    const Shape& shape = x.shape();
    const int64_t n = x.numel();
    const int64_t limit = opt.max_checks < 0 ? n : std::min(n, opt.max_checks);
    std::vector<int64_t> idx(shape.size(), 0);
    for (int64_t k = 0; k < n; ++k) {
      if (k > 0) {  // next multi-index, row-major
        for (size_t d = shape.size(); d-- > 0;) {
          if (++idx[d] < shape[d]) break;
          idx[d] = 0;
        }
      }
      // With max_checks, spread the checked elements evenly over the tensor.
      if (limit < n && (k * limit) / n == ((k + 1) * limit) / n) continue;
      int64_t off = x.offset();
      for (size_t d = 0; d < shape.size(); ++d) off += idx[d] * x.strides()[d];
      const double orig = base[off];
      base[off] = orig + opt.eps;
      const double lp = loss(inputs).item();
      base[off] = orig - opt.eps;
      const double lm = loss(inputs).item();
      base[off] = orig;
      const double num = (lp - lm) / (2 * opt.eps);
      const double ana = analytic[i].defined() ? analytic[i].at(idx) : 0.0;
      const double abs_err = std::abs(ana - num);
      const double rel_err = abs_err / std::max(std::abs(num), 1e-12);
      res.checked++;
      res.max_abs_error = std::max(res.max_abs_error, abs_err);
      res.max_rel_error = std::max(res.max_rel_error, rel_err);
      const double excess = abs_err - (opt.atol + opt.rtol * std::abs(num));
      if (excess > 0) res.ok = false;
      if (excess > worst_excess) {
        worst_excess = excess;
        res.input = static_cast<int64_t>(i);
        res.index = idx;
        res.analytic = ana;
        res.numeric = num;
      }
    }
  }
  return res;
}

}  // namespace heed
