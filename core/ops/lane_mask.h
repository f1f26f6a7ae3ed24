// heed (internal): the mask of the first lanes of a 16-lane AVX-512 vector (floats or 32-bit
// words), for loads and stores that a row's end cuts short. One definition for the two kernels
// that pack operands with masked loads: the bf16 GEMM's packing (core/ops/gemm_bf16.cpp) and the
// fp32 A^T B kernel's (core/ops/sgemm_at_b.cpp), both behind a runtime CPU check. It needs
// AVX-512F only.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <cstdint>

namespace heed::detail {

/// Lanes [0, n) set: none for n <= 0, all 16 for n >= 16.
__attribute__((target("avx512f"))) inline __mmask16 first_lanes(int64_t n) {
  return n >= 16 ? __mmask16(0xffff) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}

}  // namespace heed::detail

#endif
