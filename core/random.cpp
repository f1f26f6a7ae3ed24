#include "core/random.h"

#include <cmath>
#include <numbers>

namespace heed {

static uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t derive_seed(uint64_t seed, uint64_t k) {
  uint64_t x = seed + 0x9E3779B97F4A7C15ull * k;  // k steps along, then the k-th output
  return splitmix64(x);
}

uint64_t derive_seed(uint64_t seed, std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a, 64 bits
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  return derive_seed(seed, h);
}

Generator& default_generator() {
  static Generator gen(kDefaultSeed);
  return gen;
}

void manual_seed(uint64_t seed) { default_generator().seed_(seed); }

uint64_t seed_or_draw(const std::optional<uint64_t>& seed) {
  return seed ? *seed : default_generator().next_u64();
}

void Generator::seed_(uint64_t seed) {
  for (auto& w : s_) w = splitmix64(seed);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t Generator::next_u64() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Generator::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

int64_t Generator::randint(int64_t n) {
  // Lemire's method would be faster; rejection keeps it obviously unbiased.
  const uint64_t un = static_cast<uint64_t>(n);
  const uint64_t limit = UINT64_MAX - UINT64_MAX % un;
  uint64_t r;
  do r = next_u64(); while (r >= limit);
  return static_cast<int64_t>(r % un);
}

double Generator::normal(double mean, double std) {
  // Box-Muller without caching the second value, so the state alone determines the stream.
  double u1 = uniform();
  while (u1 <= 0.0) u1 = uniform();
  const double u2 = uniform();
  return mean + std * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

}  // namespace heed
