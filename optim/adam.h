// heed::optim: Adam and AdamW, step for step as torch.optim.Adam / torch.optim.AdamW (amsgrad
// off, maximize off). Each parameter is updated in one fused pass over its elements (moments,
// bias-corrected step, weight decay), float32 or float64.
//
//   AdamW (decoupled):  p -= lr*wd*p;            m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g*g
//   Adam  (L2):         g += wd*p;               (same moments)
//   both:               p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
#pragma once

#include "optim/optimizer.h"

namespace heed::optim {

/// Adam with L2 weight decay added to the gradient (torch.optim.Adam's weight_decay).
class Adam : public Optimizer {
 public:
  /// Throws heed::Error unless lr >= 0, 0 <= beta1, beta2 < 1, eps >= 0 and every weight decay
  /// is >= 0. `weight_decay` is for the groups that do not set their own.
  Adam(std::vector<ParamGroup> groups, double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999,
       double eps = 1e-8, double weight_decay = 0.0);
  double beta1() const { return beta1_; }
  double beta2() const { return beta2_; }
  double eps() const { return eps_; }

  // State per parameter: tensors "exp_avg", "exp_avg_sq" (the moments) and the scalar "step"
  // (its own step count, for the bias corrections), as torch.optim.Adam's state.

 protected:
  Adam(std::vector<ParamGroup> groups, double lr, double beta1, double beta2, double eps, double weight_decay,
       bool decoupled);
  BlockUpdate prepare_update(const std::string& name, const Tensor& param, const Tensor& grad, ParamState& state,
                             const ParamGroup& group) override;

 private:
  double beta1_, beta2_, eps_;
  bool decoupled_;  // AdamW: decay the weights, not the gradient
};

/// AdamW: decoupled weight decay, p -= lr*wd*p before the Adam update (torch.optim.AdamW).
class AdamW : public Adam {
 public:
  /// As Adam's; `weight_decay` (for the groups that do not set their own) defaults to 0.01, as
  /// torch.optim.AdamW's.
  AdamW(std::vector<ParamGroup> groups, double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999,
        double eps = 1e-8, double weight_decay = 1e-2)
      : Adam(std::move(groups), lr, beta1, beta2, eps, weight_decay, true) {}
};

}  // namespace heed::optim
