// heed (internal): the per-head products of attention (core/ops/attention.cpp), written for the
// small matrices attention has (T up to a few hundred, head_dim 16-128), where a BLAS call per
// head costs more in overhead than in arithmetic. Rows are vectorised with xsimd; causal rows stop
// at their last visible key, so the masked half is never computed.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/ops/simd_rows.h"
#include "core/ops/transpose16.h"
#include "core/tuning.h"

namespace heed::detail::kernels {

#if defined(__AVX512F__)
/// dst (16 x 16, row stride ld_dst) = src^T, src (16 x 16, row stride ld_src), in registers.
inline void transpose_16x16(float* dst, int64_t ld_dst, const float* src, int64_t ld_src) {
  __m512i r[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_castps_si512(_mm512_loadu_ps(src + i * ld_src));
  transpose16(r);
  for (int i = 0; i < 16; ++i) _mm512_storeu_ps(dst + i * ld_dst, _mm512_castsi512_ps(r[i]));
}
#endif

/// dst (cols x ld_dst, only the first rows columns written) = src^T, src (rows x cols) with row
/// stride ld_src. Entries of dst past `rows` in each row, up to ld_dst, are set to zero.
template <class T>
void transpose(T* dst, int64_t ld_dst, const T* src, int64_t ld_src, int64_t rows, int64_t cols) {
  int64_t whole_rows = 0, whole_cols = 0;  // the corner done in 16 x 16 register tiles
#if defined(__AVX512F__)
  // Scalar, a 64 x 32 head took 1.1 us, as long as a third of its score product (it runs for
  // every head, forward and backward); the tiles move it 16 lanes at a time.
  if constexpr (std::is_same_v<T, float>) {
    whole_rows = rows / 16 * 16, whole_cols = cols / 16 * 16;
    for (int64_t c0 = 0; c0 < whole_cols; c0 += 16)
      for (int64_t r0 = 0; r0 < whole_rows; r0 += 16)
        transpose_16x16(dst + c0 * ld_dst + r0, ld_dst, src + r0 * ld_src + c0, ld_src);
  }
#endif
  constexpr int64_t kTile = 16;  // tiles keep both sides' cache lines live while they are used
  for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
    const int64_t c1 = std::min(cols, c0 + kTile);
    // Columns inside the register-tiled corner need only its rows past whole_rows.
    for (int64_t r0 = c0 < whole_cols ? whole_rows : 0; r0 < rows; r0 += kTile) {
      const int64_t r1 = std::min(rows, r0 + kTile);
      for (int64_t c = c0; c < c1; ++c)
        for (int64_t r = r0; r < r1; ++r) dst[c * ld_dst + r] = src[r * ld_src + c];
    }
    for (int64_t c = c0; c < c1; ++c) std::fill(dst + c * ld_dst + rows, dst + (c + 1) * ld_dst, T(0));
  }
}

namespace blocks {

// R output rows of NB batches at once: every load of y feeds R rows, and every broadcast of an x
// element NB batches. c[r] = c0[r] + sum over k in [lo, hi) of x[r sxr + k sxk] * y[k ldy .. + NB W],
// where c0 is what out holds when `accumulate`, else zero. The sum runs in k order whether or
// not [lo, hi) was split into pieces, so splitting does not change a bit of the result.
template <int R, int NB, class T>
inline void rows_block(T* out, int64_t ld_out, int64_t valid, const T* x, int64_t sxr, int64_t sxk, const T* y,
                       int64_t ldy, int64_t lo, int64_t hi, bool accumulate) {
  constexpr int64_t W = Batch<T>::size;
  Batch<T> c[R][NB];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b) {
      const T* o = out + r * ld_out + b * W;
      if (!accumulate) {
        c[r][b] = Batch<T>(T(0));
      } else if ((b + 1) * W <= valid) {
        c[r][b] = Batch<T>::load_unaligned(o);
      } else {  // the row ends inside this batch
        alignas(64) T tail[W] = {};
        for (int64_t t = 0; t < std::min<int64_t>(valid - b * W, W); ++t) tail[t] = o[t];
        c[r][b] = Batch<T>::load_aligned(tail);
      }
    }
  for (int64_t k = lo; k < hi; ++k) {
    const T* yk = y + k * ldy;
    Batch<T> yb[NB];
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b) {
      yb[b] = Batch<T>::load_unaligned(yk + b * W);
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
      // Pin the loaded row to a register. Left alone, GCC folds the load into each of the R
      // FMAs that use it as a memory operand, so the row is read R times per k; a 512-bit load
      // takes both of a Zen 4 core's load ports, and the loop became load-bound: p_v at the baby
      // head (64 x 64 x 32, causal) 1.84 -> 1.40 us, at the small one (256 x 256 x 64) 76.8 ->
      // 41.0 us (docs/performance.md). The empty asm only says the value is in a vector register.
      typename Batch<T>::register_type reg = yb[b];
      __asm__("" : "+v"(reg));
      yb[b] = reg;
#endif
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const Batch<T> xr(x[r * sxr + k * sxk]);
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
      } else {
        alignas(64) T tail[W];
        c[r][b].store_aligned(tail);
        for (int64_t t = 0; t < std::min<int64_t>(valid - b * W, W); ++t) o[t] = tail[t];
      }
    }
}

