// heed (internal): the 16 x 16 transpose of 32-bit words held in 16 AVX-512 registers, one
// definition for the two places that move data through it: the bf16 packing (core/ops/
// gemm_bf16.cpp, which runs it on any x86 build after a runtime CPU check) and attention's key
// and value transposes (core/ops/attention_kernels.h, in builds for an AVX-512 CPU). Its target
// attribute lets both call it; it needs AVX-512F only.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

namespace heed::detail {

/// Transposes 16 x 16 words held as 16 rows: r[i] word j becomes r[j] word i. Pure data movement:
/// floats go through it bit for bit (cast with _mm512_castps_si512 and back).
__attribute__((target("avx512f"))) inline void transpose16(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    r[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int i = 0; i < 4; ++i) {  // 128-bit lanes: first between rows 4 apart, then 8 apart
    t[i] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0xdd);
    t[i + 8] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0x88);
    t[i + 12] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0xdd);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0xdd);
    r[i + 4] = _mm512_shuffle_i32x4(t[i + 4], t[i + 12], 0x88);
    r[i + 12] = _mm512_shuffle_i32x4(t[i + 4], t[i + 12], 0xdd);
  }
}

}  // namespace heed::detail
#endif
