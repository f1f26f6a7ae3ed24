// Elementwise ops (core/ops/elementwise.cpp): forward values against PyTorch, float64 gradchecks
// with broadcasting on either side, 0-d operands, transposed and sliced inputs, a tensor used
// twice, sum_to and expand; broadcast and dtype errors; and a deliberately wrong backward that
// gradcheck must catch.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numbers>
#include <string>

#include "support/helpers.h"

using namespace heed;
using heed::test::rand64;
using heed::test::randn64;
using heed::test::require_gradcheck;
using heed::test::require_values;

namespace {

using Unary = std::function<Tensor(const Tensor&)>;
using Binary = std::function<Tensor(const Tensor&, const Tensor&)>;

// A float64 leaf with normal entries pushed at least `margin` away from 0 (for relu's kink and
// for denominators).
Tensor away_from_zero(const Shape& shape, uint64_t seed, double margin) {
  Generator gen(seed);
  auto v = Tensor::randn(shape, gen, 1.0, 0.0, DType::f64).to_vector<double>();
  for (double& x : v) x = x < 0 ? x - margin : x + margin;
  return Tensor::from_vector(v, shape).requires_grad_();
}

// (3, 4) float64 leaves that are views, not contiguous: a transpose of a (4, 3) buffer and a
// slice [1, 5) of the columns of a (3, 6) buffer (an offset and a row stride of 6).
Tensor transposed_leaf(uint64_t seed, double margin = 0) {
  Tensor base = away_from_zero({4, 3}, seed, margin).detach();
  return transpose(base, 0, 1).detach().requires_grad_();
}
Tensor sliced_leaf(uint64_t seed, double margin = 0) {
  Tensor base = away_from_zero({3, 6}, seed, margin).detach();
  return slice(base, 1, 1, 5).detach().requires_grad_();
}
// The same views over positive entries in [lo, hi).
Tensor transposed_positive(uint64_t seed, double lo, double hi) {
  return transpose(rand64({4, 3}, seed, lo, hi).detach(), 0, 1).detach().requires_grad_();
}
Tensor sliced_positive(uint64_t seed, double lo, double hi) {
  return slice(rand64({3, 6}, seed, lo, hi).detach(), 1, 1, 5).detach().requires_grad_();
}

Tensor values(const std::vector<double>& v, const Shape& shape, DType dt) {
  return Tensor::from_vector(v, shape).to(dt);
}

}  // namespace

// Reference values printed by (torch 1.13):
// /usr/bin/python3 - <<'EOF'
// import torch, math
// def p(name, t): print(name, list(t.shape), ", ".join("%.10g" % v for v in t.flatten().tolist()))
// a = torch.tensor([[0.5, -1.25, 2.0], [1.5, -0.75, 0.3]], dtype=torch.float64)
// b = torch.tensor([[1.2, 0.8, -2.5], [-0.4, 1.7, 3.1]], dtype=torch.float64)
// q = torch.tensor([[0.3, 1.2, 2.5], [0.05, 4.0, 0.9]], dtype=torch.float64)
// p("add", a + b); p("sub", a - b); p("mul", a * b); p("div", a / b)
// p("add_s", a + 2.5); p("mul_s", a * -1.5); p("rsub", 3 - a); p("rdiv", 2 / a)
// p("neg", -a); p("exp", a.exp()); p("tanh", a.tanh()); p("relu", a.relu())
// p("gelu", torch.nn.functional.gelu(a)); p("pow3", a.pow(3)); p("pow2", a.pow(2))
// p("log", q.log()); p("sqrt", q.sqrt()); p("pow07", q.pow(0.7)); p("pow-1.5", q.pow(-1.5))
// A = torch.sin(0.9 * torch.arange(12, dtype=torch.float64) + 0.2).reshape(3, 1, 4)
// B = (torch.cos(0.6 * torch.arange(8, dtype=torch.float64)) + 1.5).reshape(2, 4)
// p("badd", A + B); p("bsub", B - A); p("bmul", A * B); p("bdiv", A / B)
// p("sigmoid", a.sigmoid()); p("silu", torch.nn.functional.silu(a)); p("sin", a.sin()); p("cos", a.cos())
// p("clamp", a.clamp(-1, 1)); p("clampmin", a.clamp(min=0.4)); p("clampmax", a.clamp(max=-0.5))
// p("clampinv", a.clamp(1, -1)); p("maximum", torch.maximum(a, b)); p("minimum", torch.minimum(a, b))
// EOF
TEST_CASE("elementwise forward values match PyTorch", "[elementwise]") {
  for (DType dt : {DType::f32, DType::f64}) {
    INFO(dtype_name(dt));
    const double tol = dt == DType::f32 ? 1e-5 : 1e-9;
    const Tensor a = values({0.5, -1.25, 2.0, 1.5, -0.75, 0.3}, {2, 3}, dt);
    const Tensor b = values({1.2, 0.8, -2.5, -0.4, 1.7, 3.1}, {2, 3}, dt);
    const Tensor q = values({0.3, 1.2, 2.5, 0.05, 4.0, 0.9}, {2, 3}, dt);
    const Shape s = {2, 3};
    require_values(add(a, b), s, {1.7, -0.45, -0.5, 1.1, 0.95, 3.4}, tol);
    require_values(sub(a, b), s, {-0.7, -2.05, 4.5, 1.9, -2.45, -2.8}, tol);
    require_values(mul(a, b), s, {0.6, -1, -5, -0.6, -1.275, 0.93}, tol);
    require_values(div(a, b), s, {0.4166666667, -1.5625, -0.8, -3.75, -0.4411764706, 0.09677419355}, tol);
    require_values(add(a, 2.5), s, {3, 1.25, 4.5, 4, 1.75, 2.8}, tol);
    require_values(mul(a, -1.5), s, {-0.75, 1.875, -3, -2.25, 1.125, -0.45}, tol);
    require_values(rsub(3.0, a), s, {2.5, 4.25, 1, 1.5, 3.75, 2.7}, tol);
    require_values(rdiv(2.0, a), s, {4, -1.6, 1, 1.333333333, -2.666666667, 6.666666667}, tol);
    require_values(neg(a), s, {-0.5, 1.25, -2, -1.5, 0.75, -0.3}, tol);
    require_values(exp(a), s, {1.648721271, 0.2865047969, 7.389056099, 4.48168907, 0.4723665527, 1.349858808}, tol);
    require_values(tanh(a), s, {0.4621171573, -0.84828364, 0.9640275801, 0.9051482536, -0.6351489524, 0.2913126125},
                   tol);
    require_values(relu(a), s, {0.5, 0, 2, 1.5, 0, 0.3}, tol);
    require_values(gelu(a), s,
                   {0.3457312306, -0.1320622171, 1.954499736, 1.399789198, -0.1699705143, 0.1853734267}, tol);
    require_values(pow(a, 3), s, {0.125, -1.953125, 8, 3.375, -0.421875, 0.027}, tol);
    require_values(pow(a, 2), s, {0.25, 1.5625, 4, 2.25, 0.5625, 0.09}, tol);
    require_values(log(q), s, {-1.203972804, 0.1823215568, 0.9162907319, -2.995732274, 1.386294361, -0.1053605157},
                   tol);
    require_values(sqrt(q), s, {0.5477225575, 1.095445115, 1.58113883, 0.2236067977, 2, 0.9486832981}, tol);
    require_values(pow(q, 0.7), s, {0.4305116202, 1.136126977, 1.899144482, 0.1228228026, 2.639015822, 0.9289016977},
                   tol);
    require_values(pow(q, -1.5), s, {6.085806195, 0.7607257743, 0.2529822128, 89.4427191, 0.125, 1.171213948}, tol);
    require_values(sigmoid(a), s, {0.6224593312, 0.2227001388, 0.880797078, 0.8175744762, 0.3208213008, 0.5744425168},
                   tol);
    require_values(silu(a), s, {0.3112296656, -0.2783751735, 1.761594156, 1.226361714, -0.2406159756, 0.172332755},
                   tol);
    require_values(sin(a), s, {0.4794255386, -0.9489846194, 0.9092974268, 0.9974949866, -0.68163876, 0.2955202067},
                   tol);
    require_values(cos(a), s, {0.8775825619, 0.3153223624, -0.4161468365, 0.07073720167, 0.7316888689, 0.9553364891},
                   tol);
    require_values(clamp(a, -1.0, 1.0), s, {0.5, -1, 1, 1, -0.75, 0.3}, tol);
    require_values(clamp(a, 0.4), s, {0.5, 0.4, 2, 1.5, 0.4, 0.4}, tol);
    require_values(clamp(a, std::nullopt, -0.5), s, {-0.5, -1.25, -0.5, -0.5, -0.75, -0.5}, tol);
    require_values(clamp(a, 1.0, -1.0), s, {-1, -1, -1, -1, -1, -1}, tol);
    require_values(maximum(a, b), s, {1.2, 0.8, 2, 1.5, 1.7, 3.1}, tol);
    require_values(minimum(a, b), s, {0.5, -1.25, -2.5, -0.4, -0.75, 0.3}, tol);
    // The operators are the same ops.
    require_values(a + b, s, add(a, b).to_vector<double>(), 0);
    require_values(a / 2.0, s, mul(a, 0.5).to_vector<double>(), 0);
    require_values(1.0 - a, s, rsub(1.0, a).to_vector<double>(), 0);
    REQUIRE(add(a, b).dtype() == dt);
  }
}

