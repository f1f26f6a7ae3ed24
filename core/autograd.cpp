#include "core/autograd.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "core/ops.h"

namespace heed {

namespace {
thread_local bool g_grad_mode = true;
std::atomic<uint64_t> g_next_seq{0};
OpTimer g_op_timer = nullptr;

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}
// With a timer installed, an op's forward time is the time since the previous op recorded:
// ops run one after another, so this attributes the kernel (and any glue before it) to the op
// without every op having to time itself. Ops called inside a backward function belong to that
// backward's time, so they report nothing themselves.
thread_local double g_last_record = 0.0;
thread_local bool g_in_backward = false;
thread_local GradReadyHook g_grad_ready_hook;
}  // namespace

bool grad_mode_enabled() { return g_grad_mode; }
NoGradGuard::NoGradGuard() : prev_(g_grad_mode) { g_grad_mode = false; }
NoGradGuard::~NoGradGuard() { g_grad_mode = prev_; }

void set_op_timer(OpTimer timer) {
  g_op_timer = timer;
  g_last_record = now_seconds();
}
OpTimer op_timer() { return g_op_timer; }

GradReadyHook set_grad_ready_hook(GradReadyHook hook) {
  std::swap(hook, g_grad_ready_hook);
  return hook;
}

Node::Node(const char* name, std::vector<Tensor> inputs, BackwardFn backward, Shape out_shape,
           DType out_dtype, std::vector<Saved> saved)
    : name_(name),
      inputs_(std::move(inputs)),
      saved_(std::move(saved)),
      backward_(std::move(backward)),
      out_shape_(std::move(out_shape)),
      out_dtype_(out_dtype),
      seq_(g_next_seq++) {}

Node::~Node() {
  // Destroying a long chain recursively (Node -> input TensorImpl -> its Node -> ...) would
  // overflow the stack; unlink it iteratively: take over the inputs of every Node that dies with us.
  // A closure may hold its inputs as well (a user's op that captured them by value): each Node's
  // closure goes right after its inputs are taken over, so that they are found unshared below.
  std::vector<Tensor> pending = std::move(inputs_);
  backward_ = nullptr;
  while (!pending.empty()) {
    Tensor t = std::move(pending.back());
    pending.pop_back();
    auto& impl = t.impl_ptr();
    if (impl && impl.use_count() == 1 && impl->grad_fn && impl->grad_fn.use_count() == 1) {
      Node& node = *impl->grad_fn;
      for (auto& x : node.inputs_) pending.push_back(std::move(x));
      node.inputs_.clear();
      node.backward_ = nullptr;
    }
  }
}

namespace {

// What record() notes of the tensors an op saved: storage, version, and which tensor it was.
std::vector<Node::Saved> note_saved(const Tensor* saved, size_t n, const std::vector<Tensor>& inputs,
                                    const Tensor& out) {
  std::vector<Node::Saved> notes;
  notes.reserve(n);
  for (size_t s = 0; s < n; ++s) {
    const Tensor& t = saved[s];
    if (!t.defined()) continue;
    int which = t.storage() == out.storage() ? Node::Saved::kOutput : Node::Saved::kOther;
    for (size_t i = 0; i < inputs.size() && which == Node::Saved::kOther; ++i)
      if (inputs[i].defined() && inputs[i].storage() == t.storage()) which = static_cast<int>(i);
    notes.push_back({t.storage(), t.version(), which});
  }
  return notes;
}

Tensor record_saving(const char* name, Tensor out, std::vector<Tensor> inputs, BackwardFn backward,
                     const Tensor* saved, size_t n_saved) {
  if (g_op_timer && !g_in_backward) {
    const double t = now_seconds();
    g_op_timer(name, "forward", t - g_last_record);
    g_last_record = t;
  }
  if (!g_grad_mode) return out;
  bool needed = false;
  for (const auto& in : inputs) needed |= in.defined() && in.requires_grad();
  if (!needed) return out;
  HEED_CHECK(backward != nullptr, "record: op '", name, "' was given an empty backward function");
  // The output becomes a fresh handle: `out` may be a view sharing an impl with someone else's,
  // or be one of the inputs itself (its node would then hold itself: a cycle that never frees).
  bool is_an_input = false;
  for (const auto& in : inputs) is_an_input |= in.same(out);
  Tensor result = out.grad_fn() || out.requires_grad() || is_an_input ? out.detach() : out;
  std::vector<Node::Saved> notes = note_saved(saved, n_saved, inputs, result);
  result.impl().grad_fn = std::make_shared<Node>(name, std::move(inputs), std::move(backward), result.shape(),
                                                 result.dtype(), std::move(notes));
  result.impl().requires_grad = true;
  return result;
}

}  // namespace

Tensor record(const char* name, Tensor out, std::vector<Tensor> inputs, BackwardFn backward,
              std::initializer_list<Tensor> saved) {
  return record_saving(name, std::move(out), std::move(inputs), std::move(backward), saved.begin(), saved.size());
}

