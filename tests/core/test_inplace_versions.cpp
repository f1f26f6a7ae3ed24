// In-place writes and autograd: version counts, and a backward that refuses values changed since
// its op saved them (torch's "modified by an inplace operation"), while ops that saved nothing
// still run. Each case modifies one tensor between the forward and the backward.
#include <functional>
#include <string>
#include <type_traits>
#include <utility>

#include "nn/kv_cache.h"
#include "optim/adam.h"
#include "optim/clip.h"
#include "support/helpers.h"

using namespace heed;
using Catch::Matchers::Contains;
using heed::test::randn64;

TEST_CASE("in-place writes count in version(), shared by views and detach, not by clones", "[autograd][version]") {
  Tensor a = randn64({2, 3}, 1);
  const uint64_t v0 = a.version();
  a.fill_(1.0);
  REQUIRE(a.version() == v0 + 1);
  a.copy_(randn64({2, 3}, 2));
  REQUIRE(a.version() == v0 + 2);
  Tensor row = select(a, 0, 1);  // a view: of a leaf that requires grad, so an op's output
  {
    NoGradGuard no_grad;  // a write to an op's output in grad mode is refused (test below)
    row.fill_(0.0);
  }
  REQUIRE(a.version() == v0 + 3);
  REQUIRE(row.version() == a.version());
  REQUIRE(a.detach().version() == a.version());
  Tensor c = a.detach().clone();  // not an op's output: writable in grad mode
  const uint64_t vc = c.version();
  c.fill_(2.0);
  REQUIRE(a.version() == v0 + 3);
  REQUIRE(c.version() == vc + 1);
  a.increment_version();  // a user's write through data<T>()
  REQUIRE(a.version() == v0 + 4);
}

