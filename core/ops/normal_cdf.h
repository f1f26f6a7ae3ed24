// heed (internal): the standard normal's CDF Phi and density phi, element by element, for GELU
// (core/ops/elementwise.cpp), written once over xsimd batches (a single number goes through a
// batch too, so a loop's scalar tail gives the bits its batches would).
//
// Why not 0.5 (1 + erf(x / sqrt 2)), the textbook form: for x < 0 it subtracts two nearly equal
// numbers (Phi(-4) = 3.2e-5 keeps two significant bits of a float erf), and xsimd 8.1's float erf
// branches on the values: a short polynomial only when all lanes of a batch have |x| < 0.94, so
// GELU cost twice as much once training had moved the pre-activations (docs/performance.md).
// Here Phi comes from the lower tail L = Phi(-|x|) = 0.5 erfc(|x| / sqrt 2), accurate relative to
// itself: Phi(x) = L for x < 0, 1 - L otherwise. Double takes xsimd's erfc (detail::erfc_lanes).
// Float computes L near the centre from an odd polynomial and in the tail from
// erfc(z) = t exp(-z^2) Q(t),
// t = 1 / (1 + p z) (the form of Abramowitz & Stegun 7.1.25-26), the exp(-x^2 / 2) of which also
// gives the density. The polynomials are our own fits (scripts/fit_normal_cdf.py prints them) for
// the relative error: 1.7e-9 and 1.3e-8 in exact arithmetic; in float the values of Phi, GELU and
// its derivative stay within 8 * 2^-24 relative of double's up to |x| = 12.5, where Phi(-|x|) is
// still a normal float (tests/core/test_elementwise.cpp; measured worst 6.4 * 2^-24, with and
// without FMA). A batch whose lanes are all near the centre (as GELU's inputs are at
// initialisation) skips the tail; any other batch computes both forms and keeps one per lane.
#pragma once

#include <bit>
#include <numbers>
#include <type_traits>

#include "core/ops/simd_exp.h"  // xsimd, included there past GCC 12's false positive (bug 105593)

// GCC 12 warns inside its own AVX-512 headers once xsimd's exp is inlined into the functions
// below (simd_exp.h silences the same false positive, GCC bug 105593, around xsimd's include).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace heed::detail {

template <class T>
struct NormalCdfPdf {
  T cdf;  ///< Phi(x)
  T pdf;  ///< phi(x) = exp(-x^2 / 2) / sqrt(2 pi)
};

/// Phi(x) and phi(x) of the standard normal, for every lane of x (see the top of this file for how
/// and how exactly).
template <class T, class A>
inline NormalCdfPdf<xsimd::batch<T, A>> normal_cdf_pdf(xsimd::batch<T, A> x) {
  using B = xsimd::batch<T, A>;
  constexpr double inv_sqrt_2pi = std::numbers::inv_sqrtpi / std::numbers::sqrt2;
  B lower, gauss;  // lower = Phi(-|x|), gauss = exp(-x^2 / 2)
  if constexpr (std::is_same_v<T, double>) {
    lower = B(0.5) * detail::erfc_lanes(xsimd::abs(x) * B(std::numbers::sqrt2 / 2));
    gauss = detail::exp_lanes(B(-0.5) * x * x);
  } else {
    // Past |x| = 20 both terms are 0 in float; the clamp keeps x^2 finite.
    const B a = xsimd::min(xsimd::abs(x), B(20.0f));
    // exp(-a^2 / 2) from a^2 = sq + sq_lo exactly (Dekker's product over a split of a into 12-bit
    // halves, exact with or without an FMA): float's rounding of a^2 alone would cost up to
    // a^2 / 2 * 6e-8 of relative error, 3e-6 at |x| = 10.
    const B a_hi = a & B(std::bit_cast<float>(0xfffff000u));
    const B a_lo = a - a_hi;
    const B sq = a * a;
    const B sq_lo = ((a_hi * a_hi - sq) + B(2.0f) * a_hi * a_lo) + a_lo * a_lo;
    gauss = detail::exp_lanes(B(-0.5f) * sq) * (B(1.0f) - B(0.5f) * sq_lo);
    // Near the centre (|x| < 1.06, z < 0.75) the tail form loses accuracy through t (a rounding of
    // t moves erfc by up to twice as much): there L = 0.5 - 0.5 erf(z) = 0.5 - a R(a^2).
    B r = B(-7.410458215e-06f);
    r = xsimd::fma(r, sq, B(1.128912278e-04f));
    r = xsimd::fma(r, sq, B(-1.185825792e-03f));
    r = xsimd::fma(r, sq, B(9.973151045e-03f));
    r = xsimd::fma(r, sq, B(-6.649033960e-02f));
    r = xsimd::fma(r, sq, B(3.989422797e-01f));
    const B lower_centre = B(0.5f) - a * r;
    const auto centre = a < B(1.06f);
    if (xsimd::all(centre)) {
      // Every lane near the centre, as GELU's inputs are at initialisation: the tail's division
      // and polynomial would all be discarded. Same bits as the select below.
      lower = lower_centre;
    } else {
      // The tail: erfc(z) = t exp(-z^2) Q(t), t = 1 / (1 + z / sqrt 2) = 1 / (1 + a / 2), which
      // rounds once in the sum and once in the division.
      const B t = B(1.0f) / (B(1.0f) + B(0.5f) * a);
      B q = B(8.740179129e-02f);
      q = xsimd::fma(q, t, B(-5.334296146e-01f));
      q = xsimd::fma(q, t, B(1.121814871e+00f));
      q = xsimd::fma(q, t, B(-9.585705688e-01f));
      q = xsimd::fma(q, t, B(1.339651991e-01f));
      q = xsimd::fma(q, t, B(4.410598272e-02f));
      q = xsimd::fma(q, t, B(3.064138610e-01f));
      q = xsimd::fma(q, t, B(3.984272880e-01f));
      q = xsimd::fma(q, t, B(3.989578101e-01f));
      const B lower_tail = B(0.5f) * t * q * gauss;
      lower = xsimd::select(centre, lower_centre, lower_tail);
    }
  }
  return {xsimd::select(x < B(0), lower, B(1) - lower), gauss * B(inv_sqrt_2pi)};
}

/// The same for one number: computed in a batch, so that a scalar tail of a loop gives the very
/// bits its batches would.
template <class T>
  requires std::is_floating_point_v<T>
inline NormalCdfPdf<T> normal_cdf_pdf(T x) {
  const auto r = normal_cdf_pdf(xsimd::batch<T>(x));
  return {first_lane(r.cdf), first_lane(r.pdf)};
}

}  // namespace heed::detail

#pragma GCC diagnostic pop
