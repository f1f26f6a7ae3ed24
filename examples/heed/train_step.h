// The training step both trainers run, GPT (`heed train`, `heed bench`) and encoder-decoder
// (`heed seq2seq`): the scheduled learning rate, the forward pass, a refusal of a non-finite loss,
// backward, global-norm gradient clipping, a refusal of a non-finite gradient norm, the optimizer
// step; and, before any checkpoint is written, a refusal of non-finite weights (a diverged model
// never replaces a good checkpoint).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/tensor.h"
#include "nn/module.h"
#include "optim/optimizer.h"

namespace heed::cli {

class Profiler;

/// nanoGPT's get_lr: linear warm-up to `lr`, cosine decay to `min_lr` at `decay_iters`, then flat.
struct LrSchedule {
  double lr = 1e-3, min_lr = 1e-4;
  int64_t warmup_iters = 0, decay_iters = 1;
  double at(int64_t iter) const;
};

class TrainingStep {
 public:
  /// `grad_clip` 0 turns clipping off (the norm is still computed, to catch a non-finite one).
  TrainingStep(nn::Module& model, optim::Optimizer& optimizer, LrSchedule schedule, double grad_clip);

  /// Step `iter`: sets the learning rate, calls `draw_batch`, then `loss` (the forward pass of that
  /// batch), backward, clips and steps. Returns the loss. Throws heed::Error "training diverged:
  /// the loss is nan at iteration 7" (or the gradient norm), before the optimizer changes anything.
  double run(int64_t iter, const std::function<void()>& draw_batch, const std::function<Tensor()>& loss);

  /// Throws heed::Error "training diverged: parameter 'x' is nan (element 3) at iteration 7; not
  /// saved" if a weight is not finite: what every trainer calls before writing a checkpoint.
  void require_finite_weights(int64_t iter) const;

  const LrSchedule& schedule() const { return schedule_; }
  void set_profiler(Profiler* p) { profiler_ = p; }

 private:
  nn::Module& model_;
  optim::Optimizer& optimizer_;
  LrSchedule schedule_;
  double grad_clip_;
  std::vector<Tensor> params_;
  Profiler* profiler_ = nullptr;
};

}  // namespace heed::cli