namespace {

struct SavedCase {
  const char* what;  // the op and what is modified
  const char* op;    // the name the error must give
  // Runs the forward; returns the scalar to differentiate and the tensor to change afterwards.
  std::function<std::pair<Tensor, Tensor>()> run;
};

Tensor leaf(const Shape& shape, uint64_t seed) { return randn64(shape, seed).requires_grad_(); }
Tensor positive_leaf(const Shape& shape, uint64_t seed) { return (exp(randn64(shape, seed))).detach().requires_grad_(); }

std::vector<SavedCase> saved_cases() {
  std::vector<SavedCase> cases;
  cases.push_back({"mul, its first input", "mul", [] {
                     Tensor a = leaf({3}, 1), b = leaf({3}, 2);
                     return std::pair{sum(mul(a, b)), a};
                   }});
  cases.push_back({"mul, a broadcast second input", "mul", [] {
                     Tensor a = leaf({2, 3}, 1), b = leaf({3}, 2);
                     return std::pair{sum(mul(a, b)), b};
                   }});
  cases.push_back({"div, its divisor", "div", [] {
                     Tensor a = leaf({3}, 1), b = positive_leaf({3}, 2);
                     return std::pair{sum(div(a, b)), b};
                   }});
  cases.push_back({"div, its output", "div", [] {
                     Tensor a = leaf({3}, 1), b = positive_leaf({3}, 2);
                     Tensor y = div(a, b);
                     return std::pair{sum(mul(y, 2.0)), y};
                   }});
  cases.push_back({"rdiv_scalar, its input", "rdiv_scalar", [] {
                     Tensor a = positive_leaf({3}, 1);
                     return std::pair{sum(rdiv(2.0, a)), a};
                   }});
  cases.push_back({"pow, its input", "pow", [] {
                     Tensor a = positive_leaf({3}, 1);
                     return std::pair{sum(pow(a, 3.0)), a};
                   }});
  cases.push_back({"exp, its output", "exp", [] {
                     Tensor y = exp(leaf({3}, 1));
                     return std::pair{sum(mul(y, 1.0)), y};
                   }});
  cases.push_back({"log, its input", "log", [] {
                     Tensor a = positive_leaf({3}, 1);
                     return std::pair{sum(log(a)), a};
                   }});
  cases.push_back({"sqrt, its output", "sqrt", [] {
                     Tensor y = sqrt(positive_leaf({3}, 1));
                     return std::pair{sum(mul(y, 1.0)), y};
                   }});
  cases.push_back({"tanh, its output", "tanh", [] {
                     Tensor y = tanh(leaf({3}, 1));
                     return std::pair{sum(mul(y, 1.0)), y};
                   }});
  cases.push_back({"abs, its input", "abs", [] {
                     Tensor a = leaf({3}, 1);
                     return std::pair{sum(abs(a)), a};
                   }});
  cases.push_back({"relu, its output", "relu", [] {
                     Tensor y = relu(leaf({3}, 1));
                     return std::pair{sum(mul(y, 1.0)), y};
                   }});
  cases.push_back({"gelu, its input", "gelu", [] {
                     Tensor a = leaf({3}, 1);
                     return std::pair{sum(gelu(a)), a};
                   }});
  cases.push_back({"sigmoid, its output", "sigmoid", [] {
                     Tensor y = sigmoid(leaf({3}, 1));
                     return std::pair{sum(mul(y, 1.0)), y};
                   }});
  cases.push_back({"silu, its input", "silu", [] {
                     Tensor a = leaf({3}, 1);
                     return std::pair{sum(silu(a)), a};
                   }});
  cases.push_back({"sin, its input", "sin", [] {
                     Tensor a = leaf({3}, 1);
                     return std::pair{sum(sin(a)), a};
                   }});
  cases.push_back({"cos, its input", "cos", [] {
                     Tensor a = leaf({3}, 1);
                     return std::pair{sum(cos(a)), a};
                   }});
  cases.push_back({"clamp, its input", "clamp", [] {
                     Tensor a = leaf({3}, 1);
                     return std::pair{sum(clamp(a, -0.5, 0.5)), a};
                   }});
  cases.push_back({"maximum, its second input", "maximum", [] {
                     Tensor a = leaf({3}, 1), b = leaf({3}, 2);
                     return std::pair{sum(maximum(a, b)), b};
                   }});
  cases.push_back({"std, its output", "std", [] {
                     Tensor y = heed::std(leaf({5}, 1));
                     return std::pair{mul(y, 1.0), y};
                   }});
  cases.push_back({"where, its condition", "where", [] {
                     Tensor cond = Tensor::from_vector(std::vector<int32_t>{1, 0, 1}, {3}).to(DType::boolean);
                     return std::pair{sum(where(cond, leaf({3}, 1), leaf({3}, 2))), cond};
                   }});
  cases.push_back({"softmax, its output", "softmax", [] {
                     Tensor y = softmax(leaf({2, 4}, 1), -1);
                     return std::pair{sum(mul(y, randn64({2, 4}, 2).detach())), y};
                   }});
  cases.push_back({"log_softmax, its output", "log_softmax", [] {
                     Tensor y = log_softmax(leaf({2, 4}, 1), -1);
                     return std::pair{sum(mul(y, randn64({2, 4}, 2).detach())), y};
                   }});
  cases.push_back({"cross_entropy, its logits", "cross_entropy", [] {
                     Tensor logits = leaf({2, 4}, 1);
                     return std::pair{cross_entropy(logits, std::vector<int32_t>{1, 3}), logits};
                   }});
  cases.push_back({"layer_norm, its input", "layer_norm", [] {
                     Tensor x = leaf({2, 4}, 1);
                     return std::pair{sum(mul(layer_norm(x, leaf({4}, 2), leaf({4}, 3)), randn64({2, 4}, 4).detach())), x};
                   }});
  cases.push_back({"layer_norm, its weight", "layer_norm", [] {
                     Tensor w = leaf({4}, 2);
                     return std::pair{sum(mul(layer_norm(leaf({2, 4}, 1), w, leaf({4}, 3)), randn64({2, 4}, 4).detach())), w};
                   }});
  cases.push_back({"matmul, its left operand", "matmul", [] {
                     Tensor a = leaf({2, 3}, 1), b = leaf({3, 4}, 2);
                     return std::pair{sum(matmul(a, b)), a};
                   }});
  cases.push_back({"matmul, a transposed (non-contiguous) right operand", "matmul", [] {
                     Tensor b = leaf({4, 3}, 2);
                     return std::pair{sum(matmul(leaf({2, 3}, 1), transpose(b, 0, 1))), b};
                   }});
  cases.push_back({"linear, its weight", "linear", [] {
                     Tensor w = leaf({4, 3}, 2);
                     return std::pair{sum(linear(leaf({2, 3}, 1), w, leaf({4}, 3))), w};
                   }});
  cases.push_back({"add_linear, its input", "add_linear", [] {
                     Tensor x = leaf({2, 3}, 1);
                     return std::pair{sum(add_linear(leaf({2, 4}, 4), x, leaf({4, 3}, 2))), x};
                   }});
  cases.push_back({"attention_softmax, its output", "attention_softmax", [] {
                     Tensor y = attention_softmax(leaf({1, 2, 3, 3}, 1), 0.5, true);
                     return std::pair{sum(mul(y, randn64({1, 2, 3, 3}, 2).detach())), y};
                   }});
  cases.push_back({"attention_heads, its fused projection", "attention_heads", [] {
                     Tensor qkv = leaf({2, 3, 12}, 1);
                     AttentionHeadsOptions o;
                     o.n_head = 2;
                     o.scale = 0.5;
                     o.causal = true;
                     Tensor y = attention_heads({qkv, 0}, {qkv, 4}, {qkv, 8}, 4, o);
                     return std::pair{sum(mul(y, randn64({2, 3, 4}, 2).detach())), qkv};
                   }});
  cases.push_back({"attention_heads, the weights it handed out", "attention_heads", [] {
                     Tensor q = leaf({2, 3, 4}, 1), kv = leaf({2, 3, 8}, 2), weights;
                     AttentionHeadsOptions o;
                     o.n_head = 2;
                     o.scale = 0.5;
                     o.weights = &weights;
                     Tensor y = attention_heads({q, 0}, {kv, 0}, {kv, 4}, 4, o);
                     return std::pair{sum(mul(y, randn64({2, 3, 4}, 3).detach())), weights};
                   }});
  return cases;
}

}  // namespace

