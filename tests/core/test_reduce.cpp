// Reductions and softmax (core/ops/reduce.cpp): forward values against PyTorch, keepdim shapes,
// every axis (negative too), float64 gradchecks on contiguous and transposed inputs, the long-row
// vector paths, large-magnitude inputs, max's gradient on ties, and bad-axis errors.
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "support/helpers.h"

using namespace heed;
using heed::test::randn64;
using heed::test::require_gradcheck;
using heed::test::require_values;
using heed::test::sine_input;

namespace {

using AxisOp = std::function<Tensor(const Tensor&, int64_t, bool)>;
struct NamedOp {
  const char* name;
  AxisOp f;
  bool reduces;  // false: softmax-like, same shape out
};
const std::vector<NamedOp>& axis_ops() {
  static const std::vector<NamedOp> ops = {
      {"sum", [](const Tensor& a, int64_t ax, bool k) { return sum(a, ax, k); }, true},
      {"mean", [](const Tensor& a, int64_t ax, bool k) { return mean(a, ax, k); }, true},
      {"max", [](const Tensor& a, int64_t ax, bool k) { return max(a, ax, k); }, true},
      {"softmax", [](const Tensor& a, int64_t ax, bool) { return softmax(a, ax); }, false},
      {"log_softmax", [](const Tensor& a, int64_t ax, bool) { return log_softmax(a, ax); }, false},
  };
  return ops;
}

// Plain double loops over (outer, n, inner), written independently of the kernels, for inputs
// too long to paste from PyTorch. Returns the op along the middle of the 3-d view.
std::vector<double> reference(const std::string& op, const std::vector<double>& x, int64_t outer,
                              int64_t n, int64_t inner) {
  const bool same = op == "softmax" || op == "log_softmax";
  std::vector<double> out(same ? x.size() : static_cast<size_t>(outer * inner));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t k) { return x[(o * n + k) * inner + i]; };
      double s = 0, m = -INFINITY;
      for (int64_t k = 0; k < n; ++k) s += at(k), m = std::max(m, at(k));
      if (op == "sum") out[o * inner + i] = s;
      if (op == "mean") out[o * inner + i] = s / n;
      if (op == "max") out[o * inner + i] = m;
      if (!same) continue;
      double z = 0;
      for (int64_t k = 0; k < n; ++k) z += std::exp(at(k) - m);
      for (int64_t k = 0; k < n; ++k)
        out[(o * n + k) * inner + i] = op == "softmax" ? std::exp(at(k) - m) / z : at(k) - m - std::log(z);
    }
  return out;
}

}  // namespace

