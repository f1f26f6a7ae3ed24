// Ops a PyTorch porter reaches for: cumsum, sum and mean over several axes, vector_norm
// (core/ops/reduce.cpp); repeat and slice with a step (shape.cpp); index_select (index.cpp);
// Tensor::linspace (core/tensor.cpp).
// Values against PyTorch 1.13, float64 gradchecks (contiguous, transposed and sliced inputs, an
// input used twice, broadcasting), and a bad-input case per op naming the op.
#include <cmath>
#include <limits>
#include <vector>

#include "support/helpers.h"

using namespace heed;
using Catch::Contains;
using heed::test::randn64;
using heed::test::require_gradcheck;
using heed::test::require_values;
using heed::test::sine_input;
using heed::test::transposed64;

namespace {

// A (2, 3, 4) float64 leaf sliced out of a (2, 3, 7) one.
Tensor sliced64(uint64_t seed) {
  Tensor x = slice(randn64({2, 3, 7}, seed).detach(), 2, 1, 5).detach().requires_grad_();
  REQUIRE_FALSE(x.is_contiguous());
  return x;
}

}  // namespace

// ------------------------------------------------------------------------------------------ cumsum

// x = (3 * torch.sin(0.7 * torch.arange(24, dtype=torch.float64) + 0.3)).reshape(2, 3, 4)
// x.cumsum(0), x.cumsum(1), x.cumsum(-1);
// torch.tensor([[3, -1, 4], [1, -5, 9]], dtype=torch.int32).cumsum(1) (int64);
// torch.tensor([True, False, True, True]).cumsum(0);
// torch.tensor([1e8, 1, -1e8, 1], dtype=torch.float32).cumsum(0) (torch accumulates in double).
TEST_CASE("cumsum matches PyTorch on every axis, integers give int64", "[porter][cumsum]") {
  const Tensor x = sine_input();
  require_values(cumsum(x, 0), {2, 3, 4},
                 {0.88656062, 2.524412954, 2.974994431, 2.026389542, 0.1247419873, -1.835573673, -2.932590353,
                  -2.650363967, -1.121629994, 0.9346240905, 2.551309862, 2.96807474, 2.87546831, 2.598739231,
                  1.099782485, -0.9164191485, -2.501614537, -2.91026152, -1.950167036, -0.07287852259,
                  1.838685898, 2.885487611, 2.575199413, 1.053754693},
                 1e-9);
  require_values(x.cumsum(1), {2, 3, 4},
                 {0.88656062, 2.524412954, 2.974994431, 2.026389542, 1.011302607, 0.6888392816, 0.04240407836,
                  -0.6239744255, -0.1103273872, 1.623463372, 2.59371394, 2.344100314, 1.98890769, 0.07432627636,
                  -1.875211947, -2.94280869, -0.6374488338, -1.00036157, -0.8927886293, -0.3653232456,
                  2.322867059, 0.9505019501, -0.8688990779, -2.279643293},
                 1e-9);
  require_values(cumsum(x.to(DType::f32), -1), {2, 3, 4},
                 {0.88656062, 3.410973574, 6.385968006, 8.412357547, 0.1247419873, -1.710831686, -4.643422039,
                  -7.293786006, -1.121629994, -0.187005904, 2.364303958, 5.332378698, 1.98890769, 2.063233967,
                  0.1880220199, -2.75478667, -2.626356524, -3.701044371, -2.718621053, -0.1411356088,
                  2.960315893, 4.911179413, 4.935068965, 3.020748918},
                 1e-6);
  const Tensor ci = cumsum(Tensor::from_vector(std::vector<int32_t>{3, -1, 4, 1, -5, 9}, {2, 3}), 1);
  REQUIRE(ci.dtype() == DType::i64);
  REQUIRE(ci.to_vector<int64_t>() == std::vector<int64_t>{3, 2, 6, 1, -4, 5});
  const Tensor cb = Tensor({true, false, true, true}).cumsum(0);
  REQUIRE(cb.dtype() == DType::i64);
  REQUIRE(cb.to_vector<int64_t>() == std::vector<int64_t>{1, 1, 2, 3});
  REQUIRE(cumsum(Tensor({1e8f, 1.0f, -1e8f, 1.0f}), 0).to_vector<float>() == std::vector<float>{1e8f, 1e8f, 1.0f, 2.0f});
  // A 0-d tensor has axis 0 (or -1), as in torch; an empty one stays empty.
  REQUIRE(cumsum(Tensor::scalar(2.5), -1).item() == 2.5);
  REQUIRE(cumsum(Tensor::zeros({0, 3}), 0).shape() == Shape{0, 3});
}

TEST_CASE("cumsum gradchecks: every axis, non-contiguous inputs, an input used twice, broadcasting", "[porter][cumsum]") {
  for (int64_t axis = -3; axis < 3; ++axis) {
    INFO("axis " << axis);
    require_gradcheck([&](const std::vector<Tensor>& in) { return cumsum(in[0], axis); }, {randn64({2, 3, 4}, 1 + axis)});
    require_gradcheck([&](const std::vector<Tensor>& in) { return cumsum(in[0], axis); }, {transposed64(7)});
    require_gradcheck([&](const std::vector<Tensor>& in) { return cumsum(in[0], axis); }, {sliced64(8)});
  }
  require_gradcheck([](const std::vector<Tensor>& in) { return cumsum(in[0], 1) * in[0]; }, {randn64({3, 5}, 2)});
  // (3, 1) + (1, 4) broadcast before the running sum: each input gets the sum over the other's axis.
  require_gradcheck([](const std::vector<Tensor>& in) { return cumsum(in[0] + in[1], 1); },
                    {randn64({3, 1}, 3), randn64({1, 4}, 4)});
}