namespace {
// Runs `check` on the special values laid out every way the vectorised functions split their
// input: all of them five times over (mixed within batches, and a tail), each alone (the scalar
// tail only) and each as 16 copies (whole batches only, at every vector width up to 16 lanes).
void check_special_layouts(const std::vector<double>& special, const std::function<void(const std::vector<double>&)>& check) {
  std::vector<double> mixed;
  for (int rep = 0; rep < 5; ++rep) mixed.insert(mixed.end(), special.begin(), special.end());
  check(mixed);
  for (double v : special) {
    check({v});
    check(std::vector<double>(16, v));
  }
}
}  // namespace

// The vectorised exp (core/ops/simd_exp.h) at the inputs where xsimd's double exp would cast a
// non-finite or huge value to an integer: the answers are IEEE's, and under clang's UBSan
// (float-cast-overflow, CI's sanitized build) the cast itself would fail this test.
TEST_CASE("exp of +-inf, NaN and huge inputs is 0, inf or NaN in float32 and float64, in batches and the tail", "[elementwise]") {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> special = {-inf, inf, nan, -1e300, 1e300, -1000.5, 1000.5, -2e9, 2e9, 0.0, -0.0};
  auto check_exp = [&](const std::vector<double>& in) {
    for (DType dt : {DType::f32, DType::f64}) {
      INFO(dtype_name(dt) << ", " << in.size() << " elements");
      const Tensor y = exp(Tensor::from_vector(in, {static_cast<int64_t>(in.size())}).to(dt)).to(DType::f64);
      for (size_t i = 0; i < in.size(); ++i) {
        INFO("exp(" << in[i] << ") at " << i);
        const double got = y.data<double>()[i];
        if (std::isnan(in[i])) {
          CHECK(std::isnan(got));
        } else if (in[i] > 100) {
          CHECK(got == inf);
        } else if (in[i] < -100) {
          CHECK(got == 0.0);
        } else {
          CHECK(got == 1.0);
        }
      }
    }
  };
  check_special_layouts(special, check_exp);
}

// tanh and GELU (its normal CDF takes erfc in float64) at the inputs where xsimd's double tanh
// and erfc reach its exp's cast of a non-finite or huge value: the answers are PyTorch's
// (torch.tanh, F.gelu and its gradient in float64 give these), and under clang's UBSan the cast
// itself would fail this test.
TEST_CASE("tanh and GELU of +-inf, NaN and huge inputs are PyTorch's in float32 and float64, in batches and the tail", "[elementwise]") {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> special = {-inf, inf, nan, -1e300, 1e300, -1000.5, 1000.5, -2e9, 2e9, 0.0, -0.0, -25.0, 25.0};
  auto check = [&](const std::vector<double>& in) {
    for (DType dt : {DType::f32, DType::f64}) {
      INFO(dtype_name(dt) << ", " << in.size() << " elements");
      const Tensor x = Tensor::from_vector(in, {static_cast<int64_t>(in.size())}).to(dt).detach().requires_grad_();
      const Tensor xs = x.detach().to(DType::f64);  // the inputs as the dtype holds them (1e300 is inf in float32)
      const Tensor t = tanh(x).to(DType::f64), y = gelu(x);
      sum(y).backward();
      const Tensor g = x.grad().to(DType::f64), yd = y.to(DType::f64);
      for (size_t i = 0; i < in.size(); ++i) {
        const double v = xs.data<double>()[i];
        INFO("x = " << v << " at " << i);
        const double tanh_got = t.data<double>()[i], gelu_got = yd.data<double>()[i], grad_got = g.data<double>()[i];
        if (std::isnan(v)) {
          CHECK(std::isnan(tanh_got));
          CHECK(std::isnan(gelu_got));
          CHECK(std::isnan(grad_got));
          continue;
        }
        CHECK(tanh_got == std::tanh(v));  // +-1 past |x| = 19.1, the zeros exact
        CHECK(std::signbit(tanh_got) == std::signbit(v));
        if (v == -inf) {
          CHECK(std::isnan(gelu_got));  // -inf * Phi(-inf) = -inf * 0
        } else if (v >= 25) {
          CHECK(gelu_got == v);  // Phi = 1 (inf stays inf)
        } else if (v <= -1000) {
          CHECK(gelu_got == 0.0);  // x * 0: -0 in PyTorch and here
          CHECK(std::signbit(gelu_got));
        } else if (v == -25) {
          CHECK(std::fabs(gelu_got) < 1e-100);  // -25 Phi(-25) = -7.6e-137 (PyTorch's 1 + erf rounds it to -0)
        } else {
          CHECK(gelu_got == 0.0);  // x = +-0
        }
        if (std::isinf(v)) {
          CHECK(std::isnan(grad_got));  // Phi + x phi: inf * 0 in both directions
        } else if (v >= 1000) {
          CHECK(grad_got == 1.0);
        } else if (v <= -1000) {
          CHECK(grad_got == 0.0);
        } else if (v == 0.0) {
          CHECK(grad_got == 0.5);
        } else {
          CHECK(std::fabs(grad_got - (v > 0 ? 1.0 : 0.0)) < 1e-100);  // +-25: 25 phi(25) is 1.9e-135
        }
      }
    }
  };
  check_special_layouts(special, check);
}

