// bf16 GEMM with fp32 accumulation, blocked as in BLIS/GotoBLAS: for each kc-deep slice of k, a
// kc x nc panel of op(B) and an mc x kc block of op(A) are rounded to bf16 and packed, and a
// register-tile kernel computes mr x nr tiles of C from them. The loop around the kernel walks the
// nr-wide strips of B outermost, so one kc x nr strip stays in L1 while the mr-row strips of A
// stream past it from L2.
//
// Packed panels hold pair words: the bf16 of element (r, 2p) in the low half of a uint32 and of
// (r, 2p + 1) in the high half, the operand layout of VDPBF16PS. A panel is a run of strips of R
// rows (R = mr for op(A), nr for op(B)), each zero-padded to R rows and to a whole number of
// chunks of 16 pairs (32 k). Inside a strip, chunk q holds words 16 R q .. 16 R (q + 1), in one of
// two orders:
//   by pair: word (r, p) at 16 R q + R (p % 16) + r. One 512-bit load gives 16 columns of B at
//            one pair; op(B) always, and op(A) when it is stored transposed (its rows then run
//            along r, so packing just interleaves two source rows).
//   by row:  word (r, p) at 16 R q + 16 r + p % 16. One row's 16 pairs fill one cache line, so
//            packing an op(A) whose rows run along k stores whole vectors, where the by-pair order
//            would need a transpose. The kernel reads either order at fixed offsets.
#include "core/ops/gemm_bf16.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <tuple>
#include <vector>

#include "core/amx.h"
#include "core/check.h"
#include "core/cpu.h"
#include "core/ops/bf16.h"
#include "core/ops/lane_mask.h"
#include "core/ops/pack_buffer.h"
#include "core/ops/transpose16.h"
#include "core/parallel.h"
#include "core/tuning.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HEED_X86 1
#endif

namespace heed {
namespace {

// The register tile: 12 rows x 32 columns = 24 of the 32 zmm registers as accumulators, 2 for
// the strip of B. Per pair the kernel issues 24 dot products for 2 loads and 12 broadcasts, so
// neither loads nor latency (24 independent chains) limit it.
constexpr int64_t kMR = 12, kNR = 32;
constexpr int64_t kChunk = 16;  // pairs per chunk: the kernel's unrolled step
constexpr int kVecs = kNR / 16;  // zmm registers per tile row
// The AMX kernel's tile of C: 32 x 32 as 2 x 2 AMX tiles of 16 x 16, from two 16-row tiles of A
// and two 16-column tiles of B per chunk (TDPBF16PS's time grows with the rows of its tiles, so
// they are full: 12-row tiles measured 2.6 TFLOP/s against 3.5 for 16 rows on a Xeon).
constexpr int64_t kAmxMR = 32;
constexpr int64_t kMaxMR = std::max(kMR, kAmxMR);

// A chunk handed to another thread runs at least kMinProductChunkSeconds at the kernel's peak
// (core/tuning.h: the rule every split in heed follows).

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }
// Pairs in a packed strip of depth kb: whole chunks.
int64_t padded_pairs(int64_t kb) { return round_up(ceil_div(kb, 2), kChunk); }

// Element (r, k) of op(X) for one operand: rows r of op(A), or columns r of op(B). k_contiguous:
// at data[r ld + k] (A, or B transposed); else at data[k ld + r].
struct Source {
  const float* data;
  int64_t ld;
  bool k_contiguous;
};

// Packs rows [r0, r0 + rows) and depth [k0, k0 + kb) of a source into ceil(rows / R) strips of R
// x padded_pairs(kb) words at dst, each element rounded to bf16 once.
using PackFn = void (*)(const Source& src, int64_t r0, int64_t rows, int64_t k0, int64_t kb, uint32_t* dst);

// A register-tile kernel: the mr x kNR tile at c (row stride ldc) becomes (load_c ? c : 0) plus,
// for each pair p of chunks [q0, q1) in order, the pair's two products (VDPBF16PS's kernels: a_odd
// b_odd then a_even b_even, each added with one fp32 rounding; AMX's: a chunk at a time, see the
// header). a: the tile's strip of packed A; b: its strip of packed B.
using TileKernel = void (*)(int64_t q0, int64_t q1, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc,
                            bool load_c);

// Offset of word (r, u) in a chunk of a strip of R rows, u = p % 16.
template <int64_t R, bool kByRow>
constexpr int64_t word_offset(int64_t r, int64_t u) {
  return kByRow ? r * kChunk + u : u * R + r;
}

// ---- portable packing and kernel: the emulated path ----

// Element by element through to_bf16, reading the source along its rows; the reference for the
// vectorised packing below.
template <int64_t R, bool kByRow>
void pack_portable(const Source& src, int64_t r0, int64_t rows, int64_t k0, int64_t kb, uint32_t* dst) {
  const int64_t pairs = padded_pairs(kb);
  std::fill(dst, dst + ceil_div(rows, R) * R * pairs, 0u);  // the padding, and the halves ORed in below
  auto put = [&](int64_t r, int64_t k, float x) {
    const int64_t p = k / 2;
    dst[(r / R) * R * pairs + (p / kChunk) * kChunk * R + word_offset<R, kByRow>(r % R, p % kChunk)] |=
        uint32_t(to_bf16(x)) << (16 * (k % 2));
  };
  if (src.k_contiguous) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = 0; k < kb; ++k) put(r, k, src.data[(r0 + r) * src.ld + k0 + k]);
  } else {
    for (int64_t k = 0; k < kb; ++k)
      for (int64_t r = 0; r < rows; ++r) put(r, k, src.data[(k0 + k) * src.ld + r0 + r]);
  }
}

// The same pairs in the same order as VDPBF16PS, on fp32 arithmetic. A bf16 value widened to
// fp32 is exact, and so is the product of two (8 + 8 significant bits fit in fp32's 24), so
// `acc += x * y` rounds once, exactly as the instruction's step does (a compiler that contracts it
// into an fma gives the same bits).
template <bool kByRow>
void tile_emulated(int64_t q0, int64_t q1, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc, bool load_c) {
  alignas(64) float acc[kMR][kNR];
  for (int64_t r = 0; r < kMR; ++r)
    for (int64_t j = 0; j < kNR; ++j) acc[r][j] = load_c ? c[r * ldc + j] : 0.0f;
  for (int64_t q = q0; q < q1; ++q)
    for (int64_t u = 0; u < kChunk; ++u) {
      const uint32_t* pa = a + q * kChunk * kMR;
      const uint32_t* pb = b + q * kChunk * kNR + u * kNR;
      alignas(64) float b_even[kNR], b_odd[kNR];
      for (int64_t j = 0; j < kNR; ++j) {
        b_even[j] = std::bit_cast<float>(pb[j] << 16);
        b_odd[j] = std::bit_cast<float>(pb[j] & 0xffff0000u);
      }
      for (int64_t r = 0; r < kMR; ++r) {
        const uint32_t w = pa[word_offset<kMR, kByRow>(r, u)];
        const float a_even = std::bit_cast<float>(w << 16), a_odd = std::bit_cast<float>(w & 0xffff0000u);
        for (int64_t j = 0; j < kNR; ++j) {
          acc[r][j] += a_odd * b_odd[j];
          acc[r][j] += a_even * b_even[j];
        }
      }
    }
  for (int64_t r = 0; r < kMR; ++r)
    for (int64_t j = 0; j < kNR; ++j) c[r * ldc + j] = acc[r][j];
}

