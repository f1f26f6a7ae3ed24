// to_bf16: round to nearest, ties to even, at every kind of value (normal, tie, denormal, largest
// finite, inf, NaN), against hand-worked bit patterns and an independent reference.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/ops/bf16.h"
#include "core/random.h"

using namespace heed;

namespace {

float bits(uint32_t u) { return std::bit_cast<float>(u); }

bool is_bf16_nan(uint16_t b) { return (b & 0x7f80u) == 0x7f80u && (b & 0x007fu) != 0; }

// The nearest bf16 by comparing distances in double (exact for these values), ties to the even
// neighbour: an independent statement of what to_bf16 must do for any non-NaN float.
uint16_t reference_bf16(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint16_t down = static_cast<uint16_t>(u >> 16);  // toward zero
  const uint16_t up = static_cast<uint16_t>(down + 1);   // away from zero (0x7f7f + 1 is inf)
  const double dx = std::fabs(static_cast<double>(x));
  const double d_down = dx - std::fabs(static_cast<double>(from_bf16(down)));
  const double d_up = std::fabs(static_cast<double>(from_bf16(up))) - dx;  // inf - finite = inf
  // Past the largest finite bf16 the upper neighbour is 2^128 (where inf starts), not inf itself.
  const double d_up_finite = (up & 0x7fffu) == 0x7f80u ? std::ldexp(1.0, 128) - dx : d_up;
  if (d_down < d_up_finite) return down;
  if (d_up_finite < d_down) return up;
  return (down & 1u) ? up : down;
}

}  // namespace

TEST_CASE("to_bf16 keeps values that are already bf16 and rounds to nearest", "[bf16]") {
  CHECK(to_bf16(1.0f) == 0x3f80);
  CHECK(to_bf16(-2.0f) == 0xc000);
  CHECK(to_bf16(0.0f) == 0x0000);
  CHECK(to_bf16(-0.0f) == 0x8000);
  CHECK(to_bf16(bits(0x3f807fff)) == 0x3f80);  // just below half an ulp: down
  CHECK(to_bf16(bits(0x3f808001)) == 0x3f81);  // just above: up
  CHECK(to_bf16(bits(0xbf808001)) == 0xbf81);  // the same on the negative side
  CHECK(from_bf16(0x3fc0) == 1.5f);
  CHECK(round_bf16(3.14159265f) == 3.140625f);  // 0x40490fdb -> 0x4049
  // Every bf16 survives a round trip through float32 unchanged (the NaNs keep being NaN).
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const uint16_t back = to_bf16(from_bf16(static_cast<uint16_t>(b)));
    if (is_bf16_nan(static_cast<uint16_t>(b))) {
      REQUIRE(is_bf16_nan(back));
    } else {
      REQUIRE(back == b);
    }
  }
}

TEST_CASE("to_bf16 breaks ties to the even neighbour", "[bf16]") {
  CHECK(to_bf16(bits(0x3f808000)) == 0x3f80);  // 1 + 2^-8, between 0x3f80 (even) and 0x3f81: down
  CHECK(to_bf16(bits(0x3f818000)) == 0x3f82);  // between 0x3f81 and 0x3f82 (even): up
  CHECK(to_bf16(bits(0xbf818000)) == 0xbf82);
  CHECK(to_bf16(bits(0x3fff8000)) == 0x4000);  // a tie that carries into the exponent
}

TEST_CASE("to_bf16 of inf, NaN and the largest finite values", "[bf16]") {
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(to_bf16(inf) == 0x7f80);
  CHECK(to_bf16(-inf) == 0xff80);
  for (uint32_t nan : {0x7fc00000u, 0x7f800001u, 0x7f80ffffu, 0x7fa00000u, 0xffc00001u, 0xff800001u}) {
    INFO("NaN bits " << std::hex << nan);
    const uint16_t b = to_bf16(bits(nan));
    CHECK(is_bf16_nan(b));  // even a payload only in the dropped half stays NaN
    CHECK((b & 0x0040u) != 0);  // quiet
    CHECK((b >> 15) == (nan >> 31));  // sign kept
  }
  CHECK(std::isnan(round_bf16(std::nanf(""))));
  // The largest finite bf16, (2 - 2^-7) 2^127 = 0x7f7f, and where rounding reaches inf.
  CHECK(to_bf16(bits(0x7f7f0000)) == 0x7f7f);
  CHECK(to_bf16(bits(0x7f7f7fff)) == 0x7f7f);  // below the midpoint to 2^128
  CHECK(to_bf16(bits(0x7f7f8000)) == 0x7f80);  // the tie: 0x7f7f is odd, so up, to inf
  CHECK(to_bf16(std::numeric_limits<float>::max()) == 0x7f80);
  CHECK(to_bf16(-std::numeric_limits<float>::max()) == 0xff80);
  CHECK(from_bf16(0x7f7f) == 0x1.fep127f);  // (2 - 2^-7) 2^127
}

TEST_CASE("to_bf16 rounds denormals like any other value instead of flushing them", "[bf16]") {
  CHECK(to_bf16(bits(0x00010000)) == 0x0001);  // the smallest bf16 denormal, 2^-133
  CHECK(to_bf16(bits(0x00000001)) == 0x0000);  // 2^-149 rounds to zero
  CHECK(to_bf16(bits(0x00008000)) == 0x0000);  // a tie with 0x0000 (even)
  CHECK(to_bf16(bits(0x00008001)) == 0x0001);
  CHECK(to_bf16(bits(0x00018000)) == 0x0002);  // a tie between 0x0001 and 0x0002 (even)
  CHECK(to_bf16(bits(0x80018000)) == 0x8002);
  CHECK(to_bf16(bits(0x007fffff)) == 0x0080);  // the largest fp32 denormal rounds up to the smallest normal
  CHECK(to_bf16(bits(0x00400000)) == 0x0040);  // 2^-127 is a bf16 denormal, kept exactly
  CHECK(from_bf16(0x0001) == std::ldexp(1.0f, -133));
}

TEST_CASE("to_bf16 agrees with a distance-comparing reference on random bit patterns", "[bf16]") {
  Generator gen(16);
  int64_t checked = 0;
  for (int i = 0; i < 1'000'000; ++i) {
    const uint32_t u = static_cast<uint32_t>(gen.next_u64());
    const float x = bits(u);
    if (std::isnan(x) || std::isinf(x)) continue;
    INFO("bits " << std::hex << u);
    REQUIRE(to_bf16(x) == reference_bf16(x));
    ++checked;
  }
  CHECK(checked > 990'000);
}