TEST_CASE("cumsum refuses a bad axis naming itself", "[porter][cumsum]") {
  REQUIRE_THROWS_WITH(cumsum(Tensor::zeros({2, 3}), 2), Contains("cumsum") && Contains("axis 2") && Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(cumsum(Tensor::scalar(1.0), 1), Contains("cumsum") && Contains("[]"));
}

// ------------------------------------------------------------------------------------------ sum / mean over several axes

// x as above; x.sum(dim=(0, 2)), x.sum(dim=(0, 2), keepdim=True), x.sum(dim=(-1, 0)),
// x.mean(dim=(1, 2)), x.mean(dim=(0, 1), keepdim=True), x.sum(dim=[]), x.sum(dim=[], keepdim=True),
// x.mean(dim=[]), x.sum(dim=(2, 0, 1)); torch.tensor([[True, False], [True, True]]).sum(dim=(0, 1)).
TEST_CASE("sum and mean over several axes match PyTorch", "[porter][reduce_axes]") {
  const Tensor x = sine_input();
  const std::vector<double> s02 = {5.657570877, -7.434921614, 8.353127615};
  require_values(sum(x, {0, 2}), {3}, s02, 1e-9);
  require_values(x.sum({0, 2}, true), {1, 3, 1}, s02, 1e-9);
  require_values(x.sum(std::vector<int64_t>{-1, 0}), {3}, s02, 1e-9);
  require_values(x.to(DType::f32).sum({0, 2}), {3}, s02, 1e-6);
  require_values(mean(x, {1, 2}), {2}, {0.5375791866, 0.01040221988}, 1e-9);
  require_values(x.mean({0, 1}, true), {1, 1, 4}, {0.368756612, 0.4289942204, 0.2874691437, 0.01074283695}, 1e-9);
  require_values(x.sum({2, 0, 1}), {}, {6.575776878}, 1e-9);
  // An empty list reduces everything, as torch 1.13's dim=[] (not axis 0, as a plain {} converted
  // to one int64_t would).
  require_values(x.sum({}), {}, {6.575776878}, 1e-9);
  require_values(sum(x, {}, true), {1, 1, 1}, {6.575776878}, 1e-9);
  require_values(x.mean({}), {}, {0.2739907033}, 1e-9);
  // {1} and 1 are one axis either way; a plain 1 still picks the single-axis overload.
  require_values(x.sum({1}), {2, 4}, x.sum(1).to_vector<double>(), 0);
  const Tensor b = sum(Tensor({{true, false}, {true, true}}), {0, 1});
  REQUIRE(b.dtype() == DType::i64);
  REQUIRE(b.item() == 3);
  // 0-d and empty inputs, as torch: a scalar's axis 0; an empty sum is 0 and an empty mean NaN.
  REQUIRE(sum(Tensor::scalar(4.0), {0}).item() == 4.0);
  require_values(sum(Tensor::zeros({2, 0, 3}), {1, 2}), {2}, {0, 0}, 0);
  REQUIRE(std::isnan(mean(Tensor::zeros({2, 0}), {0, 1}).item()));
}

TEST_CASE("sum and mean over several axes: gradchecks", "[porter][reduce_axes]") {
  const std::vector<std::vector<int64_t>> lists = {{0, 2}, {2, 0}, {1, -1}, {0, 1, 2}, {}, {1}};
  for (const auto& axes : lists) {
    for (bool keep : {false, true}) {
      INFO("axes " << to_string(axes) << " keepdim " << keep);
      require_gradcheck([&](const std::vector<Tensor>& in) { return sum(in[0], axes, keep); }, {randn64({2, 3, 4}, 5)});
      require_gradcheck([&](const std::vector<Tensor>& in) { return mean(in[0], axes, keep); }, {randn64({2, 3, 4}, 6)});
      require_gradcheck([&](const std::vector<Tensor>& in) { return mean(in[0], axes, keep); }, {transposed64(9)});
      require_gradcheck([&](const std::vector<Tensor>& in) { return sum(in[0], axes, keep); }, {sliced64(10)});
    }
  }
  require_gradcheck([](const std::vector<Tensor>& in) { return sum(in[0], {0, 2}, true) * in[0]; }, {randn64({2, 3, 4}, 11)});
  require_gradcheck([](const std::vector<Tensor>& in) { return mean(in[0] * in[1], {0, 2}); },
                    {randn64({2, 3, 1}, 12), randn64({3, 4}, 13)});
}

TEST_CASE("sum and mean over several axes refuse repeats, bad axes and an integer mean", "[porter][reduce_axes]") {
  const Tensor x = Tensor::zeros({2, 3, 4});
  REQUIRE_THROWS_WITH(sum(x, {0, -3}), Contains("sum") && Contains("axis 0 appears more than once"));
  REQUIRE_THROWS_WITH(x.mean({1, 1}), Contains("mean") && Contains("more than once"));
  REQUIRE_THROWS_WITH(sum(x, {0, 3}), Contains("sum") && Contains("axis 3") && Contains("[2, 3, 4]"));
  REQUIRE_THROWS_WITH(mean(Tensor::zeros({2, 3}, DType::i64), {0, 1}), Contains("mean") && Contains("int64"));
  // The single-axis and whole-tensor means name themselves too.
  REQUIRE_THROWS_WITH(mean(Tensor::zeros({2, 3}, DType::i64), 1), Contains("mean: expected a float32 or float64 tensor, got int64"));
  REQUIRE_THROWS_WITH(Tensor({true, false}).mean(), Contains("mean: expected a float32 or float64 tensor, got bool"));
}

// ------------------------------------------------------------------------------------------ vector_norm

// x as above with x[0, 1, 2] = 0; for ord in [2, 1, inf, -inf, 0, 3, 0.5, -1.5]:
// torch.linalg.vector_norm(x, ord=ord), (..., dim=1), (..., dim=(0, 2), keepdim=True);
// x.norm(), x.norm(1, 2); torch.linalg.vector_norm(x.float(), dim=-1).
TEST_CASE("vector_norm matches PyTorch for every ord, over everything or some axes", "[porter][norm]") {
  const Tensor x = sine_input();
  x[0][1][2] = 0.0;
  REQUIRE(x.at({0, 1, 2}) == 0.0);
  struct Ref {
    double ord, all;
    std::vector<double> dim1, dim02;
  };
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<Ref> refs = {
      {2, 9.798402118,
       {1.435132099, 3.25814574, 3.91915474, 4.465439664, 4.429105167, 2.228530197, 2.117107964, 4.355246887},
       {6.021072825, 5.105938678, 5.803857021}},
      {1, 41.59027261,
       {2.132932602, 5.294610718, 5.526304293, 7.644828249, 7.575580107, 3.099877644, 2.881524815, 7.434614182},
       {15.29361215, 11.87163276, 14.4250277}},
      {inf, 2.974994431,
       {1.121629994, 2.524412954, 2.974994431, 2.96807474, 2.960315893, 1.95086352, 1.875211947, 2.94280869},
       {2.974994431, 2.650363967, 2.96807474}},
      {-inf, 0, {0.1247419873, 0.9346240905, 0, 2.026389542, 1.98890769, 0.07432627636, 0.02388955136, 1.914320047},
       {0.07432627636, 0, 0.02388955136}},
      {0, 23, {3, 3, 2, 3, 3, 3, 3, 3}, {8, 7, 8}},
      {3, 6.20564316,
       {1.282576096, 2.847501535, 3.501697184, 3.758300398, 3.730744945, 2.054055472, 1.961101481, 3.674765971},
       {4.50423544, 3.96283472, 4.40310088}},
      {0.5, 843.193062,
       {5.540525755, 15.2914875, 11.03634336, 22.79410353, 22.57624854, 7.322615363, 6.325823247, 22.13237773},
       {109.1294502, 73.78669966, 100.0272838}},
      {-1.5, 0,
       {0.1177868731, 0.6864781479, 0, 1.18624579, 1.172351723, 0.07308305642, 0.02380661957, 1.143962849},
       {0.07152002133, 0, 0.02369568583}},
  };
  for (const Ref& r : refs) {
    INFO("ord " << r.ord);
    require_values(vector_norm(x, r.ord), {}, {r.all}, 1e-9);
    require_values(vector_norm(x, r.ord, {1}), {2, 4}, r.dim1, 1e-9);
    require_values(vector_norm(x, r.ord, {0, 2}, true), {1, 3, 1}, r.dim02, 1e-9);
    require_values(x.norm(r.ord, {0, 2}, true), {1, 3, 1}, r.dim02, 1e-9);
  }
  require_values(x.norm(), {}, {9.798402118}, 1e-9);
  require_values(x.norm(1, 2), {2, 3}, {8.412357547, 4.610679627, 7.575638687, 6.881254603, 7.260953133, 6.849389012}, 1e-9);
  require_values(vector_norm(x.to(DType::f32), 2, {-1}), {2, 3},
                 {4.485030174, 3.226347685, 4.177346706, 4.017190933, 3.957434893, 4.029209614}, 1e-6);
  // Empty: the sums are 0, as torch's.
  REQUIRE(vector_norm(Tensor::zeros({0, 3})).item() == 0.0);
  REQUIRE(vector_norm(Tensor::zeros({0, 3}), inf, {1}).shape() == Shape{0});
}

// z = torch.tensor([[0., 0, 0], [3, -4, 0]], requires_grad=True); vector_norm(z, dim=1).sum().backward()
// and for z = [1, -2, 2, 0]: ord inf; ord 1; for z = [1, -2, 0.5, 0]: ord 0.5, 3, 1.5; z = zeros(3):
// ord 1.5; z = [1, -2, 0.5]: ord -1.5 (each vector_norm(z, ord).backward(), z.grad).
TEST_CASE("vector_norm's gradient is torch's at zeros and ties", "[porter][norm]") {
  const double inf = std::numeric_limits<double>::infinity();
  auto grad = [](const Tensor& z0, double ord, const std::vector<int64_t>& axes = {}) {
    Tensor z = z0.to(DType::f64).requires_grad_();
    sum(vector_norm(z, ord, axes)).backward();
    return z.grad();
  };
  require_values(grad(Tensor({{0.0, 0.0, 0.0}, {3.0, -4.0, 0.0}}), 2, {1}), {2, 3}, {0, 0, 0, 0.6, -0.8, 0}, 1e-12);
  require_values(grad(Tensor({1.0, -2.0, 2.0, 0.0}), inf), {4}, {0, -0.5, 0.5, 0}, 1e-12);
  require_values(grad(Tensor({1.0, -2.0, 2.0, 0.0}), 1), {4}, {1, -1, 1, 0}, 1e-12);
  require_values(grad(Tensor({1.0, -2.0, 0.5, 0.0}), 0.5), {4}, {3.121320344, -2.207106781, 4.414213562, 0}, 1e-9);
  require_values(grad(Tensor({1.0, -2.0, 0.5, 0.0}), 3), {4}, {0.2290048875, -0.9160195499, 0.05725122187, 0}, 1e-9);
  require_values(grad(Tensor({1.0, -2.0, 0.5, 0.0}), 1.5), {4}, {0.6206870223, -0.8777840049, 0.4388920025, 0}, 1e-9);
  require_values(grad(Tensor::zeros({3}), 1.5), {3}, {0, 0, 0}, 0);
  require_values(grad(Tensor::zeros({3}), 2), {3}, {0, 0, 0}, 0);
  require_values(grad(Tensor({1.0, -2.0, 0.5}), -1.5), {3}, {0.09212199298, -0.01628502148, 0.5211206874}, 1e-9);
  // ord 0 counts: torch's gradient is None, and so is heed's (no gradient reaches z).
  Tensor z = Tensor({1.0, 0.0}).to(DType::f64).requires_grad_();
  vector_norm(z, 0).backward();
  REQUIRE_FALSE(z.grad().defined());
}

TEST_CASE("vector_norm gradchecks: every ord, non-contiguous inputs, an input used twice, broadcasting", "[porter][norm]") {
  const double inf = std::numeric_limits<double>::infinity();
  for (double ord : {2.0, 1.0, inf, -inf, 3.0, 0.5, 1.5, -1.5}) {
    for (bool keep : {false, true}) {
      INFO("ord " << ord << " keepdim " << keep);
      require_gradcheck([&](const std::vector<Tensor>& in) { return vector_norm(in[0], ord); }, {randn64({3, 4}, 20)});
      require_gradcheck([&](const std::vector<Tensor>& in) { return vector_norm(in[0], ord, {0, 2}, keep); }, {transposed64(21)});
      require_gradcheck([&](const std::vector<Tensor>& in) { return vector_norm(in[0], ord, {1}, keep); }, {sliced64(22)});
    }
  }
  require_gradcheck([](const std::vector<Tensor>& in) { return in[0].norm(2, 1, true) * in[0]; }, {randn64({3, 4}, 23)});
  require_gradcheck([](const std::vector<Tensor>& in) { return vector_norm(in[0] - in[1], 3, {1}); },
                    {randn64({3, 4}, 24), randn64({1, 4}, 25)});
}

// torch 1.13: x = (1.5 sin(0.37 n + 0.4)).reshape(3, 4) with x[1] = 0, w = (sin(0.37 n + 1.1)).reshape(3, 4);
// y = F.normalize(x); (y * w).sum().backward(), x.grad; the same for F.normalize(x, p=1, dim=0,
// eps=0.5); F.normalize(x, p=math.inf, dim=-1).
TEST_CASE("normalize matches F.normalize, its gradient too, a zero row included", "[porter][normalize]") {
  auto sines = [](double phase, double amp) {
    std::vector<double> v(12);
    for (int n = 0; n < 12; ++n) v[n] = amp * std::sin(0.37 * n + phase);
    return Tensor::from_vector(v, {3, 4});
  };
  Tensor x = sines(0.4, 1.5);
  x[1] = 0.0;
  x.requires_grad_();
  const Tensor w = sines(1.1, 1.0);
  Tensor y = normalize(x);
  require_values(y, {3, 4},
                 {0.2483762605, 0.4440044255, 0.5795386744, 0.6366350825, 0, 0, 0, 0, -0.1544930384, -0.3957508156,
                  -0.5834455764, -0.6921737155},
                 1e-9);
  sum(y * w).backward();
  // The zero row's gradient is w / eps (1e12 times w): compared scaled.
  const Tensor g = x.grad();
  require_values(cat({g.select(0, 0), g.select(0, 2)}, 0), {8},
                 {0.1959540972, 0.09592324373, -0.01709037074, -0.1277908837, -0.2525146265, -0.1357750885,
                  -0.0006590292001, 0.1345462266},
                 1e-9);
  require_values(g.select(0, 1) * 1e-12, {4}, {0.5325349076, 0.1904226474, -0.1774624248, -0.5213287904}, 1e-9);
  x.zero_grad();
  y = normalize(x, 1, 0, 0.5);
  require_values(y, {3, 4},
                 {0.6425054748, 0.5563864536, 0.5261612803, 0.5069543553, 0, 0, 0, 0, -0.3574945252, -0.4436135464,
                  -0.4738387197, -0.4930456447},
                 1e-9);
  sum(y * w).backward();
  require_values(x.grad(), {3, 4},
                 {0.03797414797, 0.008162373441, -0.005886772246, -0.0157826869, 0.5857566811, 0.1014636003,
                  -0.06850863197, -0.1765193916, 0.06824887166, 0.01023736549, -0.006536805655, -0.01622791308},
                 1e-9);
  require_values(normalize(x, std::numeric_limits<double>::infinity(), -1), {3, 4},
                 {0.3901391351, 0.6974237482, 0.9103153287, 1, 0, 0, 0, 0, -0.2231998051, -0.5717507133, -0.8429178446,
                  -1},
                 1e-9);
}

TEST_CASE("normalize gradchecks: p 2, 1 and 3, every axis, a row clamped at eps", "[porter][normalize]") {
  for (double p : {2.0, 1.0, 3.0}) {
    for (int64_t axis : {0, 1, -1}) {
      INFO("p " << p << " axis " << axis);
      require_gradcheck([&](const std::vector<Tensor>& in) { return normalize(in[0], p, axis); },
                        {randn64({2, 3, 4}, 60 + axis)});
    }
  }
  // The middle row's norm (about 0.03) is under eps = 0.5: x / eps there, the others divided by
  // their norms (all above 1.5).
  Tensor x = Tensor::from_vector(std::vector<double>{1.0, -2.0, 0.5, 0.03, -0.01, 0.02, 1.5, 0.25, -1.0}, {3, 3});
  x.requires_grad_();
  require_gradcheck([](const std::vector<Tensor>& in) { return normalize(in[0], 2, 1, 0.5); }, {x});
}

TEST_CASE("vector_norm refuses integers, a NaN ord, an empty inf norm and bad axes", "[porter][norm]") {
  const double inf = std::numeric_limits<double>::infinity();
  REQUIRE_THROWS_WITH(vector_norm(Tensor({1, 2})), Contains("vector_norm") && Contains("int64"));
  REQUIRE_THROWS_WITH(vector_norm(Tensor::zeros({2}), std::nan("")), Contains("vector_norm") && Contains("NaN"));
  REQUIRE_THROWS_WITH(vector_norm(Tensor::zeros({0, 3}), inf), Contains("vector_norm") && Contains("empty"));
  REQUIRE_THROWS_WITH(vector_norm(Tensor::zeros({0, 3}), -inf, {0}), Contains("vector_norm") && Contains("empty"));
  REQUIRE_THROWS_WITH(Tensor::zeros({2, 3}).norm(2, 2), Contains("vector_norm") && Contains("axis 2"));
  REQUIRE_THROWS_WITH(vector_norm(Tensor::zeros({2, 3}), 2, {1, -1}), Contains("vector_norm") && Contains("more than once"));
}

// ------------------------------------------------------------------------------------------ repeat

// x = torch.tensor([[1., 2, 3], [4, 5, 6]]); x.repeat(2, 1), x.repeat(1, 2, 2), x.repeat(0, 2),
// torch.tensor(7.).repeat(2, 3); x.requires_grad_(); (x.repeat(2, 2) * torch.arange(24.).reshape(4, 6)).sum().backward()
TEST_CASE("repeat tiles as PyTorch's, adding leading axes, and always copies", "[porter][repeat]") {
  const Tensor x = Tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}});
  require_values(x.repeat({2, 1}), {4, 3}, {1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6}, 0);
  require_values(repeat(x, {1, 2, 2}), {1, 4, 6}, {1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6, 1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6}, 0);
  REQUIRE(x.repeat({0, 2}).shape() == Shape{0, 6});
  require_values(Tensor::scalar(7.0).repeat({2, 3}), {2, 3}, {7, 7, 7, 7, 7, 7}, 0);
  const Tensor ids = Tensor({3, 4}).repeat({2});  // any dtype
  REQUIRE(ids.dtype() == DType::i64);
  REQUIRE(ids.to_vector<int64_t>() == std::vector<int64_t>{3, 4, 3, 4});
  // All ones still copies (torch's repeat never returns a view).
  Tensor same = x.repeat({1, 1});
  same[0][0] = 100.0;
  REQUIRE(x.at({0, 0}) == 1.0);
  Tensor xr = x.clone().requires_grad_();
  sum(xr.repeat({2, 2}) * Tensor::arange(24, DType::f32).reshape({4, 6})).backward();
  require_values(xr.grad(), {2, 3}, {30, 34, 38, 54, 58, 62}, 0);
}

