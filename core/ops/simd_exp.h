// heed (internal): exp, tanh and erfc of every lane of an xsimd batch (and first_lane, lane 0 read
// back), the one definition every vectorised exp, tanh and erfc in core/ops goes through (softmax
// and log_softmax rows, cross-entropy, attention, GELU, the elementwise exp and tanh).
//
// xsimd 8's double exp (Debian 12's xsimd) converts round(x / ln 2) to int64 with a scalar cast
// (its generic batch_cast: the AVX-512 "bw" arch it picks has no vector one), and that cast is
// undefined behaviour for +-inf, NaN and |x| past about 6e18, lanes whose exp it then overrides
// with 0, inf or NaN. Its double tanh and erfc call that exp (of 2|x| and of -x^2), so they reach
// the cast at the same inputs (erfc from |x| past about 2.5e9). A masked softmax feeds exp -inf by
// design. So double lanes go in clamped to [-1000, 1000], where each function already has its
// limit (exp 0 below and inf above; tanh +-1 from |x| = 19.1 on; erfc 0 from x = 26.6 on and 2
// below x = -6), and NaN lanes go in as 0 and come out as the NaN they were: the same results
// wherever xsimd's are defined (and erfc past |x| ~ 1e62, where xsimd's own gives NaN, now 0 or 2),
// without the cast of a non-finite value (clang's UBSan, float-cast-overflow, reports it; GCC's
// -fsanitize=undefined does not check that cast). float lanes convert with a vector instruction,
// defined for any input, and go straight through.
#pragma once

#include <type_traits>

// GCC 12 warns inside its own AVX-512 headers (_mm512_undefined_* read "uninitialized") once
// xsimd's exp is inlined: a false positive, GCC bug 105593 (fixed in GCC 13).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <xsimd/xsimd.hpp>
#pragma GCC diagnostic pop

namespace heed::detail {

// f(x) lane by lane for double lanes clamped as above, NaN lanes passed around f; float lanes
// straight to f.
template <class T, class A, class F>
xsimd::batch<T, A> lanes_clamped_for_xsimd(xsimd::batch<T, A> x, F f) {
  if constexpr (std::is_same_v<T, double>) {
    using B = xsimd::batch<T, A>;
    const auto nan = xsimd::isnan(x);  // not x != x: xsimd 8 compares batches with AVX-512's ordered "not equal", false for NaN
    const B finite = xsimd::select(x < B(-1000.0), B(-1000.0), xsimd::select(x > B(1000.0), B(1000.0), x));
    return xsimd::select(nan, x, f(xsimd::select(nan, B(0.0), finite)));
  } else {
    return f(x);
  }
}

// For the kernels' arguments, which stay at or below 0 (softmax's x - max, exp(-x^2 / 2)): xsimd's
// exp, finite up to 88.38 (float) and 709.09 (double).
template <class T, class A>
xsimd::batch<T, A> exp_lanes(xsimd::batch<T, A> x) {
  return lanes_clamped_for_xsimd(x, [](auto v) { return xsimd::exp(v); });
}

// For any argument (heed::exp, sigmoid and silu of a user's tensor): xsimd's exp gives inf from
// 127.5 ln 2 = 88.38 (float) and 1023 ln 2 = 709.09 (double) on, short of the true overflow
// (88.72 and 709.78) where std::exp, the scalar tails and torch are still finite. Lanes past 88
// (709) take exp(x - 1) e instead: x - 1 is exact there (the same binade), and the two roundings
// cost about an ulp. Not in the kernels' exp_lanes: the check slowed GELU's forward by 70 %
// (baby's profile, 0.52 -> 0.88 ms a step), whose argument is never positive.
template <class T, class A>
xsimd::batch<T, A> exp_lanes_full_range(xsimd::batch<T, A> x) {
  using B = xsimd::batch<T, A>;
  const B y = exp_lanes(x);
  const auto big = x > B(std::is_same_v<T, float> ? T(88) : T(709));
  if (!xsimd::any(big)) return y;
  const B e = B(static_cast<T>(2.718281828459045235360287471352662498L));
  return xsimd::select(big, exp_lanes(x - B(T(1))) * e, y);
}

template <class T, class A>
xsimd::batch<T, A> tanh_lanes(xsimd::batch<T, A> x) {
  return lanes_clamped_for_xsimd(x, [](auto v) { return xsimd::tanh(v); });
}

template <class T, class A>
xsimd::batch<T, A> erfc_lanes(xsimd::batch<T, A> x) {
  return lanes_clamped_for_xsimd(x, [](auto v) { return xsimd::erfc(v); });
}

/// Lane 0 of a batch: how a scalar computed through a batch (a loop's scalar tail, to give the
/// very bits of its batches) is read back. (xsimd 8 has no first().)
template <class T, class A>
inline T first_lane(const xsimd::batch<T, A>& b) {
  alignas(64) T lanes[xsimd::batch<T, A>::size];
  b.store_aligned(lanes);
  return lanes[0];
}

}  // namespace heed::detail
