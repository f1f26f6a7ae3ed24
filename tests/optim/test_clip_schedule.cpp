// clip_grad_norm against torch.nn.utils.clip_grad_norm_ (torch 1.13) and cosine_lr against the
// reference script's lr_at (scripts/torch_reference.py).
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "core/heed.h"
#include "optim/clip.h"
#include "optim/schedule.h"
#include "support/helpers.h"

using namespace heed;

namespace {

Tensor param_with_grad(const Shape& shape, const std::vector<double>& grad, DType dt) {
  Tensor p = Tensor::zeros(shape, dt).requires_grad_();
  p.impl().grad = Tensor::from_vector(grad, shape).to(dt).impl_ptr();
  return p;
}

}  // namespace

// /usr/bin/python3 -c "
// import torch
// for dt in [torch.float64, torch.float32]:
//     a = torch.zeros(2, 3, dtype=dt, requires_grad=True); b = torch.zeros(3, dtype=dt, requires_grad=True); c = torch.zeros(2, dtype=dt, requires_grad=True)
//     a.grad = torch.tensor([[0.5, -1.0, 2.0], [0.25, 1.5, -0.75]], dtype=dt); b.grad = torch.tensor([3.0, -0.5, 1.0], dtype=dt)
//     n = torch.nn.utils.clip_grad_norm_([a, b, c], 1.0)
//     print(repr(n.item()), [repr(v) for v in a.grad.flatten().tolist()], [repr(v) for v in b.grad.tolist()])
// "
// 4.286607049870562 ['0.11664234149308285', '-0.2332846829861657', '0.4665693659723314', '0.058321170746541424', '0.34992702447924856', '-0.17496351223962428'] ['0.6998540489584971', '-0.11664234149308285', '0.2332846829861657']
// 4.286607265472412 ['0.11664233356714249', '-0.23328466713428497', '0.46656933426856995', '0.05832116678357124', '0.34992700815200806', '-0.17496350407600403'] ['0.6998540163040161', '-0.11664233356714249', '0.23328466713428497']
TEST_CASE("clip_grad_norm matches torch.nn.utils.clip_grad_norm_ (float64 and float32)", "[optim]") {
  for (DType dt : {DType::f64, DType::f32}) {
    INFO(dtype_name(dt));
    Tensor a = param_with_grad({2, 3}, {0.5, -1.0, 2.0, 0.25, 1.5, -0.75}, dt);
    Tensor b = param_with_grad({3}, {3.0, -0.5, 1.0}, dt);
    Tensor c = Tensor::zeros({2}, dt).requires_grad_();  // no gradient: skipped
    // By hand: 0.25+1+4+0.0625+2.25+0.5625 + 9+0.25+1 = 18.375, sqrt = 4.28660704987...
    const double norm = optim::clip_grad_norm({a, b, c}, 1.0);
    REQUIRE(norm == Approx(std::sqrt(18.375)).epsilon(1e-12));
    REQUIRE(norm == Approx(dt == DType::f64 ? 4.286607049870562 : 4.286607265472412).epsilon(1e-7));
    test::require_values(a.grad(), {2, 3},
                         {0.11664234149308285, -0.2332846829861657, 0.4665693659723314, 0.058321170746541424,
                          0.34992702447924856, -0.17496351223962428},
                         1e-7);
    test::require_values(b.grad(), {3}, {0.6998540489584971, -0.11664234149308285, 0.2332846829861657}, 1e-7);
    REQUIRE_FALSE(c.grad().defined());
    // The clipped gradients' norm is max_norm / (1 + 1e-6/norm), just under 1.
    REQUIRE(optim::clip_grad_norm({a, b, c}, INFINITY) == Approx(1.0 / (1.0 + 1e-6 / norm)).epsilon(1e-6));
  }
}

// /usr/bin/python3 -c "
// import torch
// a = torch.zeros(2, dtype=torch.float64, requires_grad=True); a.grad = torch.tensor([0.6, 0.8], dtype=torch.float64)
// n = torch.nn.utils.clip_grad_norm_([a], 1.0); print(repr(n.item()), [repr(v) for v in a.grad.tolist()])
// a.grad = torch.tensor([0.6, 0.8], dtype=torch.float64)
// n = torch.nn.utils.clip_grad_norm_([a], 10.0); print(repr(n.item()), [repr(v) for v in a.grad.tolist()])
// "
// 1.0 ['0.5999994000006', '0.7999992000008']
// 1.0 ['0.6', '0.8']
TEST_CASE("clip_grad_norm follows PyTorch's max_norm / (norm + 1e-6) rule at the boundary", "[optim]") {
  Tensor a = param_with_grad({2}, {0.6, 0.8}, DType::f64);
  REQUIRE(optim::clip_grad_norm({a}, 1.0) == Approx(1.0).epsilon(1e-15));
  // norm == max_norm: PyTorch still scales by 1/(1 + 1e-6).
  test::require_values(a.grad(), {2}, {0.5999994000006, 0.7999992000008}, 1e-13);
  Tensor b = param_with_grad({2}, {0.6, 0.8}, DType::f64);
  REQUIRE(optim::clip_grad_norm({b}, 10.0) == Approx(1.0).epsilon(1e-15));
  REQUIRE(b.grad().to_vector<double>() == std::vector<double>{0.6, 0.8});  // untouched
  Tensor none = Tensor::zeros({3}).requires_grad_();
  REQUIRE(optim::clip_grad_norm({none}, 1.0) == 0.0);
  REQUIRE_THROWS_WITH(optim::clip_grad_norm({a}, -1.0), Catch::Contains("max_norm"));
  REQUIRE_THROWS_WITH(optim::clip_grad_norm({a}, std::nan("")), Catch::Contains("max_norm"));
}

