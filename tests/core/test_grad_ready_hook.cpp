// The grad-ready hook (core/autograd.h): each leaf is reported once per backward pass, as soon
// as its gradient for that pass is complete, with the same bits a pass without the hook gives.
#include <map>
#include <string>
#include <thread>

#include "nn/gpt.h"
#include "support/helpers.h"

using namespace heed;
using heed::test::randn64;

namespace {

// Installs a hook for one scope, restoring the previous one on every exit.
struct ScopedHook {
  explicit ScopedHook(GradReadyHook h) : previous(set_grad_ready_hook(std::move(h))) {}
  ~ScopedHook() { set_grad_ready_hook(std::move(previous)); }
  GradReadyHook previous;
};

struct Report {
  std::string name;
  std::vector<double> grad;                  // leaf.grad() when reported
  std::map<std::string, bool> others_ready;  // whether the other leaves had a gradient then
};

// Two tanh layers; w1 is used twice, at the bottom and again in a term at the top of the graph.
struct TwoLayers {
  Tensor x = randn64({5, 3}, 1).requires_grad_(false);  // data, not a parameter
  std::map<std::string, Tensor> leaves{{"w1", randn64({4, 3}, 2).requires_grad_()},
                                       {"b1", randn64({4}, 3).requires_grad_()},
                                       {"w2", randn64({2, 4}, 4).requires_grad_()},
                                       {"b2", randn64({2}, 5).requires_grad_()}};
  Tensor loss() {
    Tensor h1 = tanh(linear(x, leaves["w1"], leaves["b1"]));
    Tensor h2 = tanh(linear(h1, leaves["w2"], leaves["b2"]));
    return add(sum(mul(h2, h2)), mul(sum(mul(leaves["w1"], leaves["w1"])), 0.1));
  }
  std::string name_of(const Tensor& leaf) {
    for (auto& [name, t] : leaves)
      if (t.same(leaf)) return name;
    return "?";
  }
};

}  // namespace

TEST_CASE("the grad-ready hook reports every leaf once, complete, before the pass ends", "[autograd][hook]") {
  TwoLayers plain;
  plain.loss().backward();

  TwoLayers hooked;
  std::vector<Report> reports;
  {
    ScopedHook hook([&](const Tensor& leaf) {
      Report r{hooked.name_of(leaf), leaf.grad().to_vector<double>(), {}};
      for (auto& [name, t] : hooked.leaves) r.others_ready[name] = t.grad().defined();
      reports.push_back(std::move(r));
    });
    hooked.loss().backward();
  }
  REQUIRE(reports.size() == 4);
  std::map<std::string, size_t> position;
  for (size_t i = 0; i < reports.size(); ++i) {
    INFO(reports[i].name);
    REQUIRE(position.emplace(reports[i].name, i).second);  // once each
    // The reported gradient is the whole gradient of the pass, bit for bit.
    REQUIRE(reports[i].grad == plain.leaves[reports[i].name].grad().to_vector<double>());
    REQUIRE(reports[i].grad == hooked.leaves[reports[i].name].grad().to_vector<double>());
  }
  // The top layer is reported before the bottom one has its gradient: the hook runs mid-pass.
  REQUIRE(position["w2"] < position["w1"]);
  REQUIRE(position["b2"] < position["b1"]);
  REQUIRE_FALSE(reports[position["w2"]].others_ready["w1"]);
  REQUIRE_FALSE(reports[position["w2"]].others_ready["b1"]);
  // w1's first contribution (the top term) comes early; it is reported only after the last.
  REQUIRE(reports[position["w1"]].others_ready["b1"] == (position["b1"] < position["w1"]));
}

TEST_CASE("the grad-ready hook reports a leaf used twice by one op once", "[autograd][hook]") {
  Tensor x = Tensor::from_vector(std::vector<double>{1.5, -2.0}, {2}).requires_grad_();
  int calls = 0;
  ScopedHook hook([&](const Tensor& leaf) {
    ++calls;
    REQUIRE(leaf.same(x));
    heed::test::require_values(leaf.grad(), {2}, {3.0, -4.0}, 0.0);  // d sum(x*x) = 2x
  });
  sum(mul(x, x)).backward();
  REQUIRE(calls == 1);
}

