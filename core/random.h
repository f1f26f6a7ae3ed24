// heed: a small, seedable random generator whose whole state is four integers, so a training
// run can save it and resume bit-for-bit (xoshiro256**, seeded through splitmix64), and the
// process-wide default generator that layers and factories draw from when given none
// (torch.manual_seed's generator):
//
//   heed::manual_seed(42);
//   nn::Linear a(4, 4), b(4, 4);      // different weights, the same ones on every run
//   Generator gen(7);
//   nn::Linear c(4, 4, true, &gen);   // an explicit generator: independent of the default one
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

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

/// The seed the default generator starts from, before any manual_seed.
inline constexpr uint64_t kDefaultSeed = 0x68656564;  // "heed"

/// The process-wide default generator: what Tensor::randn/rand, nn::init and the layers draw from
/// when no generator is given. It starts at kDefaultSeed, so a program is reproducible run to run
/// without a manual_seed. Like any Generator it is not synchronised: draw from one thread at a time.
Generator& default_generator();

/// Reseeds the default generator (torch.manual_seed).
void manual_seed(uint64_t seed);

/// `seed` if given, else a fresh seed drawn from the default generator: how a model with an
/// optional seed (GPT, EncoderDecoder, MultiHeadAttention...) picks its root seed.
uint64_t seed_or_draw(const std::optional<uint64_t>& seed);

/// Output k (from 0) of the splitmix64 stream that starts at `seed`: distinct, reproducible seeds
/// derived from one.
uint64_t derive_seed(uint64_t seed, uint64_t k);

/// derive_seed(seed, FNV-1a 64 of `name`): the seed of the parameter or module at dotted path
/// `name` in a model whose root seed is `seed` (nn::init::by_name).
uint64_t derive_seed(uint64_t seed, std::string_view name);

}  // namespace heed
