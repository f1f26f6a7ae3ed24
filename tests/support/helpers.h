// Test helpers: random float64 inputs for gradient checks, and element-wise comparisons.
#pragma once

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "core/heed.h"

namespace heed::test {

/// A float64 leaf with normal(0, 1) entries that requires grad.
inline Tensor randn64(const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  return Tensor::randn(shape, gen, 1.0, 0.0, DType::f64).requires_grad_();
}

/// A float64 leaf with uniform [lo, hi) entries that requires grad.
inline Tensor rand64(const Shape& shape, uint64_t seed, double lo, double hi) {
  Generator gen(seed);
  return Tensor::rand(shape, gen, lo, hi, DType::f64).requires_grad_();
}

/// The (2, 3, 4) input of many PyTorch references: x[i] = 3 sin(0.7 i + 0.3), row-major (torch:
/// (3 * torch.sin(0.7 * torch.arange(24, dtype=torch.float64) + 0.3)).reshape(2, 3, 4)).
inline Tensor sine_input(DType dtype = DType::f64) {
  std::vector<double> v(24);
  for (int i = 0; i < 24; ++i) {
    // Two statements: torch rounds 0.7 * i before adding 0.3, and clang (-ffp-contract=on) would
    // fuse a one-expression 0.7 * i + 0.3 into an fma, an ulp off torch's inputs.
    const double scaled = 0.7 * static_cast<double>(i);
    v[i] = 3 * std::sin(scaled + 0.3);
  }
  return Tensor::from_vector(v, {2, 3, 4}).to(dtype);
}

/// cos(0.37 i + phase), row-major, float64, of any shape (torch:
/// torch.cos(0.37 * torch.arange(n, dtype=torch.float64) + phase).reshape(shape)).
inline Tensor cos_wave(const Shape& shape, double phase) {
  std::vector<double> v(static_cast<size_t>(numel_of(shape)));
  for (size_t i = 0; i < v.size(); ++i) {
    const double scaled = 0.37 * static_cast<double>(i);  // rounded first, as torch's (no fma)
    v[i] = std::cos(scaled + phase);
  }
  return Tensor::from_vector(v, shape);
}

/// A (2, 3, 4) float64 leaf whose strides are not contiguous: the transpose of a (4, 3, 2) one.
inline Tensor transposed64(uint64_t seed) {
  Tensor x = transpose(randn64({4, 3, 2}, seed).detach(), 0, 2).detach().requires_grad_();
  REQUIRE_FALSE(x.is_contiguous());
  return x;
}

/// Asserts t's elements (row-major) equal `expected` within `tol` and that the shape matches.
inline void require_values(const Tensor& t, const Shape& shape, const std::vector<double>& expected,
                           double tol = 1e-5) {
  REQUIRE(t.shape() == shape);
  auto v = t.to_vector<double>();
  REQUIRE(v.size() == expected.size());
  for (size_t i = 0; i < v.size(); ++i) {
    INFO("element " << i);
    REQUIRE(v[i] == Approx(expected[i]).margin(tol).epsilon(tol));
  }
}

/// The tolerances heed's own gradient checks use: atol 1e-7 and rtol 1e-5, a hundred times
/// tighter than GradcheckOptions' defaults (torch.autograd.gradcheck's atol 1e-5 and rtol 1e-3,
/// which stay the library's for users' ops). At PyTorch's a backward whose sums are 0.1 % off
/// passes. Every gradient check of the suite passed at a third of these (atol 3e-8, rtol 3e-6), in
/// the Release and in the sanitized clang build; at atol 1e-8 the float64 differences' own
/// rounding fails some (6.5e-8 on long log_softmax rows).
inline GradcheckOptions tight_gradcheck(GradcheckOptions opt = {}) {
  opt.atol = 1e-7;
  opt.rtol = 1e-5;
  return opt;
}

/// Runs gradcheck and fails the test with its report if it does not pass.
inline void require_gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs,
                              const GradcheckOptions& opt = tight_gradcheck()) {
  auto r = gradcheck(fn, inputs, opt);
  INFO(r.report());
  REQUIRE(r.checked > 0);
  REQUIRE(r.ok);
}

}  // namespace heed::test