TEST_CASE("broadcast binary ops match PyTorch: (3, 1, 4) with (2, 4)", "[elementwise]") {
  std::vector<double> av(12), bv(8);
  for (int i = 0; i < 12; ++i) av[i] = std::sin(0.9 * i + 0.2);
  for (int j = 0; j < 8; ++j) bv[j] = std::cos(0.6 * j) + 1.5;
  for (DType dt : {DType::f32, DType::f64}) {
    INFO(dtype_name(dt));
    const double tol = dt == DType::f32 ? 1e-5 : 1e-9;
    const Tensor A = values(av, {3, 1, 4}, dt), B = values(bv, {2, 4}, dt);
    const Shape s = {3, 2, 4};
    require_values(add(A, B), s,
                   {2.698669331, 3.216542975, 2.771655181, 1.512047235, 0.9612756153, 1.401214863, 1.51253901,
                    1.248988508, 1.888142109, 1.325412357, 1.231091117, 1.487917893, 0.1507483935, -0.4899157542,
                    -0.02802505421, 1.224859167, 3.398708096, 3.227507449, 2.085247669, 0.6477272564, 1.66131438,
                    1.412179337, 0.8261314978, 0.3846685298},
                   tol);
    require_values(sub(B, A), s,
                   {2.301330669, 1.434128255, 0.9530603277, 1.033548576, 0.5639369537, -0.3811998567, -0.3060558432,
                    0.7704898494, 3.111857891, 3.325258872, 2.493624392, 1.057677917, 1.374464175, 1.509930761,
                    1.234508222, 0.7946191906, 1.601291904, 1.423163781, 1.63946784, 1.897868554, -0.1361018114,
                    -0.3921643304, 0.3803516696, 1.634809828},
                   tol);
    require_values(mul(A, B), s,
                   {0.496673327, 2.072356215, 1.693437114, 0.3045160451, 0.1515064802, 0.4545224407, 0.5485260198,
                    0.2415794212, -1.529644727, -2.325157163, -1.175644318, 0.2738042702, -0.4666066728,
                    -0.5099683642, -0.3808062863, 0.2172150801, 2.24677024, 2.097852296, 0.4151007599,
                    -0.7955886126, 0.6853604418, 0.4601144046, 0.1344564648, -0.6311583236},
                   tol);
    require_values(div(A, B), s,
                   {0.07946773232, 0.3832596699, 0.4882506729, 0.187971184, 0.2605136292, 1.747439703, 1.507352032,
                    0.2369417116, -0.2447431564, -0.4300124469, -0.3389609952, 0.169013468, -0.8023247427,
                    -1.960604993, -1.046457431, 0.2130451038, 0.3594832383, 0.3879748919, 0.1196815776,
                    -0.4910996838, 1.178469302, 1.768938354, 0.3694869852, -0.6190416913},
                   tol);
    // Operand order does not change a commutative result; a 0-d operand broadcasts everywhere.
    require_values(mul(B, A), s, mul(A, B).to_vector<double>(), 0);
    const Tensor two = Tensor::scalar(2.0, dt);
    require_values(sub(two, B), {2, 4}, rsub(2.0, B).to_vector<double>(), tol);
    require_values(div(B, two), {2, 4}, mul(B, 0.5).to_vector<double>(), tol);
    require_values(add(two, two), {}, {4.0}, 0);
  }
}

TEST_CASE("binary ops on transposed and sliced views equal the ops on contiguous copies", "[elementwise]") {
  const Tensor t = transposed_leaf(1, 0.5), sl = sliced_leaf(2, 0.5);
  const Tensor tc = t.detach().contiguous(), sc = sl.detach().contiguous();
  REQUIRE_FALSE(t.is_contiguous());
  REQUIRE_FALSE(sl.is_contiguous());
  const std::vector<std::pair<const char*, Binary>> ops = {
      {"add", [](const Tensor& a, const Tensor& b) { return add(a, b); }},
      {"sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); }},
      {"mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); }},
      {"div", [](const Tensor& a, const Tensor& b) { return div(a, b); }},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }},
  };
  for (const auto& [name, f] : ops) {
    INFO(name);
    require_values(f(t, sl), {3, 4}, f(tc, sc).to_vector<double>(), 0);
    require_values(f(sl, t), {3, 4}, f(sc, tc).to_vector<double>(), 0);
    // A non-contiguous operand broadcast against a row.
    const Tensor row = slice(sc, 0, 0, 1);  // (1, 4)
    require_values(f(t, row), {3, 4}, f(tc, row.contiguous()).to_vector<double>(), 0);
  }
  require_values(exp(t), {3, 4}, exp(tc).to_vector<double>(), 0);
  require_values(gelu(sl), {3, 4}, gelu(sc).to_vector<double>(), 0);
}

TEST_CASE("float64 gradchecks of the binary ops, with broadcasting on either side", "[elementwise]") {
  const std::vector<std::pair<const char*, Binary>> ops = {
      {"add", [](const Tensor& a, const Tensor& b) { return add(a, b); }},
      {"sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); }},
      {"mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); }},
      {"div", [](const Tensor& a, const Tensor& b) { return div(a, b); }},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }},
  };
  // Pairs of shapes: equal, (3, 1, 4) with (2, 4) both ways, 0-d with a matrix both ways, a row
  // and a column.
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{2, 3}, {2, 3}}, {{3, 1, 4}, {2, 4}}, {{2, 4}, {3, 1, 4}}, {{}, {3, 4}}, {{3, 4}, {}}, {{1, 4}, {3, 1}}};
  uint64_t seed = 100;
  for (const auto& [name, op] : ops) {
    const auto& f = op;  // the lambdas below capture f: clang 14 cannot capture a structured binding
    for (const auto& [sa, sb] : shapes) {
      INFO(name << " " << to_string(sa) << " with " << to_string(sb));
      // Denominators stay at least 0.5 from zero.
      Tensor a = randn64(sa, seed++), b = away_from_zero(sb, seed++, 0.5);
      require_gradcheck([&](const std::vector<Tensor>& in) { return f(in[0], in[1]); }, {a, b});
    }
    INFO(name << " on transposed and sliced views");
    Tensor t = transposed_leaf(seed++, 0.5), sl = sliced_leaf(seed++, 0.5);
    require_gradcheck([&](const std::vector<Tensor>& in) { return f(in[0], in[1]); }, {t, sl});
    require_gradcheck([&](const std::vector<Tensor>& in) { return f(in[0], in[1]); }, {sl, t});
    // A transposed view broadcast against a (4,) vector and a 0-d tensor.
    Tensor v = away_from_zero({4}, seed++, 0.5), z = away_from_zero({}, seed++, 0.5);
    require_gradcheck([&](const std::vector<Tensor>& in) { return f(in[0], in[1]); }, {t, v});
    require_gradcheck([&](const std::vector<Tensor>& in) { return f(in[0], in[1]); }, {z, sl});
    // Only one side requiring grad.
    Tensor c = away_from_zero({3, 4}, seed++, 0.5).detach();
    require_gradcheck([&](const std::vector<Tensor>& in) { return f(in[0], c); }, {t});
    require_gradcheck([&](const std::vector<Tensor>& in) { return f(c, in[0]); }, {sl});
  }
}

TEST_CASE("a tensor used twice gets both gradients", "[elementwise]") {
  Tensor x = away_from_zero({3, 4}, 200, 0.3);
  require_gradcheck([](const std::vector<Tensor>& in) { return mul(in[0], in[0]); }, {x});
  require_gradcheck([](const std::vector<Tensor>& in) { return add(in[0], in[0]); }, {x});
  require_gradcheck([](const std::vector<Tensor>& in) { return div(in[0], tanh(in[0])); }, {x});
  Tensor t = transposed_leaf(201);
  require_gradcheck([](const std::vector<Tensor>& in) { return mul(in[0], in[0]); }, {t});
  require_gradcheck([](const std::vector<Tensor>& in) { return add(in[0], in[0]); }, {t});
  // Exact values: d sum(x * x) = 2x, d sum(x + x) = 2.
  Tensor y = Tensor::from_vector(std::vector<double>{1.5, -2.0, 0.25}, {3}).requires_grad_();
  sum(mul(y, y)).backward();
  require_values(y.grad(), {3}, {3.0, -4.0, 0.5}, 0);
  y.zero_grad();
  sum(add(y, y)).backward();
  require_values(y.grad(), {3}, {2.0, 2.0, 2.0}, 0);
}