TEST_CASE("the grad-ready hook sees gradients accumulated across passes", "[autograd][hook]") {
  Tensor w = Tensor::from_vector(std::vector<double>{2.0}, {1}).requires_grad_();
  std::vector<double> seen;
  ScopedHook hook([&](const Tensor& leaf) { seen.push_back(leaf.grad().item()); });
  sum(mul(w, 3.0)).backward();
  sum(mul(w, 3.0)).backward();
  REQUIRE(seen == std::vector<double>{3.0, 6.0});
  w.backward(Tensor::from_vector(std::vector<double>{0.5}, {1}));  // a leaf as the root
  REQUIRE(seen == std::vector<double>{3.0, 6.0, 6.5});
}

TEST_CASE("set_grad_ready_hook returns the previous hook, and hooks belong to one thread", "[autograd][hook]") {
  int a = 0, b = 0;
  GradReadyHook none = set_grad_ready_hook([&](const Tensor&) { ++a; });
  REQUIRE_FALSE(none);
  GradReadyHook first = set_grad_ready_hook([&](const Tensor&) { ++b; });
  REQUIRE(first);
  Tensor x = randn64({3}, 7).requires_grad_();
  std::thread other([&] { sum(exp(x)).backward(); });  // another thread: no hook of ours runs
  other.join();
  REQUIRE(a + b == 0);
  sum(exp(x)).backward();
  REQUIRE(b == 1);
  set_grad_ready_hook(first);
  sum(exp(x)).backward();
  REQUIRE(a == 1);
  set_grad_ready_hook(nullptr);
  sum(exp(x)).backward();
  REQUIRE(a + b == 2);
}

TEST_CASE("the grad-ready hook on a GPT: every parameter once, bits unchanged, the tied matrix last",
          "[autograd][hook]") {
  const nn::GPTConfig cfg{.vocab_size = 11, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 16, .bias = true};
  std::vector<int32_t> idx, targets;
  for (int i = 0; i < 2 * 8; ++i) {
    idx.push_back((i * 7 + 3) % 11);
    targets.push_back((i * 5 + 1) % 11);
  }
  nn::GPT plain(cfg, 5), hooked(cfg, 5);
  plain.loss(idx, targets, 2, 8).backward();

  const auto named = hooked.named_parameters();
  std::vector<std::string> order;
  {
    ScopedHook hook([&](const Tensor& leaf) {
      for (auto& [name, t] : named)
        if (t.same(leaf)) order.push_back(name);
    });
    hooked.loss(idx, targets, 2, 8).backward();
  }
  REQUIRE(order.size() == named.size());
  std::map<std::string, size_t> position;
  for (size_t i = 0; i < order.size(); ++i) REQUIRE(position.emplace(order[i], i).second);
  const auto reference = plain.named_parameters();
  for (size_t i = 0; i < named.size(); ++i) {
    INFO(named[i].first);
    REQUIRE(named[i].second.grad().to_vector<float>() == reference[i].second.grad().to_vector<float>());
  }
  // Layers finish from the top down; wte (also lm_head) gets its last contribution at the bottom.
  REQUIRE(position["transformer.ln_f.weight"] < position["transformer.h.1.mlp.c_fc.weight"]);
  REQUIRE(position["transformer.h.1.ln_1.weight"] < position["transformer.h.0.mlp.c_proj.weight"]);
  REQUIRE(position["transformer.h.0.attn.c_attn.weight"] < position["transformer.wte.weight"]);
  REQUIRE(order.back() == "transformer.wte.weight");
}

TEST_CASE("a leaf finished early keeps the buffer its gradient was made in (no copy)", "[autograd][hook]") {
  Tensor w = randn64({64}, 3);
  const void* produced = nullptr;
  Tensor y = record("times_two", mul(w.detach(), 2.0), {w}, [&produced](const Tensor& gy) {
    Tensor g = mul(gy, 2.0);
    produced = g.storage()->data();
    return std::vector<Tensor>{g};
  });
  const void* seen = nullptr;
  ScopedHook hook([&](const Tensor& leaf) { seen = leaf.grad().storage()->data(); });
  sum(mul(y, y)).backward();
  REQUIRE(produced != nullptr);
  REQUIRE(seen == produced);
}
