// heed (internal): SIMD primitives over one contiguous row of n elements, shared by every op
// family that reduces rows (sum, softmax, log_softmax, max, cross_entropy, layer_norm,
// attention). They are written with xsimd batches because GCC does not vectorise a floating-point
// reduction without -ffast-math (it may not reassociate the sum), and std::exp does not vectorise
// at all: a scalar exp makes a softmax about 10x slower (docs/platform.md, "xtensor and xsimd").
//
// Precision, stated once for all of them:
//   - row_max, row_max_nan: exact (a max does not round).
//   - row_sum, row_exp_sum: one vector of T lanes accumulates within blocks of kSumBlock elements,
//     and the block totals add up in double, so the rounding error grows with the block length,
//     not with n (a float32 sum over a 50 K vocabulary or millions of elements stays accurate).
//     For n <= kSumBlock this is exactly a plain T-lane sum.
//   - row_dot, row_sq_dev: T lanes over the whole row. They serve rows of one softmax or one layer
//     norm (a few thousand elements at most), where a T accumulator is what PyTorch uses too.
//   - row_dot_streamed: four T-lane accumulators over the whole row, added at the end (a weight
//     row of a one-row matrix product; see there).
// The scalar tail after the last whole batch uses the same formula, so a result differs from an
// all-scalar loop only in rounding.
//
// Masked tails: functions that take `avail` (>= n) may read, and row_exp_sum may write, whole
// batches up to `avail` elements of the row, with the lanes at or past n masked out of the
// result. Attention's causal rows end at any length n inside a padded buffer, and a scalar tail
// (std::exp) would cost as much as the rest of a short row. With avail == n (the default) nothing
// past n is touched.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/ops/simd_exp.h"  // xsimd, included there past GCC 12's false positive (bug 105593)