TEST_CASE("repeat gradchecks: leading axes, non-contiguous inputs, an input used twice, broadcasting", "[porter][repeat]") {
  require_gradcheck([](const std::vector<Tensor>& in) { return repeat(in[0], {2, 1, 3}); }, {randn64({3, 2}, 30)});
  require_gradcheck([](const std::vector<Tensor>& in) { return repeat(in[0], {1, 2, 1, 2}); }, {transposed64(31)});
  require_gradcheck([](const std::vector<Tensor>& in) { return repeat(in[0], {2, 1, 1}); }, {sliced64(32)});
  require_gradcheck([](const std::vector<Tensor>& in) { return in[0].repeat({1, 2}) * in[0].repeat({1, 2}); },
                    {randn64({3, 2}, 33)});
  require_gradcheck([](const std::vector<Tensor>& in) { return repeat(in[0] * in[1], {2, 2}); },
                    {randn64({3, 1}, 34), randn64({1, 2}, 35)});
}

TEST_CASE("repeat refuses too few and negative counts", "[porter][repeat]") {
  const Tensor x = Tensor::zeros({2, 3});
  REQUIRE_THROWS_WITH(x.repeat({2}), Contains("repeat") && Contains("[2]") && Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(repeat(x, {-1, 2}), Contains("repeat") && Contains("negative"));
  REQUIRE_THROWS_WITH(repeat(x, {int64_t{1} << 62, 4}), Contains("repeat") && Contains("overflows"));
  // An empty tensor: torch.zeros(0, 3).repeat(2**63 - 1, 1) and .repeat(2**62, 2) are (0, 3) and
  // (0, 6) (heed refused both, naming no op, when the count entered the expanded shape), and the
  // sizes other than 0 must multiply without overflow, as any shape's (they were checked after
  // the 0, whose product hid them: the refusal named no op)
  const Tensor e = Tensor::zeros({0, 3});
  REQUIRE(repeat(e, {std::numeric_limits<int64_t>::max(), 1}).shape() == Shape{0, 3});
  REQUIRE(repeat(e, {int64_t{1} << 62, 2}).shape() == Shape{0, 6});
  REQUIRE_THROWS_WITH(repeat(Tensor::zeros({0, 2, 2}), {1, int64_t{1} << 40, int64_t{1} << 40}),
                      Contains("repeat") && Contains("overflows"));
}

// ------------------------------------------------------------------------------------------ index_select

// x = torch.tensor([[1., 2, 3], [4, 5, 6]]); x.index_select(1, torch.tensor([2, 0, 2])),
// x.index_select(0, torch.tensor([1, 1, 0], dtype=torch.int32)), x.index_select(1, torch.tensor(2));
// x.requires_grad_(); (x.index_select(1, [2, 0, 2]) * [[1, 10, 100], [1000, 10000, 100000]]).sum().backward()
TEST_CASE("index_select matches PyTorch: any order, repeats, int32 or int64", "[porter][index_select]") {
  const Tensor x = Tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}});
  const Tensor i = Tensor({2, 0, 2});
  require_values(x.index_select(1, i), {2, 3}, {3, 1, 3, 6, 4, 6}, 0);
  require_values(index_select(x, 0, Tensor::from_vector(std::vector<int32_t>{1, 1, 0}, {3})), {3, 3},
                 {4, 5, 6, 4, 5, 6, 1, 2, 3}, 0);
  require_values(index_select(x, -1, Tensor::scalar(2, DType::i64)), {2, 1}, {3, 6}, 0);
  REQUIRE(index_select(x, 0, Tensor::zeros({0}, DType::i64)).shape() == Shape{0, 3});
  REQUIRE(index_select(Tensor({{true, false}}), 1, Tensor({1, 1, 0})).to_vector<int64_t>() == std::vector<int64_t>{0, 0, 1});
  Tensor xr = x.clone().requires_grad_();
  sum(xr.index_select(1, i) * Tensor({{1.0, 10.0, 100.0}, {1000.0, 10000.0, 100000.0}})).backward();
  require_values(xr.grad(), {2, 3}, {10, 0, 101, 10000, 0, 101000}, 0);
}