TEST_CASE("a backward refuses a saved tensor modified in place since its forward", "[autograd][version]") {
  for (const SavedCase& c : saved_cases()) {
    DYNAMIC_SECTION(c.what) {
      auto [loss, modified] = c.run();
      // Untouched, the same graph runs (retained, so the modified run below can use it).
      REQUIRE_NOTHROW(loss.backward(/*retain_graph=*/true));
      {
        NoGradGuard no_grad;
        modified.fill_(0.5);
      }
      REQUIRE_THROWS_WITH(loss.backward(), Contains(std::string("backward of '") + c.op + "'") &&
                                               Contains("modified in place after the forward saved it"));
    }
  }
}

TEST_CASE("the refusal names which tensor changed", "[autograd][version]") {
  Tensor a = leaf({3}, 1), b = leaf({2, 3}, 2);
  Tensor loss = sum(mul(a, b));
  b.fill_(0.0);
  REQUIRE_THROWS_WITH(loss.backward(), Contains("one of its inputs (float64 [2, 3])") && Contains("version 1, saved at 0"));
  Tensor y = exp(leaf({4}, 3));
  Tensor loss2 = sum(mul(y, 2.0));
  {
    NoGradGuard no_grad;
    y.fill_(1.0);
  }
  REQUIRE_THROWS_WITH(loss2.backward(), Contains("backward of 'exp': its output (float64 [4])"));
  Tensor cond = Tensor::from_vector(std::vector<int32_t>{1, 0}, {2}).to(DType::boolean);
  Tensor loss3 = sum(where(cond, leaf({2}, 4), leaf({2}, 5)));
  cond.fill_(1.0);
  REQUIRE_THROWS_WITH(loss3.backward(), Contains("backward of 'where': a tensor it saved (bool, 2 elements)"));
}