TEST_CASE("float64 gradchecks of the scalar and pointwise ops", "[elementwise]") {
  struct Case {
    const char* name;
    Unary f;
    int domain;  // 0: any real, 1: away from 0 (relu's kink, negative powers), 2: positive
  };
  const std::vector<Case> cases = {
      {"add_scalar", [](const Tensor& a) { return add(a, 2.5); }, 0},
      {"mul_scalar", [](const Tensor& a) { return mul(a, -1.5); }, 0},
      {"div_scalar", [](const Tensor& a) { return a / -1.5; }, 0},
      {"abs", [](const Tensor& a) { return abs(a); }, 1},
      {"rsub_scalar", [](const Tensor& a) { return rsub(3.0, a); }, 0},
      {"rdiv_scalar", [](const Tensor& a) { return rdiv(2.0, a); }, 1},
      {"neg", [](const Tensor& a) { return neg(a); }, 0},
      {"pow 3", [](const Tensor& a) { return pow(a, 3.0); }, 0},
      {"pow 2", [](const Tensor& a) { return pow(a, 2.0); }, 0},
      {"pow -2", [](const Tensor& a) { return pow(a, -2.0); }, 1},
      {"pow 0.7", [](const Tensor& a) { return pow(a, 0.7); }, 2},
      {"pow -1.5", [](const Tensor& a) { return pow(a, -1.5); }, 2},
      {"exp", [](const Tensor& a) { return exp(a); }, 0},
      {"log", [](const Tensor& a) { return log(a); }, 2},
      {"sqrt", [](const Tensor& a) { return sqrt(a); }, 2},
      {"tanh", [](const Tensor& a) { return tanh(a); }, 0},
      {"relu", [](const Tensor& a) { return relu(a); }, 1},
      {"gelu", [](const Tensor& a) { return gelu(a); }, 0},
      {"gelu tanh", [](const Tensor& a) { return gelu(a, GeluApproximation::tanh); }, 0},
      {"sigmoid", [](const Tensor& a) { return sigmoid(a); }, 0},
      {"silu", [](const Tensor& a) { return silu(a); }, 0},
      {"sin", [](const Tensor& a) { return sin(a); }, 0},
      {"cos", [](const Tensor& a) { return cos(a); }, 0},
      {"clamp [-0.5, 0.7]", [](const Tensor& a) { return clamp(a, -0.5, 0.7); }, 0},
      {"clamp min 0.1", [](const Tensor& a) { return clamp(a, 0.1); }, 0},
      {"clamp max -0.3", [](const Tensor& a) { return clamp(a, std::nullopt, -0.3); }, 0},
  };
  uint64_t seed = 300;
  for (const auto& c : cases) {
    INFO(c.name);
    std::vector<Tensor> inputs;
    if (c.domain == 2) {
      inputs = {rand64({2, 3}, seed, 0.3, 2.0), transposed_positive(seed + 1, 0.3, 2.0),
                sliced_positive(seed + 2, 0.3, 2.0), rand64({}, seed + 3, 0.3, 2.0)};
    } else {
      const double margin = c.domain == 1 ? 0.2 : 0.0;
      inputs = {away_from_zero({2, 3}, seed, margin), transposed_leaf(seed + 1, margin),
                sliced_leaf(seed + 2, margin), away_from_zero({}, seed + 3, margin)};
    }
    seed += 4;
    for (const Tensor& x : inputs) {
      INFO("input shape " << to_string(x.shape()) << " strides " << to_string(x.strides()));
      require_gradcheck([&](const std::vector<Tensor>& in) { return c.f(in[0]); }, {x});
    }
  }
}

// Where PyTorch's result is not the textbook formula's, heed follows PyTorch (each value below was
// printed by torch 1.13):
//   torch.relu(torch.tensor([nan, -1., 2.], dtype=torch.float64))  -> [nan, 0, 2], gradient [1, 0, 1]
//   x = torch.tensor([0., 2.], dtype=torch.float64, requires_grad=True); x.pow(0.).sum().backward()
//                                                                    -> x.grad [0, 0] (not nan at 0)
//   torch.tensor([5., 7., 10.], dtype=torch.float64) / 3.0           -> 1.6666666666666667, ...
//   torch.tensor([1e-300], dtype=torch.float64) / 1e-310              -> 1e10 (not inf)
//   torch.tensor([-0.0]).abs()                                        -> 0. (sign bit clear)
TEST_CASE("relu keeps NaN, pow 0 has a zero gradient at 0, a / s divides, |-0| is +0: as torch", "[elementwise]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (DType dt : {DType::f32, DType::f64}) {
    INFO(dtype_name(dt));
    Tensor x = values({nan, -1.0, 2.0}, {3}, dt).requires_grad_();
    Tensor y = relu(x);
    const auto v = y.to_vector<double>();
    CHECK(std::isnan(v[0]));
    CHECK(v[1] == 0.0);
    CHECK(v[2] == 2.0);
    sum(y).backward();
    CHECK(x.grad().to_vector<double>() == std::vector<double>{1.0, 0.0, 1.0});

    Tensor z = values({0.0, 2.0}, {2}, dt).requires_grad_();
    sum(pow(z, 0.0)).backward();
    CHECK(z.grad().to_vector<double>() == std::vector<double>{0.0, 0.0});

    const Tensor m = abs(values({-0.0, -2.0, 3.0}, {3}, dt));
    const auto mv = m.to_vector<double>();
    CHECK_FALSE(std::signbit(mv[0]));
    CHECK(mv == std::vector<double>{0.0, 2.0, 3.0});
  }
  // Correctly rounded, as a / s is in torch: a * (1 / s) gives 1.6666666666666665 for 5 / 3.
  const auto q = (values({5.0, 7.0, 10.0}, {3}, DType::f64) / 3.0).to_vector<double>();
  CHECK(q == std::vector<double>{5.0 / 3.0, 7.0 / 3.0, 10.0 / 3.0});
  CHECK(q[0] == 1.6666666666666667);
  // 1 / 1e-310 overflows; the quotient does not.
  CHECK((values({1e-300}, {1}, DType::f64) / 1e-310).item() == 1e-300 / 1e-310);
  CHECK((values({1e-30}, {1}, DType::f32) / 1e-39).item() == static_cast<double>(1e-30f / static_cast<float>(1e-39)));
  CHECK(std::isfinite((values({1e-30}, {1}, DType::f32) / 1e-39).item()));
}