#ifdef HEED_X86
// ---- AVX-512 packing and the VDPBF16PS kernel: the hardware path ----
#define HEED_TARGET_AVX512BW __attribute__((target("avx512f,avx512bw")))
#define HEED_TARGET_AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512bf16")))

// to_bf16 of 16 floats, in the high halves of 16 words (the low halves are left over).
HEED_TARGET_AVX512BW inline __m512i rounded_high(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  return _mm512_mask_or_epi32(rounded, nan, u, _mm512_set1_epi32(0x00400000));  // NaN: made quiet
}

// Pair words from two vectors: element i of `even` in the low half of word i, of `odd` in the high.
HEED_TARGET_AVX512BW inline __m512i pair_words(__m512 even, __m512 odd) {
  return _mm512_or_si512(_mm512_srli_epi32(rounded_high(even), 16),
                         _mm512_and_si512(rounded_high(odd), _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
}

// 32 consecutive floats (x0: 0..15, x1: 16..31) as 16 pair words: the high half of each rounded
// float, in order.
HEED_TARGET_AVX512BW inline __m512i consecutive_pair_words(__m512 x0, __m512 x1) {
  alignas(64) static constexpr uint16_t kHighHalves[32] = {1,  3,  5,  7,  9,  11, 13, 15, 17, 19, 21,
                                                           23, 25, 27, 29, 31, 33, 35, 37, 39, 41, 43,
                                                           45, 47, 49, 51, 53, 55, 57, 59, 61, 63};
  return _mm512_permutex2var_epi16(rounded_high(x0), _mm512_load_si512(kHighHalves), rounded_high(x1));
}

using detail::first_lanes;  // core/ops/lane_mask.h

// Chunk q of a row contiguous along k (x at its k0, kb elements in all) as 16 pair words.
HEED_TARGET_AVX512BW inline __m512i row_chunk(const float* x, int64_t q, int64_t kb) {
  const int64_t k = q * 2 * kChunk;
  return consecutive_pair_words(_mm512_maskz_loadu_ps(first_lanes(kb - k), x + k),
                                _mm512_maskz_loadu_ps(first_lanes(kb - k - 16), x + k + 16));
}

// A source contiguous along k, by row: each row's chunks are whole vectors.
template <int64_t R>
HEED_TARGET_AVX512BW void pack_k_contiguous_by_row(const Source& src, int64_t r0, int64_t rows, int64_t k0, int64_t kb,
                                                   uint32_t* dst) {
  const int64_t pairs = padded_pairs(kb), chunks = pairs / kChunk;
  for (int64_t s = 0; s < ceil_div(rows, R); ++s, dst += R * pairs)
    for (int64_t r = 0; r < R; ++r) {
      const int64_t row = s * R + r;
      const float* x = src.data + (r0 + row) * src.ld + k0;
      for (int64_t q = 0; q < chunks; ++q)
        _mm512_store_si512(dst + q * kChunk * R + r * kChunk, row < rows ? row_chunk(x, q, kb) : _mm512_setzero_si512());
    }
}

// A source contiguous along k, by pair (op(B) = W^T): 16 rows' chunks, transposed in registers.
template <int64_t R>
HEED_TARGET_AVX512BW void pack_k_contiguous_by_pair(const Source& src, int64_t r0, int64_t rows, int64_t k0, int64_t kb,
                                                    uint32_t* dst) {
  static_assert(R % 16 == 0);
  const int64_t pairs = padded_pairs(kb), chunks = pairs / kChunk;
  for (int64_t s = 0; s < ceil_div(rows, R); ++s, dst += R * pairs)
    for (int64_t g = 0; g < R; g += 16)
      for (int64_t q = 0; q < chunks; ++q) {
        __m512i w[16];
        for (int64_t i = 0; i < 16; ++i) {
          const int64_t row = s * R + g + i;
          w[i] = row < rows ? row_chunk(src.data + (r0 + row) * src.ld + k0, q, kb) : _mm512_setzero_si512();
        }
        detail::transpose16(w);
        for (int64_t u = 0; u < kChunk; ++u) _mm512_store_si512(dst + q * kChunk * R + u * R + g, w[u]);
      }
}

// A source strided along k (its rows are k), by pair: source rows 2p and 2p + 1 interleave into
// word p of every strip, 16 panel rows per vector; a vector that straddles strips is stored into
// each with a mask (rows past the panel's end load as zero, the padding of the last strip).
template <int64_t R>
HEED_TARGET_AVX512BW void pack_k_strided_by_pair(const Source& src, int64_t r0, int64_t rows, int64_t k0, int64_t kb,
                                                 uint32_t* dst) {
  const int64_t pairs = padded_pairs(kb), padded_rows = ceil_div(rows, R) * R;
  for (int64_t p = 0; p < pairs; ++p) {
    const float* x0 = 2 * p < kb ? src.data + (k0 + 2 * p) * src.ld + r0 : nullptr;
    const float* x1 = 2 * p + 1 < kb ? src.data + (k0 + 2 * p + 1) * src.ld + r0 : nullptr;
    uint32_t* row_p = dst + (p / kChunk) * kChunk * R + (p % kChunk) * R;  // word (0, p) of strip 0
    for (int64_t e = 0; e < padded_rows; e += 16) {
      const __mmask16 m = first_lanes(rows - e);
      const __m512 even = x0 ? _mm512_maskz_loadu_ps(m, x0 + e) : _mm512_setzero_ps();
      const __m512 odd = x1 ? _mm512_maskz_loadu_ps(m, x1 + e) : _mm512_setzero_ps();
      const __m512i w = pair_words(even, odd);
      if constexpr (R % 16 == 0) {
        _mm512_store_si512(row_p + (e / R) * R * pairs + e % R, w);
      } else {
        // Lane l is panel row e + l: strip (e + l) / R, position (e + l) % R in it.
        const int64_t last = std::min(padded_rows, e + 16);
        for (int64_t s = e / R; s * R < last; ++s) {
          const int64_t lo = std::max(e, s * R) - e, hi = std::min(last, (s + 1) * R) - e;  // lanes [lo, hi)
          const __mmask16 lanes = static_cast<__mmask16>(first_lanes(hi) & ~first_lanes(lo));
          // Lane l goes to row_p + s R pairs + (e + l - s R): the store starts e - s R words in.
          _mm512_mask_storeu_epi32(row_p + s * R * pairs + (e - s * R), lanes, w);
        }
      }
    }
  }
}

template <bool kByRow>
HEED_TARGET_AVX512BF16 void tile_avx512_bf16(int64_t q0, int64_t q1, const uint32_t* a, const uint32_t* b, float* c,
                                             int64_t ldc, bool load_c) {
  __m512 acc[kMR][kVecs];
#pragma GCC unroll 12
  for (int r = 0; r < kMR; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < kVecs; ++v) acc[r][v] = load_c ? _mm512_loadu_ps(c + r * ldc + 16 * v) : _mm512_setzero_ps();
  for (int64_t q = q0; q < q1; ++q) {
    const uint32_t* pa = a + q * kChunk * kMR;
    const uint32_t* pb = b + q * kChunk * kNR;
#pragma GCC unroll 16
    for (int u = 0; u < kChunk; ++u) {
      __m512bh bv[kVecs];
#pragma GCC unroll 2
      for (int v = 0; v < kVecs; ++v) bv[v] = (__m512bh)_mm512_load_si512(pb + u * kNR + 16 * v);
#pragma GCC unroll 12
      for (int r = 0; r < kMR; ++r) {
        const __m512bh ar = (__m512bh)_mm512_set1_epi32(static_cast<int>(pa[word_offset<kMR, kByRow>(r, u)]));
#pragma GCC unroll 2
        for (int v = 0; v < kVecs; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], bv[v], ar);
      }
    }
  }
#pragma GCC unroll 12
  for (int r = 0; r < kMR; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < kVecs; ++v) _mm512_storeu_ps(c + r * ldc + 16 * v, acc[r][v]);
}

// kStrips strips of C from consecutive packed strips at b (the last of them `last_cols` wide when
// `last` is set), kVecs accumulator chains a strip.
template <int kStrips>
HEED_TARGET_AVX512BF16 void row_strips_avx512_bf16(int64_t pairs, const uint32_t* x, const uint32_t* b, bool last,
                                                   int64_t last_cols, float* c, bool load_c) {
  constexpr int kAcc = kStrips * kVecs;
  __mmask16 mask[kAcc];
  for (int i = 0; i < kAcc; ++i) {
    const int64_t cols = (last && i / kVecs == kStrips - 1 ? last_cols : kNR) - 16 * (i % kVecs);
    mask[i] = cols >= 16 ? __mmask16(0xffff) : cols <= 0 ? __mmask16(0) : __mmask16((1u << cols) - 1);
  }
  __m512 acc[kAcc];
  for (int i = 0; i < kAcc; ++i) acc[i] = load_c ? _mm512_maskz_loadu_ps(mask[i], c + 16 * i) : _mm512_setzero_ps();
  for (int64_t p = 0; p < pairs; ++p) {
    const __m512bh xp = (__m512bh)_mm512_set1_epi32(static_cast<int>(x[p]));
#pragma GCC unroll 4
    for (int i = 0; i < kAcc; ++i)
      acc[i] = _mm512_dpbf16_ps(acc[i], (__m512bh)_mm512_load_si512(b + (i / kVecs) * pairs * kNR + p * kNR + 16 * (i % kVecs)), xp);
  }
  for (int i = 0; i < kAcc; ++i) _mm512_mask_storeu_ps(c + 16 * i, mask[i], acc[i]);
}

// Two strips (four accumulator chains) at a time: one strip's two chains would wait on
// VDPBF16PS's latency at every pair, where the strips stream from cache or memory faster.
HEED_TARGET_AVX512BF16 void row_avx512_bf16(int64_t pairs, const uint32_t* x, const uint32_t* b, int64_t strips,
                                            int64_t last_cols, float* c, bool load_c) {
  int64_t s = 0;
  for (; s + 2 <= strips; s += 2)
    row_strips_avx512_bf16<2>(pairs, x, b + s * pairs * kNR, s + 2 == strips, last_cols, c + s * kNR, load_c);
  if (s < strips) row_strips_avx512_bf16<1>(pairs, x, b + s * pairs * kNR, true, last_cols, c + s * kNR, load_c);
}

#ifdef HEED_AMX
// ---- AMX: TDPBF16PS on tiles ----
// AMX's operands are VDPBF16PS's pair words in other shapes: a tile of A is 16 rows of one chunk's
// 16 pair words, by row (so op(A) is always packed by row for it: a transposed A through the
// transpose below); a tile of B is a chunk's 16 pair rows of 16 columns, exactly half of a by-pair
// strip of kNR columns read with a row stride of kNR words.
#define HEED_TARGET_AMX __attribute__((target("avx512f,avx512bw,amx-tile,amx-bf16")))

// A source strided along k (its rows are k), by row: for 16 panel rows at a time, each chunk's 16
// pairs are made as for the by-pair order (source rows 2p and 2p + 1 interleaved, 16 panel rows
// per vector) and transposed in registers, so that each panel row's 16 words are one store.
template <int64_t R>
HEED_TARGET_AVX512BW void pack_k_strided_by_row(const Source& src, int64_t r0, int64_t rows, int64_t k0, int64_t kb,
                                                uint32_t* dst) {
  static_assert(R % 16 == 0);
  // A chunk (32 source rows) at a time, its rows read along their length across every group of 16
  // panel rows: long runs the hardware prefetchers follow. (Group by group, each visit read one
  // 64-byte line of each of the slice's source rows, a kb-line stride walk per group.)
  const int64_t pairs = padded_pairs(kb), chunks = pairs / kChunk;
  for (int64_t q = 0; q < chunks; ++q)
    for (int64_t e = 0; e < round_up(rows, R); e += 16) {  // the first panel row of a group of 16
      const __mmask16 m = first_lanes(rows - e);
      __m512i w[16];
      for (int64_t u = 0; u < kChunk; ++u) {
        const int64_t k = 2 * (q * kChunk + u);
        const float* x = src.data + (k0 + k) * src.ld + r0 + e;
        const __m512 even = k < kb ? _mm512_maskz_loadu_ps(m, x) : _mm512_setzero_ps();
        const __m512 odd = k + 1 < kb ? _mm512_maskz_loadu_ps(m, x + src.ld) : _mm512_setzero_ps();
        w[u] = pair_words(even, odd);
      }
      detail::transpose16(w);
      uint32_t* strip = dst + (e / R) * R * pairs + q * kChunk * R + (e % R) * kChunk;
      for (int64_t i = 0; i < 16; ++i) _mm512_store_si512(strip + i * kChunk, w[i]);
    }
}

// The 32 x 32 tile: C tile 2t + h (rows 16t.., columns 16h..) from A tile 4 + t and B tile 6 + h.
// The thread's tiles must be configured as detail::full_tiles() (detail::AmxTiles, core/amx.h).
// kStreamC: C is only written (never loaded), through a 4 KB scratch in L1 and non-temporal
// stores, which do not read each line of C before writing it (see KernelSet::tile_streaming_c);
// c must be 64-byte aligned and ldc a multiple of 16.
template <bool kStreamC>
HEED_TARGET_AMX void tile_amx(int64_t q0, int64_t q1, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc,
                              bool load_c) {
  const size_t c_stride = static_cast<size_t>(ldc) * sizeof(float);
  float* c1 = c + 16 * ldc;
  if (load_c && !kStreamC) {
    HEED_TILE_LOADD(0, c, c_stride);
    HEED_TILE_LOADD(1, c + 16, c_stride);
    HEED_TILE_LOADD(2, c1, c_stride);
    HEED_TILE_LOADD(3, c1 + 16, c_stride);
  } else {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  constexpr size_t kRowA = kChunk * sizeof(uint32_t), kRowB = kNR * sizeof(uint32_t);
  for (int64_t q = q0; q < q1; ++q) {
    const uint32_t* pa = a + q * kChunk * kAmxMR;
    const uint32_t* pb = b + q * kChunk * kNR;
    HEED_TILE_LOADD(4, pa, kRowA);
    HEED_TILE_LOADD(6, pb, kRowB);
    HEED_TILE_LOADD(7, pb + 16, kRowB);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    HEED_TILE_LOADD(5, pa + 16 * kChunk, kRowA);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  if constexpr (kStreamC) {
    alignas(64) float scratch[kAmxMR * kNR];
    constexpr size_t kRow = kNR * sizeof(float);
    _tile_stored(0, scratch, kRow);
    _tile_stored(1, scratch + 16, kRow);
    _tile_stored(2, scratch + 16 * kNR, kRow);
    _tile_stored(3, scratch + 16 * kNR + 16, kRow);
    for (int64_t r = 0; r < kAmxMR; ++r) {
      _mm512_stream_ps(c + r * ldc, _mm512_load_ps(scratch + r * kNR));
      _mm512_stream_ps(c + r * ldc + 16, _mm512_load_ps(scratch + r * kNR + 16));
    }
  } else {
    _tile_stored(0, c, c_stride);
    _tile_stored(1, c + 16, c_stride);
    _tile_stored(2, c1, c_stride);
    _tile_stored(3, c1 + 16, c_stride);
  }
}

// One row of C on the tiles: every row of A's tile is x's chunk (a row stride of 0), so every row
// of C's tile holds the same sums, of which row 0 is kept. Each output gets the same TDPBF16PS
// steps as in tile_amx, so a one-row product has the bits of row 0 of a taller one; the 15 idle
// rows cost nothing measurable, the product being bound by streaming B.
HEED_TARGET_AMX void row_amx(int64_t pairs, const uint32_t* x, const uint32_t* b, int64_t strips, int64_t last_cols,
                             float* c, bool load_c) {
  constexpr size_t kRowB = kNR * sizeof(uint32_t);
  alignas(64) float row[16], out[16 * 16];
  for (int64_t s = 0; s < strips; ++s) {
    const int64_t cols = s + 1 == strips ? last_cols : kNR;
    const uint32_t* strip = b + s * pairs * kNR;
    for (int64_t h = 0; 16 * h < cols; ++h) {
      float* ch = c + s * kNR + 16 * h;
      const int64_t n = std::min<int64_t>(16, cols - 16 * h);
      std::fill(row, row + 16, 0.0f);
      if (load_c) std::copy(ch, ch + n, row);
      HEED_TILE_LOADD(0, row, 0);
      for (int64_t q = 0; q < pairs / kChunk; ++q) {
        HEED_TILE_LOADD(4, x + q * kChunk, 0);
        HEED_TILE_LOADD(6, strip + q * kChunk * kNR + 16 * h, kRowB);
        _tile_dpbf16ps(0, 4, 6);
      }
      _tile_stored(0, out, 16 * sizeof(float));
      std::copy(out, out + n, ch);
    }
  }
}
#endif  // HEED_AMX

// VDPBF16PS treats denormal inputs (bf16 or the accumulator) as zero and flushes denormal results
// to zero, whatever MXCSR says; the emulated kernel gets the same from MXCSR's DAZ and FTZ bits,
// set while it runs on this thread.
class FlushDenormals {
 public:
  FlushDenormals() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | 0x8040u); }
  ~FlushDenormals() { _mm_setcsr(saved_); }
  FlushDenormals(const FlushDenormals&) = delete;
  FlushDenormals& operator=(const FlushDenormals&) = delete;

 private:
  unsigned saved_;
};
#else
struct FlushDenormals {
  FlushDenormals() {}
};
#endif

// ---- one-row products: C (1 x n) = x (1 x k) op(B) ----
// op(B) packed whole (all of k, strips of kNR columns by pair: pack_b's layout with kb = k) and x
// as `pairs` pair words; each output sums its pairs in increasing p, odd first, as a lane of the
// tile kernel does, so a one-row product has the bits of row 0 of the same product with more rows.
// A row kernel computes `strips` strips of C (the last one `last_cols` wide) from consecutive
// packed strips.
using RowKernel = void (*)(int64_t pairs, const uint32_t* x, const uint32_t* b, int64_t strips, int64_t last_cols,
                           float* c, bool load_c);

void row_emulated(int64_t pairs, const uint32_t* x, const uint32_t* b, int64_t strips, int64_t last_cols, float* c,
                  bool load_c) {
  for (int64_t s = 0; s < strips; ++s) {
    const int64_t cols = s + 1 == strips ? last_cols : kNR;
    const uint32_t* strip = b + s * pairs * kNR;
    for (int64_t j = 0; j < cols; ++j) {
      float acc = load_c ? c[s * kNR + j] : 0.0f;
      for (int64_t p = 0; p < pairs; ++p) {
        const uint32_t w = x[p], v = strip[p * kNR + j];
        acc += std::bit_cast<float>(w & 0xffff0000u) * std::bit_cast<float>(v & 0xffff0000u);
        acc += std::bit_cast<float>(w << 16) * std::bit_cast<float>(v << 16);
      }
      c[s * kNR + j] = acc;
    }
  }
}

// One path's packing and kernels. op(A) is packed by row when its source is contiguous along k,
// else by pair; op(B) always by pair.
// mr: the rows of its tile of C (and of a packed strip of A).
enum class Arithmetic { emulated, avx512_bf16, amx };
struct KernelSet {
  PackFn pack_a_k_contiguous, pack_a_k_strided, pack_b_k_contiguous, pack_b_k_strided;
  TileKernel tile_a_by_row, tile_a_by_pair;
  RowKernel row;
  Arithmetic arithmetic;
  int64_t mr;
  // A tile kernel that only writes C, with non-temporal stores, or nullptr: for a C written once
  // and too large for L2 (gemm_serial). AMX's tiles make C faster than stores that first read each
  // line for ownership can take it (docs/performance.md, "Issue 16 on the Xeon, continued").
  // gemm_serial runs it for either layout of A, so a set that has one must use one tile kernel
  // for both (AMX packs A by row always).
  TileKernel tile_streaming_c = nullptr;
};

constexpr KernelSet kEmulated{pack_portable<kMR, true>,  pack_portable<kMR, false>, pack_portable<kNR, false>,
                              pack_portable<kNR, false>, tile_emulated<true>,       tile_emulated<false>,
                              row_emulated,              Arithmetic::emulated,      kMR};
#ifdef HEED_X86
constexpr KernelSet kAvx512Bf16{pack_k_contiguous_by_row<kMR>,  pack_k_strided_by_pair<kMR>,
                                pack_k_contiguous_by_pair<kNR>, pack_k_strided_by_pair<kNR>,
                                tile_avx512_bf16<true>,         tile_avx512_bf16<false>,
                                row_avx512_bf16,                Arithmetic::avx512_bf16,
                                kMR};
#endif
#ifdef HEED_AMX
constexpr KernelSet kAmxBf16{pack_k_contiguous_by_row<kAmxMR>, pack_k_strided_by_row<kAmxMR>,
                             pack_k_contiguous_by_pair<kNR>,   pack_k_strided_by_pair<kNR>,
                             tile_amx<false>,                  tile_amx<false>,
                             row_amx,                          Arithmetic::amx,
                             kAmxMR,                           tile_amx<true>};
#endif

// One tile of `rows` x `cols` (at most mr x kNR) at c: the kernel in place when the tile is
// whole, else through a full-size scratch tile of which only the valid part is read and written.
void run_tile(TileKernel kernel, int64_t mr, int64_t q0, int64_t q1, const uint32_t* a, const uint32_t* b, float* c,
              int64_t ldc, int64_t rows, int64_t cols, bool load_c) {
  if (rows == mr && cols == kNR) return kernel(q0, q1, a, b, c, ldc, load_c);
  alignas(64) float tile[kMaxMR * kNR];
  std::fill(tile, tile + mr * kNR, 0.0f);
  if (load_c)
    for (int64_t r = 0; r < rows; ++r) std::copy(c + r * ldc, c + r * ldc + cols, tile + r * kNR);
  kernel(q0, q1, a, b, tile, kNR, load_c);
  for (int64_t r = 0; r < rows; ++r) std::copy(tile + r * kNR, tile + r * kNR + cols, c + r * ldc);
}

using PackBuffer = detail::PackBuffer<uint32_t>;  // one thread's packed panels (core/ops/pack_buffer.h)

struct Problem {
  int64_t m, n, k;
  Source a, b;  // a: rows of op(A); b: columns of op(B)
  bool beta_one;
  float* c;
  int64_t ldc;
  Bf16Skip skip;
  int64_t diagonal;
  Bf16BlockingCaps caps;
};

// Splits [0, total) into the fewest blocks of at most `max` (a multiple of `unit`), all of about
// the same size (a multiple of `unit`): 384 at a maximum of 256 is 2 x 192, not 256 + 128.
int64_t balanced_block(int64_t total, int64_t max, int64_t unit) {
  const int64_t blocks = ceil_div(total, std::max(max, unit));
  return round_up(ceil_div(total, blocks), unit);
}

// Asks for the cache lines of rows [r0, r0 + rows) x depth [k0, k0 + kb) of a source whose rows
// run along k.
void prefetch_rows(const Source& src, int64_t r0, int64_t rows, int64_t k0, int64_t kb) {
  constexpr int64_t kLine = 16;  // floats per 64-byte line
  for (int64_t r = r0; r < r0 + rows; ++r)
    for (int64_t k = 0; k < kb; k += kLine) __builtin_prefetch(src.data + r * src.ld + k0 + k);
}

GemmBf16Blocking blocking(int64_t m, int64_t n, int64_t k, bool trans_a, int64_t mr, const Bf16BlockingCaps& caps);

// The whole product on the calling thread.
void gemm_serial(const Problem& pr, const KernelSet& ks) {
  const int64_t mr = ks.mr;
  const GemmBf16Blocking blk = blocking(pr.m, pr.n, pr.k, !pr.a.k_contiguous, mr, pr.caps);
  const int64_t kc = blk.kc, mc = blk.mc, nc = blk.nc;
  const PackFn pack_a = pr.a.k_contiguous ? ks.pack_a_k_contiguous : ks.pack_a_k_strided;
  const PackFn pack_b = pr.b.k_contiguous ? ks.pack_b_k_contiguous : ks.pack_b_k_strided;
  const TileKernel kernel = pr.a.k_contiguous ? ks.tile_a_by_row : ks.tile_a_by_pair;
  // C written once (beta 0, one k slice) and larger than L2, so headed for memory anyway: its
  // whole tiles skip the read for ownership of every line (see KernelSet::tile_streaming_c).
  const bool stream_c = ks.tile_streaming_c && !pr.beta_one && kc >= pr.k &&
                        pr.m * pr.n * static_cast<int64_t>(sizeof(float)) > cpu_info().l2_bytes &&
                        reinterpret_cast<uintptr_t>(pr.c) % 64 == 0 && pr.ldc % 16 == 0;
  thread_local PackBuffer a_buffer, b_buffer;
  uint32_t* ap = a_buffer.get(mc * kc / 2);
  uint32_t* bp = b_buffer.get(nc * kc / 2);
  for (int64_t jc = 0; jc < pr.n; jc += nc) {
    const int64_t nb = std::min(nc, pr.n - jc);
    for (int64_t pc = 0; pc < pr.k; pc += kc) {
      const int64_t kb = std::min(kc, pr.k - pc), pairs = padded_pairs(kb), chunks = pairs / kChunk;
      pack_b(pr.b, jc, nb, pc, kb, bp);
      const bool load_c = pr.beta_one || pc > 0;
      // The chunks of this slice that the tile of rows [i0, i0 + rows) needs: all of them, or those
      // a skip leaves (whole chunks: the rest of a chunk is zero).
      auto needed_chunks = [&](int64_t i0, int64_t rows) {
        int64_t q0 = 0, q1 = chunks;
        if (pr.skip == Bf16Skip::a_above)  // k <= the tile's last row + diagonal
          q1 = std::clamp<int64_t>(ceil_div(i0 + rows + pr.diagonal - pc, 2 * kChunk), 0, chunks);
        if (pr.skip == Bf16Skip::a_below)  // k >= the tile's first row + diagonal
          q0 = std::clamp<int64_t>((i0 + pr.diagonal - pc) / (2 * kChunk), 0, chunks);
        return std::pair<int64_t, int64_t>{q0, std::max(q0, q1)};
      };
      for (int64_t ic = 0; ic < pr.m; ic += mc) {
        const int64_t mb = std::min(mc, pr.m - ic);
        // An A whose rows run along k is packed a strip at a time when the first column of tiles
        // reaches it, only the chunks its tiles need, with the next strip's rows prefetched from
        // memory meanwhile. A transposed A is packed a block at a time: its source rows run along
        // m, and reading mb floats of each at once is what is fast (strip by strip, dk of small's
        // attention ran at 95 GFLOP/s instead of 99).
        const bool by_strip = pr.a.k_contiguous;
        if (!by_strip) pack_a(pr.a, ic, mb, pc, kb, ap);
        for (int64_t jr = 0; jr < nb; jr += kNR) {
          const int64_t j0 = jc + jr, cols = std::min(kNR, nb - jr);
          for (int64_t ir = 0; ir < mb; ir += mr) {
            const int64_t i0 = ic + ir, rows = std::min(mr, mb - ir);
            const auto [q0, q1] = needed_chunks(i0, rows);
            if (by_strip && jr == 0) {
              const int64_t k_lo = 2 * kChunk * q0, k_hi = std::min(kb, 2 * kChunk * q1);
              if (k_lo < k_hi) pack_a(pr.a, i0, rows, pc + k_lo, k_hi - k_lo, ap + ir * pairs + q0 * kChunk * mr);
              if (ir + mr < mb) {
                const int64_t next_rows = std::min(mr, mb - ir - mr);
                const auto [n0, n1] = needed_chunks(i0 + mr, next_rows);
                const int64_t n_lo = 2 * kChunk * n0, n_hi = std::min(kb, 2 * kChunk * n1);
                if (n_lo < n_hi) prefetch_rows(pr.a, i0 + mr, next_rows, pc + n_lo, n_hi - n_lo);
              }
            }
            if (pr.skip == Bf16Skip::c_above && j0 > i0 + rows - 1 + pr.diagonal) continue;
            const bool whole = rows == mr && cols == kNR;
            // The next tile's rows of C, while this tile computes (C comes from memory). AMX's
            // tiles too: without this, small's c_fc forward alone (bench/bf16_gemm.cpp) ran 10-14 %
            // faster on a Xeon, but small's bf16 training step 7 % slower (heed bench, alternated).
            if (ir + mr < mb && !stream_c)
              for (int64_t r = 0; r < std::min(mr, mb - ir - mr); ++r)
                for (int64_t j = 0; j < cols; j += 16) __builtin_prefetch(pr.c + (i0 + mr + r) * pr.ldc + j0 + j, 1);
            // (An empty range still runs: the tile must be started at zero, or kept, for later slices.)
            run_tile(stream_c && whole ? ks.tile_streaming_c : kernel, mr, q0, q1, ap + ir * pairs, bp + jr * pairs,
                     pr.c + i0 * pr.ldc + j0, pr.ldc, rows, cols, load_c);
          }
        }
      }
    }
  }
#ifdef HEED_X86
  if (stream_c) _mm_sfence();  // non-temporal stores are weakly ordered: complete them before C is read
#endif
}

const KernelSet& kernel_set(Bf16Kernel kernel) {
  if (kernel == Bf16Kernel::automatic) kernel = bf16_kernel();
  if (kernel == Bf16Kernel::emulated) return kEmulated;
  if (kernel == Bf16Kernel::amx_bf16) {
    // (Its packing and one-row kernel use AVX-512BW too.)
    HEED_CHECK(amx_ready() && cpu_info().avx512bw, "gemm_bf16: the amx_bf16 kernel needs a CPU with AMX-BF16 (and ",
               "AVX-512BW) that the OS lets this process use; this ", cpu_info().model_name,
               " has not (use avx512_bf16 or the emulated kernel)");
#ifdef HEED_AMX
    return kAmxBf16;
#endif
  }
  HEED_CHECK(cpu_info().avx512_bf16 && cpu_info().avx512bw, "gemm_bf16: the avx512_bf16 kernel needs a CPU with ",
             "AVX512_BF16 and AVX512BW; this ", cpu_info().model_name, " has not (use the emulated kernel)");
#ifdef HEED_X86
  return kAvx512Bf16;
#else
  return kEmulated;  // unreachable: no x86 CPU, no AVX512_BF16
#endif
}

// Multiply-adds per second a kernel does on one core, for sizing its chunks: the quick fp32 FMA
// rate core/tuning.h sizes every split from, doubled for VDPBF16PS (two multiply-adds per lane
// where an FMA does one, at the same issue rate on the CPUs that have it: Zen 4 measured 236.4
// against 118.2 GFLOP/s). Not cpu_peaks(): its careful measurement takes about 0.1 s, a third of
// a short `heed sample --precision bf16`, for a grain that is rounded anyway.
// AMX: its own quick rate (TDPBF16PS on full tiles).
double macs_per_second(const KernelSet& ks) {
  switch (ks.arithmetic) {
    case Arithmetic::emulated: return cpu_quick_rates().fp32_fma_gflops * 0.5e9;
    case Arithmetic::avx512_bf16: return cpu_quick_rates().fp32_fma_gflops * 0.5e9 * 2.0;
    case Arithmetic::amx: return amx_quick_gflops() * 0.5e9;
  }
  return 0;
}

// Calls f() with this thread set up for the kernel set's arithmetic: the emulated kernels get
// VDPBF16PS's flush to zero from MXCSR (see FlushDenormals), the AMX ones their tiles configured.
template <class F>
void with_kernel_arithmetic(const KernelSet& ks, F&& f) {
  if (ks.arithmetic == Arithmetic::emulated) {
    FlushDenormals flush;
    f();
#ifdef HEED_AMX
  } else if (ks.arithmetic == Arithmetic::amx) {
    const detail::AmxTiles tiles;
    f();
#endif
  } else {
    f();
  }
}

void run(const Problem& pr, const KernelSet& ks) {
  with_kernel_arithmetic(ks, [&] { gemm_serial(pr, ks); });
}

// A one-row product: x rounded once, op(B) from the thread's Bf16WeightCache or packed here, a
// thread's strips at a time, split into chunks of about the streaming grain (memory-bound: each
// element of B is used once).
void gemv_bf16(const Problem& pr, const KernelSet& ks) {
  const int64_t pairs = padded_pairs(pr.k), strips = ceil_div(pr.n, kNR), strip_words = pairs * kNR;
  std::vector<uint32_t> x(static_cast<size_t>(pairs), 0u);
  auto x_at = [&](int64_t kk) { return pr.a.k_contiguous ? pr.a.data[kk] : pr.a.data[kk * pr.a.ld]; };
  for (int64_t kk = 0; kk < pr.k; ++kk)
    x[kk / 2] |= static_cast<uint32_t>(to_bf16(x_at(kk))) << (kk % 2 ? 16 : 0);
  const PackFn pack_b = pr.b.k_contiguous ? ks.pack_b_k_contiguous : ks.pack_b_k_strided;
  const uint32_t* cached = nullptr;
  if (Bf16WeightCache* cache = Bf16WeightCache::active())
    cached = cache->packed(pr.b.data, pr.b.ld, pr.b.k_contiguous, pr.n, pr.k, strips * strip_words,
                           [&](uint32_t* dst) { pack_b(pr.b, 0, pr.n, 0, pr.k, dst); });
  const int64_t grain = std::max<int64_t>(1, tuning().elementwise_grain / strip_words);
  parallel_for(strips, grain, [&](int64_t s0, int64_t s1) {
    const int64_t cols = std::min(pr.n, s1 * kNR) - s0 * kNR;
    const uint32_t* b = cached ? cached + s0 * strip_words : nullptr;
    if (!b) {
      thread_local PackBuffer buffer;
      uint32_t* dst = buffer.get((s1 - s0) * strip_words);
      pack_b(pr.b, s0 * kNR, cols, 0, pr.k, dst);
      b = dst;
    }
    const int64_t last_cols = cols - (s1 - s0 - 1) * kNR;
    with_kernel_arithmetic(ks, [&] { ks.row(pairs, x.data(), b, s1 - s0, last_cols, pr.c + s0 * kNR, pr.beta_one); });
  });
}

void check_operand(const char* what, bool trans, int64_t rows, int64_t cols, int64_t ld) {
  const int64_t need = std::max<int64_t>(1, trans ? rows : cols);
  HEED_CHECK(ld >= need, "gemm_bf16: leading dimension of ", what, " is ", ld, ", less than ", need, " (",
             trans ? "transposed " : "", rows, " x ", cols, ")");
}

void check_args(int64_t m, int64_t n, int64_t k, bool trans_a, int64_t lda, bool trans_b, int64_t ldb, float beta,
                int64_t ldc) {
  HEED_CHECK(m >= 0 && n >= 0 && k >= 0, "gemm_bf16: negative size m=", m, " n=", n, " k=", k);
  HEED_CHECK(beta == 0.0f || beta == 1.0f, "gemm_bf16: beta must be 0 or 1, got ", beta);
  check_operand("A", trans_a, m, k, lda);  // A is stored (k x m) when transposed
  check_operand("B", trans_b, k, n, ldb);
  HEED_CHECK(ldc >= std::max<int64_t>(1, n), "gemm_bf16: leading dimension of C is ", ldc, ", less than ", n);
}

// C = beta C for an empty sum (k = 0).
void scale_only(int64_t m, int64_t n, bool beta_one, float* c, int64_t ldc) {
  if (beta_one) return;
  for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
}

}  // namespace