TEST_CASE("index_select gradchecks: every axis, non-contiguous inputs, an input used twice, broadcasting", "[porter][index_select]") {
  const Tensor i = Tensor({3, 0, 3, 1, 1});
  for (int64_t axis : {0, 1, 2, -1}) {
    INFO("axis " << axis);
    const Tensor ia = Tensor({1, 0, 1, 1});  // valid on every axis of (2, 3, 4)
    require_gradcheck([&](const std::vector<Tensor>& in) { return index_select(in[0], axis, ia); }, {randn64({2, 3, 4}, 40)});
    require_gradcheck([&](const std::vector<Tensor>& in) { return index_select(in[0], axis, ia); }, {transposed64(41)});
    require_gradcheck([&](const std::vector<Tensor>& in) { return index_select(in[0], axis, ia); }, {sliced64(42)});
  }
  require_gradcheck([&](const std::vector<Tensor>& in) { return index_select(in[0], 1, i) * index_select(in[0], 1, i); },
                    {randn64({3, 4}, 43)});
  require_gradcheck([&](const std::vector<Tensor>& in) { return index_select(in[0] + in[1], 1, i); },
                    {randn64({3, 1}, 44), randn64({1, 4}, 45)});
}

TEST_CASE("index_select refuses an out-of-range id naming it, a 2-D or float index and a bad axis", "[porter][index_select]") {
  const Tensor x = Tensor::zeros({2, 3});
  REQUIRE_THROWS_WITH(x.index_select(1, Tensor({0, 3})), Contains("index_select") && Contains("index 3") && Contains("size 3"));
  REQUIRE_THROWS_WITH(x.index_select(1, Tensor({-1})), Contains("index_select") && Contains("index -1"));
  REQUIRE_THROWS_WITH(x.index_select(0, Tensor({{0}})), Contains("index_select") && Contains("1-D"));
  REQUIRE_THROWS_WITH(x.index_select(0, Tensor({0.0})), Contains("index_select") && Contains("float32"));
  REQUIRE_THROWS_WITH(x.index_select(2, Tensor({0})), Contains("index_select") && Contains("axis 2"));
  // An int64 id past 2^53 is named exactly (it was read through a double, and rounded).
  REQUIRE_THROWS_WITH(x.index_select(1, Tensor::from_vector(std::vector<int64_t>{9007199254740993L}, {1})),
                      Contains("index 9007199254740993 out of range"));
}

