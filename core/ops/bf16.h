// heed: bfloat16, the upper half of a float32 (sign, the same 8 exponent bits, 7 mantissa bits).
// Mixed precision rounds fp32 values to bf16 for the inputs of matrix products only; everything
// else stays fp32. One rounding function, used by every kernel that packs bf16 operands.
#pragma once

#include <bit>
#include <cstdint>

namespace heed {

/// x rounded to bf16 (returned as its 16 bits): to nearest, ties to even, as PyTorch and
/// VCVTNEPS2BF16 round, except that fp32 denormals are rounded like any other value (not flushed
/// to zero). NaN stays NaN (made quiet, sign kept), +-inf stays inf, and a finite x rounds to inf
/// past the largest finite bf16, (2 - 2^-7) 2^127 ~ 3.3895e38, plus half its last place.
inline uint16_t to_bf16(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
  // Adding 0x7fff plus the lowest kept bit rounds the dropped 16 bits to nearest, ties to even
  // (the carry may run into the exponent: that is the correct next binade, or inf).
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return static_cast<uint16_t>(nan ? (u >> 16) | 0x0040u : rounded);
}

/// The float32 value of a bf16 (exact: bf16 is a prefix of float32).
inline float from_bf16(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

/// x rounded to bf16 and back: the fp32 value a bf16 product sees for x.
inline float round_bf16(float x) { return from_bf16(to_bf16(x)); }

}  // namespace heed
