#include "optim/optimizer.h"

#include <cmath>
#include <map>
#include <set>
#include <unordered_set>

#include "core/check.h"
#include "core/parallel.h"

namespace heed::optim {

std::vector<ParamGroup> param_groups_nanogpt(const NamedTensors& named_params, double weight_decay) {
  std::vector<ParamGroup> groups(2);
  groups[0].weight_decay = weight_decay;
  groups[1].weight_decay = 0.0;
  for (const auto& [name, t] : named_params) {
    HEED_CHECK(t.defined(), "param_groups_nanogpt: parameter '", name, "' is an undefined tensor");
    groups[t.dim() >= 2 ? 0 : 1].params.emplace_back(name, t);
  }
  return groups;
}

template <class Entries>
static auto& entry(Entries& entries, std::string_view name) {
  for (auto& [n, v] : entries)
    if (n == name) return v;
  detail::fail("optimizer state: no entry '", name, "'");
}

Tensor& ParamState::tensor(std::string_view name) { return entry(tensors, name); }
double& ParamState::scalar(std::string_view name) { return entry(scalars, name); }

// A learning rate or a weight decay: finite and >= 0, wherever one is set. `where` names the group.
static void check_rate(const char* optimizer, const char* what, double v, const std::string& where = "") {
  HEED_CHECK(std::isfinite(v) && v >= 0, optimizer, ": invalid ", what, " ", v, where);
}

Optimizer::Optimizer(const char* name, std::vector<ParamGroup> groups, double lr, double weight_decay,
                     std::vector<std::string> tensor_entries, std::vector<std::string> scalar_entries)
    : name_(name), groups_(std::move(groups)), tensor_entries_(std::move(tensor_entries)),
      scalar_entries_(std::move(scalar_entries)) {
  check_rate(name_, "learning rate", lr);
  check_rate(name_, "weight_decay", weight_decay);
  std::set<std::string> names;
  std::unordered_set<const TensorImpl*> impls;
  for (size_t g = 0; g < groups_.size(); ++g) {
    if (!groups_[g].weight_decay) groups_[g].weight_decay = weight_decay;
    check_rate(name_, "weight_decay", *groups_[g].weight_decay, " in group " + std::to_string(g));
    if (!groups_[g].lr) groups_[g].lr = lr;
    check_rate(name_, "learning rate", *groups_[g].lr, " in group " + std::to_string(g));
    for (const auto& [pname, t] : groups_[g].params) {
      HEED_CHECK(t.defined(), name_, ": parameter '", pname, "' is an undefined tensor");
      HEED_CHECK(names.insert(pname).second, name_, ": parameter name '", pname, "' is listed twice");
      // A tensor stepped twice per step() (e.g. a tied weight under both names) would be
      // updated twice with one gradient.
      HEED_CHECK(impls.insert(t.impl_ptr().get()).second, name_, ": parameter '", pname,
                 "' is a tensor already listed under another name");
    }
    state_.emplace_back(groups_[g].params.size());
  }
}

void Optimizer::set_lr(double lr) {
  check_rate(name_, "learning rate", lr);
  for (auto& group : groups_) group.lr = lr;
}

void Optimizer::set_lr(size_t group, double lr) {
  HEED_CHECK(group < groups_.size(), name_, ": no group ", group, " (", groups_.size(), " groups)");
  check_rate(name_, "learning rate", lr, " for group " + std::to_string(group));
  groups_[group].lr = lr;
}

double Optimizer::lr(size_t group) const {
  HEED_CHECK(group < groups_.size(), name_, ": no group ", group, " (", groups_.size(), " groups)");
  return *groups_[group].lr;
}

void Optimizer::zero_grad() {
  for (auto& group : groups_)
    for (auto& [name, t] : group.params) t.zero_grad();
}

void Optimizer::step() {
  // Check everything before touching anything, so a bad gradient leaves the model as it was.
  for (size_t g = 0; g < groups_.size(); ++g)
    for (size_t i = 0; i < groups_[g].params.size(); ++i) {
      const auto& [name, p] = groups_[g].params[i];
      const Tensor grad = p.grad();
      if (!grad.defined()) continue;
      HEED_CHECK(grad.shape() == p.shape() && grad.dtype() == p.dtype(), name_, ": gradient of '", name, "' is ",
                 dtype_name(grad.dtype()), " ", to_string(grad.shape()), ", the parameter ", dtype_name(p.dtype()),
                 " ", to_string(p.shape()));
      HEED_CHECK(p.is_contiguous() && grad.is_contiguous(), name_, ": parameter '", name,
                 "' or its gradient is not contiguous");
      for (const auto& [entry_name, t] : state_[g][i].tensors)
        HEED_CHECK(t.dtype() == p.dtype(), name_, ": parameter '", name, "' is ", dtype_name(p.dtype()),
                   " but its state '", entry_name, "' is ", dtype_name(t.dtype()),
                   " (converted after the optimizer was made?)");
    }

  ++step_count_;
  // Every parameter's update in one job over fixed blocks: a model's parameters are mostly too
  // small to split one at a time. Each element takes the same (vector or tail) path on any
  // thread count, so the result does not depend on it.
  std::vector<BlockUpdate> updates;
  std::vector<int64_t> lengths;
  for (size_t g = 0; g < groups_.size(); ++g)
    for (size_t i = 0; i < groups_[g].params.size(); ++i) {
      const auto& [name, p] = groups_[g].params[i];
      const Tensor grad = p.grad();
      if (!grad.defined()) continue;
      updates.push_back(prepare_update(name, p, grad, state_[g][i], groups_[g]));
      lengths.push_back(p.numel());
      // An update is an in-place write: a graph still holding the old values (retain_graph) must
      // not be run backward on the new ones.
      p.increment_version();
    }
  parallel_for_blocks(lengths, 8192, int64_t(1) << 15,
                      [&](size_t u, int64_t begin, int64_t end) { updates[u](begin, end); });
}

// ("<param>.<entry>", value) for every entry of one kind (ParamState::tensors or ::scalars) of
// every parameter, in parameter order.
template <class Named>
static Named prefixed_entries(const std::vector<ParamGroup>& groups, const std::vector<std::vector<ParamState>>& state,
                              Named ParamState::*kind) {
  Named out;
  for (size_t g = 0; g < groups.size(); ++g)
    for (size_t i = 0; i < groups[g].params.size(); ++i)
      for (const auto& [entry_name, v] : state[g][i].*kind) out.emplace_back(groups[g].params[i].first + "." + entry_name, v);
  return out;
}

NamedTensors Optimizer::state_tensors() const { return prefixed_entries(groups_, state_, &ParamState::tensors); }

NamedScalars Optimizer::state_scalars() const { return prefixed_entries(groups_, state_, &ParamState::scalars); }

void Optimizer::load_state(const NamedTensors& tensors, int64_t step_count, const NamedScalars& scalars) {
  HEED_CHECK(step_count >= 0, "load_state: negative step count ", step_count);
  std::map<std::string, const Tensor*> by_name;
  for (const auto& [name, t] : tensors) {
    HEED_CHECK(t.defined(), "load_state: entry '", name, "' is an undefined tensor");
    HEED_CHECK(by_name.emplace(name, &t).second, "load_state: entry '", name, "' appears twice");
  }
  std::map<std::string, double> scalar_by_name;
  for (const auto& [name, v] : scalars)
    HEED_CHECK(scalar_by_name.emplace(name, v).second, "load_state: entry '", name, "' appears twice");
  // Build everything first and commit at the end, so a bad entry leaves the optimizer as it was.
  std::vector<std::vector<ParamState>> fresh;
  std::set<std::string> used;
  for (size_t g = 0; g < groups_.size(); ++g) {
    fresh.emplace_back(groups_[g].params.size());
    for (size_t i = 0; i < groups_[g].params.size(); ++i) {
      const std::string& pname = groups_[g].params[i].first;
      const Tensor& p = groups_[g].params[i].second;
      std::string present, absent;  // one entry of each kind, for the message
      for (const std::string& e : tensor_entries_) (by_name.count(pname + "." + e) ? present : absent) = pname + "." + e;
      if (present.empty()) continue;  // this parameter has no state yet
      HEED_CHECK(absent.empty(), "load_state: '", absent, "' is missing (but '", present, "' is present)");
      ParamState& s = fresh[g][i];
      for (const std::string& e : tensor_entries_) {
        const std::string key = pname + "." + e;
        const Tensor& src = *by_name.at(key);
        HEED_CHECK(src.shape() == p.shape(), "load_state: '", key, "' has shape ", to_string(src.shape()),
                   " but parameter '", pname, "' has shape ", to_string(p.shape()));
        Tensor t = Tensor::empty(p.shape(), p.dtype());
        t.copy_(src);  // converts the dtype if the file holds another
        s.tensors.emplace_back(e, t);
        used.insert(key);
      }
      for (const std::string& e : scalar_entries_) {
        auto it = scalar_by_name.find(pname + "." + e);
        s.scalars.emplace_back(e, it != scalar_by_name.end() ? it->second : static_cast<double>(step_count));
        if (it != scalar_by_name.end()) used.insert(it->first);
      }
    }
  }
  auto expected = [&] {
    std::string list;
    for (const auto* entries : {&tensor_entries_, &scalar_entries_})
      for (const std::string& e : *entries) list += (list.empty() ? "'<name>." : "', '<name>.") + e;
    return list + "'";
  };
  for (const auto& [name, t] : by_name)
    HEED_CHECK(used.count(name), "load_state: entry '", name, "' matches no parameter (expected ", expected(),
               " for a parameter of this ", name_, ")");
  for (const auto& [name, v] : scalar_by_name)
    HEED_CHECK(used.count(name), "load_state: entry '", name, "' matches no parameter with state (expected ",
               expected(), " for a parameter of this ", name_, ")");
  state_ = std::move(fresh);
  step_count_ = step_count;
}

}  // namespace heed::optim
