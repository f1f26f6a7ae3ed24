// The generator's helpers: the default generator behind heed::manual_seed, the factories that
// draw from it, and seeds derived from names.
#include <catch2/catch.hpp>

#include "core/heed.h"

using namespace heed;

TEST_CASE("manual_seed makes the default generator and the factories that use it reproducible", "[random]") {
  manual_seed(21);
  const auto a = Tensor::randn({3, 4}).to_vector<float>();
  const auto b = Tensor::rand({5}, -1.0, 1.0).to_vector<float>();
  REQUIRE(Tensor::randn({3, 4}).to_vector<float>() != a);  // the stream moved on
  manual_seed(21);
  REQUIRE(Tensor::randn({3, 4}).to_vector<float>() == a);
  REQUIRE(Tensor::rand({5}, -1.0, 1.0).to_vector<float>() == b);
  for (float v : b) REQUIRE((v >= -1.0f && v < 1.0f));
  // The default generator is an ordinary Generator seeded with the given seed.
  Generator same(21);
  REQUIRE(Tensor::randn({3, 4}, same).to_vector<float>() == a);
  // An explicit generator neither reads nor moves the default one.
  manual_seed(22);
  const uint64_t next = Generator(22).next_u64();
  Generator other(5);
  Tensor::randn({100}, other);
  REQUIRE(default_generator().next_u64() == next);
}

TEST_CASE("seed_or_draw takes the seed given, else draws one from the default generator", "[random]") {
  REQUIRE(seed_or_draw(std::optional<uint64_t>(17)) == 17);
  manual_seed(3);
  const uint64_t expected = Generator(3).next_u64();
  REQUIRE(seed_or_draw(std::nullopt) == expected);
}

TEST_CASE("derive_seed of a name is derive_seed of its 64-bit FNV-1a hash", "[random]") {
  // FNV-1a 64 of "" is the offset basis; of "a", 0xaf63dc4c8601ec8c (the published test vectors).
  REQUIRE(derive_seed(9, "") == derive_seed(9, uint64_t{0xcbf29ce484222325ull}));
  REQUIRE(derive_seed(9, "a") == derive_seed(9, uint64_t{0xaf63dc4c8601ec8cull}));
  REQUIRE(derive_seed(9, "h.0.attn.c_attn.weight") != derive_seed(9, "h.1.attn.c_attn.weight"));
  REQUIRE(derive_seed(9, "h.0.attn.c_attn.weight") != derive_seed(10, "h.0.attn.c_attn.weight"));
}