// Reference values printed by (torch 1.13):
// /usr/bin/python3 - <<'EOF'
// import torch
// def p(name, t): print(name, list(t.shape), ", ".join("%.10g" % v for v in t.flatten().tolist()))
// x = (3 * torch.sin(0.7 * torch.arange(24, dtype=torch.float64) + 0.3)).reshape(2, 3, 4)
// p("sum", x.sum()); p("mean", x.mean())
// for ax in range(3):
//     p(f"sum{ax}", x.sum(ax)); p(f"mean{ax}", x.mean(ax)); p(f"max{ax}", x.max(ax).values); p(f"argmax{ax}", x.max(ax).indices)
//     p(f"softmax{ax}", torch.softmax(x, ax)); p(f"log_softmax{ax}", torch.log_softmax(x, ax))
// EOF
namespace {
struct AxisRef {
  Shape reduced;
  std::vector<double> sum, mean, max, argmax, softmax, log_softmax;
};
const AxisRef kRef[3] = {
    {{3, 4},
     {2.87546831, 2.598739231, 1.099782485, -0.9164191485, -2.501614537, -2.91026152, -1.950167036, -0.07287852259,
      1.838685898, 2.885487611, 2.575199413, 1.053754693},
     {1.437734155, 1.299369615, 0.5498912423, -0.4582095743, -1.250807268, -1.45513076, -0.9750835178, -0.0364392613,
      0.9193429492, 1.442743806, 1.287599707, 0.5268773464},
     {1.98890769, 2.524412954, 2.974994431, 2.026389542, 0.1247419873, -1.074687847, 0.9824233174, 2.577485445,
      2.960315893, 1.95086352, 2.551309862, 2.96807474},
     {1, 0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0},
     {0.2493003825, 0.9205677892, 0.9922340204, 0.9930992344, 0.9399753597, 0.3184539747, 0.01955043498,
      0.005336420751, 0.01659457091, 0.265760561, 0.9260418688, 0.9924781642, 0.7506996175, 0.07943221082,
      0.007765979636, 0.006900765594, 0.06002464035, 0.6815460253, 0.980449565, 0.9946635792, 0.9834054291,
      0.734239439, 0.07395813115, 0.007521835756},
     {-1.389096754, -0.08276463715, -0.007796291894, -0.006924685987, -0.0619016172, -1.144277321, -3.934757743,
      -5.233200122, -4.098679691, -1.325159522, -0.07683583062, -0.007550267424, -0.2867496839, -2.532851315,
      -4.85800267, -4.976122918, -2.813000129, -0.3833914948, -0.01974407269, -0.005350710304, -0.01673380329,
      -0.3089200924, -2.604256141, -4.889945054}},
    {{2, 4},
     {-0.1103273872, 1.623463372, 2.59371394, 2.344100314, 2.322867059, 0.9505019501, -0.8688990779, -2.279643293},
     {-0.03677579574, 0.5411544574, 0.8645713134, 0.7813667715, 0.7742890197, 0.3168339834, -0.289633026,
      -0.7598810976},
     {0.88656062, 2.524412954, 2.974994431, 2.96807474, 2.960315893, 1.95086352, 0.9824233174, 2.577485445},
     {0, 0, 0, 2, 2, 2, 1, 1},
     {0.624590886, 0.8218633868, 0.6033731873, 0.2798292121, 0.2915694478, 0.01050222939, 0.00164041803,
      0.002604982484, 0.08383966615, 0.1676343838, 0.3949863946, 0.7175658055, 0.2738554523, 0.1274242462,
      0.03984036179, 0.003944690548, 0.002711050523, 0.04038699863, 0.6940304099, 0.9850226584, 0.7234334971,
      0.8321887552, 0.2661292284, 0.01103265104},
     {-0.4706584259, -0.1961810939, -0.5052193892, -1.273575819, -1.232477059, -4.556167721, -6.412804174,
      -5.950329328, -2.47884904, -1.785969958, -0.9289039587, -0.3318906206, -1.295154858, -2.060233239,
      -3.222874765, -5.535384769, -5.910419072, -3.209247362, -0.3652395012, -0.01509063461, -0.3237466554,
      -0.1836959946, -1.323773267, -4.506896126}},
    {{2, 3},
     {8.412357547, -7.293786006, 5.332378698, -2.75478667, -0.1411356088, 3.020748918},
     {2.103089387, -1.823446501, 1.333094674, -0.6886966676, -0.0352839022, 0.7551872294},
     {2.974994431, 0.1247419873, 2.96807474, 1.98890769, 2.577485445, 2.960315893},
     {2, 0, 3, 0, 3, 0},
     {0.05766146145, 0.2966168896, 0.4654584571, 0.1802631918, 0.7998913568, 0.1126358732, 0.03760524646,
      0.04986752354, 0.009267294326, 0.07243905211, 0.3648299371, 0.5534637165, 0.8506301772, 0.125385883,
      0.01784739971, 0.006136540085, 0.00445215482, 0.0210112264, 0.1643779007, 0.8101587181, 0.7016995521,
      0.2557122916, 0.03722866327, 0.005359493016},
     {-2.853166241, -1.215313907, -0.7647324298, -1.713337319, -0.2232793645, -2.183595025, -3.280611705,
      -2.998385319, -4.681263816, -2.625009731, -1.00832396, -0.5915590818, -0.1617778192, -2.076359233,
      -4.025897456, -5.0934942, -5.414367071, -3.862698394, -1.805587229, -0.2105251023, -0.354249955,
      -1.363702327, -3.290676296, -5.228885895}},
};
}  // namespace

TEST_CASE("sum and mean of all elements match PyTorch", "[reduce]") {
  for (DType dt : {DType::f32, DType::f64}) {
    INFO(dtype_name(dt));
    const double tol = dt == DType::f32 ? 1e-5 : 1e-9;
    Tensor x = sine_input(dt);
    Tensor s = sum(x), m = mean(x);
    REQUIRE(s.dtype() == dt);
    require_values(s, {}, {6.575776878}, tol);
    require_values(m, {}, {0.2739907033}, tol);
    // Through a transposed (non-contiguous) view: same elements, same sum.
    require_values(sum(transpose(x, 0, 2)), {}, {6.575776878}, tol);
    // A sliced view: the elements with i % 4 in {1, 2}.
    double expect = 0;
    for (int i = 0; i < 24; ++i)
      if (i % 4 == 1 || i % 4 == 2) expect += 3 * std::sin(0.7 * i + 0.3);
    require_values(mean(slice(x, 2, 1, 3)), {}, {expect / 12}, tol);
  }
}