// 100 elements (vectorised body and tail of the sum of squares).
// /usr/bin/python3 -c "
// import torch
// for dt in [torch.float64, torch.float32]:
//     p = torch.zeros(100, dtype=dt, requires_grad=True); p.grad = torch.tensor([(i % 7 - 3) * 0.5 for i in range(100)], dtype=dt)
//     n = torch.nn.utils.clip_grad_norm_([p], 2.0); print(repr(n.item()), repr(p.grad[4].item()), repr(p.grad[99].item()))
// "
// 10.062305898749054 0.09938078912344843 -0.19876157824689686
// 10.062305450439453 0.09938079118728638 -0.19876158237457275
TEST_CASE("clip_grad_norm on a longer gradient matches PyTorch", "[optim]") {
  for (DType dt : {DType::f64, DType::f32}) {
    INFO(dtype_name(dt));
    std::vector<double> g(100);
    for (int i = 0; i < 100; ++i) g[i] = (i % 7 - 3) * 0.5;
    Tensor p = param_with_grad({100}, g, dt);
    REQUIRE(optim::clip_grad_norm({p}, 2.0) == Approx(10.062305898749054).epsilon(1e-7));
    auto v = p.grad().to_vector<double>();
    REQUIRE(v[4] == Approx(0.09938078912344843).epsilon(1e-6));
    REQUIRE(v[99] == Approx(-0.19876157824689686).epsilon(1e-6));
    for (int i = 0; i < 100; ++i) REQUIRE(v[i] == Approx(g[i] * 2.0 / (10.062305898749054 + 1e-6)).epsilon(1e-6));
  }
}

// /usr/bin/python3 -c "
// import sys, types; sys.path.insert(0, 'scripts'); from torch_reference import lr_at
// a = types.SimpleNamespace(lr=1e-3, min_lr=1e-4, warmup_iters=100, lr_decay_iters=5000)
// for it in [0, 99, 100, 101, 2550, 4999, 5000, 5001, 10000]: print(it, repr(lr_at(it, a)))
// "
TEST_CASE("cosine_lr is the reference script's lr_at", "[optim]") {
  const std::vector<std::pair<int64_t, double>> ref{
      {0, 9.900990099009901e-06},    {99, 0.0009900990099009901}, {100, 0.001},
      {101, 0.000999999907510999},   {2550, 0.00055},             {4999, 0.00010000009248900101},
      {5000, 0.0001},                {5001, 0.0001},              {10000, 0.0001}};
  for (auto [it, lr] : ref) {
    INFO("it " << it);
    REQUIRE(optim::cosine_lr(it, 1e-3, 1e-4, 100, 5000) == Approx(lr).epsilon(1e-14).margin(0));
  }
  // No warm-up: the first iteration is already on the cosine.
  REQUIRE(optim::cosine_lr(0, 1e-3, 1e-4, 0, 10) == 1e-3);
  REQUIRE_THROWS_WITH(optim::cosine_lr(0, 1e-3, 1e-4, 10, 10), Catch::Contains("warmup_iters < decay_iters"));
  REQUIRE_THROWS_WITH(optim::cosine_lr(0, 1e-3, 1e-4, -1, 10), Catch::Contains("warmup_iters"));
  REQUIRE(optim::constant_lr(0, 3e-4) == 3e-4);
  REQUIRE(optim::constant_lr(123456, 3e-4) == 3e-4);
}

TEST_CASE("clip_grad_norm with a parameter listed twice counts it twice and scales it twice, as PyTorch", "[optim]") {
  // torch: p.grad = g; clip_grad_norm_([p, p], 1.0) gives norm sqrt(2) |g| and p.grad = g c c,
  // c = 1 / (norm + 1e-6). Large enough (and on 3 threads) for the scaling to run in parallel.
  const int before = num_threads();
  set_num_threads(3);
  Generator gen(12);
  Tensor p = Tensor::randn({300, 250}, gen).to(DType::f64).requires_grad_();
  Tensor q = Tensor::randn({100}, gen).to(DType::f64).requires_grad_();
  sum(mul(p, Tensor::randn({300, 250}, gen).to(DType::f64))).backward();
  sum(mul(q, Tensor::randn({100}, gen).to(DType::f64))).backward();
  const std::vector<double> gp = p.grad().to_vector<double>(), gq = q.grad().to_vector<double>();
  double ss = 0;
  for (double v : gp) ss += 2 * v * v;
  for (double v : gq) ss += v * v;
  const double norm = optim::clip_grad_norm({p, q, p}, 1.0);
  set_num_threads(before);
  CHECK(norm == Approx(std::sqrt(ss)).epsilon(1e-12));
  const double c = 1.0 / (norm + 1e-6);
  const std::vector<double> after = p.grad().to_vector<double>();
  size_t wrong = 0;
  for (size_t i = 0; i < gp.size(); ++i) wrong += after[i] != gp[i] * c * c;
  CHECK(wrong == 0);
  const std::vector<double> after_q = q.grad().to_vector<double>();
  for (size_t i = 0; i < gq.size(); ++i) REQUIRE(after_q[i] == gq[i] * c);
}