// float32 GELU computes the normal CDF without erf (core/ops/normal_cdf.h); float64 takes erfc,
// exact to double. Over 0 <= |x| <= 12.5 (the float tail of Phi stays a normal number up to
// about -13), the float32 values and gradients stay within 8 * 2^-24 relative of float64's, the
// gradient relative to |Phi| + |x phi| (it is 0 near x = -0.75). The textbook float
// 0.5 x (1 + erf(x / sqrt 2)) fails this from x = -2 on (1 + erf cancels: at x = -4 it keeps two
// bits); the first version of the kernel, with x^2 rounded, failed it from |x| = 4 on.
// Printed by torch 1.13, float32 and float64 (the f32 lines where they differ):
//   x = torch.tensor([-inf, -1000., -100., -89., -20., -0., 0., 20., 89., 100., 1000., inf, nan], requires_grad=True)
//   torch.sigmoid(x), its gradient; F.silu(x), its gradient
TEST_CASE("sigmoid and silu of +-inf, NaN, huge and tiny inputs are PyTorch's, values and gradients", "[elementwise]") {
  const double inf = INFINITY, nan = NAN;
  const std::vector<double> x = {-inf, -1000, -100, -89, -20, -0.0, 0.0, 20, 89, 100, 1000, inf, nan};
  struct Expected {
    DType dt;
    std::vector<double> sig, sig_grad, silu, silu_grad;
  };
  const std::vector<Expected> expected = {
      {DType::f32,
       {0, 0, 0, 0, 2.061153692e-09, 0.5, 0.5, 1, 1, 1, 1, 1, nan},
       {0, 0, 0, 0, 2.061153692e-09, 0.25, 0.25, 0, 0, 0, 0, 0, nan},
       {nan, -0.0, -0.0, -0.0, -4.122307473e-08, -0.0, 0, 20, 89, 100, 1000, inf, nan},
       {nan, -0.0, -0.0, -0.0, -3.916192171e-08, 0.5, 0.5, 1, 1, 1, 1, nan, nan}},
      {DType::f64,
       {0, 0, 3.720075976e-44, 2.227363562e-39, 2.061153618e-09, 0.5, 0.5, 0.9999999979, 1, 1, 1, 1, nan},
       {0, 0, 3.720075976e-44, 2.227363562e-39, 2.061153614e-09, 0.25, 0.25, 2.061153688e-09, 0, 0, 0, 0, nan},
       {nan, -0.0, -3.720075976e-42, -1.98235357e-37, -4.122307236e-08, -0.0, 0, 19.99999996, 89, 100, 1000, inf, nan},
       {nan, -0.0, -3.682875216e-42, -1.960079934e-37, -3.916191866e-08, 0.5, 0.5, 1.000000039, 1, 1, 1, nan, nan}},
  };
  auto same = [](double got, double want) {
    if (std::isnan(want)) return std::isnan(got);
    if (want == 0) return got == 0 && std::signbit(got) == std::signbit(want);
    return std::fabs(got - want) <= 1e-9 * std::fabs(want) || (std::isinf(want) && got == want);
  };
  for (const Expected& e : expected) {
    // Each value 17 times over: whole vector batches at every width and the scalar tail.
    std::vector<double> xs, rep;
    for (double v : x)
      for (int k = 0; k < 17; ++k) xs.push_back(v);
    for (const auto& [name, f] : std::vector<std::pair<const char*, Unary>>{{"sigmoid", [](const Tensor& t) { return sigmoid(t); }},
                                                                           {"silu", [](const Tensor& t) { return silu(t); }}}) {
      Tensor leaf = Tensor::from_vector(xs, {static_cast<int64_t>(xs.size())}).to(e.dt).requires_grad_();
      Tensor y = f(leaf);
      y.backward(Tensor::ones(y.shape(), e.dt));
      const std::vector<double> got = y.to(DType::f64).to_vector<double>();
      const std::vector<double> grad = leaf.grad().to(DType::f64).to_vector<double>();
      const bool is_sig = std::string(name) == "sigmoid";
      for (size_t i = 0; i < xs.size(); ++i) {
        const size_t j = i / 17;
        INFO(name << " " << dtype_name(e.dt) << " at " << x[j] << ": " << got[i] << ", gradient " << grad[i]);
        CHECK(same(got[i], (is_sig ? e.sig : e.silu)[j]));
        CHECK(same(grad[i], (is_sig ? e.sig_grad : e.silu_grad)[j]));
      }
    }
  }
}

// xsimd's exp overflows at 127.5 ln 2 = 88.38 (float) and 1023 ln 2 = 709.09 (double), short of the
// true 88.72 and 709.78: in batches heed's exp(88.5f) was inf and sigmoid(-88.5f) 0, where the
// scalar tail, std::exp and torch give 2.7e38 and 3.7e-39.
TEST_CASE("exp, sigmoid and silu are finite up to the true overflow in batches as in the scalar tail", "[elementwise]") {
  struct Case {
    DType dt;
    std::vector<double> xs;
    double ulp;
  };
  for (const Case& c : {Case{DType::f32, {88.0, 88.2, 88.4, 88.5, 88.6, 88.7, 88.72, 88.7228, 88.73, 89.5}, 0x1p-23},
                        Case{DType::f64, {709.0, 709.1, 709.3, 709.5, 709.7, 709.78, 709.79, 711.0}, 0x1p-52}}) {
    for (double x : c.xs) {
      INFO(dtype_name(c.dt) << " x = " << x);
      // 17 copies: whole batches at every width, and a scalar tail.
      const std::vector<double> y = exp(Tensor::full({17}, x, c.dt)).to(DType::f64).to_vector<double>();
      const double want = c.dt == DType::f32 ? double(std::exp(float(x))) : std::exp(x);
      for (double v : y) {
        if (std::isinf(want)) {
          CHECK(std::isinf(v));
        } else {
          CHECK(std::fabs(v - want) <= 4 * c.ulp * want);
        }
      }
      const std::vector<double> s = sigmoid(Tensor::full({17}, -x, c.dt)).to(DType::f64).to_vector<double>();
      const std::vector<double> u = silu(Tensor::full({17}, -x, c.dt)).to(DType::f64).to_vector<double>();
      for (size_t i = 0; i < s.size(); ++i) {
        CHECK((s[i] == 0) == std::isinf(want));  // nonzero (a subnormal) until e^x overflows
        CHECK((u[i] == 0) == std::isinf(want));
      }
    }
  }
}

// torch 1.13: x = torch.tensor([nan, -2., -1., 0., 1., 2.], dtype=torch.float64); x.clamp(-1, 1) and its
// gradient; a = [1, 2, nan, 3, 5], b = [1, 3, 1, nan, 4]: torch.maximum / minimum and their gradients.
TEST_CASE("clamp, maximum and minimum at NaN, bounds and ties: values and gradients as torch", "[elementwise]") {
  const double nan = NAN;
  Tensor x = Tensor::from_vector(std::vector<double>{nan, -2, -1, 0, 1, 2}, {6}).requires_grad_();
  Tensor y = clamp(x, -1.0, 1.0);
  sum(y).backward();
  const std::vector<double> yv = y.to_vector<double>();
  CHECK(std::isnan(yv[0]));
  CHECK(std::vector<double>(yv.begin() + 1, yv.end()) == std::vector<double>{-1, -1, 0, 1, 1});
  require_values(x.grad(), {6}, {0, 0, 1, 1, 1, 0}, 0);  // bounds included; NaN gets none

  Tensor a = Tensor::from_vector(std::vector<double>{1, 2, nan, 3, 5}, {5}).requires_grad_();
  Tensor b = Tensor::from_vector(std::vector<double>{1, 3, 1, nan, 4}, {5}).requires_grad_();
  for (bool is_max : {true, false}) {
    INFO((is_max ? "maximum" : "minimum"));
    a.zero_grad();
    b.zero_grad();
    Tensor m = is_max ? maximum(a, b) : minimum(a, b);
    sum(m).backward();
    const std::vector<double> mv = m.to_vector<double>();
    CHECK(mv[0] == 1);
    CHECK(mv[1] == (is_max ? 3 : 2));
    CHECK(std::isnan(mv[2]));
    CHECK(std::isnan(mv[3]));
    CHECK(mv[4] == (is_max ? 5 : 4));
    // A tie splits the gradient; a NaN gives all of it to both sides.
    require_values(a.grad(), {5}, {0.5, is_max ? 0.0 : 1.0, 1, 1, is_max ? 1.0 : 0.0}, 0);
    require_values(b.grad(), {5}, {0.5, is_max ? 1.0 : 0.0, 1, 1, is_max ? 0.0 : 1.0}, 0);
  }
  // float32 bounds are rounded to float32 first: clamp(0.1f, 0.1) leaves 0.1f as it is.
  Tensor f = Tensor::full({3}, 0.1, DType::f32);
  CHECK(clamp(f, 0.1).to_vector<float>() == std::vector<float>{0.1f, 0.1f, 0.1f});
  CHECK_THROWS_WITH(clamp(f, std::nullopt, std::nullopt), Catch::Contains("clamp: give at least one of the bounds"));
  CHECK_THROWS_WITH(clamp(f, NAN), Catch::Contains("clamp: a bound is NaN"));
  CHECK_THROWS_WITH(clamp(f, 1e300), Catch::Contains("clamp: the value 1e+300 cannot be converted to float32 without overflow"));  // torch refuses too
  CHECK(clamp(f, std::nullopt, INFINITY).to_vector<float>() == f.to_vector<float>());
  CHECK(clamp(f.to(DType::f64), 1e300).to_vector<double>() == std::vector<double>(3, 1e300));
  CHECK_THROWS_WITH(maximum(f, Tensor::zeros({2})), Catch::Contains("maximum: shapes [3] and [2] cannot be broadcast"));
}

