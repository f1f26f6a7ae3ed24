// heed::nn: the Module base. A module owns named parameters and named child modules, registered
// in its constructor, so that names come out dotted as in PyTorch:
//
//   struct Block : nn::Module {
//     std::shared_ptr<nn::Linear> c_fc;
//     Tensor scale;
//     Block(int64_t C) {
//       c_fc = register_module("c_fc", std::make_shared<nn::Linear>(C, 4 * C));
//       register_parameter("scale", scale, Tensor::ones({C}));
//     }
//   };
//   // named_parameters(): "c_fc.weight", "c_fc.bias", "scale"
//
// A parameter (or buffer) is registered as the member that holds it: the module keeps the
// member's address, not a copy of the handle, so assigning the member later re-registers, as
// PyTorch's setattr does: `lin.weight = Tensor::randn({4, 4}).requires_grad_();` makes the new
// tensor the one forward, named_parameters(), the optimizer, zero_grad and checkpoints all see.
// Assigning an undefined Tensor removes the parameter from those lists (PyTorch's `= None`).
// For that, a Module cannot be copied or moved (it holds its members' addresses): build modules
// in place or behind std::make_shared.
//
// Parameters and children keep registration order, so optimizer state and checkpoints walk them
// in a stable order. Initial values: a layer built alone draws from the generator it is given
// (or the default one, heed::manual_seed); a model built from a seed draws every parameter from
// its own dotted name (nn::init::by_name), so adding or reordering children changes no one else's. A tensor registered under two names (tied weights) is a single parameter:
// named_parameters() yields it once, under the first name; named_tensors() yields every alias.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace heed {
class Generator;
}

namespace heed::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;  // registrations hold the addresses of members
  Module& operator=(const Module&) = delete;

  /// Every trainable tensor once (tied weights under their first name), in registration order.
  NamedTensors named_parameters() const;
  /// Every registered tensor under every name it has (aliases included), in registration order.
  NamedTensors named_tensors() const;
  std::vector<Tensor> parameters() const;
  /// Direct children, in registration order.
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const { return children_; }
  /// This module's own parameters (not its children's), in registration order.
  NamedTensors own_parameters() const;
  /// Every buffer (a registered tensor that is saved and loaded but not trained), dotted names.
  NamedTensors named_buffers() const;

  /// Every parameter (aliases included, as PyTorch's state_dict lists a tied weight under each
  /// name) and buffer, detached: the tensors share the module's storage.
  NamedTensors state_dict() const;
  /// What load_state_dict did not match when strict is false (PyTorch's _IncompatibleKeys).
  struct LoadResult {
    std::vector<std::string> missing_keys;     ///< in the module, not in the dict
    std::vector<std::string> unexpected_keys;  ///< in the dict, not in the module
  };
  /// Copies `dict`'s values into the registered tensors (any dtype is converted; outside
  /// autograd). Throws one heed::Error listing every mis-shaped key (always) and, when `strict`,
  /// every missing and unexpected key; on a throw nothing has been copied.
  LoadResult load_state_dict(const NamedTensors& dict, bool strict = true);
  /// Every module of the tree with its dotted path, depth first in registration order, starting
  /// with this one as "".
  std::vector<std::pair<std::string, Module*>> named_modules();

  /// Draws own parameter `name` (the tensor t) with this layer's default init from `gen`:
  /// Linear uniform(+-1/sqrt(in)), Embedding normal(0, 1), LayerNorm ones and zeros. Modules
  /// without an init of their own keep the values. nn::init::by_name calls it for every
  /// parameter of a model; a layer's constructor for its own.
  virtual void reset_parameter(const std::string& name, Tensor& t, Generator& gen);
  /// Reseeds this module's own random state (Dropout's masks); modules without any ignore it.
  virtual void reseed(uint64_t) {}

  /// Switches training mode (dropout on) for this module and every descendant.
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  /// Total number of scalar parameters, each tied tensor counted once.
  int64_t num_parameters() const;
  /// Drops every parameter's gradient.
  void zero_grad();
  /// Converts every parameter and float buffer to `dtype` in place (handles held by layers stay valid); used to
  /// run gradient checks on a layer in float64.
  void to(DType dtype);

 protected:
  /// Registers member `slot` as trainable tensor `name`: sets it to `value` (with requires_grad)
  /// and keeps its address, so a later assignment to the member re-registers. Throws on an empty,
  /// dotted or duplicate name, or an undefined value.
  void register_parameter(const std::string& name, Tensor& slot, Tensor value);
  /// Registers member `slot` as buffer `name` (in state_dict, not trained), set to `value`.
  void register_buffer(const std::string& name, Tensor& slot, Tensor value);
  /// Registers a child module and returns it. Throws on an empty, dotted or duplicate name.
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    add_child(name, m);
    return m;
  }
  /// Called by train(); override to react to the mode (most modules just read is_training()).
  virtual void on_train(bool) {}

 private:
  void add_child(const std::string& name, std::shared_ptr<Module> m);
  void check_name(const std::string& name) const;
  void collect(const std::string& prefix, NamedTensors& out, bool buffers) const;

  NamedTensors own(const std::vector<std::pair<std::string, Tensor*>>& slots) const;

  std::vector<std::pair<std::string, Tensor*>> params_;   // the members registered as parameters
  std::vector<std::pair<std::string, Tensor*>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

/// A list of modules named "0", "1", ... (PyTorch's nn.ModuleList).
template <class M>
class ModuleList : public Module {
 public:
  void push_back(std::shared_ptr<M> m) { items_.push_back(register_module(std::to_string(items_.size()), m)); }
  size_t size() const { return items_.size(); }
  const std::shared_ptr<M>& operator[](size_t i) const { return items_.at(i); }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

 private:
  std::vector<std::shared_ptr<M>> items_;
};

}  // namespace heed::nn
