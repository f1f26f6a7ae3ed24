// heed: reverse-mode autograd.
//
// Every differentiable op computes its output, then calls record() with the inputs and a
// backward closure. record() attaches a Node to the output when grad mode is on and an input
// requires grad. Tensor::backward() walks the Nodes reachable from the root in reverse
// topological order (an iterative DFS: no recursion, so 10,000-op chains are fine), calls each
// closure once with the gradient of that Node's output, and accumulates what it returns into the
// inputs: into the gradient of the producing Node for intermediates, into `.grad()` for leaves.
//
// The backward contract (the same for heed's ops and for users' own):
//   - it runs with grad mode off, receives the gradient of the output (contiguous, same
//     shape and dtype as the output), and returns one Tensor per input, in order: an
//     undefined Tensor() where an input needs no gradient;
//   - each returned gradient must have its input's shape (the engine checks and names the op);
//   - capture what it needs by value (input Tensors, `out.detach()`), never the output Tensor
//     itself: the output owns the Node, and capturing it would form a cycle that leaks the graph;
//   - list in record()'s `saved` the tensors whose values it reads (torch's save_for_backward):
//     inputs, the output, anything else a user holds. The engine notes their version() when the
//     op is recorded and refuses to run the backward if one has been written in place since
//     (by copy_, fill_, add_ and the other in-place methods, an optimizer step), where it would
//     otherwise compute a wrong gradient without a word. An op that needs only shapes (add, a
//     view, a sum) saves nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace heed {

using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_output)>;

/// One recorded op: its name (for errors and the profiler), its inputs and its backward.
class Node {
 public:
  /// A tensor the backward reads, as it was when the op ran: its storage and that storage's
  /// version(), and which it was (input i, or kOutput / kOther) for the error message.
  struct Saved {
    static constexpr int kOutput = -1, kOther = -2;
    std::weak_ptr<Storage> storage;  // weak: an expired storage cannot have been written
    uint64_t version;
    int which;
  };
  Node(const char* name, std::vector<Tensor> inputs, BackwardFn backward, Shape out_shape,
       DType out_dtype, std::vector<Saved> saved = {});
  ~Node();  // unlinks long chains iteratively
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  const char* name() const { return name_; }
  const std::vector<Tensor>& inputs() const { return inputs_; }
  const Shape& output_shape() const { return out_shape_; }
  DType output_dtype() const { return out_dtype_; }
  uint64_t sequence() const { return seq_; }

 private:
  friend void run_backward(const Tensor&, const Tensor&, bool);
  const char* name_;  // a string literal
  std::vector<Tensor> inputs_;
  std::vector<Saved> saved_;
  BackwardFn backward_;
  Shape out_shape_;
  DType out_dtype_;
  uint64_t seq_;
};

/// Records `out` as the result of op `name` applied to `inputs`. Returns `out` (with a grad_fn
/// attached when grad mode is on and some input requires grad; untouched otherwise). `saved`:
/// the tensors `backward` reads the values of (see the contract above), e.g. `{a, b}` for a
/// product, `{out}` for exp.
Tensor record(const char* name, Tensor out, std::vector<Tensor> inputs, BackwardFn backward,
              std::initializer_list<Tensor> saved = {});
/// The same with a list built at run time.
Tensor record(const char* name, Tensor out, std::vector<Tensor> inputs, BackwardFn backward,
              const std::vector<Tensor>& saved);

/// True while gradients are being recorded (the default).
bool grad_mode_enabled();

/// RAII scope in which ops record nothing (evaluation, optimizer updates, sampling).
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

/// The engine behind Tensor::backward (exposed for tests and tools).
void run_backward(const Tensor& root, const Tensor& grad_root, bool retain_graph);

/// Called during a backward pass as soon as a leaf's gradient for that pass is complete: every op
/// that feeds the leaf has run and its gradient has been added into `leaf.grad()`. Called once
/// per leaf that receives a gradient, on the thread that runs the backward, before the pass
/// goes on; leaves that receive none are not reported. Data-parallel training uses it to start
/// sending a layer's gradients while the layers below are still being differentiated.
using GradReadyHook = std::function<void(const Tensor& leaf)>;
/// Installs `hook` for the backward passes this thread runs (an empty function removes it) and
/// returns the previous one. Without a hook, leaves get their gradients at the end of the pass.
GradReadyHook set_grad_ready_hook(GradReadyHook hook);

/// Optional per-op timing hook (used by `heed train --profile`). `phase` is "forward" or
/// "backward"; called with the op name and seconds spent. Null to disable (the default).
using OpTimer = void (*)(const char* op, const char* phase, double seconds);
void set_op_timer(OpTimer timer);
OpTimer op_timer();

}  // namespace heed