TEST_CASE("axis reductions and softmax match PyTorch on every axis, negative too", "[reduce]") {
  for (DType dt : {DType::f32, DType::f64}) {
    const double tol = dt == DType::f32 ? 1e-5 : 1e-8;
    Tensor x = sine_input(dt);
    for (int64_t ax = 0; ax < 3; ++ax) {
      for (int64_t axis : {ax, ax - 3}) {
        INFO(dtype_name(dt) << " axis " << axis);
        const AxisRef& r = kRef[ax];
        require_values(sum(x, axis), r.reduced, r.sum, tol);
        require_values(mean(x, axis), r.reduced, r.mean, tol);
        require_values(max(x, axis), r.reduced, r.max, tol);
        require_values(softmax(x, axis), {2, 3, 4}, r.softmax, tol);
        require_values(log_softmax(x, axis), {2, 3, 4}, r.log_softmax, tol);
        // max's gradient lands on torch's argmax: summing it back along the axis with index
        // weights recovers the index.
        Tensor xg = x.detach().clone().requires_grad_();
        max(xg, axis).backward(Tensor::ones(r.reduced, dt));
        Shape idx_shape = {2, 3, 4};
        idx_shape[ax] = 1;
        Shape pos_shape = {1, 1, 1};
        pos_shape[ax] = x.shape()[ax];
        Tensor pos = Tensor::arange(x.shape()[ax], dt);
        pos = reshape(pos, pos_shape);
        require_values(sum(mul(xg.grad(), pos), axis), r.reduced, r.argmax, 0);
        require_values(sum(xg.grad(), axis), r.reduced, std::vector<double>(r.argmax.size(), 1.0), 0);
      }
    }
  }
}

TEST_CASE("keepdim keeps a 1 where the axis was", "[reduce]") {
  Tensor x = Tensor::zeros({2, 3, 4}, DType::f64);
  const Shape kept[3] = {{1, 3, 4}, {2, 1, 4}, {2, 3, 1}};
  const Shape dropped[3] = {{3, 4}, {2, 4}, {2, 3}};
  for (const auto& op : axis_ops()) {
    if (!op.reduces) continue;
    for (int64_t ax = 0; ax < 3; ++ax) {
      INFO(op.name << " axis " << ax);
      REQUIRE(op.f(x, ax, true).shape() == kept[ax]);
      REQUIRE(op.f(x, ax - 3, true).shape() == kept[ax]);
      REQUIRE(op.f(x, ax, false).shape() == dropped[ax]);
      REQUIRE(op.f(x, ax - 3, false).shape() == dropped[ax]);
    }
  }
  // keepdim gives the same values as without, just reshaped.
  Tensor s = sine_input(DType::f64);
  require_values(sum(s, 1, true), {2, 1, 4}, kRef[1].sum, 1e-9);
  require_values(max(s, -1, true), {2, 3, 1}, kRef[2].max, 1e-9);
  // A 1-d reduction leaves a 0-d tensor; a 0-d input has axes 0 and -1 only.
  REQUIRE(sum(Tensor::ones({5}), 0).shape() == Shape{});
  REQUIRE(mean(Tensor::scalar(2.5), -1).item() == 2.5);
  REQUIRE(softmax(Tensor::scalar(7.0), 0).item() == 1.0);
}

TEST_CASE("float64 gradchecks of every axis op, keepdim or not", "[reduce]") {
  for (const auto& op : axis_ops()) {
    for (int64_t axis = -3; axis < 3; ++axis) {
      for (bool keep : {false, true}) {
        if (!op.reduces && keep) continue;
        INFO(op.name << " axis " << axis << " keepdim " << keep);
        Tensor x = randn64({2, 3, 4}, 11 + axis);
        require_gradcheck([&](const std::vector<Tensor>& in) { return op.f(in[0], axis, keep); }, {x});
      }
    }
  }
  require_gradcheck([](const std::vector<Tensor>& in) { return sum(in[0]); }, {randn64({3, 5}, 1)});
  require_gradcheck([](const std::vector<Tensor>& in) { return mean(in[0]); }, {randn64({3, 5}, 2)});
}