template <int R, class T>
inline void rows_blocks(T* out, int64_t ld_out, int64_t valid, const T* x, int64_t sxr, int64_t sxk, const T* y,
                        int64_t ldy, int64_t lo, int64_t hi, int64_t batches, bool accumulate) {
  switch (batches) {
    case 1: rows_block<R, 1>(out, ld_out, valid, x, sxr, sxk, y, ldy, lo, hi, accumulate); break;
    case 2: rows_block<R, 2>(out, ld_out, valid, x, sxr, sxk, y, ldy, lo, hi, accumulate); break;
    case 3: rows_block<R, 3>(out, ld_out, valid, x, sxr, sxk, y, ldy, lo, hi, accumulate); break;
    default: rows_block<R, 4>(out, ld_out, valid, x, sxr, sxk, y, ldy, lo, hi, accumulate); break;
  }
}

// `count` rows (1 to 4) through rows_blocks with R = count.
template <class T>
inline void group_blocks(int64_t count, T* out, int64_t ld_out, int64_t valid, const T* x, int64_t sxr, int64_t sxk,
                         const T* y, int64_t ldy, int64_t lo, int64_t hi, int64_t batches, bool accumulate) {
  switch (count) {
    case 1: rows_blocks<1>(out, ld_out, valid, x, sxr, sxk, y, ldy, lo, hi, batches, accumulate); break;
    case 2: rows_blocks<2>(out, ld_out, valid, x, sxr, sxk, y, ldy, lo, hi, batches, accumulate); break;
    case 3: rows_blocks<3>(out, ld_out, valid, x, sxr, sxk, y, ldy, lo, hi, batches, accumulate); break;
    default: rows_blocks<4>(out, ld_out, valid, x, sxr, sxk, y, ldy, lo, hi, batches, accumulate); break;
  }
}

}  // namespace blocks

/// out[i, j] = sum_d a[i, d] * bt[d, j] for i < R and at least every j < n(i) (more columns may
/// be written, never past ld_out); bt (K x ldb) is b transposed, zero-padded to ldb, a multiple
/// of the batch width, with ldb >= ld_out rounded up. The a rows have stride lda; out rows
/// stride ld_out. n(i) comes from `visible`, nondecreasing in i.
///
/// Column blocks are the outer loop: one block of bt (K x 4 batches, 16 KB at K = 64) stays in
/// L1 while every row uses it, where rows outside would stream all of bt from L2 for each.
template <class T, class Visible>
void a_bt(T* out, int64_t ld_out, const T* a, int64_t lda, const T* bt, int64_t ldb, int64_t R, int64_t K,
          Visible visible) {
  constexpr int64_t W = Batch<T>::size;
  if (R <= 0) return;
  const int64_t widest = visible(R - 1);
  int64_t first = 0;  // the first row group that reaches column block j
  for (int64_t j = 0; j < widest; j += 4 * W) {
    while (first + 4 < R && visible(first + 3) <= j) first += 4;
    for (int64_t i = first; i < R; i += 4) {
      const int64_t rows = std::min<int64_t>(4, R - i);
      const int64_t n = visible(i + rows - 1);  // the widest row of the group
      if (n <= j) continue;
      const int64_t batches = std::min<int64_t>(4, (n - j + W - 1) / W);
      blocks::group_blocks(rows, out + i * ld_out + j, ld_out, ld_out - j, a + i * lda, lda, int64_t(1), bt + j, ldb,
                           int64_t(0), K, batches, false);
    }
  }
}

