#include "nn/module.h"

#include <unordered_map>
#include <unordered_set>

#include "core/autograd.h"

namespace heed::nn {

void Module::check_name(const std::string& name) const {
  HEED_CHECK(!name.empty() && name.find('.') == std::string::npos,
             "Module: invalid name '", name, "' (must be non-empty and contain no '.')");
  HEED_CHECK(name != "__metadata__", "Module: '__metadata__' cannot name a parameter, buffer or child: a safetensors "
             "file keeps its metadata under that key");
  for (const auto& [n, _] : params_) HEED_CHECK(n != name, "Module: name '", name, "' registered twice");
  for (const auto& [n, _] : buffers_) HEED_CHECK(n != name, "Module: name '", name, "' registered twice");
  for (const auto& [n, _] : children_) HEED_CHECK(n != name, "Module: name '", name, "' registered twice");
}

void Module::register_parameter(const std::string& name, Tensor& slot, Tensor value) {
  check_name(name);
  HEED_CHECK(value.defined(), "Module: parameter '", name, "' is undefined");
  if (!value.requires_grad()) value.requires_grad_();
  slot = std::move(value);
  params_.emplace_back(name, &slot);
}

void Module::register_buffer(const std::string& name, Tensor& slot, Tensor value) {
  check_name(name);
  HEED_CHECK(value.defined(), "Module: buffer '", name, "' is undefined");
  slot = std::move(value);
  buffers_.emplace_back(name, &slot);
}

NamedTensors Module::own(const std::vector<std::pair<std::string, Tensor*>>& slots) const {
  NamedTensors out;
  // An undefined member is a parameter set to None: listed nowhere until assigned again.
  for (const auto& [n, t] : slots)
    if (t->defined()) out.emplace_back(n, *t);
  return out;
}

NamedTensors Module::own_parameters() const { return own(params_); }

void Module::add_child(const std::string& name, std::shared_ptr<Module> m) {
  check_name(name);
  HEED_CHECK(m != nullptr, "Module: child '", name, "' is null");
  // A module inside its own subtree would make every walk of the tree (named_parameters, train,
  // to) recurse forever.
  for (const auto& [path, sub] : m->named_modules())
    HEED_CHECK(sub != this, "Module: child '", name, "' contains this module", path.empty() ? "" : " (as '" + path + "')",
               ": a module tree cannot hold a cycle");
  children_.emplace_back(name, std::move(m));
}

void Module::collect(const std::string& prefix, NamedTensors& out, bool buffers) const {
  for (auto& [n, t] : own(buffers ? buffers_ : params_)) out.emplace_back(prefix + n, std::move(t));
  for (const auto& [n, m] : children_) m->collect(prefix + n + ".", out, buffers);
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out{{"", this}};
  // Children's lists, spliced in depth first: each child's own entries get its name as prefix.
  for (const auto& [n, m] : children_)
    for (auto& [path, sub] : m->named_modules()) out.emplace_back(path.empty() ? n : n + "." + path, sub);
  return out;
}

void Module::reset_parameter(const std::string&, Tensor&, Generator&) {}

NamedTensors Module::named_tensors() const {
  NamedTensors out;
  collect("", out, false);
  return out;
}

NamedTensors Module::named_buffers() const {
  NamedTensors out;
  collect("", out, true);
  return out;
}

NamedTensors Module::state_dict() const {
  NamedTensors out = named_tensors();
  for (auto& entry : named_buffers()) out.push_back(std::move(entry));
  for (auto& [_, t] : out) t = t.detach();
  return out;
}

Module::LoadResult Module::load_state_dict(const NamedTensors& dict, bool strict) {
  LoadResult result;
  std::vector<std::string> mis_shaped;
  std::unordered_map<std::string, const Tensor*> given;
  for (const auto& [n, t] : dict) {
    HEED_CHECK(given.emplace(n, &t).second, "load_state_dict: key '", n, "' appears twice");
    HEED_CHECK(t.defined(), "load_state_dict: key '", n, "' holds an undefined tensor");
  }
  NamedTensors mine = state_dict();
  std::unordered_set<std::string> known;
  for (const auto& [n, t] : mine) {
    known.insert(n);
    auto it = given.find(n);
    if (it == given.end()) {
      result.missing_keys.push_back(n);
    } else if (it->second->shape() != t.shape()) {
      mis_shaped.push_back(n + " (" + to_string(it->second->shape()) + " given, " + to_string(t.shape()) +
                           " in the module)");
    }
  }
  for (const auto& [n, _] : dict)
    if (!known.count(n)) result.unexpected_keys.push_back(n);
  // Everything is checked before anything is copied, so a failed load leaves the module as it was.
  std::string problems;
  auto list = [&](const char* what, const std::vector<std::string>& keys) {
    if (keys.empty()) return;
    problems += problems.empty() ? "" : "; ";
    problems += what;
    for (size_t i = 0; i < keys.size(); ++i) problems += (i ? ", " : " ") + keys[i];
  };
  list("size mismatch:", mis_shaped);
  if (strict) {
    list("missing keys:", result.missing_keys);
    list("unexpected keys:", result.unexpected_keys);
  }
  HEED_CHECK(problems.empty(), "load_state_dict: ", problems);
  NoGradGuard no_grad;  // parameters require grad; the copy is outside autograd, as torch's
  for (auto& [n, t] : mine) {
    auto it = given.find(n);
    if (it != given.end()) t.copy_(*it->second);
  }
  return result;
}

NamedTensors Module::named_parameters() const {
  NamedTensors out;
  std::unordered_set<const TensorImpl*> seen;
  for (auto& [n, t] : named_tensors())
    if (seen.insert(t.impl_ptr().get()).second) out.emplace_back(std::move(n), std::move(t));
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [_, t] : named_parameters()) out.push_back(t);
  return out;
}

void Module::train(bool on) {
  training_ = on;
  on_train(on);
  for (auto& [_, m] : children_) m->train(on);
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const auto& [_, t] : named_parameters()) n += t.numel();
  return n;
}

void Module::zero_grad() {
  for (auto& [_, t] : named_parameters()) t.zero_grad();
}

void Module::to(DType dtype) {
  HEED_CHECK(is_floating(dtype), "Module::to: ", dtype_name(dtype),
             " parameters cannot hold gradients; a module converts to float32 or float64 (as torch's Module.to)");
  NamedTensors tensors = named_parameters();
  for (auto& entry : named_buffers()) tensors.push_back(std::move(entry));
  for (auto& [_, t] : tensors) {
    // Float buffers follow the parameters (as torch's Module.to); integer and bool ones keep their type.
    if (t.dtype() == dtype || !is_floating(t.dtype())) continue;
    Tensor converted = Tensor::empty(t.shape(), dtype);
    converted.copy_(t);
    t.set_(converted);  // under the same TensorImpl: every handle (and every alias) follows
  }
}

}  // namespace heed::nn
