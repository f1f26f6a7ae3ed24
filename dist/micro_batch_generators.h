// heed::dist: random streams (dropout masks) that belong to a micro-batch, not to the process
// that happens to compute it.
//
// A dropout layer's generator moves on with every mask it draws. One process running
// micro-batches 0..A-1 in turn would give micro-batch i the stream that micro-batch i-1 left;
// rank r of N, running only its own micro-batches, would give it another, and the model would
// depend on N. So, within a step, each generator is reseeded for micro-batch i from (its state at
// the step's start, i), and after the step every rank moves it to the same next state.
// A plain run (A = 1 on one process) keeps the single stream it always had: nothing is reseeded.
#pragma once

#include <cstdint>
#include <vector>

#include "core/random.h"

namespace heed::dist {

class MicroBatchGenerators {
 public:
  /// The model's generators (e.g. every Dropout's), A micro-batches per step shared by
  /// `processes` processes.
  MicroBatchGenerators(std::vector<Generator*> generators, int64_t micro_batches, int processes);
  /// Before micro-batch i (0 <= i < A) of the current step, on the rank that computes it.
  void begin_micro_batch(int64_t i);
  /// After the step, on every rank: moves each generator to the state the next step starts from
  /// (the same on every rank, whichever micro-batches it ran). This is the state a checkpoint saves.
  void end_step();

 private:
  std::vector<Generator*> generators_;
  int64_t micro_batches_;
  bool reseed_;
  bool in_step_ = false;
  std::vector<uint64_t> step_seed_;  // per generator: a digest of its state at the step's start
};

}  // namespace heed::dist
