// The autograd engine: accumulation, retain_graph, no_grad, detach, deep graphs, errors.
#include <cmath>

#include "support/helpers.h"

using namespace heed;
using heed::test::randn64;

TEST_CASE("a tensor used twice accumulates both gradients", "[autograd]") {
  Tensor x = Tensor::from_vector(std::vector<double>{1.5, -2.0, 0.25}, {3}).requires_grad_();
  // y = sum(x * x + x): dy/dx = 2x + 1, both uses of x contribute.
  sum(x * x + x).backward();
  heed::test::require_values(x.grad(), {3}, {4.0, -3.0, 1.5}, 1e-12);
}

TEST_CASE("a residual branch accumulates into the shared input", "[autograd]") {
  Tensor x = Tensor::from_vector(std::vector<double>{0.5, 1.0}, {2}).requires_grad_();
  Tensor h = tanh(x);
  Tensor y = sum(h + mul(h, 3.0));  // h feeds two ops; d/dx = 4 (1 - tanh^2)
  y.backward();
  const double t0 = std::tanh(0.5), t1 = std::tanh(1.0);
  heed::test::require_values(x.grad(), {2}, {4 * (1 - t0 * t0), 4 * (1 - t1 * t1)}, 1e-12);
}

TEST_CASE("gradients accumulate across backward calls until zero_grad", "[autograd]") {
  Tensor w = Tensor::from_vector(std::vector<double>{2.0}, {1}).requires_grad_();
  sum(mul(w, 3.0)).backward();
  sum(mul(w, 3.0)).backward();
  heed::test::require_values(w.grad(), {1}, {6.0}, 1e-12);
  w.zero_grad();
  REQUIRE_FALSE(w.grad().defined());
  sum(mul(w, 3.0)).backward();
  heed::test::require_values(w.grad(), {1}, {3.0}, 1e-12);
}

TEST_CASE("the graph is freed after backward unless retained", "[autograd]") {
  Tensor x = Tensor::from_vector(std::vector<double>{1.0, 2.0}, {2}).requires_grad_();
  Tensor y = sum(exp(x));
  y.backward(/*retain_graph=*/true);
  y.backward();  // allowed: the first call kept the graph
  heed::test::require_values(x.grad(), {2}, {2 * std::exp(1.0), 2 * std::exp(2.0)}, 1e-12);
  REQUIRE_THROWS_WITH(y.backward(), Catch::Contains("already freed") && Catch::Contains("retain_graph"));
}

TEST_CASE("no_grad records nothing and detach cuts the graph", "[autograd]") {
  Tensor x = randn64({2, 2}, 1);
  {
    NoGradGuard guard;
    Tensor y = x * x;
    REQUIRE_FALSE(y.requires_grad());
    REQUIRE(y.grad_fn() == nullptr);
  }
  REQUIRE(grad_mode_enabled());
  Tensor d = (x * 2.0).detach();
  REQUIRE_FALSE(d.requires_grad());
  REQUIRE(d.storage() != nullptr);
  // d is a constant: only the direct use of x contributes.
  sum(x * d).backward();
  heed::test::require_values(x.grad(), {2, 2}, d.to_vector<double>(), 1e-12);
}

TEST_CASE("backward with an explicit upstream gradient", "[autograd]") {
  Tensor x = Tensor::from_vector(std::vector<double>{1.0, 2.0, 3.0}, {3}).requires_grad_();
  Tensor y = x * x;
  y.backward(Tensor::from_vector(std::vector<double>{1.0, 0.5, -1.0}, {3}));
  heed::test::require_values(x.grad(), {3}, {2.0, 2.0, -6.0}, 1e-12);
}

TEST_CASE("backward on a non-scalar without a gradient names the shape", "[autograd]") {
  Tensor x = randn64({2, 3}, 2);
  REQUIRE_THROWS_WITH((x * 2.0).backward(), Catch::Contains("backward") && Catch::Contains("[2, 3]"));
  REQUIRE_THROWS_WITH((x * 2.0).backward(Tensor::ones({3, 2}, DType::f64)),
                      Catch::Contains("[3, 2]") && Catch::Contains("[2, 3]"));
}

TEST_CASE("backward on a tensor that needs no gradient is an error", "[autograd]") {
  Tensor x = Tensor::ones({2}, DType::f64);
  REQUIRE_THROWS_WITH(sum(x).backward(), Catch::Contains("does not require grad"));
}

TEST_CASE("an op's output can be marked requires_grad (a no-op) but not unmarked, as torch", "[autograd]") {
  Tensor x = randn64({2}, 3);
  Tensor y = x * 2.0;
  y.requires_grad_();  // torch: y.requires_grad_() on a non-leaf does nothing
  REQUIRE(y.grad_fn());
  // Unmarking it would silently cut the gradient's path through y: an error, as torch's.
  REQUIRE_THROWS_WITH(y.requires_grad_(false), Catch::Contains("leaf"));
  REQUIRE(y.requires_grad());
  sum(y * 3.0).backward();
  REQUIRE(x.grad().to_vector<double>() == std::vector<double>{6.0, 6.0});
  Tensor leaf = randn64({2}, 4);
  leaf.requires_grad_(false);
  REQUIRE_FALSE(leaf.requires_grad());
}

TEST_CASE("a chain of 10,000 ops runs backward without overflowing the stack", "[autograd]") {
  Tensor x = Tensor::from_vector(std::vector<double>{1.0}, {1}).requires_grad_();
  Tensor y = x;
  const int n = 10000;
  for (int i = 0; i < n; ++i) y = mul(y, 1.0001);
  sum(y).backward();
  REQUIRE(x.grad().item() == Approx(std::pow(1.0001, n)).epsilon(1e-10));
}