Bf16Kernel bf16_kernel() {
  // AMX's packing and its one-row kernel use AVX-512BW too (every CPU with AMX has it).
  if (amx_ready() && cpu_info().avx512bw) return Bf16Kernel::amx_bf16;
  return cpu_info().avx512_bf16 && cpu_info().avx512bw ? Bf16Kernel::avx512_bf16 : Bf16Kernel::emulated;
}

std::string bf16_product_kernel() {
  switch (bf16_kernel()) {
    case Bf16Kernel::amx_bf16:
      return "AMX TDPBF16PS";
    case Bf16Kernel::avx512_bf16:
      return "AVX512_BF16 VDPBF16PS";
    default:
      return "emulated on fp32 FMAs";
  }
}

std::vector<Bf16Kernel> bf16_kernels_here() {
  std::vector<Bf16Kernel> kernels{Bf16Kernel::emulated};
  if (cpu_info().avx512_bf16 && cpu_info().avx512bw) kernels.push_back(Bf16Kernel::avx512_bf16);
  if (bf16_kernel() == Bf16Kernel::amx_bf16) kernels.push_back(Bf16Kernel::amx_bf16);
  return kernels;
}

GemmBf16Blocking gemm_bf16_blocking(int64_t m, int64_t n, int64_t k, bool trans_a, Bf16Kernel kernel,
                                    const Bf16BlockingCaps& caps) {
  return blocking(m, n, k, trans_a, kernel_set(kernel).mr, caps);
}