// ------------------------------------------------------------------------------------------ linspace

TEST_CASE("linspace matches PyTorch bit for bit", "[porter][linspace]") {
  auto bits_f32 = [](double a, double b, int64_t n, const std::vector<float>& want) {
    INFO("linspace(" << a << ", " << b << ", " << n << ")");
    const Tensor t = Tensor::linspace(a, b, n);
    REQUIRE(t.dtype() == DType::f32);
    REQUIRE(t.to_vector<float>() == want);
  };
  auto bits_f64 = [](double a, double b, int64_t n, const std::vector<double>& want) {
    INFO("linspace(" << a << ", " << b << ", " << n << ", float64)");
    REQUIRE(Tensor::linspace(a, b, n, DType::f64).to_vector<double>() == want);
  };
  // torch.linspace(start, end, steps, dtype=...), printed with float.hex.
  bits_f32(0, 1, 10, {0x0p+0f, 0x1.c71c72p-4f, 0x1.c71c72p-3f, 0x1.555556p-2f, 0x1.c71c72p-2f, 0x1.1c71c8p-1f,
                      0x1.555556p-1f, 0x1.8e38e4p-1f, 0x1.c71c72p-1f, 0x1p+0f});
  bits_f32(-1.3, 2.7, 7, {-0x1.4cccccp+0f, -0x1.444442p-1f, 0x1.11114p-5f, 0x1.666666p-1f, 0x1.5ddddep+0f,
                          0x1.044444p+1f, 0x1.59999ap+1f});
  bits_f32(0.1, 0.9, 15, {0x1.99999ap-4f, 0x1.41d41cp-3f, 0x1.b6db6cp-3f, 0x1.15f15ep-2f, 0x1.507506p-2f,
                          0x1.8af8aep-2f, 0x1.c57c56p-2f, 0x1p-1f, 0x1.1d41d4p-1f, 0x1.3a83a8p-1f, 0x1.57c57cp-1f,
                          0x1.75075p-1f, 0x1.924924p-1f, 0x1.af8af8p-1f, 0x1.ccccccp-1f});
  bits_f64(2.5, -7.25, 6, {0x1.4p+1, 0x1.199999999999ap-1, -0x1.6666666666666p+0, -0x1.acccccccccccdp+1,
                           -0x1.5333333333333p+2, -0x1.dp+2});
  bits_f64(-1.3, 2.7, 7, {-0x1.4cccccccccccdp+0, -0x1.4444444444445p-1, 0x1.11111111111p-5, 0x1.6666666666669p-1,
                          0x1.5dddddddddddfp+0, 0x1.0444444444445p+1, 0x1.599999999999ap+1});
  bits_f64(0.1, 0.9, 5, {0x1.999999999999ap-4, 0x1.3333333333334p-2, 0x1p-1, 0x1.6666666666666p-1, 0x1.ccccccccccccdp-1});
  bits_f64(1e-3, 7.77, 3, {0x1.0624dd2f1a9fcp-10, 0x1.f15810624dd2fp+1, 0x1.f147ae147ae14p+2});
  // torch.linspace(2, 5, 1) is [2.]; torch.linspace(0, 1, 0) is empty.
  require_values(Tensor::linspace(2, 5, 1), {1}, {2}, 0);
  REQUIRE(Tensor::linspace(0, 1, 0).shape() == Shape{0});
  // Past the scalar path: torch's loop takes 2 AVX2 vectors (8 float32 or 4 float64 each) at a
  // time, each from its first element with lanes first + k * step (rounded product, then sum).
  // 37 float32 values are 32 of them and a scalar tail; 40 float64 are all vectors.
  bits_f32(0.1, 7.9, 37, {0x1.99999ap-4f, 0x1.444444p-2f, 0x1.111112p-1f, 0x1.8p-1f,      0x1.eeeefp-1f,
                          0x1.2eeefp+0f,  0x1.666666p+0f, 0x1.9ddddep+0f, 0x1.d55556p+0f, 0x1.066666p+1f,
                          0x1.222222p+1f, 0x1.3ddddep+1f, 0x1.59999ap+1f, 0x1.755556p+1f, 0x1.91111p+1f,
                          0x1.acccccp+1f, 0x1.c88888p+1f, 0x1.e44444p+1f, 0x1p+2f,        0x1.0ddddep+2f,
                          0x1.1bbbbcp+2f, 0x1.29999ap+2f, 0x1.377778p+2f, 0x1.455554p+2f, 0x1.533334p+2f,
                          0x1.611112p+2f, 0x1.6eeefp+2f,  0x1.7ccccep+2f, 0x1.8aaaacp+2f, 0x1.98888ap+2f,
                          0x1.a66668p+2f, 0x1.b44444p+2f, 0x1.c22222p+2f, 0x1.dp+2f,      0x1.dddddep+2f,
                          0x1.ebbbbcp+2f, 0x1.f9999ap+2f});
  bits_f64(-1, 3, 40, {-0x1p+0, -0x1.cb7cb7cb7cb7dp-1, -0x1.96f96f96f96fap-1, -0x1.6276276276276p-1,
                       -0x1.2df2df2df2df3p-1, -0x1.f2df2df2df2ep-2, -0x1.89d89d89d89d9p-2, -0x1.20d20d20d20d2p-2,
                       -0x1.6f96f96f96f98p-3, -0x1.3b13b13b13b16p-4, 0x1.a41a41a41a41p-6, 0x1.069069069069p-3,
                       0x1.d89d89d89d89cp-3, 0x1.5555555555554p-2, 0x1.be5be5be5be5bp-2, 0x1.13b13b13b13b1p-1,
                       0x1.4834834834834p-1, 0x1.7cb7cb7cb7cb7p-1, 0x1.b13b13b13b13ap-1, 0x1.e5be5be5be5bep-1,
                       0x1.0d20d20d20d21p+0, 0x1.2762762762763p+0, 0x1.41a41a41a41a4p+0, 0x1.5be5be5be5be6p+0,
                       0x1.7627627627628p+0, 0x1.906906906906ap+0, 0x1.aaaaaaaaaaaabp+0, 0x1.c4ec4ec4ec4edp+0,
                       0x1.df2df2df2df2ep+0, 0x1.f96f96f96f97p+0, 0x1.09d89d89d89d9p+1, 0x1.16f96f96f96fap+1,
                       0x1.241a41a41a41ap+1, 0x1.313b13b13b13bp+1, 0x1.3e5be5be5be5cp+1, 0x1.4b7cb7cb7cb7cp+1,
                       0x1.589d89d89d89ep+1, 0x1.65be5be5be5bfp+1, 0x1.72df2df2df2ep+1, 0x1.8p+1});
  bits_f64(2.5, -4.75, 19, {0x1.4p+1, 0x1.0c71c71c71c72p+1, 0x1.b1c71c71c71c7p+0, 0x1.4aaaaaaaaaaaap+0,
                            0x1.c71c71c71c71cp-1, 0x1.f1c71c71c71c6p-2, 0x1.555555555555p-4, -0x1.471c71c71c72p-2,
                            -0x1.71c71c71c71c8p-1, -0x1.2p+0, -0x1.871c71c71c71dp+0, -0x1.ee38e38e38e3ap+0,
                            -0x1.2aaaaaaaaaaaap+1, -0x1.5e38e38e38e38p+1, -0x1.91c71c71c71c6p+1, -0x1.c555555555555p+1,
                            -0x1.f8e38e38e38e4p+1, -0x1.1638e38e38e39p+2, -0x1.3p+2});
}

