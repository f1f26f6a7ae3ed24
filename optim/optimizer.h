// heed::optim: the optimizer base. An optimizer updates named parameters, split into groups that
// may differ in weight decay (nanoGPT decays matrices and embeddings, not biases and norms) and in
// learning rate (a fine-tuned model's new head faster than its body, torch's per-group 'lr'):
//
//   optim::AdamW opt(optim::param_groups_nanogpt(model.named_parameters(), 0.1), 6e-4, 0.9, 0.99);
//   for (...) { opt.set_lr(optim::cosine_lr(it, ...)); loss.backward(); opt.step(); opt.zero_grad(); }
//
// Per-parameter state is kept by parameter name, as named entries: tensors of the parameter's
// shape (Adam's "exp_avg" and "exp_avg_sq", SGD's "momentum_buffer") and scalars (Adam's "step").
// A checkpoint is one walk over names: state_tensors() gives ("<param>.<entry>", tensor) pairs,
// state_scalars() ("<param>.<entry>", value) pairs, step_count() the number of step() calls, and
// load_state() puts them back, checking every entry. Updates run outside autograd, in place on the
// parameters' storage, every parameter's elements in one parallel job.
//
// A new optimizer declares its entries and implements prepare_update (see optim/sgd.cpp, about
// 60 lines, for a complete one).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace heed::optim {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using NamedScalars = std::vector<std::pair<std::string, double>>;

/// Parameters sharing one weight decay and one learning rate (PyTorch's param_groups entries).
struct ParamGroup {
  NamedTensors params;
  /// Unset: the optimizer's own weight_decay argument, whose defaults are torch.optim's (0 for
  /// Adam and SGD, 0.01 for AdamW). The optimizer's param_groups() hold the value each group uses.
  std::optional<double> weight_decay = std::nullopt;
  /// Unset: the optimizer's lr argument, as torch's groups without an 'lr'. Likewise filled in
  /// param_groups(); set_lr changes it.
  std::optional<double> lr = std::nullopt;
};

/// nanoGPT's configure_optimizers split: weight_decay on every parameter with dim() >= 2
/// (matrices and embeddings), none on the rest (biases, norm gains). Always two groups, in that order.
std::vector<ParamGroup> param_groups_nanogpt(const NamedTensors& named_params, double weight_decay);

/// One parameter's optimizer state: its named entries, empty until its first step (or a
/// load_state). Tensor entries have the parameter's shape and dtype.
struct ParamState {
  NamedTensors tensors;
  NamedScalars scalars;
  bool empty() const { return tensors.empty() && scalars.empty(); }
  /// The entry called `name`; throws heed::Error if there is none.
  Tensor& tensor(std::string_view name);
  double& scalar(std::string_view name);
};

/// Base of heed's optimizers: the parameters, the learning rate, the per-parameter state, the
/// checks and the parallel loop of a step, and the state's save and load.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// One update of every parameter that has a gradient (parameters without one are skipped).
  /// Checks every gradient first (shape and dtype as the parameter's, contiguous, state of the
  /// parameter's dtype) and throws heed::Error naming the parameter, changing nothing, if one is bad.
  void step();
  /// Drops every parameter's gradient.
  void zero_grad();

  /// Sets the learning rate of every group (schedules call this before each step), as torch's
  /// `for g in opt.param_groups: g['lr'] = lr`; must be >= 0.
  void set_lr(double lr);
  /// Sets group `group`'s learning rate only (`opt.param_groups[group]['lr'] = lr`).
  void set_lr(size_t group, double lr);
  /// Group `group`'s learning rate (the first group's by default: every group's, unless one was
  /// given its own or set on its own).
  double lr(size_t group = 0) const;
  const std::vector<ParamGroup>& param_groups() const { return groups_; }

  /// Number of step() calls so far (restored by load_state).
  int64_t step_count() const { return step_count_; }
  /// The tensor entries of every parameter that has state, ("<param>.<entry>", tensor), in
  /// parameter order and then the optimizer's entry order. The live state, not copies.
  NamedTensors state_tensors() const;
  /// The scalar entries likewise, ("<param>.<entry>", value).
  NamedScalars state_scalars() const;
  /// Restores what state_tensors(), step_count() and state_scalars() gave. Each parameter needs
  /// all of its tensor entries or none (no state yet). A scalar entry left out of `scalars` takes
  /// `step_count` (checkpoints written before scalars were saved hold only that count, which is
  /// every parameter's step in a run where each had a gradient at every step). Throws heed::Error,
  /// naming the entry, on a missing entry, an unknown name, a duplicate, or a tensor whose shape
  /// differs from its parameter's; nothing is changed when it throws.
  void load_state(const NamedTensors& tensors, int64_t step_count, const NamedScalars& scalars = {});

 protected:
  /// `name` names the optimizer in errors; `tensor_entries` and `scalar_entries` are the names of
  /// the per-parameter state, in the order state_tensors() and state_scalars() list them. Throws
  /// heed::Error on an undefined tensor, a name or tensor listed twice, a negative weight decay
  /// or a negative learning rate.
  /// A group without a weight_decay takes `weight_decay`, one without an lr `lr`.
  Optimizer(const char* name, std::vector<ParamGroup> groups, double lr, double weight_decay,
            std::vector<std::string> tensor_entries, std::vector<std::string> scalar_entries = {});

  /// What step() runs on the elements [begin, end) of one parameter, on fixed blocks and from
  /// several threads at once (blocks never overlap).
  using BlockUpdate = std::function<void(int64_t begin, int64_t end)>;
  /// One parameter's update for this step, prepared before any element of any parameter
  /// changes: create `state` if empty (with every declared entry), advance its counters, compute
  /// the coefficients, and return the element loop. `grad` has been checked. `group` is the
  /// parameter's group, its `lr` and `weight_decay` set.
  virtual BlockUpdate prepare_update(const std::string& name, const Tensor& param, const Tensor& grad,
                                     ParamState& state, const ParamGroup& group) = 0;

  const char* name_;

 private:
  std::vector<ParamGroup> groups_;
  std::vector<std::vector<ParamState>> state_;  // state_[g][i] belongs to groups_[g].params[i]
  std::vector<std::string> tensor_entries_, scalar_entries_;
  int64_t step_count_ = 0;
};

}  // namespace heed::optim