namespace {
GemmBf16Blocking blocking(int64_t m, int64_t n, int64_t k, bool trans_a, int64_t mr, const Bf16BlockingCaps& caps) {
  constexpr int64_t kBytes = 2;  // per bf16 element
  struct Limits {
    int64_t kc_max, kc_max_transposed, l2_half, l3_half;
  };
  // C is read and written once per k slice, from memory at these sizes, so slices are as deep as
  // the caches allow: a kc x nr strip of B (read from L2 by every tile of its column) in a quarter
  // of L2. L1 is not the limit: a tile streams its strips of A and B from L2 at about 7 bytes per
  // cycle, a fraction of what L2 delivers. A transposed A is the exception: its block is packed
  // from runs of mc floats of source rows far apart in memory, which only read near memory speed
  // when long, so its blocks keep at least kMinTransposedRows rows and the slices get shallower
  // (its C, a weight gradient, is small enough to stay in cache between slices).
  static const Limits limits = [] {
    constexpr int64_t kMinTransposedRows = 512;  // 2 KB of each source row per run
    const CpuInfo& cpu = cpu_info();
    auto whole_chunks = [](int64_t kc) { return std::max<int64_t>(2 * kChunk, kc / (2 * kChunk) * (2 * kChunk)); };
    const int64_t kc_max = whole_chunks(cpu.l2_bytes / 4 / (kNR * kBytes));
    return Limits{kc_max, std::min(kc_max, whole_chunks(cpu.l2_bytes / 2 / (kMinTransposedRows * kBytes))),
                  cpu.l2_bytes / 2, cpu.l3_per_core() / 2};
  }();
  auto capped = [](int64_t limit, int64_t cap) { return cap > 0 ? std::min(limit, cap) : limit; };
  GemmBf16Blocking b{mr, kNR, 0, 0, 0};
  // (A cap on kc in whole chunks, so that the balanced slices stay under it.)
  const int64_t kc_cap = caps.kc > 0 ? std::max(2 * kChunk, caps.kc / (2 * kChunk) * (2 * kChunk)) : 0;
  b.kc = balanced_block(std::max<int64_t>(k, 1), capped(trans_a ? limits.kc_max_transposed : limits.kc_max, kc_cap),
                        2 * kChunk);
  // The packed block of A, reused by every strip of B, in half of L2; the panel of B in half of
  // this core's share of L3.
  const int64_t mc_max = std::max<int64_t>(mr, capped(limits.l2_half / (b.kc * kBytes), caps.mc) / mr * mr);
  const int64_t nc_max = std::max<int64_t>(kNR, capped(limits.l3_half / (b.kc * kBytes), caps.nc) / kNR * kNR);
  b.mc = balanced_block(std::max<int64_t>(m, 1), mc_max, mr);
  b.nc = balanced_block(std::max<int64_t>(n, 1), nc_max, kNR);
  return b;
}
}  // namespace

