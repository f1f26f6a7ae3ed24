// heed: a small, seedable random generator whose whole state is four integers, so a training
// run can save it and resume bit-for-bit (xoshiro256**, seeded through splitmix64).
#pragma once

#include <array>
#include <cstdint>

namespace heed {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) { seed_(seed); }
  void seed_(uint64_t seed);
  uint64_t next_u64();
  double uniform();                           ///< [0, 1), 53 random bits
  int64_t randint(int64_t n);                 ///< uniform in [0, n), unbiased
  double normal(double mean = 0.0, double std = 1.0);  ///< Box-Muller

  using State = std::array<uint64_t, 4>;
  State state() const { return s_; }
  void set_state(const State& s) { s_ = s; }

 private:
  State s_{};
};

/// Output k (from 0) of the splitmix64 stream that starts at `seed`: distinct, reproducible
/// seeds for a module's sub-generators (its weight init, each of its dropouts) from one seed.
uint64_t derive_seed(uint64_t seed, uint64_t k);

}  // namespace heed