TEST_CASE("linspace refuses negative steps, integer dtypes and ends past the dtype's range", "[porter][linspace]") {
  REQUIRE_THROWS_WITH(Tensor::linspace(0, 1, -1), Contains("linspace") && Contains("non-negative"));
  REQUIRE_THROWS_WITH(Tensor::linspace(0, 1, 3, DType::i64), Contains("linspace") && Contains("int64"));
  // torch.linspace(0, 1e39, 5) refuses ("value cannot be converted to type float without
  // overflow"); heed gave [nan, inf, nan, nan, nan]. Infinite ends are taken, as torch's
  // (torch.linspace(inf, 1, 3) is [nan, inf, nan]), and float64 holds 1e39.
  REQUIRE_THROWS_WITH(Tensor::linspace(0, 1e39, 5), Contains("linspace: the value 1e+39 cannot be converted to float32 without overflow"));
  REQUIRE_THROWS_WITH(Tensor::linspace(-1e39, 0, 5), Contains("linspace: the value -1e+39 cannot be converted to float32 without overflow"));
  const std::vector<double> inf_start = Tensor::linspace(std::numeric_limits<double>::infinity(), 1, 3).to_vector<double>();
  REQUIRE((std::isnan(inf_start[0]) && std::isinf(inf_start[1]) && std::isnan(inf_start[2])));
  REQUIRE(Tensor::linspace(0, 1e39, 5, DType::f64).to_vector<double>()[4] == 1e39);
}

