// heed::nn: inverted dropout as a module; active only in training mode.
#pragma once

#include <cstdint>
#include <optional>

#include "core/random.h"
#include "core/tensor.h"
#include "nn/module.h"

namespace heed::nn {

class Dropout : public Module {
 public:
  /// Drops with probability p in [0, 1) (else heed::Error); masks come from its own Generator,
  /// seeded with `seed`, or with a seed drawn from the default generator when none is given.
  explicit Dropout(double p, std::optional<uint64_t> seed = std::nullopt);

  /// Identity in eval mode or when p == 0; else heed::dropout(x, p, generator()).
  Tensor forward(const Tensor& x);

  double p() const { return p_; }
  /// Whether forward() changes anything: training mode with p > 0.
  bool active() const { return is_training() && p_ > 0.0; }
  /// Reseeds the mask generator (so a run can be reproduced).
  void seed(uint64_t s) { gen_.seed_(s); }
  void reseed(uint64_t s) override { seed(s); }
  /// The mask generator (its state is saved with checkpoints to resume bit-for-bit).
  Generator& generator() { return gen_; }

 private:
  double p_;
  Generator gen_;
};

}  // namespace heed::nn