TEST_CASE("ops that saved nothing of a tensor still run backward after it changes, with torch's gradients",
          "[autograd][version]") {
  // add, sub, neg, scalar arithmetic, sums, views, concatenation, embedding, masked_fill and
  // where's values need no values of these tensors; neither does a product's operand whose own
  // partner needs no gradient (dA = g B^T reads only B).
  Tensor a = leaf({2, 3}, 1), b = leaf({2, 3}, 2), w = leaf({5, 3}, 3);
  const Tensor consts = randn64({3, 4}, 4).detach();
  Tensor masked = masked_fill(a, Tensor::from_vector(std::vector<int32_t>{1, 0, 0}, {3}).to(DType::boolean), 0.0);
  Tensor cond = Tensor::from_vector(std::vector<int32_t>{0, 1, 1}, {3}).to(DType::boolean);
  Tensor loss = sum(add(a, b)) + sum(sub(a, b)) + sum(neg(b)) + mean(mul(add(a, 1.0), 3.0)) +
                sum(reshape(transpose(a, 0, 1), {6})) + sum(slice(concat({a, b}, 0), 0, 1, 3)) +
                sum(embedding(w, {4, 0, 4}, {3})) + sum(masked) + sum(where(cond, a, b)) + sum(matmul(a, consts));
  {
    NoGradGuard no_grad;
    a.fill_(7.0);
    b.fill_(-3.0);
    w.fill_(2.0);
  }
  loss.backward();
  // d/da: 1 + 1 + 3/6 + 1 + [0 or 1: the concat slice keeps a's row 1] + [0 where masked] + cond + rows of consts
  const Tensor ones_c = sum(consts, 1);
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j) {
      const double expected = 1 + 1 + 0.5 + 1 + (i == 1 ? 1 : 0) + (j == 0 ? 0 : 1) + (j == 0 ? 0 : 1) + ones_c.at({j});
      REQUIRE(a.grad().at({i, j}) == Approx(expected).epsilon(1e-12));
      REQUIRE(b.grad().at({i, j}) == Approx(1 - 1 - 1 + (i == 0 ? 1 : 0) + (j == 0 ? 1 : 0)).margin(1e-12));
    }
  heed::test::require_values(w.grad(), {5, 3}, {1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2}, 0.0);
}

TEST_CASE("an optimizer step between a retained backward and the next is refused", "[autograd][version][optim]") {
  Tensor w = randn64({3, 2}, 1).detach().to(DType::f32).requires_grad_();
  const Tensor x = randn64({4, 2}, 2).detach().to(DType::f32);
  Tensor w2 = randn64({2, 3}, 3).detach().to(DType::f32).requires_grad_();
  optim::AdamW opt({{{{"w", w}, {"w2", w2}}}}, 0.1);
  // The second layer keeps w2 for its input's gradient (the first keeps only x: x needs none).
  Tensor loss = sum(linear(tanh(linear(x, w)), w2));
  loss.backward(/*retain_graph=*/true);
  const uint64_t before = w2.version();
  opt.step();
  REQUIRE(w2.version() == before + 1);
  REQUIRE_THROWS_WITH(loss.backward(), Contains("backward of 'linear': one of its inputs (float32 [2, 3])") &&
                                           Contains("modified in place"));
  // The usual loop (forward, backward, step, zero_grad) never meets it.
  for (int it = 0; it < 3; ++it) {
    Tensor l = sum(linear(tanh(linear(x, w)), w2));
    REQUIRE_NOTHROW(l.backward());
    opt.step();
    opt.zero_grad();
  }
}

