#include "nn/module.h"

#include <unordered_set>

namespace heed::nn {

void Module::check_name(const std::string& name) const {
  HEED_CHECK(!name.empty() && name.find('.') == std::string::npos,
             "Module: invalid name '", name, "' (must be non-empty and contain no '.')");
  for (const auto& [n, _] : params_) HEED_CHECK(n != name, "Module: name '", name, "' registered twice");
  for (const auto& [n, _] : children_) HEED_CHECK(n != name, "Module: name '", name, "' registered twice");
}

Tensor Module::register_parameter(const std::string& name, Tensor t) {
  check_name(name);
  HEED_CHECK(t.defined(), "Module: parameter '", name, "' is undefined");
  if (!t.requires_grad()) t.requires_grad_();
  params_.emplace_back(name, t);
  return t;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> m) {
  check_name(name);
  HEED_CHECK(m != nullptr, "Module: child '", name, "' is null");
  children_.emplace_back(name, std::move(m));
}

void Module::collect(const std::string& prefix, NamedTensors& out) const {
  for (const auto& [n, t] : params_) out.emplace_back(prefix + n, t);
  for (const auto& [n, m] : children_) m->collect(prefix + n + ".", out);
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
  collect("", out);
  return out;
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
  for (auto& [_, t] : named_parameters()) {
    if (t.dtype() == dtype) continue;
    Tensor converted = Tensor::empty(t.shape(), dtype);
    converted.copy_(t);
    // Swap the storage under the same TensorImpl, so every handle (and every alias) follows.
    TensorImpl& impl = t.impl();
    impl.storage = converted.storage();
    impl.strides = converted.strides();
    impl.offset = 0;
    impl.grad.reset();
  }
}

}  // namespace heed::nn