TEST_CASE("a chain of 200,000 ops is destroyed without recursion", "[autograd]") {
  Tensor x = Tensor::from_vector(std::vector<float>{1.0f}, {1}).requires_grad_();
  Tensor y = x;
  for (int i = 0; i < 200000; ++i) y = add(y, 1.0);
  REQUIRE(y.item() == Approx(200001.0));
  y = Tensor();  // drops the whole graph; a recursive destructor would overflow here
  REQUIRE(x.defined());
}

TEST_CASE("a gradient never aliases another leaf's gradient", "[autograd]") {
  // add's backward returns the same upstream buffer for both inputs; each leaf must own its own.
  Tensor a = Tensor::zeros({3}, DType::f64).requires_grad_();
  Tensor b = Tensor::zeros({3}, DType::f64).requires_grad_();
  sum(a + b).backward();
  REQUIRE(a.grad().storage() != b.grad().storage());
  a.grad().fill_(7.0);
  heed::test::require_values(b.grad(), {3}, {1.0, 1.0, 1.0}, 0.0);
}

TEST_CASE("float64 to float32 conversion is differentiable", "[autograd]") {
  Tensor x = randn64({4}, 4);
  Tensor y = sum(mul(x.to(DType::f32), 2.0));
  REQUIRE(y.dtype() == DType::f32);
  y.backward();
  REQUIRE(x.grad().dtype() == DType::f64);
  heed::test::require_values(x.grad(), {4}, {2.0, 2.0, 2.0, 2.0}, 0.0);
}

TEST_CASE("a user-defined op with its own backward passes gradcheck", "[autograd][gradcheck]") {
  // softplus(x) = log(1 + e^x), written as a new op with record(): the public extension API.
  auto softplus = [](const Tensor& x) {
    Tensor y = Tensor::empty(x.shape(), x.dtype());
    {
      NoGradGuard g;
      y.copy_(log(add(exp(x), 1.0)));
    }
    return record("softplus", y, {x}, [x = x.detach()](const Tensor& gy) {
      return std::vector<Tensor>{mul(gy, rdiv(1.0, add(exp(neg(x)), 1.0)))};  // sigmoid(x)
    });
  };
  Tensor x = randn64({3, 4}, 5);
  heed::test::require_gradcheck([&](const std::vector<Tensor>& in) { return softplus(in[0]); }, {x});
  // and on a transposed (non-contiguous) input
  Tensor xt = transpose(randn64({4, 3}, 6), 0, 1).detach().requires_grad_();
  REQUIRE_FALSE(xt.is_contiguous());
  heed::test::require_gradcheck([&](const std::vector<Tensor>& in) { return softplus(in[0]); }, {xt});
}

TEST_CASE("gradcheck rejects float32 inputs and reports the failing element", "[gradcheck]") {
  Tensor x32 = Tensor::ones({2}).requires_grad_();
  REQUIRE_THROWS_WITH(gradcheck([](const std::vector<Tensor>& in) { return in[0]; }, {x32}),
                      Catch::Contains("float64"));
  // An op's output keeps no gradient: refused, rather than failing with an analytic zero.
  Tensor viewed = randn64({2, 3}, 7).transpose(0, 1);
  REQUIRE_THROWS_WITH(gradcheck([](const std::vector<Tensor>& in) { return in[0] * 2.0; }, {viewed}),
                      Catch::Contains("input 0 is the output of permute, not a leaf"));  // transpose is a permute
  // A backward that is wrong on one element only: gradcheck must name that element.
  auto bad = [](const Tensor& x) {
    Tensor y = Tensor::empty(x.shape(), x.dtype());
    y.copy_(x);
    return record("bad_identity", y, {x}, [](const Tensor& g) {
      Tensor d = g.clone();
      double* p = d.data<double>();  // element [1, 2] gets a wrong gradient
      p[1 * 3 + 2] *= 1.01;
      return std::vector<Tensor>{d};
    });
  };
  Tensor x = randn64({2, 3}, 7);
  auto r = gradcheck([&](const std::vector<Tensor>& in) { return bad(in[0]); }, {x});
  INFO(r.report());
  REQUIRE_FALSE(r.ok);
  REQUIRE(r.input == 0);
  REQUIRE(r.index == std::vector<int64_t>{1, 2});
  REQUIRE(r.report().find("FAILED") != std::string::npos);
}

TEST_CASE("set_ makes every handle of a tensor read and write another's storage, without a copy", "[autograd]") {
  Tensor p = Tensor::zeros({2, 3});
  p.requires_grad_();
  mul(p, 2.0).sum().backward();
  REQUIRE(p.grad().defined());
  const Tensor alias = p;  // another handle of the same tensor (a tied weight)
  const Tensor src = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3});
  p.set_(src);
  REQUIRE(alias.data<float>() == src.data<float>());  // the same memory, not a copy
  REQUIRE(alias.to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
  REQUIRE_FALSE(p.grad().defined());  // the old gradient belonged to the old values
  REQUIRE(p.requires_grad());
  p.data<float>()[0] = 9;  // writes reach src: they share storage
  REQUIRE(src.to_vector<float>()[0] == 9);
  // A view: its shape, strides and offset come along.
  p.set_(transpose(src, 0, 1));
  REQUIRE(alias.shape() == Shape{3, 2});
  REQUIRE(alias.to_vector<float>() == std::vector<float>{9, 4, 2, 5, 3, 6});
}
