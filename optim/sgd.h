// heed::optim: stochastic gradient descent with momentum, dampening, Nesterov momentum and L2
// weight decay (per group), step for step as torch.optim.SGD (maximize off):
//
//   g = grad + wd * p                                        (when wd != 0)
//   b = g at a parameter's first step,
//       else momentum * b + (1 - dampening) * g              (when momentum != 0)
//   g = g + momentum * b (Nesterov), else g = b              (when momentum != 0)
//   p = p - lr * g
#pragma once

#include "optim/optimizer.h"

namespace heed::optim {

class SGD : public Optimizer {
 public:
  /// torch.optim.SGD's arguments in its order: `SGD(groups, 0.1, 0.9, 0.0, 1e-4)` is
  /// `SGD(params, 0.1, 0.9, 0.0, 1e-4)`. `weight_decay` is for the groups that do not set their
  /// own. Throws heed::Error unless lr >= 0, momentum >= 0 and dampening are finite, weight decays
  /// >= 0, and, with nesterov, momentum > 0 and dampening == 0 (as torch.optim.SGD).
  SGD(std::vector<ParamGroup> groups, double lr, double momentum = 0.0, double dampening = 0.0,
      double weight_decay = 0.0, bool nesterov = false);
  /// heed's SGD before 2026-11-30 took nesterov fifth, where torch takes weight_decay: such a call
  /// would now read `true` as a weight decay of 1. It does not compile; pass (..., 0.0, true).
  SGD(std::vector<ParamGroup> groups, double lr, double momentum, double dampening, bool nesterov) = delete;
  double momentum() const { return momentum_; }
  double dampening() const { return dampening_; }
  bool nesterov() const { return nesterov_; }
  // State per parameter: the tensor "momentum_buffer" when momentum != 0 (none otherwise).

 protected:
  BlockUpdate prepare_update(const std::string& name, const Tensor& param, const Tensor& grad, ParamState& state,
                             const ParamGroup& group) override;

 private:
  double momentum_, dampening_;
  bool nesterov_;
};

}  // namespace heed::optim
