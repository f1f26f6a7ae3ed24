// heed::nn: modules applied one after another, as PyTorch's nn.Sequential:
//
//   nn::Sequential mlp(std::make_shared<nn::Linear>(4, 16), std::make_shared<nn::ReLU>(),
//                      std::make_shared<nn::Linear>(16, 2));
//   Tensor y = mlp.forward(x);                  // linear2(relu(linear1(x)))
//   // named_parameters(): "0.weight", "0.bias", "2.weight", "2.bias", as torch's
//   mlp.push_back(nn::Functional::make([](const Tensor& t) { return heed::softmax(t, -1); }));
//   auto first = mlp.at<nn::Linear>(0);          // typed access (torch: mlp[0])
//
// Any module with a `Tensor forward(const Tensor&)` can be a step: heed's layers, a user's own
// modules, another Sequential. heed's Module has no virtual forward (layers take different
// arguments: masks, caches, ids), so a Sequential keeps, beside each child, a call of that child's
// own forward, typed when the step was added.
#pragma once

#include <concepts>
#include <cstddef>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/tensor.h"
#include "nn/module.h"

namespace heed::nn {

/// A module whose forward is `m.forward(x)` for a Tensor x, returning a Tensor.
template <class M>
concept TensorToTensorModule = std::derived_from<M, Module> && requires(M& m, const Tensor& x) {
  { m.forward(x) } -> std::convertible_to<Tensor>;
};

/// A function as a module without parameters (libtorch's nn::Functional): lets an op that has no
/// module of its own be a step of a Sequential.
class Functional : public Module {
 public:
  explicit Functional(std::function<Tensor(const Tensor&)> fn);
  /// std::make_shared<Functional>(fn), shorter at the call site.
  static std::shared_ptr<Functional> make(std::function<Tensor(const Tensor&)> fn) {
    return std::make_shared<Functional>(std::move(fn));
  }
  Tensor forward(const Tensor& x);

 private:
  std::function<Tensor(const Tensor&)> fn_;
};

class Sequential : public Module {
  struct Step {
    std::string name;
    std::shared_ptr<Module> module;
    std::function<Tensor(const Tensor&)> forward;  // module's own forward, typed when added
  };

 public:
  /// Walks the steps in order, giving each one's module (torch's `for m in seq`):
  /// `for (const auto& m : seq)` sees the std::shared_ptr<Module> that seq[i] returns.
  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = std::shared_ptr<Module>;
    using difference_type = std::ptrdiff_t;
    using pointer = const value_type*;
    using reference = const value_type&;
    const_iterator() = default;
    reference operator*() const { return it_->module; }
    pointer operator->() const { return &it_->module; }
    const_iterator& operator++() {
      ++it_;
      return *this;
    }
    const_iterator operator++(int) {
      const_iterator old = *this;
      ++it_;
      return old;
    }
    bool operator==(const const_iterator&) const = default;

   private:
    friend class Sequential;
    explicit const_iterator(std::vector<Step>::const_iterator it) : it_(it) {}
    std::vector<Step>::const_iterator it_;
  };

  Sequential() = default;
  /// The steps in order, named "0", "1", ...
  template <TensorToTensorModule... M>
  explicit Sequential(std::shared_ptr<M>... steps) {
    (push_back(std::move(steps)), ...);
  }

  /// Appends a step named by its position ("3" for the fourth), as torch's append.
  template <TensorToTensorModule M>
  void push_back(std::shared_ptr<M> step) {
    push_back(std::to_string(steps_.size()), std::move(step));
  }
  /// Appends a step under a name of the caller's (torch's Sequential(OrderedDict(...))): its
  /// parameters are then "<name>.weight". Names follow register_module's rules.
  template <TensorToTensorModule M>
  void push_back(const std::string& name, std::shared_ptr<M> step) {
    HEED_CHECK(step != nullptr, "Sequential: step '", name, "' is null");
    M* raw = step.get();
    register_module(name, step);
    steps_.push_back({name, std::move(step), [raw](const Tensor& x) -> Tensor { return raw->forward(x); }});
  }

  /// Each step's forward on the previous one's output; x itself when there are no steps.
  Tensor forward(const Tensor& x);

  size_t size() const { return steps_.size(); }
  const_iterator begin() const { return const_iterator(steps_.begin()); }
  const_iterator end() const { return const_iterator(steps_.end()); }
  /// Step i, as a Module (torch's seq[i]); a negative i counts from the end (seq[-1] is the last
  /// step); throws naming i unless -size() <= i < size().
  std::shared_ptr<Module> operator[](int64_t i) const { return steps_[index(i)].module; }
  /// Step i (negative: from the end) as the type it was added with, or a base of it; throws naming
  /// i when it is not one.
  template <class M>
  std::shared_ptr<M> at(int64_t i) const {
    const size_t k = index(i);
    auto typed = std::dynamic_pointer_cast<M>(steps_[k].module);
    HEED_CHECK(typed != nullptr, "Sequential: step ", i, " ('", steps_[k].name, "') is not of the type asked for");
    return typed;
  }

 private:
  // i's position in steps_, a negative i counted from the end; throws when out of range.
  size_t index(int64_t i) const;
  std::vector<Step> steps_;
};

}  // namespace heed::nn