void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
               const float* b, int64_t ldb, float beta, float* c, int64_t ldc, const GemmBf16Options& options) {
  check_args(m, n, k, trans_a, lda, trans_b, ldb, beta, ldc);
  const KernelSet& ks = kernel_set(options.kernel);
  if (m == 0 || n == 0) return;
  if (k == 0) return scale_only(m, n, beta == 1.0f, c, ldc);
  const Problem whole{m, n, k, {a, lda, !trans_a}, {b, ldb, trans_b}, beta == 1.0f, c, ldc, options.skip,
                      options.diagonal, options.caps};
  if (m == 1 && options.skip == Bf16Skip::none) return gemv_bf16(whole, ks);
  // Split the longer side of C into runs of whole tiles (so every tile, and so every bit of the
  // result, is the same on any thread count), each at least kMinProductChunkSeconds of work.
  const double min_macs = macs_per_second(ks) * kMinProductChunkSeconds;
  const bool by_rows = m >= n;
  const int64_t unit = by_rows ? ks.mr : kNR, units = ceil_div(by_rows ? m : n, unit);
  const double macs_per_unit = static_cast<double>(unit) * static_cast<double>(by_rows ? n : m) * static_cast<double>(k);
  const int64_t grain = std::max<int64_t>(1, static_cast<int64_t>(min_macs / macs_per_unit));
  parallel_for(units, grain, [&](int64_t u0, int64_t u1) {
    Problem part = whole;
    const int64_t lo = u0 * unit, hi = std::min(u1 * unit, by_rows ? m : n);
    if (by_rows) {
      part.m = hi - lo;
      part.a.data += part.a.k_contiguous ? lo * part.a.ld : lo;
      part.c += lo * ldc;
      part.diagonal += lo;  // row i of the part is row lo + i of C
    } else {
      part.n = hi - lo;
      part.b.data += part.b.k_contiguous ? lo * part.b.ld : lo;
      part.c += lo;
      if (part.skip == Bf16Skip::c_above) part.diagonal -= lo;  // column j of the part is column lo + j
    }
    run(part, ks);
  });
}

