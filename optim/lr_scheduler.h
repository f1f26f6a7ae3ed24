// heed::optim: learning-rate schedulers as torch.optim.lr_scheduler's objects, for a loop ported
// from PyTorch (optim/schedule.h has the same idea as plain functions of the iteration):
//
//   optim::AdamW opt(groups, 1e-3);
//   auto sched = optim::CosineAnnealingLR(opt, 100, 1e-5);  // sets epoch 0's rates now, as torch's
//   for (...) { ...; opt.step(); sched.step(); }
//
// A scheduler takes each group's learning rate when it is made as that group's base rate and, at
// every step(), sets the group's rate to rule(epoch, base). The rules are torch's closed forms
// (its `_get_closed_form_lr`): torch's own step() updates the rates recursively, so its values
// drift from these by rounding (5e-16 after 20 cosine steps) and agree with them to 1e-12.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace heed::optim {

class Optimizer;

class LRScheduler {
 public:
  /// A group's rate at `epoch` (0 at construction, +1 a step), from its base rate.
  using Rule = std::function<double(int64_t epoch, double base_lr)>;
  /// Takes each group's current rate as its base and sets epoch 0's rates. The optimizer must
  /// outlive the scheduler.
  LRScheduler(Optimizer& optimizer, Rule rule);

  /// The next epoch's rates, set on the optimizer (call after optimizer.step(), as torch's).
  void step();
  /// The epoch whose rates are set: 0 after construction, +1 a step (torch's last_epoch).
  int64_t last_epoch() const { return epoch_; }
  /// Sets `epoch`'s rates, as resuming a run at that epoch does (torch's load_state_dict of a
  /// scheduler whose last_epoch was `epoch`).
  void set_epoch(int64_t epoch);
  /// Each group's rate as last set (torch's get_last_lr()).
  std::vector<double> last_lr() const;
  const std::vector<double>& base_lrs() const { return base_lrs_; }

 private:
  Optimizer* optimizer_;
  Rule rule_;
  std::vector<double> base_lrs_;
  int64_t epoch_ = 0;
};

/// base * gamma^(epoch / step_size) (torch.optim.lr_scheduler.StepLR); step_size > 0.
LRScheduler StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);
/// base * gamma^(the milestones <= epoch, counted with repeats) (MultiStepLR).
LRScheduler MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma = 0.1);
/// base * gamma^epoch (ExponentialLR).
LRScheduler ExponentialLR(Optimizer& optimizer, double gamma);
/// eta_min + (base - eta_min) (1 + cos(pi epoch / T_max)) / 2 (CosineAnnealingLR; past T_max the
/// cosine goes on, back up to base at 2 T_max, as torch's); T_max > 0.
LRScheduler CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0.0);
/// base * (start + (end - start) min(epoch, total_iters) / total_iters) (LinearLR): 0 < start <= 1,
/// 0 <= end <= 1, total_iters > 0.
LRScheduler LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3.0, double end_factor = 1.0,
                     int64_t total_iters = 5);
/// base * factor(epoch) (LambdaLR).
LRScheduler LambdaLR(Optimizer& optimizer, std::function<double(int64_t epoch)> factor);

}  // namespace heed::optim