namespace heed::detail {

template <class T>
using Batch = xsimd::batch<T>;

/// Elements per block of row_sum and row_exp_sum (see the precision note above).
constexpr int64_t kSumBlock = 2048;

/// Lanes [0, k) true, the rest false.
template <class T>
xsimd::batch_bool<T> lanes_below(int64_t k) {
  alignas(64) T idx[Batch<T>::size];
  for (size_t i = 0; i < Batch<T>::size; ++i) idx[i] = static_cast<T>(i);
  return Batch<T>::load_aligned(idx) < Batch<T>(static_cast<T>(k));
}

/// The largest lane (xsimd 8.1 has no reduce_max).
template <class T>
T hmax(const Batch<T>& b) {
  alignas(64) T lanes[Batch<T>::size];
  b.store_aligned(lanes);
  return *std::max_element(lanes, lanes + Batch<T>::size);
}

/// max of x[0, n) (-inf for n == 0); x readable up to avail >= n.
template <class T>
T row_max(const T* x, int64_t n, int64_t avail) {
  constexpr int64_t W = Batch<T>::size;
  const Batch<T> ninf(-std::numeric_limits<T>::infinity());
  Batch<T> mb = ninf;
  int64_t j = 0;
  for (; j + W <= n; j += W) mb = xsimd::max(mb, Batch<T>::load_unaligned(x + j));
  if (j < n && j + W <= avail) {
    mb = xsimd::max(mb, xsimd::select(lanes_below<T>(n - j), Batch<T>::load_unaligned(x + j), ninf));
    j = n;
  }
  T m = hmax(mb);
  for (; j < n; ++j) m = std::max(m, x[j]);
  return m;
}

template <class T>
T row_max(const T* x, int64_t n) {
  return row_max(x, n, n);
}

/// row_max that also reports whether the row holds a NaN (which xsimd::max may drop).
template <class T>
T row_max_nan(const T* x, int64_t n, bool& nan) {
  constexpr int64_t W = Batch<T>::size;
  Batch<T> mb(-std::numeric_limits<T>::infinity());
  auto bad = xsimd::isnan(mb);  // not mb != mb: xsimd compares with NEQ_OQ, false for NaN
  int64_t j = 0;
  for (; j + W <= n; j += W) {
    const Batch<T> v = Batch<T>::load_unaligned(x + j);
    mb = xsimd::max(mb, v);
    bad = bad || xsimd::isnan(v);
  }
  nan = xsimd::any(bad);
  T m = hmax(mb);
  for (; j < n; ++j) {
    nan = nan || x[j] != x[j];
    m = std::max(m, x[j]);
  }
  return m;
}

/// sum of x[0, n), rounded to T (blocked; see the precision note).
template <class T>
T row_sum(const T* x, int64_t n) {
  constexpr int64_t W = Batch<T>::size;
  double total = 0;
  for (int64_t b0 = 0; b0 < n; b0 += kSumBlock) {
    const int64_t b1 = std::min(n, b0 + kSumBlock);
    Batch<T> acc(T(0));
    int64_t i = b0;
    for (; i + W <= b1; i += W) acc += Batch<T>::load_unaligned(x + i);
    T s = xsimd::hadd(acc);
    for (; i < b1; ++i) s += x[i];
    total += s;
  }
  return static_cast<T>(total);
}

/// sum of exp(x[j] * scale - shift) over [0, n), in double (blocked; see the precision note).
/// Writes each exp to y[j] unless y is null; with avail > n it may also write y[n, avail) with
/// values the caller must overwrite. The softmax shift is the row's max (times scale), so no
/// exp overflows.
template <class T>
double row_exp_sum(T* y, const T* x, T scale, T shift, int64_t n, int64_t avail) {
  constexpr int64_t W = Batch<T>::size;
  const Batch<T> sb(scale), shb(shift);
  double total = 0;
  for (int64_t b0 = 0; b0 < n; b0 += kSumBlock) {
    const int64_t b1 = std::min(n, b0 + kSumBlock);
    Batch<T> acc(T(0));
    int64_t j = b0;
    for (; j + W <= b1; j += W) {
      const Batch<T> e = exp_lanes(xsimd::fms(Batch<T>::load_unaligned(x + j), sb, shb));
      if (y) e.store_unaligned(y + j);
      acc += e;
    }
    if (b1 == n && j < n && j + W <= avail) {  // the row's masked tail
      const Batch<T> e = exp_lanes(xsimd::fms(Batch<T>::load_unaligned(x + j), sb, shb));
      if (y) e.store_unaligned(y + j);
      acc += xsimd::select(lanes_below<T>(n - j), e, Batch<T>(T(0)));
      j = n;
    }
    T s = xsimd::hadd(acc);
    for (; j < b1; ++j) {
      const T e = std::exp(x[j] * scale - shift);
      if (y) y[j] = e;
      s += e;
    }
    total += s;
  }
  return total;
}

template <class T>
double row_exp_sum(T* y, const T* x, T scale, T shift, int64_t n) {
  return row_exp_sum(y, x, scale, shift, n, n);
}

/// sum of a[j] b[j] over [0, n); both readable up to avail >= n.
template <class T>
T row_dot(const T* a, const T* b, int64_t n, int64_t avail) {
  constexpr int64_t W = Batch<T>::size;
  Batch<T> acc(T(0));
  int64_t j = 0;
  for (; j + W <= n; j += W) acc = xsimd::fma(Batch<T>::load_unaligned(a + j), Batch<T>::load_unaligned(b + j), acc);
  if (j < n && j + W <= avail) {
    const Batch<T> prod = Batch<T>::load_unaligned(a + j) * Batch<T>::load_unaligned(b + j);
    acc += xsimd::select(lanes_below<T>(n - j), prod, Batch<T>(T(0)));
    j = n;
  }
  T sum = xsimd::hadd(acc);
  for (; j < n; ++j) sum += a[j] * b[j];
  return sum;
}

template <class T>
T row_dot(const T* a, const T* b, int64_t n) {
  return row_dot(a, b, n, n);
}

/// sum of a[j] b[j] over [0, n) with four independent T-lane accumulators, for a long row streamed
/// from memory (a weight row of a one-row matrix product, KV-cached generation): one accumulator
/// would wait on its FMA latency at every batch, where memory could feed four. The four add up at
/// the end, so the rounding is that of 4 T-lane sums, not row_dot's one.
template <class T>
T row_dot_streamed(const T* a, const T* b, int64_t n) {
  constexpr int64_t W = Batch<T>::size;
  Batch<T> acc0(T(0)), acc1(T(0)), acc2(T(0)), acc3(T(0));
  int64_t j = 0;
  for (; j + 4 * W <= n; j += 4 * W) {
    acc0 = xsimd::fma(Batch<T>::load_unaligned(a + j), Batch<T>::load_unaligned(b + j), acc0);
    acc1 = xsimd::fma(Batch<T>::load_unaligned(a + j + W), Batch<T>::load_unaligned(b + j + W), acc1);
    acc2 = xsimd::fma(Batch<T>::load_unaligned(a + j + 2 * W), Batch<T>::load_unaligned(b + j + 2 * W), acc2);
    acc3 = xsimd::fma(Batch<T>::load_unaligned(a + j + 3 * W), Batch<T>::load_unaligned(b + j + 3 * W), acc3);
  }
  for (; j + W <= n; j += W) acc0 = xsimd::fma(Batch<T>::load_unaligned(a + j), Batch<T>::load_unaligned(b + j), acc0);
  T sum = xsimd::hadd((acc0 + acc1) + (acc2 + acc3));
  for (; j < n; ++j) sum += a[j] * b[j];
  return sum;
}

/// sum of (x[j] - m)^2 over [0, n): the two-pass variance, which does not cancel
/// catastrophically as E[x^2] - m^2 does.
template <class T>
T row_sq_dev(const T* x, T m, int64_t n) {
  constexpr int64_t W = Batch<T>::size;
  const Batch<T> mb(m);
  Batch<T> acc(T(0));
  int64_t j = 0;
  for (; j + W <= n; j += W) {
    const Batch<T> d = Batch<T>::load_unaligned(x + j) - mb;
    acc = xsimd::fma(d, d, acc);
  }
  T s = xsimd::hadd(acc);
  for (; j < n; ++j) s += (x[j] - m) * (x[j] - m);
  return s;
}

}  // namespace heed::detail