// ------------------------------------------------------------------------------------------ slice with a step

// a = torch.arange(10.); a[::2], a[1:7:3], a[-3::2], a[2:10:3]; m = torch.arange(12.).reshape(3, 4):
// m[:, 1::2], m[::2]; a.requires_grad_(); (a[1:7:3] * torch.tensor([5., 7])).sum().backward()
TEST_CASE("slice with a step is a strided view, as torch x start:end:step", "[porter][slice_step]") {
  const Tensor a = Tensor::arange(10, DType::f32);
  require_values(slice(a, 0, 0, 10, 2), {5}, {0, 2, 4, 6, 8}, 0);
  require_values(slice(a, 0, 1, 7, 3), {2}, {1, 4}, 0);
  require_values(slice(a, 0, -3, 10, 2), {2}, {7, 9}, 0);
  require_values(slice(a, 0, 2, 10, 3), {3}, {2, 5, 8}, 0);
  REQUIRE(slice(a, 0, 4, 4, 3).shape() == Shape{0});
  const Tensor m = Tensor::arange(12, DType::f32).reshape({3, 4});
  const Tensor cols = slice(m, 1, 1, 4, 2);
  require_values(cols, {3, 2}, {1, 3, 5, 7, 9, 11}, 0);
  REQUIRE(cols.strides() == Shape{4, 2});
  REQUIRE(cols.storage() == m.storage());
  require_values(slice(m, 0, 0, 3, 2), {2, 4}, {0, 1, 2, 3, 8, 9, 10, 11}, 0);
  // A step of a step, and a write through the view.
  require_values(slice(slice(a, 0, 0, 10, 2), 0, 1, 5, 2), {2}, {2, 6}, 0);
  Tensor w = Tensor::zeros({6});
  slice(w, 0, 1, 6, 2) = 1.0;
  require_values(w, {6}, {0, 1, 0, 1, 0, 1}, 0);
  Tensor ar = Tensor::arange(10, DType::f32).requires_grad_();
  sum(slice(ar, 0, 1, 7, 3) * Tensor({5.0f, 7.0f})).backward();
  require_values(ar.grad(), {10}, {0, 5, 0, 0, 7, 0, 0, 0, 0, 0}, 0);
}