TEST_CASE("float32 GELU and its gradient are accurate to a few float ulps over the whole line", "[elementwise]") {
  std::vector<float> grid;
  for (float x = 0; x <= 12.5f; x += 0.5f * (x < 1 ? 1.0f / 4096 : x / 4096)) {
    grid.push_back(x);
    grid.push_back(-x);
  }
  const int64_t n = static_cast<int64_t>(grid.size());
  const Tensor x32 = Tensor::from_vector(std::vector<double>(grid.begin(), grid.end()), {n}).to(DType::f32);
  const Tensor x64 = x32.to(DType::f64);
  const std::vector<double> xs = x64.to_vector<double>();
  Tensor leaf32 = x32.detach().requires_grad_();
  Tensor leaf64 = x64.detach().requires_grad_();
  const std::vector<double> y32 = gelu(leaf32).to(DType::f64).to_vector<double>();
  const std::vector<double> y64 = gelu(leaf64).to_vector<double>();
  gelu(leaf32).backward(Tensor::ones({n}, DType::f32));
  gelu(leaf64).backward(Tensor::ones({n}, DType::f64));
  const std::vector<double> d32 = leaf32.grad().to(DType::f64).to_vector<double>();
  const std::vector<double> d64 = leaf64.grad().to_vector<double>();
  const double bound = 8.0 * std::ldexp(1.0, -24);
  double worst_y = 0, worst_d = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double cdf = 0.5 * std::erfc(-xs[i] / std::sqrt(2.0));
    const double x_pdf = std::abs(xs[i]) * std::exp(-0.5 * xs[i] * xs[i]) / std::sqrt(2 * std::numbers::pi);
    if (y64[i] != 0) worst_y = std::max(worst_y, std::abs(y32[i] - y64[i]) / std::abs(y64[i]));
    worst_d = std::max(worst_d, std::abs(d32[i] - d64[i]) / (cdf + x_pdf));
  }
  INFO(n << " points; worst relative error of the values " << worst_y << ", of the gradients " << worst_d);
  REQUIRE(worst_y <= bound);
  REQUIRE(worst_d <= bound);
  REQUIRE(y32[1] == 0);  // gelu(-0) is exactly 0, and far out the tail stays finite
  REQUIRE(std::isfinite(y32.back()));
}

TEST_CASE("float32 GELU gives one value for one input, in the batches and in the scalar tail", "[elementwise]") {
  for (double v : {-7.25, -1.5, -0.75, -0.1, 0.3, 1.0625, 2.5, 9.0}) {
    INFO(v);
    // 35 elements: two 16-lane batches on AVX-512, then three scalar elements.
    const std::vector<float> y = gelu(Tensor::full({35}, v, DType::f32)).to_vector<float>();
    for (float e : y) REQUIRE(std::memcmp(&e, &y[0], sizeof e) == 0);
  }
}

// GELU's tanh approximation against torch 1.13 (/usr/bin/python3):
//   xs = [i * 0.5 for i in range(-20, 21)] + [-0.1, 0.1, -0.01, 1e-3, -3.3, 2.7]
//   for dt in (torch.float64, torch.float32):
//     x = torch.tensor(xs, dtype=dt, requires_grad=True); y = F.gelu(x, approximate="tanh")
//     y.backward(torch.ones_like(y)); print(y.tolist(), x.grad.tolist())
// torch computes 0.5 x (1 + tanh(u)), which cancels for x < 0: in float32 it returns 0 from
// x = -5.5 on (the value there is -5.9e-9) and is off by up to 7e-8 (values) and 5e-7 (gradients)
// near x = -5; in float64 it returns 0 from x = -7.5 on. heed's x sigmoid(2u) keeps the tail, so
// float32 is checked against torch's float32 within those absolute errors, and float64 within a
// float64 rounding of the terms (|x| 1e-16).
namespace gelu_tanh_ref {
const std::vector<double> xs = {
    -10.0, -9.5, -9.0, -8.5, -8.0, -7.5, -7.0, -6.5, -6.0, -5.5, -5.0, -4.5, -4.0, -3.5, -3.0, -2.5, -2.0, -1.5,
    -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 5.5, 6.0, 6.5, 7.0, 7.5, 8.0, 8.5, 9.0, 9.5,
    10.0, -0.1, 0.1, -0.01, 0.001, -3.3, 2.7};
const std::vector<double> y64 = {
    -0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -2.3314683517128287e-15, -6.27831120425526e-13, -8.43964897967453e-11,
    -5.927640267522349e-09, -2.2917961972623857e-07, -5.136737411925996e-06, -7.024594819227126e-05,
    -0.0006161976553737403, -0.0036373920817729943, -0.015084266089998577, -0.04540230591222494,
    -0.10042842301976707, -0.1588080093917233, -0.15428599017485606, 0.0, 0.34571400982514394, 0.8411919906082768,
    1.3995715769802328, 1.954597694087775, 2.484915733910001, 2.996362607918227, 3.499383802344626,
    3.9999297540518075, 4.499994863262588, 4.999999770820381, 5.499999994072359, 5.9999999999156035,
    6.499999999999372, 6.999999999999997, 7.5, 8.0, 8.5, 9.0, 9.5, 10.0, -0.04601724895456484, 0.053982751045435165,
    -0.0049601064401444276, 0.000500398942213582, -0.0013112281183358498, 2.6911124053605326};
const std::vector<double> g64 = {
    0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -2.7842558190908887e-14, -6.583528748372494e-12, -7.709976012836329e-10,
    -4.676552813680803e-08, -1.5463619879596227e-06, -2.9322270442568694e-05, -0.00033512319712218684,
    -0.0024226437601167334, -0.011584166630969648, -0.03795157621266618, -0.0860992566236183, -0.12771079315143308,
    -0.08296408384578258, 0.13263009646535764, 0.5, 0.8673699035346424, 1.0829640838457826, 1.127710793151433,
    1.0860992566236183, 1.037951576212666, 1.0115841666309695, 1.0024226437601167, 1.000335123197122,
    1.0000293222704426, 1.000001546361988, 1.0000000467655281, 1.0000000007709977, 1.0000000000065836,
    1.0000000000000278, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.4204782107282433, 0.5795217892717567, 0.49202142166375923,
    0.500797884293525, -0.0047497144977223715, 1.0246678654351904};
const std::vector<double> y32 = {
    -0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -2.980232238769531e-07, -5.0961971282958984e-06,
    -7.021427154541016e-05, -0.0006161481142044067, -0.0036374330520629883, -0.015084296464920044,
    -0.04540228843688965, -0.10042843222618103, -0.15880799293518066, -0.1542859971523285, 0.0, 0.3457140028476715,
    0.8411920070648193, 1.3995715379714966, 1.9545977115631104, 2.4849157333374023, 2.9963626861572266,
    3.4993836879730225, 3.999929904937744, 4.49999475479126, 4.999999523162842, 5.5, 6.0, 6.5, 7.0, 7.5, 8.0, 8.5,
    9.0, 9.5, 10.0, -0.046017248183488846, 0.053982753306627274, -0.00496010622009635, 0.0005003989790566266,
    -0.0013112693559378386, 2.6911122798919678};
const std::vector<double> g32 = {
    0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -2.010875732594286e-06, -2.909085560531821e-05,
    -0.00033497207914479077, -0.0024224489461630583, -0.011584296822547913, -0.03795165196061134,
    -0.08609922230243683, -0.12771081924438477, -0.08296409249305725, 0.1326301097869873, 0.5, 0.8673698902130127,
    1.0829640626907349, 1.1277108192443848, 1.0860992670059204, 1.0379517078399658, 1.0115842819213867,
    1.0024224519729614, 1.0003349781036377, 1.0000290870666504, 1.0000020265579224, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0,
    1.0, 1.0, 1.0, 1.0, 0.4204781949520111, 0.5795217752456665, 0.4920214116573334, 0.5007978677749634,
    -0.004749863874167204, 1.024667739868164};
}  // namespace gelu_tanh_ref