TEST_CASE("a refused backward changes nothing: no gradient written, no grad-ready hook called", "[autograd][version]") {
  // Without the check of every Node before the pass, the add's leaf a would be finished (and
  // reported to the hook, which data-parallel training uses to send it) before exp's Node refused.
  Tensor a = leaf({3}, 1), b = leaf({3}, 2);
  Tensor e = exp(b);
  Tensor loss = sum(mul(e, 2.0)) + sum(add(a, 1.0));
  {
    NoGradGuard no_grad;
    e.fill_(0.0);
  }
  int calls = 0;
  GradReadyHook previous = set_grad_ready_hook([&](const Tensor&) { ++calls; });
  CHECK_THROWS_WITH(loss.backward(), Contains("backward of 'exp'"));
  set_grad_ready_hook(std::move(previous));
  CHECK(calls == 0);
  CHECK_FALSE(a.grad().defined());
  CHECK_FALSE(b.grad().defined());
}

TEST_CASE("div keeps its output only for the divisor's gradient, as torch keeps what it reads", "[autograd][version]") {
  Tensor a = leaf({3}, 1);
  const Tensor b = Tensor::from_vector(std::vector<double>{2, 4, 8}, {3});
  Tensor y = div(a, b);
  Tensor loss = sum(mul(y, 1.0));
  {
    NoGradGuard no_grad;
    y.fill_(100.0);  // read by neither gradient here: a's is g / b
  }
  loss.backward();
  heed::test::require_values(a.grad(), {3}, {0.5, 0.25, 0.125}, 0);
}

TEST_CASE("clip_grad_norm, the KV cache and the optimizers count their writes", "[autograd][version]") {
  // A graph built on a gradient (a second-order use) sees clip_grad_norm's scaling.
  Tensor p = Tensor::from_vector(std::vector<double>{3, 4}, {2}).requires_grad_();
  sum(mul(p, p)).backward();  // p.grad = (6, 8)
  Tensor w = leaf({2}, 5);
  Tensor loss = sum(mul(w, p.grad()));
  const uint64_t before = p.grad().version();
  optim::clip_grad_norm({p}, 1.0);
  CHECK(p.grad().version() == before + 1);
  CHECK_THROWS_WITH(loss.backward(), Contains("backward of 'mul'") && Contains("modified in place"));

  // The cache's rows are rewritten after clear(): a graph over the old rows is refused.
  nn::KVCache cache(1, 1, 4, 2, DType::f64);
  Tensor q = leaf({1, 2, 2}, 6);
  const Tensor kv = cache.append(0, randn64({1, 2, 4}, 7).detach(), 0, 2);
  AttentionHeadsOptions o;
  o.scale = 0.5;
  Tensor y = attention_heads({q, 0}, {kv, 0}, {kv, 2}, 2, o);
  cache.clear();
  cache.append(0, randn64({1, 2, 4}, 8).detach(), 0, 2);
  CHECK_THROWS_WITH(sum(y).backward(), Contains("backward of 'attention_heads'") && Contains("modified in place"));
}

TEST_CASE("in-place arithmetic: torch's values and broadcasting, each write counted, graphs over it refused",
          "[autograd][version]") {
  Tensor x = Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor row = Tensor::from_vector(std::vector<double>{10, 20, 30}, {3});
  const uint64_t v0 = x.version();
  x.add_(row);  // [[11, 22, 33], [14, 25, 36]]
  x.sub_(row, 0.5);  // [[6, 12, 18], [9, 15, 21]]
  x.mul_(2.0).div_(3.0);  // chains, as torch's: [[4, 8, 12], [6, 10, 14]]
  x.add_(1.0).sub_(1.0);
  heed::test::require_values(x, {2, 3}, {4, 8, 12, 6, 10, 14}, 1e-12);
  CHECK(x.version() == v0 + 6);
  x.mul_(Tensor::from_vector(std::vector<double>{2}, {1})).div_(row);
  heed::test::require_values(x, {2, 3}, {0.8, 0.8, 0.8, 1.2, 1.0, 14.0 / 15}, 1e-12);
  // A view is written in place through its strides, and its base sees it.
  Tensor col = select(x, 1, 0);
  col.zero_();
  CHECK(x.at({0, 0}) == 0);
  CHECK(x.at({1, 0}) == 0);
  // The same values as the out-of-place expression a training loop would write.
  Tensor p = randn64({4, 3}, 90).detach(), g = randn64({4, 3}, 91).detach();
  Tensor expected = p - g * 0.1;
  p.sub_(g, 0.1);
  CHECK(p.to_vector<double>() == expected.to_vector<double>());
  // The operand must broadcast to this tensor, not the other way round, and have its dtype.
  CHECK_THROWS_WITH(row.detach().add_(x), Contains("add_: [2, 3] does not broadcast to this tensor's shape [3]"));
  CHECK_THROWS_WITH(x.mul_(Tensor::ones({3})), Contains("mul_: a float32 operand for a float64 tensor"));
  // A graph that saved the tensor refuses its backward afterwards.
  Tensor w = leaf({3}, 92), a = leaf({3}, 93);
  Tensor loss = sum(mul(w, a));
  {
    NoGradGuard no_grad;
    w.mul_(0.5);
  }
  CHECK_THROWS_WITH(loss.backward(), Contains("backward of 'mul'") && Contains("modified in place"));
}