TEST_CASE("float64 gradchecks on transposed and sliced (non-contiguous) inputs", "[reduce]") {
  Tensor base = randn64({4, 3, 2}, 21).detach();
  Tensor xt = transpose(base, 0, 2).detach().requires_grad_();  // (2, 3, 4), strides (1, 2, 6)
  REQUIRE_FALSE(xt.is_contiguous());
  Tensor xs = slice(randn64({2, 3, 7}, 22).detach(), 2, 1, 5).detach().requires_grad_();  // (2, 3, 4)
  REQUIRE_FALSE(xs.is_contiguous());
  for (const Tensor& x : {xt, xs}) {
    for (const auto& op : axis_ops()) {
      for (int64_t axis : {0, 1, -1}) {
        INFO(op.name << " axis " << axis << " strides " << to_string(x.strides()));
        require_gradcheck([&](const std::vector<Tensor>& in) { return op.f(in[0], axis, false); }, {x});
      }
    }
    require_gradcheck([](const std::vector<Tensor>& in) { return sum(in[0]); }, {x});
    require_gradcheck([](const std::vector<Tensor>& in) { return mean(in[0]); }, {x});
  }
  // Values through the view equal values of the contiguous copy.
  Tensor c = xt.detach().contiguous();
  for (int64_t axis : {0, 1, 2}) {
    require_values(softmax(xt, axis), {2, 3, 4}, softmax(c, axis).to_vector<double>(), 1e-14);
    require_values(max(xt, axis), max(c, axis).shape(), max(c, axis).to_vector<double>(), 0);
  }
}

TEST_CASE("softmax and log_softmax along a middle axis", "[reduce]") {
  // (2, 5, 3) along axis 1: inner = 3 > 1, the column path.
  Tensor x = randn64({2, 5, 3}, 31);
  require_gradcheck([](const std::vector<Tensor>& in) { return softmax(in[0], 1); }, {x});
  require_gradcheck([](const std::vector<Tensor>& in) { return log_softmax(in[0], -2); }, {x});
  Tensor y = softmax(x, 1);
  // Each column along axis 1 sums to 1; exp(log_softmax) is softmax.
  require_values(sum(y, 1), {2, 3}, std::vector<double>(6, 1.0), 1e-14);
  require_values(exp(log_softmax(x, 1)), {2, 5, 3}, y.to_vector<double>(), 1e-14);
  require_values(y, {2, 5, 3}, reference("softmax", x.to_vector<double>(), 2, 5, 3), 1e-14);
}

TEST_CASE("long rows and columns take the vector paths and agree with a plain reference", "[reduce]") {
  // Lengths 37 and 70 exceed the SIMD width of both dtypes and leave a tail; inner 37 does the
  // same for the column kernels.
  const struct {
    Shape shape;
    int64_t axis, outer, n, inner;
  } cases[] = {{{3, 70}, 1, 3, 70, 1}, {{2, 37}, -1, 2, 37, 1}, {{2, 6, 37}, 1, 2, 6, 37}, {{37, 5}, 0, 1, 37, 5}};
  for (DType dt : {DType::f32, DType::f64}) {
    const double tol = dt == DType::f32 ? 2e-5 : 1e-12;
    for (const auto& c : cases) {
      Generator gen(41);
      Tensor x = Tensor::randn(c.shape, gen, 3.0, 0.0, dt);
      const auto xv = x.to_vector<double>();
      for (const auto& op : axis_ops()) {
        INFO(dtype_name(dt) << " " << op.name << " shape " << to_string(c.shape) << " axis " << c.axis);
        Tensor y = op.f(x, c.axis, false);
        require_values(y, y.shape(), reference(op.name, xv, c.outer, c.n, c.inner), tol);
      }
    }
  }
  // Gradchecks on the long paths (float64: 8 lanes, so 37 = 4 batches + 5).
  for (const auto& op : axis_ops()) {
    INFO(op.name);
    require_gradcheck([&](const std::vector<Tensor>& in) { return op.f(in[0], -1, false); }, {randn64({2, 37}, 42)});
    require_gradcheck([&](const std::vector<Tensor>& in) { return op.f(in[0], 0, false); }, {randn64({9, 37}, 43)});
  }
}