void gemm_bf16_batched(int64_t outer, int64_t inner, int64_t m, int64_t n, int64_t k, const Bf16Operand& a,
                       const Bf16Operand& b, float beta, const Bf16Output& c, const GemmBf16Options& options) {
  HEED_CHECK(outer >= 0 && inner >= 0, "gemm_bf16_batched: negative batch ", outer, " x ", inner);
  check_args(m, n, k, a.trans, a.ld, b.trans, b.ld, beta, c.ld);
  const KernelSet& ks = kernel_set(options.kernel);
  const int64_t count = outer * inner;
  if (count == 0 || m == 0 || n == 0) return;
  const double macs = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const int64_t grain = std::max<int64_t>(1, static_cast<int64_t>(macs_per_second(ks) * kMinProductChunkSeconds / std::max(macs, 1.0)));
  parallel_for(count, grain, [&](int64_t begin, int64_t end) {
    for (int64_t idx = begin; idx < end; ++idx) {
      const int64_t o = idx / inner, i = idx % inner;
      float* pc = c.data + o * c.outer_stride + i * c.inner_stride;
      if (k == 0) {
        scale_only(m, n, beta == 1.0f, pc, c.ld);
        continue;
      }
      const Problem pr{m,
                       n,
                       k,
                       {a.data + o * a.outer_stride + i * a.inner_stride, a.ld, !a.trans},
                       {b.data + o * b.outer_stride + i * b.inner_stride, b.ld, b.trans},
                       beta == 1.0f,
                       pc,
                       c.ld,
                       options.skip,
                       options.diagonal,
                       options.caps};
      run(pr, ks);
    }
  });
}