Tensor record(const char* name, Tensor out, std::vector<Tensor> inputs, BackwardFn backward,
              const std::vector<Tensor>& saved) {
  return record_saving(name, std::move(out), std::move(inputs), std::move(backward), saved.data(), saved.size());
}

// Refuses to run `node`'s backward on values written in place since the op saved them: torch
// raises here too, rather than return a gradient of something that was never computed.
static void check_saved_versions(const Node& node, const std::vector<Node::Saved>& saved) {
  for (const Node::Saved& s : saved) {
    const std::shared_ptr<Storage> storage = s.storage.lock();
    if (!storage || storage->version() == s.version) continue;
    // Named by dtype and shape: an input's index would be the op's internal order (add_linear
    // records x, w, b, r), and two inputs can share the storage that changed.
    std::string what = "a tensor it saved (" + std::string(dtype_name(storage->dtype())) + ", " +
                       std::to_string(storage->numel()) + " elements)";
    if (s.which == Node::Saved::kOutput) {
      what = "its output (" + std::string(dtype_name(node.output_dtype())) + " " + to_string(node.output_shape()) + ")";
    } else if (s.which >= 0) {
      const Tensor& in = node.inputs()[static_cast<size_t>(s.which)];
      what = "one of its inputs (" + std::string(dtype_name(in.dtype())) + " " + to_string(in.shape()) + ")";
    }
    detail::fail("backward of '", node.name(), "': ", what, " was modified in place after the forward saved it (version ",
              storage->version(), ", saved at ", s.version, "); change a clone() instead, or run the forward again");
  }
}

// Adds `g` into the slot; the first gradient is stored as is (no copy), later ones out of place,
// so a gradient that aliases another op's buffer is never written through.
static void accumulate(Tensor& slot, const Tensor& g) { slot = slot.defined() ? add(slot, g) : g; }

// Leaves' .grad() are the one state two backward passes share: two threads may run backward
// into the same parameter (torch's AccumulateGrad locks too). One lock for all leaves: a pass takes
// it once a leaf, beside that leaf's whole gradient computation.
static std::mutex g_leaf_grad_mutex;

// Adds a leaf's gradient from one backward pass into its .grad(), an owned contiguous buffer
// (gradients accumulate across passes until zero_grad).
static void add_to_leaf_grad(TensorImpl* impl, Tensor g) {
  std::lock_guard<std::mutex> lock(g_leaf_grad_mutex);
  if (impl->grad) {
    Tensor old(impl->grad);
    impl->grad = add(old, g).impl_ptr();
  } else {
    // Reuse the buffer only when nothing else can see it (another leaf, a view, a closure).
    const bool owned = g.impl_ptr().use_count() == 1 && g.storage().use_count() == 1 &&
                       g.is_contiguous() && g.offset() == 0 && g.storage()->numel() == g.numel();
    impl->grad = (owned ? g.detach() : g.clone().detach()).impl_ptr();
  }
}