TEST_CASE("a float32 sum of a million elements stays accurate", "[reduce]") {
  Generator gen(51);
  Tensor x = Tensor::rand({1000, 1000}, gen, 0.0, 1.0, DType::f32);
  double expect = 0;
  for (float v : x.to_vector<float>()) expect += v;
  REQUIRE(sum(x).item() == Approx(expect).epsilon(1e-6));
  REQUIRE(mean(x).item() == Approx(expect / 1e6).epsilon(1e-6));
  // Along axis 0 (columns of 1000) and axis 1 (rows of 1000).
  auto col = sum(x, 0).to_vector<double>(), row = sum(x, 1).to_vector<double>();
  double tc = 0, tr = 0;
  for (double v : col) tc += v;
  for (double v : row) tr += v;
  REQUIRE(tc == Approx(expect).epsilon(1e-6));
  REQUIRE(tr == Approx(expect).epsilon(1e-6));
}

// Reference values printed by (torch 1.13):
// /usr/bin/python3 - <<'EOF'
// import torch
// def p(name, t): print(name, list(t.shape), ", ".join("%.10g" % v for v in t.flatten().tolist()))
// x = torch.tensor([[1000., 1001., 1002.], [-1000., -1001., -1002.]], dtype=torch.float32)
// p("softmax_big", torch.softmax(x, 1)); p("log_softmax_big", torch.log_softmax(x, 1))
// p("softmax_big0", torch.softmax(x, 0)); p("log_softmax_big0", torch.log_softmax(x, 0))
// EOF
TEST_CASE("softmax and log_softmax of inputs near +-1000 stay finite", "[reduce]") {
  for (DType dt : {DType::f32, DType::f64}) {
    INFO(dtype_name(dt));
    Tensor x = Tensor::from_vector(std::vector<double>{1000, 1001, 1002, -1000, -1001, -1002}, {2, 3}).to(dt);
    require_values(softmax(x, 1), {2, 3},
                   {0.09003057331, 0.2447284758, 0.6652409434, 0.6652409434, 0.2447284758, 0.09003057331}, 1e-6);
    require_values(log_softmax(x, 1), {2, 3},
                   {-2.407605886, -1.407605886, -0.4076059461, -0.4076059461, -1.407605886, -2.407605886}, 1e-6);
    require_values(softmax(x, 0), {2, 3}, {1, 1, 1, 0, 0, 0}, 1e-6);
    require_values(log_softmax(x, 0), {2, 3}, {0, 0, 0, -2000, -2002, -2004}, 1e-6);
    // Long rows too (the vector path), and the backward stays finite.
    Generator gen(61);
    Tensor big = add(Tensor::randn({4, 50}, gen, 5.0, 0.0, dt), 1000.0).requires_grad_();
    Tensor y = softmax(big, -1), ly = log_softmax(big, -1);
    for (double v : y.to_vector<double>()) REQUIRE(std::isfinite(v));
    for (double v : ly.to_vector<double>()) REQUIRE(std::isfinite(v));
    require_values(sum(y, -1), {4}, {1, 1, 1, 1}, 1e-5);
    sum(mul(ly, 0.5)).backward();
    for (double v : big.grad().to_vector<double>()) REQUIRE(std::isfinite(v));
  }
  // The float64 gradients near 1000 are right, not just finite.
  Tensor x = add(randn64({3, 4}, 62).detach(), 1000.0).requires_grad_();
  require_gradcheck([](const std::vector<Tensor>& in) { return softmax(in[0], -1); }, {x});
  require_gradcheck([](const std::vector<Tensor>& in) { return log_softmax(in[0], 0); }, {x});
}