TEST_CASE("gelu(x, tanh) is torch's F.gelu(x, approximate='tanh') in float64 and float32, values and gradients", "[elementwise]") {
  using namespace gelu_tanh_ref;
  const int64_t n = static_cast<int64_t>(xs.size());
  for (DType dt : {DType::f64, DType::f32}) {
    const bool f64 = dt == DType::f64;
    Tensor x = Tensor::from_vector(xs, {n}).to(dt).requires_grad_();
    Tensor y = gelu(x, GeluApproximation::tanh);
    y.backward(Tensor::ones({n}, dt));
    const std::vector<double> yv = y.to_vector<double>(), gv = x.grad().to_vector<double>();
    const std::vector<double>& ty = f64 ? y64 : y32;
    const std::vector<double>& tg = f64 ? g64 : g32;
    for (int64_t i = 0; i < n; ++i) {
      INFO(dtype_name(dt) << " x = " << xs[i] << ": heed " << yv[i] << ", " << gv[i] << "; torch " << ty[i] << ", " << tg[i]);
      const double rel = f64 ? 1e-14 : 1e-6;
      CHECK(yv[i] == Approx(ty[i]).epsilon(rel).margin(f64 ? 2e-15 : 4e-7));
      CHECK(gv[i] == Approx(tg[i]).epsilon(rel).margin(f64 ? 2e-14 : 1e-6));
    }
  }
  // Away from torch's cancellation (x > -4) float32 agrees with torch's float64 to a few float
  // roundings, times 1 + 2|u| (exp(-2|u|) carries u's rounding times 2|u|).
  Tensor x32 = Tensor::from_vector(xs, {n}).to(DType::f32).requires_grad_();
  gelu(x32, GeluApproximation::tanh).backward(Tensor::ones({n}, DType::f32));
  const std::vector<double> y = gelu(x32, GeluApproximation::tanh).to_vector<double>(), g = x32.grad().to_vector<double>();
  for (int64_t i = 0; i < n; ++i) {
    if (xs[i] <= -4) continue;
    INFO("x = " << xs[i]);
    const double u = std::abs(0.7978845608028654 * (xs[i] + 0.044715 * xs[i] * xs[i] * xs[i]));
    const double rel = 4 * (1 + 2 * u) * std::ldexp(1.0, -24);
    CHECK(y[i] == Approx(y64[i]).epsilon(rel).margin(1e-9));
    CHECK(g[i] == Approx(g64[i]).epsilon(rel).margin(1e-9));
  }
  // The exact form stays the default, and GeluApproximation::none is it.
  const Tensor w = Tensor::from_vector(xs, {n}).to(DType::f32);
  CHECK(gelu(w, GeluApproximation::none).to_vector<float>() == gelu(w).to_vector<float>());
  CHECK(gelu(w, GeluApproximation::tanh).to_vector<float>() != gelu(w).to_vector<float>());
}

TEST_CASE("gelu(x, tanh) in float32 keeps float64's value and gradient to a few float ulps from -10 to 10", "[elementwise]") {
  std::vector<double> grid;
  for (int k = -80000; k <= 80000; ++k) grid.push_back(k / 8000.0);
  const int64_t n = static_cast<int64_t>(grid.size());
  Tensor x32 = Tensor::from_vector(grid, {n}).to(DType::f32).requires_grad_();
  Tensor x64 = x32.detach().to(DType::f64).requires_grad_();  // the same points
  gelu(x32, GeluApproximation::tanh).backward(Tensor::ones({n}, DType::f32));
  gelu(x64, GeluApproximation::tanh).backward(Tensor::ones({n}, DType::f64));
  const std::vector<double> y32 = gelu(x32, GeluApproximation::tanh).to_vector<double>();
  const std::vector<double> y64 = gelu(x64, GeluApproximation::tanh).to_vector<double>();
  const std::vector<double> d32 = x32.grad().to_vector<double>(), d64 = x64.grad().to_vector<double>();
  const std::vector<double> xv = x64.to_vector<double>();
  double worst_y = 0, worst_d = 0;
  for (int64_t i = 0; i < n; ++i) {
    // exp(-2|u|) carries u's rounding times 2|u| (87 at |x| = 10): the bound scales with it.
    const double u = std::abs(0.7978845608028654 * (xv[i] + 0.044715 * xv[i] * xv[i] * xv[i]));
    const double scale = (1 + 2 * u) * std::ldexp(1.0, -24);
    if (y64[i] != 0) worst_y = std::max(worst_y, std::abs(y32[i] - y64[i]) / std::abs(y64[i]) / scale);
    // The gradient relative to the sum of its terms' sizes (it crosses 0 near x = -0.75).
    const double s = std::abs(y64[i] / (xv[i] == 0 ? 1 : xv[i]));
    worst_d = std::max(worst_d, std::abs(d32[i] - d64[i]) / ((s + std::abs(d64[i] - s)) * scale + 1e-30));
  }
  INFO(n << " points; worst error of the values " << worst_y << ", of the gradients " << worst_d
          << " (in units of (1 + 2|u|) 2^-24, relative)");
  CHECK(worst_y <= 8);  // measured 2.6 (values) and 2.4 (gradients) with GCC 12 on AVX-512
  CHECK(worst_d <= 8);
}

// torch 1.13, F.gelu(x, approximate="tanh") and its gradient at inf, -inf, nan, 1e20, -1e20, 30, -30, -0:
// float32 [inf, nan, nan, 1e20, -0, 30, -0, -0], gradients [nan, nan, nan, nan, nan, 1, 0, 0.5];
// float64 the same values, gradients [nan, nan, nan, 1, 0, 1, 0, 0.5].
TEST_CASE("gelu(x, tanh) at +-inf, NaN and huge inputs: torch's values, and the gradient's limits where torch's overflows to NaN",
          "[elementwise]") {
  for (DType dt : {DType::f32, DType::f64}) {
    INFO(dtype_name(dt));
    // 35 elements: the batches and the scalar tail see every value.
    std::vector<double> v;
    for (int r = 0; r < 5; ++r)
      for (double e : {double(INFINITY), -double(INFINITY), double(NAN), 1e20, -1e20, 30.0, -30.0}) v.push_back(e);
    Tensor x = Tensor::from_vector(v, {35}).to(dt).requires_grad_();
    const std::vector<double> y = gelu(x, GeluApproximation::tanh).to_vector<double>();
    gelu(x, GeluApproximation::tanh).backward(Tensor::ones({35}, dt));
    const std::vector<double> g = x.grad().to_vector<double>();
    for (int i = 0; i < 35; i += 7) {
      CHECK(y[i] == INFINITY);
      CHECK(std::isnan(y[i + 1]));  // -inf * 0, as torch
      CHECK(std::isnan(y[i + 2]));
      CHECK(y[i + 3] == Approx(1e20));
      CHECK((y[i + 4] == 0 && std::signbit(y[i + 4])));
      CHECK(y[i + 5] == 30);
      CHECK((y[i + 6] == 0 && std::signbit(y[i + 6])));
      CHECK(g[i] == 1);  // torch: NaN (inf * 0 in its formula)
      CHECK(g[i + 1] == 0);  // torch: NaN
      CHECK(std::isnan(g[i + 2]));
      CHECK(g[i + 3] == 1);  // torch's float64; its float32 overflows x^3 to NaN
      CHECK(g[i + 4] == 0);
      CHECK(g[i + 5] == 1);
      CHECK(g[i + 6] == 0);
    }
  }
  const std::vector<double> z = gelu(Tensor::full({3}, -0.0, DType::f64), GeluApproximation::tanh).to_vector<double>();
  CHECK((z[0] == 0 && std::signbit(z[0])));
}