void run_backward(const Tensor& root, const Tensor& grad_root, bool retain_graph) {
  HEED_CHECK(root.requires_grad(), "backward: the tensor does not require grad (no input of the "
             "ops that made it requires grad, or it was computed under no_grad)");
  NoGradGuard no_grad;
  if (!root.grad_fn()) {  // a leaf: its gradient is the seed itself
    {
      std::lock_guard<std::mutex> lock(g_leaf_grad_mutex);
      Tensor slot = root.grad();
      accumulate(slot, grad_root);
      root.impl().grad = slot.contiguous().clone().impl_ptr();
    }
    if (g_grad_ready_hook) g_grad_ready_hook(root);
    return;
  }

  // Topological order by iterative DFS (post-order), so deep graphs cannot overflow the stack.
  // `order` owns its Nodes: clearing a Node's inputs below would otherwise free upstream Nodes
  // that are still waiting their turn.
  std::vector<std::shared_ptr<Node>> order;
  std::unordered_set<Node*> visited;
  std::vector<std::pair<std::shared_ptr<Node>, size_t>> stack{{root.grad_fn(), 0}};
  visited.insert(root.grad_fn().get());
  while (!stack.empty()) {
    auto& [node, next] = stack.back();
    if (next < node->inputs_.size()) {
      const Tensor& in = node->inputs_[next++];
      std::shared_ptr<Node> child = in.defined() ? in.grad_fn() : nullptr;
      if (child && visited.insert(child.get()).second) stack.emplace_back(std::move(child), 0);
    } else {
      order.push_back(std::move(node));
      stack.pop_back();
    }
  }

  // With a grad-ready hook, each leaf is finished right after the last Node of the walk that
  // consumes it (ready_after[k]: the leaves whose last consumer is the k-th Node walked), in the
  // order the Nodes list them; without one, every leaf is finished at the end.
  std::vector<std::vector<std::shared_ptr<TensorImpl>>> ready_after;
  if (g_grad_ready_hook) {
    auto is_leaf = [](const Tensor& t) { return t.defined() && t.requires_grad() && !t.grad_fn(); };
    std::unordered_map<TensorImpl*, size_t> last_consumer;
    for (size_t k = 0; k < order.size(); ++k)
      for (const Tensor& in : order[order.size() - 1 - k]->inputs_)
        if (is_leaf(in)) last_consumer[in.impl_ptr().get()] = k;
    ready_after.resize(order.size());
    for (size_t k = 0; k < order.size(); ++k)
      for (const Tensor& in : order[order.size() - 1 - k]->inputs_)
        if (is_leaf(in)) {
          auto last = last_consumer.find(in.impl_ptr().get());
          if (last == last_consumer.end() || last->second != k) continue;
          ready_after[k].push_back(in.impl_ptr());
          last_consumer.erase(last);  // a leaf listed twice by one Node is reported once
        }
  }

  // Every Node's saved tensors are checked before any backward runs, so a refused pass changes
  // nothing: no leaf's .grad, no grad-ready hook called (data-parallel training would already have
  // sent gradients). Each Node is checked again just before it runs, for writes a hook makes.
  for (const auto& node : order) check_saved_versions(*node, node->saved_);

  std::unordered_map<Node*, Tensor> grads;
  grads[root.grad_fn().get()] = grad_root;
  std::unordered_map<TensorImpl*, Tensor> leaf_grads;
  std::vector<std::shared_ptr<TensorImpl>> leaf_order;  // owns the leaves, as `order` owns Nodes
  auto finish_leaves_after = [&](size_t k) {
    if (ready_after.empty()) return;
    for (const auto& leaf : ready_after[k]) {
      auto it = leaf_grads.find(leaf.get());
      if (it == leaf_grads.end()) continue;  // no gradient reached it
      add_to_leaf_grad(leaf.get(), std::move(it->second));
      leaf_grads.erase(it);
      g_grad_ready_hook(Tensor(leaf));
    }
  };
  size_t k = 0;
  for (auto it = order.rbegin(); it != order.rend(); ++it, ++k) {
    Node* node = it->get();
    auto found = grads.find(node);
    if (found == grads.end()) {  // no gradient flows into this op
      finish_leaves_after(k);
      continue;
    }
    Tensor g = found->second.contiguous();
    grads.erase(found);
    HEED_CHECK(node->backward_, "backward: the graph through '", node->name(),
               "' was already freed by an earlier backward; pass retain_graph = true to the first one");
    check_saved_versions(*node, node->saved_);
    const double t0 = g_op_timer ? now_seconds() : 0.0;
    std::vector<Tensor> in_grads;
    {
      struct InBackward {  // cleared on every exit, a throwing backward included
        InBackward() { g_in_backward = true; }
        ~InBackward() { g_in_backward = false; }
      } in_backward;
      in_grads = node->backward_(g);
    }
    if (g_op_timer) {
      g_last_record = now_seconds();
      g_op_timer(node->name(), "backward", g_last_record - t0);
    }
    HEED_CHECK(in_grads.size() == node->inputs_.size(), "backward of '", node->name(), "' returned ",
               in_grads.size(), " gradients for ", node->inputs_.size(), " inputs");
    for (size_t i = 0; i < in_grads.size(); ++i) {
      const Tensor& in = node->inputs_[i];
      const Tensor& gi = in_grads[i];
      if (!gi.defined() || !in.defined() || !in.requires_grad()) continue;
      HEED_CHECK(gi.shape() == in.shape(), "backward of '", node->name(), "': gradient for input ", i,
                 " has shape ", to_string(gi.shape()), " but the input has shape ", to_string(in.shape()));
      HEED_CHECK(gi.dtype() == in.dtype(), "backward of '", node->name(), "': gradient for input ", i,
                 " is ", dtype_name(gi.dtype()), " but the input is ", dtype_name(in.dtype()));
      if (in.grad_fn()) {
        accumulate(grads[in.grad_fn().get()], gi);
      } else {
        auto [slot, fresh] = leaf_grads.try_emplace(in.impl_ptr().get());
        if (fresh) leaf_order.push_back(in.impl_ptr());
        accumulate(slot->second, gi);
      }
    }
    if (!retain_graph) {
      node->backward_ = nullptr;
      node->inputs_.clear();
      node->saved_.clear();
    }
    in_grads.clear();  // a leaf finished now can then keep its gradient's buffer (no copy)
    finish_leaves_after(k);
  }

  // Leaves get their gradient once, at the end: an owned contiguous buffer, added to what an
  // earlier backward left there (gradients accumulate until zero_grad).
  for (const auto& leaf : leaf_order) {
    auto it = leaf_grads.find(leaf.get());
    if (it != leaf_grads.end()) add_to_leaf_grad(leaf.get(), std::move(it->second));
  }
}

}  // namespace heed
