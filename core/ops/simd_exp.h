// heed (internal): exp of every lane of an xsimd batch, the one definition every vectorised exp
// in core/ops goes through (softmax and log_softmax rows, cross-entropy, attention, GELU, the
// elementwise exp).
//
// xsimd 8's double exp (Debian 12's xsimd) converts round(x / ln 2) to int64 with a scalar cast
// (its generic batch_cast: the AVX-512 "bw" arch it picks has no vector one), and that cast is
// undefined behaviour for +-inf, NaN and |x| past about 6e18, lanes whose exp it then overrides
// with 0, inf or NaN. A masked softmax feeds it -inf by design. So double lanes go in clamped to
// [-1000, 1000], where exp is already 0 below and inf above, and NaN lanes go in as 0 and come out
// as the NaN they were: the same results, without the cast of a non-finite value (clang's UBSan,
// float-cast-overflow, reports it; GCC's -fsanitize=undefined does not check that cast). float
// lanes convert with a vector instruction, defined for any input, and go straight through.
#pragma once

#include <type_traits>

// GCC 12 warns inside its own AVX-512 headers (_mm512_undefined_* read "uninitialized") once
// xsimd's exp is inlined: a false positive, GCC bug 105593 (fixed in GCC 13).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <xsimd/xsimd.hpp>
#pragma GCC diagnostic pop

namespace heed::detail {

template <class T, class A>
xsimd::batch<T, A> exp_lanes(xsimd::batch<T, A> x) {
  if constexpr (std::is_same_v<T, double>) {
    using B = xsimd::batch<T, A>;
    const auto nan = xsimd::isnan(x);  // not x != x: xsimd 8 compares batches with AVX-512's ordered "not equal", false for NaN
    const B finite = xsimd::select(x < B(-1000.0), B(-1000.0), xsimd::select(x > B(1000.0), B(1000.0), x));
    return xsimd::select(nan, x, xsimd::exp(xsimd::select(nan, B(0.0), finite)));
  } else {
    return xsimd::exp(x);
  }
}

}  // namespace heed::detail