TEST_CASE("gelu(x, tanh) float64 gradchecks from -10 to 10, a strided input and an input used twice", "[elementwise]") {
  const auto g = [](const Tensor& a) { return gelu(a, GeluApproximation::tanh); };
  require_gradcheck([&](const std::vector<Tensor>& in) { return g(in[0]); }, {rand64({4, 10}, 520, -10.0, 10.0)});
  const Tensor t = rand64({6, 5}, 521, -6.0, 6.0).transpose(0, 1).detach().requires_grad_();  // (5, 6), strided
  require_gradcheck([&](const std::vector<Tensor>& in) { return g(in[0]); }, {t});
  require_gradcheck([&](const std::vector<Tensor>& in) { return g(in[0]) * g(in[0] * 2.0); }, {t});
  require_gradcheck([&](const std::vector<Tensor>& in) { return g(slice(in[0], 1, 1, 4)) + in[0].sum(1, true); }, {t});
}

TEST_CASE("sum_to and expand: values and gradchecks", "[elementwise]") {
  const Tensor x = Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
  require_values(sum_to(x, {1, 3}), {1, 3}, {5, 7, 9}, 0);
  require_values(sum_to(x, {3}), {3}, {5, 7, 9}, 0);
  require_values(sum_to(x, {2, 1}), {2, 1}, {6, 15}, 0);
  require_values(sum_to(x, {}), {}, {21}, 0);
  REQUIRE(sum_to(x, {2, 3}).same(x));  // nothing to reduce: the same tensor
  require_values(expand(Tensor::from_vector(std::vector<double>{1, 2}, {2, 1}), {2, 3}), {2, 3}, {1, 1, 1, 2, 2, 2}, 0);
  require_values(expand(Tensor::scalar(4.0, DType::f64), {2, 2}), {2, 2}, {4, 4, 4, 4}, 0);

  require_gradcheck([](const std::vector<Tensor>& in) { return sum_to(in[0], {2, 4}); }, {randn64({3, 2, 4}, 400)});
  require_gradcheck([](const std::vector<Tensor>& in) { return sum_to(in[0], {3, 1, 4}); }, {randn64({3, 2, 4}, 401)});
  require_gradcheck([](const std::vector<Tensor>& in) { return sum_to(in[0], {1, 1}); }, {randn64({3, 4}, 402)});
  require_gradcheck([](const std::vector<Tensor>& in) { return sum_to(in[0], {}); }, {randn64({3, 4}, 403)});
  require_gradcheck([](const std::vector<Tensor>& in) { return sum_to(in[0], {4}); }, {transposed_leaf(404)});
  require_gradcheck([](const std::vector<Tensor>& in) { return sum_to(in[0], {3, 1}); }, {sliced_leaf(405)});
  require_gradcheck([](const std::vector<Tensor>& in) { return expand(in[0], {3, 2, 4}); }, {randn64({3, 1, 4}, 406)});
  require_gradcheck([](const std::vector<Tensor>& in) { return expand(in[0], {2, 3, 4}); }, {randn64({4}, 407)});
  require_gradcheck([](const std::vector<Tensor>& in) { return expand(in[0], {2, 3}); }, {randn64({}, 408)});
  require_gradcheck([](const std::vector<Tensor>& in) { return expand(in[0], {2, 3, 4}); }, {sliced_leaf(409)});
  // An expanded view feeding an op (its backward sums the broadcast gradient back).
  require_gradcheck([](const std::vector<Tensor>& in) { return mul(expand(in[0], {3, 4}), in[1]); },
                    {randn64({3, 1}, 410), transposed_leaf(411)});
}

TEST_CASE("broadcast errors name the op and both shapes, dtype mismatches throw", "[elementwise]") {
  using Catch::Contains;
  const Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({4}), c = Tensor::zeros({3, 2, 2});
  REQUIRE_THROWS_AS(add(a, b), heed::Error);
  REQUIRE_THROWS_WITH(add(a, b), Contains("add") && Contains("[2, 3]") && Contains("[4]"));
  REQUIRE_THROWS_WITH(sub(b, a), Contains("sub") && Contains("[4]") && Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(mul(a, c), Contains("mul") && Contains("[2, 3]") && Contains("[3, 2, 2]"));
  REQUIRE_THROWS_WITH(div(c, a), Contains("div") && Contains("[3, 2, 2]") && Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(broadcast_shapes({5, 2}, {3, 2}, "my_op"), Contains("my_op") && Contains("[5, 2]") &&
                                                                     Contains("[3, 2]"));
  REQUIRE_THROWS_WITH(sum_to(a, {4}), Contains("sum_to") && Contains("[2, 3]") && Contains("[4]"));
  REQUIRE_THROWS_WITH(expand(a, {4, 3}), Contains("expand") && Contains("[2, 3]") && Contains("[4, 3]"));

  const Tensor f32 = Tensor::ones({2, 3}, DType::f32), f64 = Tensor::ones({2, 3}, DType::f64);
  REQUIRE_THROWS_AS(add(f32, f64), heed::Error);
  REQUIRE_THROWS_WITH(add(f32, f64), Contains("add") && Contains("float32") && Contains("float64"));
  REQUIRE_THROWS_WITH(mul(f64, f32), Contains("mul") && Contains("float64") && Contains("float32"));
  REQUIRE_THROWS_AS(sub(f32, f64), heed::Error);
  REQUIRE_THROWS_AS(div(f64, f32), heed::Error);
}

namespace {
// tanh with a hand-written backward scaled by `factor`: 1 is right, anything else is wrong.
Tensor scaled_tanh(const Tensor& x, double factor) {
  Tensor y = tanh(x.detach());
  return record("scaled_tanh", y, {x}, [y0 = y.detach(), factor](const Tensor& g) {
    return std::vector<Tensor>{mul(mul(g, rsub(1.0, mul(y0, y0))), factor)};
  });
}
}  // namespace

TEST_CASE("gradcheck catches a backward that is 1% wrong", "[elementwise]") {
  Tensor x = randn64({3, 4}, 500);
  // The correct version passes, so a failure below is the 1% and nothing else.
  require_gradcheck([](const std::vector<Tensor>& in) { return scaled_tanh(in[0], 1.0); }, {x});
  auto r = gradcheck([](const std::vector<Tensor>& in) { return scaled_tanh(in[0], 1.01); }, {x});
  INFO(r.report());
  REQUIRE(r.checked == 12);
  REQUIRE(!r.ok);
  REQUIRE(r.max_rel_error == Approx(0.01).epsilon(0.05));
  REQUIRE(r.analytic == Approx(1.01 * r.numeric).epsilon(1e-6));
}