TEST_CASE("slice with a step: gradchecks", "[porter][slice_step]") {
  require_gradcheck([](const std::vector<Tensor>& in) { return slice(in[0], 1, 1, 7, 3); }, {randn64({3, 8}, 50)});
  require_gradcheck([](const std::vector<Tensor>& in) { return slice(in[0], 2, 0, 4, 2); }, {transposed64(51)});
  require_gradcheck([](const std::vector<Tensor>& in) { return slice(in[0], 0, 0, 2, 2); }, {sliced64(52)});
  require_gradcheck([](const std::vector<Tensor>& in) { return slice(in[0], 1, 0, 8, 2) * slice(in[0], 1, 1, 8, 2); },
                    {randn64({3, 8}, 53)});
  require_gradcheck([](const std::vector<Tensor>& in) { return slice(in[0] + in[1], 1, 0, 5, 2); },
                    {randn64({3, 1}, 54), randn64({1, 5}, 55)});
}

TEST_CASE("slice refuses a zero or negative step", "[porter][slice_step]") {
  const Tensor a = Tensor::zeros({10});
  REQUIRE_THROWS_WITH(slice(a, 0, 0, 10, 0), Contains("slice") && Contains("step must be positive, got 0"));
  REQUIRE_THROWS_WITH(slice(a, 0, 0, 10, -1), Contains("slice") && Contains("got -1"));
  // A step past the axis gives one element (its count and stride computed without overflow).
  const Tensor one = slice(Tensor::arange(10, DType::f32), 0, 3, 10, std::numeric_limits<int64_t>::max());
  REQUIRE(one.to_vector<float>() == std::vector<float>{3});
}