// ------------------------------------------------------------------------------------------
// Bf16WeightCache

struct Bf16WeightCache::Impl {
  std::vector<std::pair<const float*, const float*>> ranges;  // [begin, end) of registered floats
  struct Key {
    const float* b;
    int64_t ldb;
    bool k_contiguous;
    int64_t n, k;
    bool operator<(const Key& o) const {
      return std::tie(b, ldb, k_contiguous, n, k) < std::tie(o.b, o.ldb, o.k_contiguous, o.n, o.k);
    }
  };
  std::map<Key, PackBuffer> packed;
};

namespace {
thread_local Bf16WeightCache* g_active_weight_cache = nullptr;
}

Bf16WeightCache::Bf16WeightCache() : impl_(std::make_unique<Impl>()), previous_(g_active_weight_cache) {
  g_active_weight_cache = this;
}

Bf16WeightCache::~Bf16WeightCache() { g_active_weight_cache = previous_; }

void Bf16WeightCache::add(const float* data, int64_t numel) {
  HEED_CHECK(numel >= 0, "Bf16WeightCache: negative size ", numel);
  if (numel > 0) impl_->ranges.emplace_back(data, data + numel);
}

Bf16WeightCache* Bf16WeightCache::active() { return g_active_weight_cache; }

const uint32_t* Bf16WeightCache::packed(const float* b, int64_t ldb, bool k_contiguous, int64_t n, int64_t k,
                                        int64_t words, const std::function<void(uint32_t* dst)>& pack) {
  // Every element op(B) reads: from b to its last element, which must lie in one registered range.
  const int64_t last = k_contiguous ? (n - 1) * ldb + (k - 1) : (k - 1) * ldb + (n - 1);
  const bool inside = std::any_of(impl_->ranges.begin(), impl_->ranges.end(),
                                  [&](const auto& r) { return b >= r.first && b + last < r.second; });
  if (!inside) return nullptr;
  auto [it, fresh] = impl_->packed.try_emplace(Impl::Key{b, ldb, k_contiguous, n, k});
  uint32_t* dst = it->second.get(words);
  if (fresh) pack(dst);
  return dst;
}

}  // namespace heed
