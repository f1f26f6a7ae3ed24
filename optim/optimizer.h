// heed::optim: the optimizer base. An optimizer updates named parameters, split into groups that
// differ in weight decay (nanoGPT decays matrices and embeddings, not biases and norms):
//
//   optim::AdamW opt(optim::param_groups_nanogpt(model.named_parameters(), 0.1), 6e-4, 0.9, 0.99);
//   for (...) { opt.set_lr(optim::cosine_lr(it, ...)); loss.backward(); opt.step(); opt.zero_grad(); }
//
// Per-parameter state (Adam's step count and moments) is kept by parameter name, so a checkpoint
// is one walk over names: state_tensors() gives "<name>.exp_avg" / "<name>.exp_avg_sq" pairs,
// step_count() the number of steps, and load_state() puts them back, checking every entry.
// Updates run outside autograd, in place on the parameters' storage.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace heed::optim {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

/// Parameters sharing one weight decay (PyTorch's param_groups entries).
struct ParamGroup {
  NamedTensors params;
  double weight_decay = 0.0;
};

/// nanoGPT's configure_optimizers split: weight_decay on every parameter with dim() >= 2
/// (matrices and embeddings), none on the rest (biases, norm gains). Always two groups, in that order.
std::vector<ParamGroup> param_groups_nanogpt(const NamedTensors& named_params, double weight_decay);

/// Base of heed's optimizers: the parameters, the learning rate and the per-parameter state.
class Optimizer {
 public:
  /// Throws heed::Error on an undefined tensor, a name or tensor listed twice, a negative weight
  /// decay or a negative learning rate.
  Optimizer(std::vector<ParamGroup> groups, double lr);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// One update of every parameter that has a gradient (parameters without one are skipped).
  virtual void step() = 0;
  /// Drops every parameter's gradient.
  void zero_grad();

  /// Sets the learning rate of every group (schedules call this before each step); must be >= 0.
  void set_lr(double lr);
  double lr() const { return lr_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }

  /// Number of step() calls so far (restored by load_state).
  int64_t step_count() const { return step_count_; }
  /// The moments of every parameter that has taken a step: ("<name>.exp_avg", m) and
  /// ("<name>.exp_avg_sq", v), in parameter order. The tensors are the live state (not copies).
  NamedTensors state_tensors() const;
  /// Restores what state_tensors() and step_count() gave. Each parameter needs both of its entries
  /// or neither (no state yet); every parameter with state gets `step_count` as its own step.
  /// Throws heed::Error, naming the entry, on a missing partner, an unknown name, a duplicate or a
  /// shape that differs from the parameter's; nothing is changed when it throws.
  void load_state(const NamedTensors& state, int64_t step_count);

 protected:
  /// What Adam-style optimizers keep per parameter (torch.optim.Adam's state entries).
  struct ParamState {
    int64_t step = 0;  // steps this parameter took (bias correction)
    Tensor exp_avg;    // undefined until the first step with a gradient
    Tensor exp_avg_sq;
  };
  /// state_[g][i] belongs to groups_[g].params[i].
  std::vector<std::vector<ParamState>> state_;
  std::vector<ParamGroup> groups_;
  double lr_;
  int64_t step_count_ = 0;
};

}  // namespace heed::optim
