// heed: the finite-difference gradient checker, for heed's own ops and for users' ops and layers.
//
//   auto r = heed::gradcheck([](const std::vector<Tensor>& in) { return my_op(in[0], in[1]); },
//                            {x, w});             // float64 inputs, requires_grad on those to check
//   INFO(r.report()); REQUIRE(r.ok);
//
// As torch.autograd.gradcheck: central differences with eps 1e-6 in float64, each element must
// satisfy |analytic - numeric| <= atol + rtol * |numeric|. A non-scalar output is reduced to a
// scalar with a fixed random weighting, L = sum(fn(x) * r), because a plain sum is blind to many
// wrong backwards (sum(softmax(x)) is constant, so its true gradient is zero). Elements are
// perturbed through the inputs' strides, so transposed or sliced (non-contiguous) inputs work.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace heed {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
  uint64_t seed = 0;          ///< seed of the output weighting r
  int64_t max_checks = -1;    ///< per input: check at most this many elements (-1: all)
};

struct GradcheckResult {
  bool ok = true;
  int64_t checked = 0;        ///< elements compared
  double max_abs_error = 0;   ///< worst |analytic - numeric|
  double max_rel_error = 0;   ///< worst |analytic - numeric| / max(|numeric|, tiny)
  // the element that failed worst (by the pass rule), valid when a comparison was made
  int64_t input = -1;
  std::vector<int64_t> index;
  double analytic = 0, numeric = 0;
  std::string report() const;  ///< one line with all of the above
};

using GradcheckFn = std::function<Tensor(const std::vector<Tensor>&)>;

/// Compares fn's backward with central differences for every input that requires grad.
/// Throws heed::Error if an input is not float64 or the output is not float64.
GradcheckResult gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options = {});

}  // namespace heed
