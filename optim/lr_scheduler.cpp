#include "optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <utility>

#include "core/check.h"
#include "optim/optimizer.h"

namespace heed::optim {

LRScheduler::LRScheduler(Optimizer& optimizer, Rule rule) : optimizer_(&optimizer), rule_(std::move(rule)) {
  HEED_CHECK(rule_ != nullptr, "LRScheduler: the rule is empty");
  for (size_t g = 0; g < optimizer.param_groups().size(); ++g) base_lrs_.push_back(optimizer.lr(g));
  set_epoch(0);
}

void LRScheduler::step() {
  HEED_CHECK(epoch_ < std::numeric_limits<int64_t>::max(), "LRScheduler: step past epoch ", epoch_,
             ", the last an int64 counts");
  set_epoch(epoch_ + 1);
}

void LRScheduler::set_epoch(int64_t epoch) {
  HEED_CHECK(epoch >= 0, "LRScheduler: epoch ", epoch, " is negative");
  // Every rate first, then set: a rule that fails (or a negative rate, which set_lr refuses)
  // leaves the optimizer as it was.
  std::vector<double> rates;
  for (double base : base_lrs_) {
    const double lr = rule_(epoch, base);
    HEED_CHECK(std::isfinite(lr) && lr >= 0, "LRScheduler: the rule gives the learning rate ", lr, " at epoch ", epoch,
               " (base ", base, ")");
    rates.push_back(lr);
  }
  for (size_t g = 0; g < rates.size(); ++g) optimizer_->set_lr(g, rates[g]);
  epoch_ = epoch;
}

std::vector<double> LRScheduler::last_lr() const {
  std::vector<double> out;
  for (size_t g = 0; g < base_lrs_.size(); ++g) out.push_back(optimizer_->lr(g));
  return out;
}

// A factor that multiplies the base rate: finite and >= 0, or the rates it makes could not be.
static void check_factor(const char* scheduler, const char* name, double v) {
  HEED_CHECK(std::isfinite(v) && v >= 0, scheduler, ": ", name, " must be finite and >= 0, got ", v);
}

LRScheduler StepLR(Optimizer& optimizer, int64_t step_size, double gamma) {
  HEED_CHECK(step_size > 0, "StepLR: step_size must be positive, got ", step_size);
  check_factor("StepLR", "gamma", gamma);
  return LRScheduler(optimizer, [step_size, gamma](int64_t epoch, double base) {
    return base * std::pow(gamma, static_cast<double>(epoch / step_size));
  });
}

LRScheduler MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma) {
  check_factor("MultiStepLR", "gamma", gamma);
  std::sort(milestones.begin(), milestones.end());  // torch keeps them as a Counter: order is free
  return LRScheduler(optimizer, [milestones = std::move(milestones), gamma](int64_t epoch, double base) {
    const auto passed = std::upper_bound(milestones.begin(), milestones.end(), epoch) - milestones.begin();
    return base * std::pow(gamma, static_cast<double>(passed));
  });
}

LRScheduler ExponentialLR(Optimizer& optimizer, double gamma) {
  check_factor("ExponentialLR", "gamma", gamma);
  return LRScheduler(optimizer, [gamma](int64_t epoch, double base) {
    return base * std::pow(gamma, static_cast<double>(epoch));
  });
}

LRScheduler CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min) {
  HEED_CHECK(T_max > 0, "CosineAnnealingLR: T_max must be positive, got ", T_max);
  check_factor("CosineAnnealingLR", "eta_min", eta_min);
  return LRScheduler(optimizer, [T_max, eta_min](int64_t epoch, double base) {
    const double phase = std::numbers::pi * static_cast<double>(epoch) / static_cast<double>(T_max);
    return eta_min + (base - eta_min) * (1 + std::cos(phase)) / 2;
  });
}

LRScheduler LinearLR(Optimizer& optimizer, double start_factor, double end_factor, int64_t total_iters) {
  HEED_CHECK(start_factor > 0 && start_factor <= 1, "LinearLR: start_factor must be in (0, 1], got ", start_factor);
  HEED_CHECK(end_factor >= 0 && end_factor <= 1, "LinearLR: end_factor must be in [0, 1], got ", end_factor);
  HEED_CHECK(total_iters > 0, "LinearLR: total_iters must be positive, got ", total_iters);
  return LRScheduler(optimizer, [start_factor, end_factor, total_iters](int64_t epoch, double base) {
    const double done = static_cast<double>(std::min(epoch, total_iters)) / static_cast<double>(total_iters);
    return base * (start_factor + (end_factor - start_factor) * done);
  });
}

LRScheduler LambdaLR(Optimizer& optimizer, std::function<double(int64_t)> factor) {
  HEED_CHECK(factor != nullptr, "LambdaLR: the factor function is empty");
  return LRScheduler(optimizer, [factor = std::move(factor)](int64_t epoch, double base) { return base * factor(epoch); });
}

}  // namespace heed::optim
