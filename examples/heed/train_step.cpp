#include "train_step.h"

#include <cmath>

#include "nn/gpt_checkpoint.h"
#include "optim/clip.h"
#include "optim/schedule.h"
#include "profile.h"
#include "profile.h"

namespace heed::cli {

double LrSchedule::at(int64_t iter) const { return optim::cosine_lr(iter, lr, min_lr, warmup_iters, decay_iters); }

TrainingStep::TrainingStep(nn::Module& model, optim::Optimizer& optimizer, LrSchedule schedule, double grad_clip)
    : model_(model), optimizer_(optimizer), schedule_(schedule), grad_clip_(grad_clip), params_(model.parameters()) {}

double TrainingStep::run(int64_t iter, const std::function<void()>& draw_batch, const std::function<Tensor()>& loss_fn) {
  optimizer_.set_lr(schedule_.at(iter));
  draw_batch();
  if (profiler_) profiler_->begin_step();
  struct EndStep {  // on every exit, a diverged step's throw included: no timer left installed
    Profiler* p;
    ~EndStep() {
      if (p) p->end_step();
    }
  } end_step{profiler_};
  Tensor loss = loss_fn();
  const double value = loss.item();
  if (!std::isfinite(value)) detail::fail("training diverged: the loss is ", value, " at iteration ", iter);
  loss.backward();
  loss = Tensor();
  double t0 = now_s();
  const double norm = optim::clip_grad_norm(params_, grad_clip_ > 0 ? grad_clip_ : INFINITY);
  if (profiler_) profiler_->add("clip_grad_norm", "step", now_s() - t0);
  if (!std::isfinite(norm)) detail::fail("training diverged: the gradient norm is ", norm, " at iteration ", iter);
  t0 = now_s();
  optimizer_.step();
  model_.zero_grad();
  if (profiler_) profiler_->add("adamw", "step", now_s() - t0);
  return value;
}

void TrainingStep::require_finite_weights(int64_t iter) const {
  for (auto& [name, t] : model_.named_parameters())
    if (const int64_t i = nn::first_non_finite(t); i >= 0)
      detail::fail("training diverged: parameter '", name, "' is ", t.to(DType::f32).contiguous().data<float>()[i],
                   " (element ", i, ") at iteration ", iter, "; not saved");
}

}  // namespace heed::cli
