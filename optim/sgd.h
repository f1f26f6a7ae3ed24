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
  /// Throws heed::Error unless lr >= 0, momentum >= 0 and dampening are finite, and, with
  /// nesterov, momentum > 0 and dampening == 0 (as torch.optim.SGD).
  SGD(std::vector<ParamGroup> groups, double lr, double momentum = 0.0, double dampening = 0.0,
      bool nesterov = false);
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
