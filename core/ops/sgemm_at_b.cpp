// heed: C = A^T B in fp32 on AVX-512F (see sgemm_at_b.h for why and for the bits).
//
// The register tile is kTileRows x kTileCols of C: for each row p of a slice of k, three vectors
// of B's row p and eight broadcasts of A's row p feed 24 accumulators. Both operands are packed a
// slice of slice_rows() rows of k at a time into strips as wide as the tile's side (A into strips of
// 8 columns, B into strips of 48), so the tile reads two contiguous streams whatever the row
// strides. A piece of C is rows [m0, m1) x columns [n0, n1); with more pieces than cores the
// operand every piece reads whole (B when C is cut by rows, A when by columns) is packed once for
// all of them first, each piece packing only its own part of the other.
#include "core/ops/sgemm_at_b.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "core/cpu.h"
#include "core/ops/lane_mask.h"
#include "core/ops/pack_buffer.h"
#include "core/ops/sgemm.h"
#include "core/parallel.h"
#include "core/tuning.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HEED_X86 1
#endif

namespace heed::detail {

#if HEED_X86

namespace {

#define HEED_TARGET_AVX512 __attribute__((target("avx512f")))

constexpr int64_t kTileRows = 8;                     // rows of C per tile: broadcasts of A
constexpr int kTileVectors = 3;                      // 16-float vectors of B per tile row
constexpr int64_t kTileCols = 16 * kTileVectors;     // columns of C per tile

// A row stride of a multiple of this many floats (1 KB) puts the rows an operand's kernel reads
// together into a fraction of L1's sets (sgemm_at_b_suits).
constexpr int64_t kAliasingStrideFloats = 256;

// The most the copy packed once for all pieces may take (it is as large as the operand it copies):
// past it, a batch of tens of thousands of rows, the pieces stay one a core and each packs only
// its slices, in scratch of one slice.
constexpr int64_t kSharedCopyMaxBytes = int64_t{64} << 20;

// Rows of k per packed slice: a strip of B (kTileCols floats a row) fills tuning().l1_block_bytes,
// half of L1, and stays there while the tile runs down the strips of A.
int64_t slice_rows() {
  static const int64_t rows = std::max<int64_t>(16, tuning().l1_block_bytes / (kTileCols * int64_t{sizeof(float)}));
  return rows;
}

// Packs rows [k0, k0 + kc) of columns [c0, c0 + width) of X (row-major, row stride ldx) into
// strips of R columns: strip s holds the kc rows, R floats each, row p at dst + s R kc + p R;
// columns past `width` are 0. Sixteen rows at a time, strip after strip, so each pass reads a
// block of 16 rows of a strip (a few cache lines of each) while they are in L1.
template <int64_t R>
HEED_TARGET_AVX512 void pack_strips(const float* x, int64_t ldx, int64_t k0, int64_t kc, int64_t c0, int64_t width,
                                    float* dst) {
  constexpr int kVectors = static_cast<int>((R + 15) / 16);
  const int64_t strips = (width + R - 1) / R;
  for (int64_t p0 = 0; p0 < kc; p0 += 16) {
    const int64_t p1 = std::min(kc, p0 + 16);
    for (int64_t s = 0; s < strips; ++s) {
      const int64_t valid = std::min(R, width - s * R);
      __mmask16 load[kVectors], store[kVectors];
      for (int v = 0; v < kVectors; ++v) {
        store[v] = first_lanes(R - 16 * v);
        load[v] = first_lanes(valid - 16 * v);
      }
      const float* src = x + (k0 + p0) * ldx + c0 + s * R;
      float* out = dst + s * R * kc + p0 * R;
      for (int64_t p = p0; p < p1; ++p, src += ldx, out += R)
        for (int v = 0; v < kVectors; ++v)
          _mm512_mask_storeu_ps(out + 16 * v, store[v], _mm512_maskz_loadu_ps(load[v], src + 16 * v));
    }
  }
}

// The tile: C (kTileRows x kTileCols at c, row stride ldc) = (accumulate ? C : 0) + sum over the
// kc rows p of a's row p (kTileRows floats) times b's row p (kTileCols floats), each element's
// terms in the order of p by fused multiply-adds.
HEED_TARGET_AVX512 void tile(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool accumulate) {
  __m512 acc[kTileRows][kTileVectors];
  for (int64_t i = 0; i < kTileRows; ++i)
    for (int v = 0; v < kTileVectors; ++v)
      acc[i][v] = accumulate ? _mm512_loadu_ps(c + i * ldc + 16 * v) : _mm512_setzero_ps();
  for (int64_t p = 0; p < kc; ++p, a += kTileRows, b += kTileCols) {
    __m512 row[kTileVectors];
    for (int v = 0; v < kTileVectors; ++v) row[v] = _mm512_load_ps(b + 16 * v);
    for (int64_t i = 0; i < kTileRows; ++i) {
      const __m512 ai = _mm512_set1_ps(a[i]);
      for (int v = 0; v < kTileVectors; ++v) acc[i][v] = _mm512_fmadd_ps(ai, row[v], acc[i][v]);
    }
  }
  for (int64_t i = 0; i < kTileRows; ++i)
    for (int v = 0; v < kTileVectors; ++v) _mm512_storeu_ps(c + i * ldc + 16 * v, acc[i][v]);
}

struct Problem {
  int64_t m, n, k;
  const float* a;
  int64_t lda;
  const float* b;
  int64_t ldb;
  bool beta_one;
  float* c;
  int64_t ldc;
};

constexpr int64_t padded(int64_t width, int64_t strip) { return (width + strip - 1) / strip * strip; }

// Floats of pack_shared's copy of the operand every piece reads whole: B when C is cut by rows, A
// when by columns.
int64_t shared_copy_floats(int64_t m, int64_t n, int64_t k, bool by_rows) {
  return padded(k, slice_rows()) * (by_rows ? padded(n, kTileCols) : padded(m, kTileRows));
}

// Rows [m0, m1) x columns [n0, n1) of C. shared_a / shared_b: the whole operand packed by
// pack_shared (then m0, or n0, is a multiple of its strip width), or null: the piece packs its part.
// q.m and q.n are read only to find a slice in a shared copy (whose rows are the whole operand's
// padded width); a piece with no shared copy may carry any value there.
void run_piece(const Problem& q, int64_t m0, int64_t m1, int64_t n0, int64_t n1, const float* shared_a,
               const float* shared_b) {
  const int64_t kc_max = slice_rows();
  thread_local PackBuffer<float> a_buffer, b_buffer;
  float* own_a = shared_a ? nullptr : a_buffer.get(kc_max * padded(m1 - m0, kTileRows));
  float* own_b = shared_b ? nullptr : b_buffer.get(kc_max * padded(n1 - n0, kTileCols));
  alignas(64) float edge[kTileRows * kTileCols];  // a tile that C's edge cuts short
  for (int64_t k0 = 0; k0 < q.k; k0 += kc_max) {
    const int64_t kc = std::min(kc_max, q.k - k0);
    // Slices before this one are kc_max rows each: the shared copies' slice starts at k0 times
    // their padded width, their strip for column m0 (n0) that many strips in.
    const float* pa = shared_a ? shared_a + k0 * padded(q.m, kTileRows) + m0 * kc : own_a;
    const float* pb = shared_b ? shared_b + k0 * padded(q.n, kTileCols) + n0 * kc : own_b;
    if (!shared_a) pack_strips<kTileRows>(q.a, q.lda, k0, kc, m0, m1 - m0, own_a);
    if (!shared_b) pack_strips<kTileCols>(q.b, q.ldb, k0, kc, n0, n1 - n0, own_b);
    const bool accumulate = k0 > 0 || q.beta_one;
    for (int64_t j = n0; j < n1; j += kTileCols) {
      const float* strip_b = pb + (j - n0) * kc;
      const int64_t cols = std::min(kTileCols, n1 - j);
      for (int64_t i = m0; i < m1; i += kTileRows) {
        const float* strip_a = pa + (i - m0) * kc;
        const int64_t rows = std::min(kTileRows, m1 - i);
        float* ci = q.c + i * q.ldc + j;
        if (rows == kTileRows && cols == kTileCols) {
          tile(kc, strip_a, strip_b, ci, q.ldc, accumulate);
          continue;
        }
        // The padded rows and columns compute zeros into `edge` that are never copied back.
        if (accumulate)
          for (int64_t r = 0; r < rows; ++r)
            std::memcpy(edge + r * kTileCols, ci + r * q.ldc, static_cast<size_t>(cols) * sizeof(float));
        tile(kc, strip_a, strip_b, edge, kTileCols, accumulate);
        for (int64_t r = 0; r < rows; ++r)
          std::memcpy(ci + r * q.ldc, edge + r * kTileCols, static_cast<size_t>(cols) * sizeof(float));
      }
    }
  }
}

// Packs all of X (k x width, row stride ldx) slice by slice into the layout run_piece reads
// (each slice at k0 times the padded width), the slices spread over the threads.
template <int64_t R>
void pack_shared(const float* x, int64_t ldx, int64_t k, int64_t width, float* dst) {
  const int64_t kc_max = slice_rows(), slices = (k + kc_max - 1) / kc_max;
  parallel_for(slices, 1, [&](int64_t s0, int64_t s1) {
    for (int64_t s = s0; s < s1; ++s) {
      const int64_t k0 = s * kc_max;
      pack_strips<R>(x, ldx, k0, std::min(kc_max, k - k0), 0, width, dst + k0 * padded(width, R));
    }
  });
}

}  // namespace

bool sgemm_at_b_available() {
  static const bool on = sgemm_on_onednn() && cpu_info().avx512f;
  return on;
}

bool sgemm_at_b_suits(int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb) {
  const double macs = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const bool aliasing_stride = lda % kAliasingStrideFloats == 0 || ldb % kAliasingStrideFloats == 0;
  return sgemm_at_b_available() && aliasing_stride && packed_pieces_per_core(macs, cpu_info().cores) >= 2;
}

AtBCut sgemm_at_b_cut(int64_t m, int64_t n, int64_t k, int64_t cores) {
  // The longer side of C, in whole tiles. Pieces as for oneDNN's packed products (core/tuning.h):
  // q a core, q = the multiply-adds / (kPackedProductPieceMacs x cores), 1 to kPackedPiecesPerCore,
  // none smaller than kProductPieceMacs, at most one a tile.
  AtBCut cut;
  cut.by_rows = m >= n;
  cut.side = cut.by_rows ? m : n;
  cut.tile = cut.by_rows ? kTileRows : kTileCols;
  const double macs = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const int64_t per_core = std::max<int64_t>(1, packed_pieces_per_core(macs, cores));
  const int64_t least_pieces = static_cast<int64_t>(macs / static_cast<double>(kProductPieceMacs));
  cut.pieces = std::clamp<int64_t>(std::min(per_core * cores, least_pieces), 1, (cut.side + cut.tile - 1) / cut.tile);
  // Up to a piece a core, each piece packs the whole of the uncut operand itself (one job); beyond
  // that it is packed once first (a second job) and read by every piece, if that copy is not too large.
  if (shared_copy_floats(m, n, k, cut.by_rows) * int64_t{sizeof(float)} > kSharedCopyMaxBytes)
    cut.pieces = std::min(cut.pieces, cores);
  cut.shared = cut.pieces > cores;
  return cut;
}

void sgemm_at_b_piece(int64_t m0, int64_t m1, int64_t n0, int64_t n1, int64_t k, const float* a, int64_t lda,
                      const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  HEED_CHECK(sgemm_at_b_available(), "sgemm_at_b: needs an x86 CPU with AVX-512F and fp32 products on oneDNN");
  HEED_CHECK(0 <= m0 && m0 < m1 && 0 <= n0 && n0 < n1 && k >= 1, "sgemm_at_b: an empty piece [", m0, ", ", m1,
             ") x [", n0, ", ", n1, ") x ", k);
  // No shared copies: Problem's m and n go unread (run_piece).
  run_piece(Problem{m1, n1, k, a, lda, b, ldb, beta != 0.0f, c, ldc}, m0, m1, n0, n1, nullptr, nullptr);
}

void sgemm_at_b(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                float* c, int64_t ldc) {
  HEED_CHECK(sgemm_at_b_available(), "sgemm_at_b: needs an x86 CPU with AVX-512F and fp32 products on oneDNN");
  HEED_CHECK(m >= 1 && n >= 1 && k >= 1, "sgemm_at_b: an empty ", m, " x ", k, " x ", n, " product");
  const Problem q{m, n, k, a, lda, b, ldb, beta != 0.0f, c, ldc};
  const AtBCut cut = sgemm_at_b_cut(m, n, k, cpu_info().cores);
  const bool by_rows = cut.by_rows;
  const float* shared_a = nullptr;
  const float* shared_b = nullptr;
  if (cut.shared) {
    thread_local PackBuffer<float> shared;
    float* dst = shared.get(shared_copy_floats(m, n, k, by_rows));
    if (by_rows) {
      pack_shared<kTileCols>(b, ldb, k, n, dst);
      shared_b = dst;
    } else {
      pack_shared<kTileRows>(a, lda, k, m, dst);
      shared_a = dst;
    }
  }
  auto piece = [&](int64_t p) {
    const int64_t s0 = cut.start(p), s1 = cut.start(p + 1);
    if (by_rows) {
      run_piece(q, s0, s1, 0, n, shared_a, shared_b);
    } else {
      run_piece(q, 0, m, s0, s1, shared_a, shared_b);
    }
  };
  if (cut.pieces == 1) return piece(0);
  parallel_for_each(cut.pieces, piece);
}

#else  // not x86: never available

bool sgemm_at_b_available() { return false; }

bool sgemm_at_b_suits(int64_t, int64_t, int64_t, int64_t, int64_t) { return false; }

AtBCut sgemm_at_b_cut(int64_t, int64_t, int64_t, int64_t) { return {}; }

void sgemm_at_b_piece(int64_t, int64_t, int64_t, int64_t, int64_t, const float*, int64_t, const float*, int64_t, float,
                      float*, int64_t) {
  HEED_CHECK(false, "sgemm_at_b: needs an x86 CPU with AVX-512F");
}

void sgemm_at_b(int64_t, int64_t, int64_t, const float*, int64_t, const float*, int64_t, float, float*, int64_t) {
  HEED_CHECK(false, "sgemm_at_b: needs an x86 CPU with AVX-512F");
}

#endif

}  // namespace heed::detail
