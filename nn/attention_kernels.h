// Internal to nn/attention.cpp: the per-head products of attention, written for the small
// matrices attention has (T up to a few hundred, head_dim 16-128), where a BLAS call per head
// costs more in overhead than in arithmetic. Rows are vectorised with xsimd; causal rows stop at
// their last visible key, so the masked half is never computed.
#pragma once

#include <xsimd/xsimd.hpp>

#include <algorithm>
#include <cstdint>

namespace heed::nn::kernels {

template <class T>
using Batch = xsimd::batch<T>;

/// dst (cols x ld_dst, only the first rows columns written) = src^T, src (rows x cols) with row
/// stride ld_src. Entries of dst past `rows` in each row, up to ld_dst, are set to zero.
template <class T>
void transpose(T* dst, int64_t ld_dst, const T* src, int64_t ld_src, int64_t rows, int64_t cols) {
  constexpr int64_t kTile = 16;  // tiles keep both sides' cache lines live while they are used
  for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
    const int64_t c1 = std::min(cols, c0 + kTile);
    for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
      const int64_t r1 = std::min(rows, r0 + kTile);
      for (int64_t c = c0; c < c1; ++c)
        for (int64_t r = r0; r < r1; ++r) dst[c * ld_dst + r] = src[r * ld_src + c];
    }
    for (int64_t c = c0; c < c1; ++c) std::fill(dst + c * ld_dst + rows, dst + (c + 1) * ld_dst, T(0));
  }
}

namespace detail {

// NB batches of one output row: c = sum_k x[k] * y[k * ldy .. + NB W], with two accumulator
// sets (even and odd k) so consecutive FMAs do not wait on each other.
template <int NB, class T>
inline void row_block(T* out, int64_t valid, const T* x, const T* y, int64_t ldy, int64_t lo, int64_t hi) {
  constexpr int64_t W = Batch<T>::size;
  Batch<T> c0[NB], c1[NB];
#pragma GCC unroll 4
  for (int b = 0; b < NB; ++b) c0[b] = c1[b] = Batch<T>(T(0));
  int64_t k = lo;
  for (; k + 2 <= hi; k += 2) {
    const Batch<T> x0(x[k]), x1(x[k + 1]);
    const T* y0 = y + k * ldy;
    const T* y1 = y0 + ldy;
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b) {
      c0[b] = xsimd::fma(x0, Batch<T>::load_unaligned(y0 + b * W), c0[b]);
      c1[b] = xsimd::fma(x1, Batch<T>::load_unaligned(y1 + b * W), c1[b]);
    }
  }
  if (k < hi) {
    const Batch<T> x0(x[k]);
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b) c0[b] = xsimd::fma(x0, Batch<T>::load_unaligned(y + k * ldy + b * W), c0[b]);
  }
#pragma GCC unroll 4
  for (int b = 0; b < NB; ++b) {
    const Batch<T> c = c0[b] + c1[b];
    if ((b + 1) * W <= valid) {
      c.store_unaligned(out + b * W);
    } else {  // the row ends inside this batch
      alignas(64) T tail[W];
      c.store_aligned(tail);
      std::copy(tail, tail + (valid - b * W), out + b * W);
    }
  }
}

// R output rows at once (R >= 2): every load of y feeds R rows, so a pass reads y once per R
// rows instead of once per row. c[r] = sum_k x[r * ldx + k] * y[k * ldy .. + NB W].
template <int R, int NB, class T>
inline void rows_block(T* out, int64_t ld_out, int64_t valid, const T* x, int64_t ldx, const T* y, int64_t ldy,
                       int64_t lo, int64_t hi) {
  constexpr int64_t W = Batch<T>::size;
  Batch<T> c[R][NB];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b) c[r][b] = Batch<T>(T(0));
  for (int64_t k = lo; k < hi; ++k) {
    const T* yk = y + k * ldy;
    Batch<T> yb[NB];
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b) yb[b] = Batch<T>::load_unaligned(yk + b * W);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const Batch<T> xr(x[r * ldx + k]);
#pragma GCC unroll 4
      for (int b = 0; b < NB; ++b) c[r][b] = xsimd::fma(xr, yb[b], c[r][b]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b) {
      T* o = out + r * ld_out + b * W;
      if ((b + 1) * W <= valid) {
        c[r][b].store_unaligned(o);
      } else {  // the row ends inside this batch
        alignas(64) T tail[W];
        c[r][b].store_aligned(tail);
        std::copy(tail, tail + (valid - b * W), o);
      }
    }
}