TEST_CASE("max sends the gradient to the first maximal element", "[reduce]") {
  Tensor x = Tensor::from_vector(std::vector<double>{1, 3, 3, 2, /**/ 5, -1, 5, 5}, {2, 4}).requires_grad_();
  Tensor m = max(x, 1);
  require_values(m, {2}, {3, 5}, 0);
  m.backward(Tensor::from_vector(std::vector<double>{2.0, -4.0}, {2}));
  require_values(x.grad(), {2, 4}, {0, 2, 0, 0, -4, 0, 0, 0}, 0);
  // Along axis 0: column ties go to row 0.
  Tensor c = Tensor::from_vector(std::vector<double>{7, 1, 2, 7, 4, 0}, {2, 3}).requires_grad_();
  sum(max(c, 0)).backward();
  require_values(c.grad(), {2, 3}, {1, 0, 1, 0, 1, 0}, 0);
  // A NaN is the maximum, as in torch.max.
  Tensor n = Tensor::from_vector(std::vector<double>{1, NAN, 3}, {3});
  REQUIRE(std::isnan(max(n, 0).item()));
  // Long rows (the vector path), both dtypes: ties keep the first, a NaN anywhere wins.
  for (DType dt : {DType::f32, DType::f64}) {
    INFO(dtype_name(dt));
    std::vector<double> v(2 * 40);
    for (int i = 0; i < 80; ++i) v[i] = std::sin(1.0 * i);
    v[5] = v[35] = 9;            // row 0: tie between 5 and 35
    v[40 + 7] = 9, v[40 + 30] = NAN;  // row 1: a NaN after the max
    Tensor xl = Tensor::from_vector(v, {2, 40}).to(dt).requires_grad_();
    Tensor m2 = max(xl, 1);
    REQUIRE(m2.at({0}) == 9);
    REQUIRE(std::isnan(m2.at({1})));
    sum(mul(m2, Tensor::from_vector(std::vector<double>{1, 0}, {2}).to(dt))).backward();
    auto gv = xl.grad().to_vector<double>();
    for (int i = 0; i < 80; ++i) REQUIRE(gv[i] == (i == 5 ? 1 : 0));
  }
}