/// out[i, :D] = sum over j in [lo(i), hi(i)) of p(i, j) * v[j, :D], for i < R, where p is zero
/// outside each row's range (rows are computed four at a time over the union of their ranges).
/// p(i, j) is at p[i spr + j spj]: (ld, 1) for a row-major matrix, (1, ld) to use its transpose
/// without moving it. v rows stride ldv, out rows stride ld_out. Overwrites out.
///
/// The sum over j runs in pieces of `piece` rows of v's 4 W columns that fill half of L1 (64 rows
/// with AVX-512 and 32 KB of L1d: core/tuning.h), each piece used by every row group while it
/// sits in L1; partial sums wait in out, and the sum keeps its order, so no bit depends on the
/// piece size.
template <class T, class Range>
void p_v(T* out, int64_t ld_out, const T* p, int64_t spr, int64_t spj, const T* v, int64_t ldv, int64_t R, int64_t D,
         Range range) {
  constexpr int64_t W = Batch<T>::size;
  const int64_t piece = l1_block_rows(4 * W * static_cast<int64_t>(sizeof(T)));
  const int64_t full = D / W * W;  // whole batches; the rest of each row is scalar
  auto group_range = [&](int64_t i, int64_t rows) {
    int64_t lo = range(i).first, hi = range(i).second;
    for (int64_t r = 1; r < rows; ++r) {
      const auto [l, h] = range(i + r);
      lo = std::min(lo, l);
      hi = std::max(hi, h);
    }
    return std::pair<int64_t, int64_t>{lo, std::max(hi, lo)};
  };
  int64_t end = 0;
  for (int64_t i = 0; i < R; i += 4) {
    const int64_t rows = std::min<int64_t>(4, R - i);
    const auto [lo, hi] = group_range(i, rows);
    end = std::max(end, hi);
    if (lo == hi)  // an empty sum
      for (int64_t r = 0; r < rows; ++r) std::fill(out + (i + r) * ld_out, out + (i + r) * ld_out + D, T(0));
  }
  for (int64_t d = 0; d < full; d += 4 * W) {
    const int64_t batches = std::min<int64_t>(4, (full - d) / W);
    for (int64_t j0 = 0; j0 < end; j0 += piece)
      for (int64_t i = 0; i < R; i += 4) {
        const int64_t rows = std::min<int64_t>(4, R - i);
        const auto [lo, hi] = group_range(i, rows);
        const int64_t j1 = std::min(hi, j0 + piece), js = std::max(lo, j0);
        if (js >= j1) continue;
        blocks::group_blocks(rows, out + i * ld_out + d, ld_out, full - d, p + i * spr, spr, spj, v + d, ldv, js, j1,
                             batches, js > lo);
      }
  }
  for (int64_t i = 0; i < R; i += 4) {
    const int64_t rows = std::min<int64_t>(4, R - i);
    const auto [lo, hi] = group_range(i, rows);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t d = full; d < D; ++d) {
        T c = 0;
        for (int64_t j = lo; j < hi; ++j) c += p[(i + r) * spr + j * spj] * v[j * ldv + d];
        out[(i + r) * ld_out + d] = c;
      }
  }
}

}  // namespace heed::detail::kernels