template <int R, class T>
inline void rows_blocks(T* out, int64_t ld_out, int64_t valid, const T* x, int64_t ldx, const T* y, int64_t ldy,
                        int64_t lo, int64_t hi, int64_t batches) {
  if constexpr (R == 1) {
    switch (batches) {
      case 1: row_block<1>(out, valid, x, y, ldy, lo, hi); break;
      case 2: row_block<2>(out, valid, x, y, ldy, lo, hi); break;
      case 3: row_block<3>(out, valid, x, y, ldy, lo, hi); break;
      default: row_block<4>(out, valid, x, y, ldy, lo, hi); break;
    }
  } else {
    switch (batches) {
      case 1: rows_block<R, 1>(out, ld_out, valid, x, ldx, y, ldy, lo, hi); break;
      case 2: rows_block<R, 2>(out, ld_out, valid, x, ldx, y, ldy, lo, hi); break;
      case 3: rows_block<R, 3>(out, ld_out, valid, x, ldx, y, ldy, lo, hi); break;
      default: rows_block<R, 4>(out, ld_out, valid, x, ldx, y, ldy, lo, hi); break;
    }
  }
}

// Rows [i, i + count) (count <= 4) through rows_blocks with R = count.
template <class T>
inline void group_blocks(int64_t count, T* out, int64_t ld_out, int64_t valid, const T* x, int64_t ldx, const T* y,
                         int64_t ldy, int64_t lo, int64_t hi, int64_t batches) {
  switch (count) {
    case 1: rows_blocks<1>(out, ld_out, valid, x, ldx, y, ldy, lo, hi, batches); break;
    case 2: rows_blocks<2>(out, ld_out, valid, x, ldx, y, ldy, lo, hi, batches); break;
    case 3: rows_blocks<3>(out, ld_out, valid, x, ldx, y, ldy, lo, hi, batches); break;
    default: rows_blocks<4>(out, ld_out, valid, x, ldx, y, ldy, lo, hi, batches); break;
  }
}

}  // namespace detail

/// out[i, j] = sum_d a[i, d] * bt[d, j] for i < R and at least every j < n(i) (more columns may
/// be written, never past ld_out); bt (K x ldb) is b transposed, zero-padded to ldb, a multiple
/// of the batch width, with ldb >= ld_out rounded up. The a rows have stride lda; out rows
/// stride ld_out. n(i) comes from `visible`, nondecreasing in i.
template <class T, class Visible>
void a_bt(T* out, int64_t ld_out, const T* a, int64_t lda, const T* bt, int64_t ldb, int64_t R, int64_t K,
          Visible visible) {
  constexpr int64_t W = Batch<T>::size;
  for (int64_t i = 0; i < R; i += 4) {
    const int64_t rows = std::min<int64_t>(4, R - i);
    const int64_t n = visible(i + rows - 1);  // the widest row of the group
    for (int64_t j = 0; j < n; j += 4 * W) {
      const int64_t batches = std::min<int64_t>(4, (n - j + W - 1) / W);
      detail::group_blocks(rows, out + i * ld_out + j, ld_out, ld_out - j, a + i * lda, lda, bt + j, ldb, 0, K,
                           batches);
    }
  }
}

/// out[i, :D] = sum over j in [lo(i), hi(i)) of p[i, j] * v[j, :D], for i < R, where p is zero
/// outside each row's range (rows are computed four at a time over the union of their ranges).
/// p rows stride ldp, v rows stride ldv, out rows stride ld_out. Overwrites out.
template <class T, class Range>
void p_v(T* out, int64_t ld_out, const T* p, int64_t ldp, const T* v, int64_t ldv, int64_t R, int64_t D,
         Range range) {
  constexpr int64_t W = Batch<T>::size;
  const int64_t full = D / W * W;  // whole batches; the rest of each row is scalar
  for (int64_t i = 0; i < R; i += 4) {
    const int64_t rows = std::min<int64_t>(4, R - i);
    int64_t lo = range(i).first, hi = range(i).second;
    for (int64_t r = 1; r < rows; ++r) {
      const auto [l, h] = range(i + r);
      lo = std::min(lo, l);
      hi = std::max(hi, h);
    }
    hi = std::max(hi, lo);
    for (int64_t d = 0; d < full; d += 4 * W)
      detail::group_blocks(rows, out + i * ld_out + d, ld_out, full - d, p + i * ldp, ldp, v + d, ldv, lo, hi,
                           std::min<int64_t>(4, (full - d) / W));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t d = full; d < D; ++d) {
        T c = 0;
        for (int64_t j = lo; j < hi; ++j) c += p[(i + r) * ldp + j] * v[j * ldv + d];
        out[(i + r) * ld_out + d] = c;
      }
  }
}

}  // namespace heed::nn::kernels