TEST_CASE("an in-place write to an op's output in grad mode is refused, not left out of the gradient",
          "[autograd][version]") {
  // torch records y.mul_(3) and gives x.grad = 2 * 36 x = [72, 144]; heed records no in-place
  // write, and would have given [24, 48] without a word.
  Tensor x = Tensor::from_vector(std::vector<double>{1, 2}, {2}).requires_grad_();
  Tensor y = mul(x, 2.0);
  const uint64_t before = y.version();
  const std::vector<std::pair<const char*, std::function<void()>>> writes = {
      {"mul_", [&] { y.mul_(3.0); }},
      {"add_", [&] { y.add_(Tensor::ones({2}, DType::f64)); }},
      {"sub_", [&] { y.sub_(1.0); }},
      {"div_", [&] { y.div_(2.0); }},
      {"copy_", [&] { y.copy_(Tensor::zeros({2}, DType::f64)); }},
      {"fill_", [&] { y.fill_(0.0); }},
      {"zero_", [&] { y.zero_(); }},
      {"copy_", [&] { y[0] = Tensor::scalar(5.0, DType::f64); }},  // a view of y: select's output
      {"fill_", [&] { y[1] = 5.0; }},
  };
  for (const auto& [op, write] : writes) {
    INFO(op);
    REQUIRE_THROWS_WITH(write(), Contains(std::string(op) + ": this tensor is the output of '") &&
                                     Contains("in a graph being recorded"));
  }
  REQUIRE(y.version() == before);  // nothing was written
  heed::test::require_values(y, {2}, {2, 4}, 0);
  // The out-of-place op the message suggests gives torch's gradient.
  Tensor y3 = mul(y, 3.0);
  sum(mul(y3, y3)).backward();
  heed::test::require_values(x.grad(), {2}, {72, 144}, 0);
  // A view of a parameter is an op's output too (torch: "a view of a leaf Variable that requires
  // grad is being used in an in-place operation"); the parameter itself, and any write under a
  // NoGradGuard, may be written.
  Tensor p = Tensor::zeros({2, 3}, DType::f64).requires_grad_();
  REQUIRE_THROWS_WITH(p[0] = 1.0, Contains("fill_: this tensor is the output of 'squeeze'"));
  REQUIRE_NOTHROW(p.fill_(1.0));
  {
    NoGradGuard no_grad;
    p[0] = 2.0;
    y.mul_(3.0);
  }
  heed::test::require_values(p, {2, 3}, {2, 2, 2, 1, 1, 1}, 0);
  heed::test::require_values(y, {2}, {6, 12}, 0);
}