TEST_CASE("bad axes throw naming the op and the shape", "[reduce]") {
  Tensor x = Tensor::zeros({2, 3});
  using Catch::Contains;
  REQUIRE_THROWS_AS(sum(x, 2), heed::Error);
  REQUIRE_THROWS_WITH(sum(x, 2), Contains("sum") && Contains("axis 2") && Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(sum(x, -3, true), Contains("sum") && Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(mean(x, 5), Contains("mean") && Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(max(x, -3), Contains("max") && Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(softmax(x, 2), Contains("softmax") && Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(log_softmax(x, -3), Contains("log_softmax") && Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(sum(Tensor::scalar(1.0), 1), Contains("sum") && Contains("[]"));
  REQUIRE_THROWS_WITH(max(Tensor::zeros({2, 0}), 1), Contains("max") && Contains("[2, 0]"));
}

// torch 1.13, float64: a = [[0.5, -1.25, 2.0], [1.5, -0.75, 0.3]]; a.var(1), a.var(0, unbiased=False),
// a.var(), a.std(1), a.std(), a.std(0, unbiased=False, keepdim=True); torch.tensor([3.]).var() is nan;
// x = torch.tensor([2., 2.], requires_grad=True); x.std().backward() gives x.grad = [0, 0].
TEST_CASE("var and std match torch, with gradchecks over every axis and on views", "[reduce]") {
  for (DType dt : {DType::f32, DType::f64}) {
    INFO(dtype_name(dt));
    const double tol = dt == DType::f32 ? 1e-6 : 1e-9;
    const Tensor a = Tensor::from_vector(std::vector<double>{0.5, -1.25, 2.0, 1.5, -0.75, 0.3}, {2, 3}).to(dt);
    require_values(var(a, 1), {2}, {2.645833333, 1.2675}, tol);
    require_values(var(a, 0, /*unbiased=*/false), {3}, {0.25, 0.0625, 0.7225}, tol);
    require_values(var(a), {}, {1.566666667}, tol);
    require_values(a.var(), {}, {1.566666667}, tol);
    require_values(heed::std(a, 1), {2}, {1.626601775, 1.125833025}, tol);
    require_values(a.std(), {}, {1.251665557}, tol);
    require_values(heed::std(a, 0, false, /*keepdim=*/true), {1, 3}, {0.5, 0.25, 0.85}, tol);
    require_values(a.std(-1, true, true), {2, 1}, {1.626601775, 1.125833025}, tol);
  }
  CHECK(std::isnan(var(Tensor::from_vector(std::vector<double>{3.0}, {1})).item()));  // 0 / 0, as torch
  // No elements: NaN, as torch (the divisor is max(0, n - 1), not -1); a 0-d tensor has axis 0.
  CHECK(std::isnan(var(Tensor::zeros({0}, DType::f64)).item()));
  for (double v : heed::std(Tensor::zeros({3, 0}, DType::f64), 1).to_vector<double>()) CHECK(std::isnan(v));
  CHECK(std::isnan(var(Tensor::scalar(2.0, DType::f64), 0).item()));
  CHECK(var(Tensor::scalar(2.0, DType::f64), 0, false).item() == 0);
  CHECK_THROWS_WITH(var(Tensor::zeros({2, 3}), 2), Catch::Contains("var: axis 2"));
  Tensor same = Tensor::from_vector(std::vector<double>{2.0, 2.0}, {2}).requires_grad_();
  heed::std(same).backward();
  require_values(same.grad(), {2}, {0, 0}, 0);  // not NaN: torch's std_backward masks a zero std

  for (int64_t axis = -3; axis < 3; ++axis)
    for (bool unbiased : {true, false})
      for (bool keep : {false, true}) {
        INFO("axis " << axis << " unbiased " << unbiased << " keepdim " << keep);
        Tensor x = randn64({2, 3, 4}, 40 + axis);
        require_gradcheck([&](const std::vector<Tensor>& in) { return var(in[0], axis, unbiased, keep); }, {x});
        require_gradcheck([&](const std::vector<Tensor>& in) { return heed::std(in[0], axis, unbiased, keep); }, {x});
      }
  Tensor xt = transpose(randn64({4, 3, 2}, 50).detach(), 0, 2).detach().requires_grad_();
  Tensor xs = slice(randn64({2, 3, 7}, 51).detach(), 2, 1, 5).detach().requires_grad_();
  for (const Tensor& x : {xt, xs}) {
    INFO("strides " << to_string(x.strides()));
    require_gradcheck([](const std::vector<Tensor>& in) { return var(in[0]); }, {x});
    require_gradcheck([](const std::vector<Tensor>& in) { return heed::std(in[0]); }, {x});
    require_gradcheck([](const std::vector<Tensor>& in) { return heed::std(in[0], 1); }, {x});
    // Used twice: the deviations and the mean both come from the one input.
    require_gradcheck([](const std::vector<Tensor>& in) { return var(in[0], 2) * mean(in[0], 2); }, {x});
  }
}

TEST_CASE("sum of an int32, int64 or bool tensor is exact, in int64, as torch's", "[reduce]") {
  // The accuracy idiom: (pred == target).sum() counts.
  const Tensor pred = Tensor({1, 2, 0, 2, 1}), target = Tensor({1, 0, 0, 2, 2});
  const Tensor hits = (pred == target).sum();
  REQUIRE(hits.dtype() == DType::i64);
  REQUIRE(hits.shape() == Shape{});
  REQUIRE(hits.to_vector<int64_t>() == std::vector<int64_t>{3});
  // Along an axis, kept or not, through a transposed view; int32 and negative values.
  const Tensor m = Tensor::from_vector(std::vector<int32_t>{1, -2, 3, 4, 5, -6}, {2, 3});
  REQUIRE(sum(m, 0).to_vector<int64_t>() == std::vector<int64_t>{5, 3, -3});
  REQUIRE(sum(m, 1, true).shape() == Shape{2, 1});
  REQUIRE(sum(m, -1, true).to_vector<int64_t>() == std::vector<int64_t>{2, 3});
  REQUIRE(sum(transpose(m, 0, 1), 1).to_vector<int64_t>() == std::vector<int64_t>{5, 3, -3});
  REQUIRE(m.sum().to_vector<int64_t>() == std::vector<int64_t>{5});
  // Exact past 2^53, where a double would round: 2^53 + 1 + 2^53 + 1.
  const int64_t big = (int64_t{1} << 53) + 1;
  REQUIRE(sum(Tensor::from_vector(std::vector<int64_t>{big, big}, {2})).to_vector<int64_t>() ==
          std::vector<int64_t>{2 * big});
  // Bool along an axis: a count per row; an empty axis sums to 0.
  const Tensor flags = Tensor({true, false, true, true, true, false}).reshape({2, 3});
  REQUIRE(sum(flags, 1).to_vector<int64_t>() == std::vector<int64_t>{2, 2});
  REQUIRE(sum(Tensor::zeros({0, 2}, DType::i32), 0).to_vector<int64_t>() == std::vector<int64_t>{0, 0});
  // mean stays float-only, as torch's ("Input dtype must be either a floating point ... dtype").
  REQUIRE_THROWS(mean(m));
}