TEST_CASE("a write to an expanded view is refused where elements share memory, as torch's", "[autograd][version]") {
  Tensor v = Tensor::from_vector(std::vector<double>{1, 2}, {2, 1});
  Tensor e = expand(v, {2, 3});  // stride 0 on dim 1
  REQUIRE_THROWS_WITH(e.add_(1.0), Contains("add_: more than one element of this tensor of shape [2, 3] is one memory location") &&
                                       Contains("stride 0 on dim 1"));
  REQUIRE_THROWS_WITH(e.copy_(Tensor::zeros({2, 3}, DType::f64)), Contains("copy_: more than one element"));
  REQUIRE_THROWS_WITH(e.mul_(Tensor::ones({2, 3}, DType::f64)), Contains("mul_: more than one element"));
  heed::test::require_values(v, {2, 1}, {1, 2}, 0);
  // Every element gets the same value: torch allows fill_ and zero_ here, and so does heed.
  e.fill_(7.0);
  heed::test::require_values(v, {2, 1}, {7, 7}, 0);
  e.zero_();
  heed::test::require_values(v, {2, 1}, {0, 0}, 0);
  // A size-1 dim's stride is never read: such a view is writable.
  Tensor one = expand(Tensor::from_vector(std::vector<double>{3}, {1, 1}), {1, 1});
  REQUIRE_NOTHROW(one.add_(1.0));
}

TEST_CASE("assigning to an indexed view writes into the tensor, as libtorch and Python's item assignment",
          "[autograd][version]") {
  static_assert(!std::is_assignable_v<Tensor&, double>, "a named Tensor is rebound, never filled");
  static_assert(std::is_assignable_v<Tensor&&, double>);
  Tensor x = Tensor::ones({2, 3}, DType::f64);
  const uint64_t v0 = x.version();
  x[0] = Tensor::zeros({3}, DType::f64);
  heed::test::require_values(x, {2, 3}, {0, 0, 0, 1, 1, 1}, 0);
  x[1] = Tensor::from_vector(std::vector<double>{5}, {1});  // broadcast, as torch's copy_
  heed::test::require_values(x, {2, 3}, {0, 0, 0, 5, 5, 5}, 0);
  slice(x, 1, 0, 2) = 7.0;
  heed::test::require_values(x, {2, 3}, {7, 7, 0, 7, 7, 5}, 0);
  x.select(1, 2) = Tensor::from_vector(std::vector<float>{8, 9}, {2});  // another dtype: cast, as torch
  heed::test::require_values(x, {2, 3}, {7, 7, 8, 7, 7, 9}, 0);
  x[0][1] = -1.0;
  heed::test::require_values(x, {2, 3}, {7, -1, 8, 7, 7, 9}, 0);
  REQUIRE(x.version() == v0 + 5);  // each counted, so a graph that saved x refuses its backward
  REQUIRE_THROWS_WITH(x[0] = Tensor::zeros({2}, DType::f64), Contains("copy_"));  // does not broadcast
  // A named handle is rebound, never written through: Python's `r = x[0]; r = zeros(3)`.
  Tensor r = x[0];
  r = Tensor::zeros({3}, DType::f64);
  heed::test::require_values(x, {2, 3}, {7, -1, 8, 7, 7, 9}, 0);
  REQUIRE(x.version() == v0 + 5);
}

// A view of a non-contiguous piece (nanoGPT's k = c_attn(x).split(C, 2)[1].view(B, T, nh, hs)) shares
// the storage, so it shares the version: a change through the base, another piece, or the view
// itself is seen by a backward that saved the view, as in torch.
TEST_CASE("a view of a split piece shares its input's version", "[autograd][version]") {
  Tensor y = randn64({2, 3, 12}, 1).detach();
  Tensor k = view(split(y, 4, 2)[1], {2, 3, 2, 2});
  REQUIRE(k.storage() == y.storage());
  REQUIRE(k.version() == y.version());
  for (int writer = 0; writer < 3; ++writer) {
    INFO("writer " << writer);
    Tensor b = leaf({2, 3, 2, 2}, 2);
    Tensor loss = sum(mul(k, b));  // mul saves k for b's gradient
    const uint64_t before = y.version();
    if (writer == 0) y.fill_(1.0);
    if (writer == 1) split(y, 4, 2)[0].fill_(2.0);  // q, beside k in the same storage
    if (writer == 2) k.fill_(3.0);
    CHECK(y.version() == before + 1);
    CHECK(k.version() == y.version());
    CHECK_THROWS_WITH(loss.backward(), Contains("backward of 'mul'") && Contains("modified in place"));
  }
}
