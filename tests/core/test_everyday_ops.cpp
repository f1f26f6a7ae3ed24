// Everyday ops a PyTorch porter expects: logsumexp, argmin, amax / amin (core/ops/reduce.cpp,
// index.cpp), and the ones after them in this file. Values against PyTorch 1.13 (the calls in the
// comments), float64 gradchecks (contiguous, non-contiguous and an input used twice), and a
// bad-input case per op naming the op.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "nn/activation.h"
#include "support/helpers.h"

using namespace heed;
using Catch::Contains;
using heed::test::randn64;
using heed::test::require_gradcheck;
using heed::test::require_values;
using heed::test::sine_input;
using heed::test::transposed64;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

using Fn = GradcheckFn;

// A bool tensor's elements (asserting its dtype), as std::vector<bool>.
std::vector<bool> bools(const Tensor& t) {
  REQUIRE(t.dtype() == DType::boolean);
  const std::vector<int64_t> v = t.to_vector<int64_t>();
  return std::vector<bool>(v.begin(), v.end());
}

}  // namespace

// ------------------------------------------------------------------------------------------ logsumexp

// x as above; torch.logsumexp(x, 0), torch.logsumexp(x, 1, keepdim=True), torch.logsumexp(x, -1),
// torch.logsumexp(x.float() * 300, -1); rows [-inf, -inf], [inf, 1], [1000, 1000] along 1.
TEST_CASE("logsumexp matches PyTorch, stable, an all -inf row gives -inf", "[everyday][logsumexp]") {
  const Tensor x = sine_input();
  require_values(logsumexp(x, 0), {3, 4},
                 {2.2756573741661987, 2.607177591572324, 2.982790723251073, 2.03331422764017, 0.18664360449969614,
                  -0.6912963519079056, 1.002167390104844, 2.5828361548733896, 2.977049696111312, 2.259783612827992,
                  2.6281456925048796, 2.9756250072945507},
                 1e-12);
  require_values(x.logsumexp(1, true), {2, 1, 4},
                 {1.3572190459151212, 2.720594048314779, 3.4802138205523994, 3.2999653605007673, 3.2840625482286976,
                  2.134559515118516, 1.3476628186202144, 2.592576079182507},
                 1e-12);
  require_values(logsumexp(x, -1), {2, 3},
                 {3.739726861143911, 0.3480213517949694, 3.5596338217092494, 2.150685509451155, 2.788010546825138,
                  3.3145658478529008},
                 1e-12);
  require_values(logsumexp(x.to(DType::f32) * 300.0, -1), {2, 3},
                 {892.4983520507812, 37.4225959777832, 890.4224243164062, 596.6723022460938, 773.2456665039062,
                  888.0947875976562},
                 1e-6);
  const std::vector<double> r =
      logsumexp(Tensor::from_vector(std::vector<double>{-kInf, -kInf, kInf, 1.0, 1000.0, 1000.0}, {3, 2}), 1)
          .to_vector<double>();
  REQUIRE(r[0] == -kInf);
  REQUIRE(r[1] == kInf);
  REQUIRE(r[2] == Approx(1000.6931471805599).epsilon(1e-15));
  // An empty axis sums to 0: -inf, as torch's.
  REQUIRE(logsumexp(Tensor::zeros({2, 0}, DType::f64), 1).to_vector<double>() == std::vector<double>{-kInf, -kInf});
}

// t = [[-inf, -inf], [0.5, 1]]; torch.logsumexp(t, 1).sum().backward(): NaN on the -inf row
// (exp(-inf - -inf)), the softmax on the other.
TEST_CASE("logsumexp's gradient is the softmax, NaN on an all -inf row as torch's", "[everyday][logsumexp]") {
  Tensor t = Tensor::from_vector(std::vector<double>{-kInf, -kInf, 0.5, 1.0}, {2, 2}).requires_grad_();
  logsumexp(t, 1).sum().backward();
  const std::vector<double> g = t.grad().to_vector<double>();
  REQUIRE(std::isnan(g[0]));
  REQUIRE(std::isnan(g[1]));
  REQUIRE(g[2] == Approx(0.3775406687981454).epsilon(1e-14));
  REQUIRE(g[3] == Approx(0.6224593312018546).epsilon(1e-14));
}

TEST_CASE("logsumexp gradchecks: every axis, keepdim, non-contiguous, an input used twice", "[everyday][logsumexp]") {
  for (int64_t axis = -3; axis < 3; ++axis) {
    INFO("axis " << axis);
    require_gradcheck([&](const std::vector<Tensor>& in) { return logsumexp(in[0], axis); }, {randn64({2, 3, 4}, 10 + axis)});
    require_gradcheck([&](const std::vector<Tensor>& in) { return logsumexp(in[0], axis, true); }, {transposed64(20)});
  }
  require_gradcheck([](const std::vector<Tensor>& in) { return logsumexp(in[0], 1, true) * in[0]; }, {randn64({3, 5}, 2)});
  // second order: the backward is built of differentiable ops
  require_gradcheck([](const std::vector<Tensor>& in) {
    Tensor x = in[0];
    Tensor y = logsumexp(x * x, 1).sum();
    return y;
  }, {randn64({3, 4}, 3)});
}

TEST_CASE("logsumexp refuses a bad axis and an integer tensor naming itself", "[everyday][logsumexp]") {
  REQUIRE_THROWS_WITH(logsumexp(Tensor::zeros({2, 3}), 2), Contains("logsumexp") && Contains("axis 2") && Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(logsumexp(Tensor::zeros({2, 3}, DType::i64), 0), Contains("logsumexp") && Contains("int64"));
}

// ------------------------------------------------------------------------------------------ argmin

// torch.argmin(x, 1), torch.argmin(x), torch.argmin(x, -1, keepdim=True);
// torch.argmin(torch.tensor([[2., 1., 1., 3.], [0., 0., 5., 0.]]), 1) (the first on ties);
// torch.argmin(torch.tensor([1., nan, 0., nan]), 0) (a NaN wins); an int64 tensor.
TEST_CASE("argmin matches PyTorch: the first on ties, a NaN wins, any dtype", "[everyday][argmin]") {
  const Tensor x = sine_input();
  REQUIRE(argmin(x, 1).shape() == Shape{2, 4});
  REQUIRE(argmin(x, 1).to_vector<int64_t>() == std::vector<int64_t>{2, 1, 1, 1, 1, 1, 0, 0});
  REQUIRE(x.argmin().dtype() == DType::i64);
  REQUIRE(x.argmin().shape() == Shape{});
  REQUIRE(x.argmin().to_vector<int64_t>() == std::vector<int64_t>{15});
  REQUIRE(x.to(DType::f32).argmin(-1, true).shape() == Shape{2, 3, 1});
  REQUIRE(x.to(DType::f32).argmin(-1, true).to_vector<int64_t>() == std::vector<int64_t>{0, 2, 0, 3, 0, 3});
  REQUIRE(argmin(Tensor({{2.0, 1.0, 1.0, 3.0}, {0.0, 0.0, 5.0, 0.0}}), 1).to_vector<int64_t>() == std::vector<int64_t>{1, 0});
  REQUIRE(argmin(Tensor({1.0, kNaN, 0.0, kNaN}), 0).to_vector<int64_t>() == std::vector<int64_t>{1});
  REQUIRE(argmin(Tensor::from_vector(std::vector<int64_t>{3, -1, 4, 1, -5, -5}, {2, 3}), 1).to_vector<int64_t>() ==
          std::vector<int64_t>{1, 1});
  REQUIRE_FALSE(argmin(randn64({3}, 1), 0).requires_grad());
}

TEST_CASE("argmin refuses a bad axis, a 0-d axis and an empty axis naming itself", "[everyday][argmin]") {
  REQUIRE_THROWS_WITH(argmin(Tensor::zeros({2, 3}), 2), Contains("argmin") && Contains("axis 2"));
  REQUIRE_THROWS_WITH(argmin(Tensor::scalar(1.0), 0), Contains("argmin") && Contains("0-d"));
  REQUIRE_THROWS_WITH(argmin(Tensor::zeros({2, 0}), 1), Contains("argmin") && Contains("empty"));
}

// ------------------------------------------------------------------------------------------ amax / amin

// torch.amax(x, (0, 2)), torch.amin(x, 1, keepdim=True), torch.amax(x, ()), torch.amin(x, -1).
TEST_CASE("amax and amin match PyTorch over one axis, several or all", "[everyday][amax]") {
  const Tensor x = sine_input();
  require_values(amax(x, {0, 2}), {3}, {2.9749944313574055, 2.5774854445694872, 2.9680747398701457}, 1e-15);
  require_values(x.amin(1, true), {2, 1, 4},
                 {-1.1216299944907107, -1.8355736728281569, -2.9325903529952906, -2.6503639671604606, -2.6263565240652857,
                  -1.0746878467104861, -1.8752119466786463, -2.9428086901994748},
                 1e-15);
  require_values(amax(x), {}, {2.9749944313574055}, 1e-15);
  require_values(x.amax(), {}, {2.9749944313574055}, 1e-15);
  require_values(amax(x, {}, true), {1, 1, 1}, {2.9749944313574055}, 1e-15);
  require_values(amin(x.to(DType::f32), {-1}), {2, 3},
                 {0.8865606199840186, -2.9325903529952906, -1.1216299944907107, -2.9428086901994748, -2.6263565240652857,
                  -1.9143200470438422},
                 1e-6);
}

// t = [[1, 3, 3, 2], [5, 5, 5, -1]]: (torch.amax(t, 1) * [1, 2]).sum().backward() shares each row's
// gradient among its tied maxima; torch.amin(t, ()) and torch.amax(t, (0, 1)) over everything.
TEST_CASE("amax and amin share the gradient evenly among ties, as torch's", "[everyday][amax]") {
  const std::vector<double> tv = {1, 3, 3, 2, 5, 5, 5, -1};
  Tensor t = Tensor::from_vector(tv, {2, 4}).requires_grad_();
  (amax(t, {1}) * Tensor({1.0, 2.0}).to(DType::f64)).sum().backward();
  require_values(t.grad(), {2, 4}, {0, 0.5, 0.5, 0, 2.0 / 3, 2.0 / 3, 2.0 / 3, 0}, 1e-15);
  t = Tensor::from_vector(tv, {2, 4}).requires_grad_();
  amin(t).backward();
  require_values(t.grad(), {2, 4}, {0, 0, 0, 0, 0, 0, 0, 1}, 0);
  t = Tensor::from_vector(tv, {2, 4}).requires_grad_();
  amax(t, {0, 1}).backward();
  require_values(t.grad(), {2, 4}, {0, 0, 0, 0, 1.0 / 3, 1.0 / 3, 1.0 / 3, 0}, 1e-15);
}

TEST_CASE("amax and amin gradchecks: axes, keepdim, non-contiguous, an input used twice", "[everyday][amax]") {
  for (const std::vector<int64_t>& axes : std::vector<std::vector<int64_t>>{{0}, {-1}, {0, 2}, {}, {1, 0, 2}}) {
    INFO("axes " << to_string(axes));
    require_gradcheck([&](const std::vector<Tensor>& in) { return amax(in[0], axes); }, {randn64({2, 3, 4}, 30)});
    require_gradcheck([&](const std::vector<Tensor>& in) { return amin(in[0], axes, true); }, {transposed64(31)});
  }
  require_gradcheck([](const std::vector<Tensor>& in) { return amax(in[0], {1}, true) * in[0]; }, {randn64({3, 5}, 32)});
  require_gradcheck([](const std::vector<Tensor>& in) { return amin(in[0] * in[0], {0}); }, {randn64({3, 5}, 33)});
}

TEST_CASE("amax and amin refuse bad axes, repeats, empty axes and integers naming themselves", "[everyday][amax]") {
  REQUIRE_THROWS_WITH(amax(Tensor::zeros({2, 3}), {2}), Contains("amax") && Contains("axis 2"));
  REQUIRE_THROWS_WITH(amin(Tensor::zeros({2, 3}), {1, -1}), Contains("amin") && Contains("more than once"));
  REQUIRE_THROWS_WITH(amax(Tensor::zeros({2, 0}), {1}), Contains("amax") && Contains("empty"));
  REQUIRE_THROWS_WITH(amin(Tensor::zeros({2}, DType::i32)), Contains("amin") && Contains("int32"));
}

// ------------------------------------------------------------------------------------------ isnan / isinf / isfinite, allclose, any / all

// v = torch.tensor([1., nan, inf, -inf, 0., -2.5]): torch.isnan(v), torch.isinf(v), torch.isfinite(v).
TEST_CASE("isnan, isinf and isfinite match PyTorch, any dtype, bool results", "[everyday][isnan]") {
  const Tensor v = Tensor({1.0, kNaN, kInf, -kInf, 0.0, -2.5});
  for (DType d : {DType::f32, DType::f64}) {
    const Tensor x = v.to(d);
    REQUIRE(isnan(x).dtype() == DType::boolean);
    REQUIRE(bools(isnan(x)) == std::vector<bool>{false, true, false, false, false, false});
    REQUIRE(bools(x.isinf()) == std::vector<bool>{false, false, true, true, false, false});
    REQUIRE(bools(isfinite(x)) == std::vector<bool>{true, false, false, false, true, true});
  }
  // non-contiguous: the transpose of a (3, 2) view
  const Tensor t = transpose(v.reshape({3, 2}), 0, 1);
  REQUIRE(bools(isnan(t)) == std::vector<bool>{false, false, false, true, false, false});
  const Tensor ints = Tensor::from_vector(std::vector<int64_t>{1, -2}, {2});
  REQUIRE(bools(isfinite(ints)) == std::vector<bool>{true, true});
  REQUIRE(bools(isinf(ints)) == std::vector<bool>{false, false});
  REQUIRE_FALSE(isnan(randn64({3}, 1)).requires_grad());
}

// torch.allclose([1, 2], [1 + 1e-6, 2]) True; [1 + 1e-4, 2] False; [inf, nan] vs itself False,
// with equal_nan=True True; [1, 100] vs [1.1, 100] with rtol=0.1 True; [1] vs [1.05] rtol=0 atol=0.1 True.
TEST_CASE("allclose matches PyTorch's tolerances, infinities and NaNs", "[everyday][allclose]") {
  REQUIRE(allclose(Tensor({1.0, 2.0}), Tensor({1.0 + 1e-6, 2.0})));
  REQUIRE_FALSE(allclose(Tensor({1.0, 2.0}), Tensor({1.0 + 1e-4, 2.0})));
  REQUIRE_FALSE(allclose(Tensor({kInf, kNaN}), Tensor({kInf, kNaN})));
  REQUIRE(Tensor({kInf, kNaN}).allclose(Tensor({kInf, kNaN}), 1e-5, 1e-8, true));
  REQUIRE_FALSE(allclose(Tensor({kInf}), Tensor({-kInf})));
  REQUIRE(allclose(Tensor({1.0, 100.0}), Tensor({1.1, 100.0}), 0.1));
  REQUIRE(allclose(Tensor({1.0}), Tensor({1.05}), 0.0, 0.1));
  // broadcasting, and a non-contiguous operand
  REQUIRE(allclose(Tensor({{1.0, 2.0}, {1.0, 2.0}}), Tensor({1.0, 2.0})));
  REQUIRE(allclose(transpose(Tensor({{1.0, 2.0}, {1.0, 2.0}}), 0, 1), Tensor({{1.0, 1.0}, {2.0, 2.0}})));
}

TEST_CASE("allclose refuses negative tolerances and unbroadcastable shapes naming itself", "[everyday][allclose]") {
  REQUIRE_THROWS_WITH(allclose(Tensor({1.0}), Tensor({1.0}), -1.0), Contains("allclose") && Contains("non-negative"));
  REQUIRE_THROWS_WITH(allclose(Tensor({1.0, 2.0}), Tensor({1.0, 2.0, 3.0})), Contains("allclose") && Contains("broadcast"));
}

// m = torch.tensor([[0, 1, 0], [0, 0, 0]]): m.any(), m.any(1); torch.tensor([[1., nan, 0.], [2., 3., 4.]]).all(0, keepdim=True);
// torch.tensor([1., nan]).all(); torch.zeros(0).any(), torch.zeros(0).all().
TEST_CASE("any and all match PyTorch over everything or an axis, any dtype", "[everyday][any]") {
  const Tensor m = Tensor::from_vector(std::vector<int64_t>{0, 1, 0, 0, 0, 0}, {2, 3});
  REQUIRE(any(m).dtype() == DType::boolean);
  REQUIRE(any(m).shape() == Shape{});
  REQUIRE(bools(m.any()) == std::vector<bool>{true});
  REQUIRE(bools(m.all()) == std::vector<bool>{false});
  REQUIRE(bools(any(m, 1)) == std::vector<bool>{true, false});
  const Tensor f = Tensor({{1.0, kNaN, 0.0}, {2.0, 3.0, 4.0}});
  REQUIRE(f.all(0, true).shape() == Shape{1, 3});
  REQUIRE(bools(f.all(0, true)) == std::vector<bool>{true, true, false});
  REQUIRE(bools(all(f, -1)) == std::vector<bool>{false, true});
  REQUIRE(bools(all(transpose(f, 0, 1), 1)) == std::vector<bool>{true, true, false});
  REQUIRE(bools(all(Tensor({1.0, kNaN}))) == std::vector<bool>{true});
  REQUIRE(bools(any(Tensor::zeros({0}))) == std::vector<bool>{false});
  REQUIRE(bools(all(Tensor::zeros({0}))) == std::vector<bool>{true});
  REQUIRE(bools(any(Tensor({true, false}) & Tensor({false, true}))) == std::vector<bool>{false});
}

TEST_CASE("any and all refuse a bad axis naming themselves", "[everyday][any]") {
  REQUIRE_THROWS_WITH(any(Tensor::zeros({2, 3}), 2), Contains("any") && Contains("axis 2") && Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(all(Tensor::zeros({2, 3}), -3), Contains("all") && Contains("axis -3"));
}

// ------------------------------------------------------------------------------------------ softplus, leaky_relu, elu

TEST_CASE("softplus, leaky_relu and elu match PyTorch", "[everyday][activation]") {
  const Tensor x = sine_input();
  // F.softplus(x * 4)
  require_values(softplus(x * 4.0), {2, 3, 4},
                 {3.574667412502203, 10.097692992977898, 11.899984515962629, 8.105859977761199, 0.9734346996942136, 0.0006473532795132753, 8.045759022475534e-06, 2.487945219071615e-05, 0.011196840686689845, 3.762007640729801, 10.205276422935231, 11.872305940591826, 7.955981381500094, 0.8528080702575283, 0.0005524630354631598, 7.723533259201103e-06, 2.7387063534875332e-05, 0.013494055797581849, 3.949152405400994, 10.30997507810255, 11.841270772464448, 7.803862320706802, 0.7420672705870306, 0.00047247938709849653},
                 1e-12);
  // F.softplus(x * 4, beta=2, threshold=5), float32
  require_values(softplus((x * 4.0).to(DType::f32), 2.0, 5.0), {2, 3, 4},
                 {3.5462424799360743, 10.097651817694757, 11.899977725429622, 8.105558166613815, 0.655876563651432, 2.096687834846178e-07, 3.236737954208854e-11, 3.0950127070152054e-10, 6.338707863991693e-05, 3.738496362160534, 10.205239447542773, 11.872298959480583, 7.9556307609862, 0.5170056619795903, 1.5269201675350474e-07, 2.982671336897454e-11, 3.750358954056902e-10, 9.227454590102095e-05, 3.9296932696523164, 10.309941778277949, 11.841263571295361, 7.803454081885402, 0.39663206984136606, 1.1167112507052108e-07},
                 1e-6);
  // F.leaky_relu(x)
  require_values(leaky_relu(x), {2, 3, 4},
                 {0.8865606199840186, 2.5244129544236893, 2.9749944313574055, 2.0263895416534536, 0.1247419872998728, -0.018355736728281568, -0.029325903529952905, -0.026503639671604608, -0.011216299944907106, 0.9346240905401335, 2.5513098618856933, 2.9680747398701457, 1.98890769024655, 0.0743262763600733, -0.018752119466786465, -0.02942808690199475, -0.026263565240652858, -0.010746878467104861, 0.9824233174130791, 2.5774854445694872, 2.9603158928238402, 1.9508635204713505, 0.023889551357812032, -0.019143200470438423},
                 1e-15);
  // F.leaky_relu(x, 0.2), float32
  require_values(leaky_relu(x.to(DType::f32), 0.2), {2, 3, 4},
                 {0.8865606199840186, 2.5244129544236893, 2.9749944313574055, 2.0263895416534536, 0.1247419872998728, -0.3671147345656314, -0.5865180705990581, -0.5300727934320921, -0.22432599889814214, 0.9346240905401335, 2.5513098618856933, 2.9680747398701457, 1.98890769024655, 0.0743262763600733, -0.3750423893357293, -0.588561738039895, -0.5252713048130572, -0.21493756934209723, 0.9824233174130791, 2.5774854445694872, 2.9603158928238402, 1.9508635204713505, 0.023889551357812032, -0.38286400940876847},
                 1e-6);
  // F.elu(x)
  require_values(elu(x), {2, 3, 4},
                 {0.8865606199840186, 2.5244129544236893, 2.9749944313574055, 2.0263895416534536, 0.1247419872998728, -0.8404780379014323, -0.9467411000419271, -0.9293744969818818, -0.6742516064365707, 0.9346240905401335, 2.5513098618856933, 2.9680747398701457, 1.98890769024655, 0.0743262763600733, -0.8466775327867321, -0.9472825463889214, -0.9276584426192938, -0.6585956908522838, 0.9824233174130791, 2.5774854445694872, 2.9603158928238402, 1.9508635204713505, 0.023889551357812032, -0.8525579478307658},
                 1e-15);
  // F.elu(x, alpha=0.5)
  require_values(elu(x, 0.5), {2, 3, 4},
                 {0.8865606199840186, 2.5244129544236893, 2.9749944313574055, 2.0263895416534536, 0.1247419872998728, -0.42023901895071614, -0.47337055002096357, -0.4646872484909409, -0.33712580321828534, 0.9346240905401335, 2.5513098618856933, 2.9680747398701457, 1.98890769024655, 0.0743262763600733, -0.42333876639336604, -0.4736412731944607, -0.4638292213096469, -0.3292978454261419, 0.9824233174130791, 2.5774854445694872, 2.9603158928238402, 1.9508635204713505, 0.023889551357812032, -0.4262789739153829},
                 1e-15);
  // w = [-30, -1, 0, 10, 20, 20.5, 30]: F.softplus(w) and its gradient (linear above 20).
  Tensor w = Tensor({-30.0, -1.0, 0.0, 10.0, 20.0, 20.5, 30.0}).to(DType::f64).requires_grad_();
  Tensor sp = softplus(w);
  require_values(sp, {7}, {9.357622968839737e-14, 0.31326168751822286, 0.6931471805599453, 10.000045398899218,
                           20.000000002061153, 20.5, 30.0}, 1e-15);
  sp.sum().backward();
  require_values(w.grad(), {7}, {9.3576229688393e-14, 0.2689414213699951, 0.5, 0.9999546021312976, 0.9999999979388464,
                                 1.0, 1.0}, 1e-15);
  // z = [-1, 0, 1]: F.leaky_relu(z, 0.2) and F.elu(z, 0.5) gradients (at 0 the x <= 0 side).
  Tensor z = Tensor({-1.0, 0.0, 1.0}).to(DType::f64).requires_grad_();
  leaky_relu(z, 0.2).sum().backward();
  require_values(z.grad(), {3}, {0.2, 0.2, 1.0}, 1e-15);
  z = Tensor({-1.0, 0.0, 1.0}).to(DType::f64).requires_grad_();
  elu(z, 0.5).sum().backward();
  require_values(z.grad(), {3}, {0.18393972058572117, 0.5, 1.0}, 1e-15);
  // the modules
  require_values(nn::Softplus(2.0, 5.0).forward(x), {2, 3, 4}, softplus(x, 2.0, 5.0).to_vector<double>(), 0);
  require_values(nn::LeakyReLU(0.2).forward(x), {2, 3, 4}, leaky_relu(x, 0.2).to_vector<double>(), 0);
  require_values(nn::ELU().forward(x), {2, 3, 4}, elu(x).to_vector<double>(), 0);
}

TEST_CASE("softplus, leaky_relu and elu gradchecks: non-contiguous, an input used twice", "[everyday][activation]") {
  const std::vector<Fn> fns = {
      [](const std::vector<Tensor>& in) { return softplus(in[0] * 3.0); },
      [](const std::vector<Tensor>& in) { return softplus(in[0], 2.0, 1.0); },
      [](const std::vector<Tensor>& in) { return softplus(in[0], -1.5); },
      [](const std::vector<Tensor>& in) { return leaky_relu(in[0], 0.2); },
      [](const std::vector<Tensor>& in) { return elu(in[0], 0.7); },
  };
  for (size_t i = 0; i < fns.size(); ++i) {
    INFO("function " << i);
    require_gradcheck(fns[i], {randn64({2, 3, 4}, 40 + i)});
    require_gradcheck(fns[i], {transposed64(50 + i)});
  }
  require_gradcheck([](const std::vector<Tensor>& in) { return softplus(in[0]) * in[0]; }, {randn64({3, 4}, 60)});
  require_gradcheck([](const std::vector<Tensor>& in) { return leaky_relu(in[0]) * in[0]; }, {randn64({3, 4}, 61)});
  require_gradcheck([](const std::vector<Tensor>& in) { return elu(in[0]) * in[0]; }, {randn64({3, 4}, 62)});
}

TEST_CASE("softplus, leaky_relu and elu refuse integer tensors naming themselves", "[everyday][activation]") {
  const Tensor i = Tensor::from_vector(std::vector<int64_t>{1, -2}, {2});
  REQUIRE_THROWS_WITH(softplus(i), Contains("softplus") && Contains("int64"));
  REQUIRE_THROWS_WITH(softplus(Tensor({1.0}), 0.0), Contains("softplus") && Contains("beta"));
  REQUIRE_THROWS_WITH(leaky_relu(i), Contains("leaky_relu") && Contains("int64"));
  REQUIRE_THROWS_WITH(elu(i), Contains("elu") && Contains("int64"));
}

// ------------------------------------------------------------------------------------------ log1p, expm1, rsqrt, reciprocal, square, floor, ceil, round

TEST_CASE("log1p, expm1, rsqrt, reciprocal and square match PyTorch", "[everyday][unary]") {
  const Tensor x = sine_input();
  // torch.log1p(x * 0.3)
  require_values(log1p(x * 0.3), {2, 3, 4},
                 {0.2358371938605809, 0.5637921327553784, 0.6378978235852049, 0.47493946699231976, 0.036739364257579656, -0.800002372353038, -2.1184078082836315, -1.585278076613037, -0.4102098441072715, 0.24716255340155194, 0.5683733050187826, 0.6368003077814157, 0.4679216553626488, 0.02205291986801692, -0.8268239186119603, -2.1442370094026755, -1.5507302195505488, -0.3892075129213549, 0.25829985842810044, 0.572811558596447, 0.635568261297887, 0.4607478363345045, 0.007141305477850667, -0.8540110430562117},
                 1e-14);
  // torch.expm1(x)
  require_values(x.expm1(), {2, 3, 4},
                 {1.426768701514728, 11.48356469069887, 18.589514162289287, 6.58664558383054, 0.13285612408872177, -0.8404780379014323, -0.9467411000419271, -0.9293744969818818, -0.6742516064365707, 1.5462561160521158, 11.823890311391041, 18.454428681840117, 6.307547296070868, 0.07715819942386785, -0.8466775327867321, -0.9472825463889214, -0.9276584426192938, -0.6585956908522838, 1.6709208949263388, 12.163994911962199, 18.304068809252055, 6.034759617488632, 0.024177192663183116, -0.8525579478307658},
                 1e-14);
  // torch.rsqrt(x.abs() + 0.1)
  require_values(rsqrt(abs(x) + 0.1), {2, 3, 4},
                 {1.0067881889442787, 0.6172824271208222, 0.570266464871805, 0.685770163986116, 2.1093948996443013, 0.718778613810348, 0.5742395827821511, 0.6029827875788345, 0.9047532593717422, 0.9831249248596732, 0.6141433538925081, 0.5709091880559155, 0.6918952922750083, 2.395071997714876, 0.7115298891544296, 0.5732745684059244, 0.6056318076954863, 0.9226537733656066, 0.9611727072441046, 0.6111339924782755, 0.5716324455849374, 0.6982832425038136, 2.8410747468573785, 0.7045888439221528},
                 1e-14);
  // torch.reciprocal(x)
  require_values(x.reciprocal(), {2, 3, 4},
                 {1.1279544539413744, 0.3961317019260404, 0.33613508296340855, 0.49348853191575376, 8.016546967430106, -0.54478881169572, -0.3409954612237674, -0.3773066689671974, -0.8915596095966226, 1.0699488811828985, 0.3919555264294287, 0.336918739466699, 0.5027885431304444, 13.454192096957806, -0.5332730530920456, -0.3398114200662552, -0.38075561746358777, -0.9305027530188433, 1.0178911496453524, 0.38797503283943013, 0.3378017874457654, 0.5125935205136178, 41.85930430514317, -0.5223786908277087},
                 1e-14);
  // torch.square(x)
  require_values(square(x), {2, 3, 4},
                 {0.7859897329064474, 6.37266076446214, 8.850591866607573, 4.106254574522494, 0.015560563395521629, 3.3693307083798496, 8.600086178481043, 7.024429158422535, 1.2580538445412317, 0.8735221906179717, 6.509182011355195, 8.809467661455233, 3.955753800321866, 0.005524395357553991, 3.516419844966318, 8.660122987113548, 6.89774859150029, 1.1549539678672214, 0.9651555745969196, 6.643431216967567, 8.76347018530541, 3.8058684755058714, 0.0005707106640775387, 3.664621242513938},
                 1e-14);
  // torch.expm1(x.float())
  require_values(expm1(x.to(DType::f32)), {2, 3, 4},
                 {1.4267686605453491, 11.483563423156738, 18.589513778686523, 6.58664608001709, 0.1328561156988144, -0.8404780626296997, -0.9467411041259766, -0.9293745160102844, -0.6742516160011292, 1.5462560653686523, 11.82388973236084, 18.454429626464844, 6.307547092437744, 0.07715819776058197, -0.8466775417327881, -0.9472825527191162, -0.9276584386825562, -0.6585956811904907, 1.6709208488464355, 12.163996696472168, 18.30406951904297, 6.034759521484375, 0.02417719177901745, -0.8525579571723938},
                 1e-6);
  // torch.log1p(x.float() * 0.3)
  require_values(log1p(x.to(DType::f32) * 0.3), {2, 3, 4},
                 {0.2358372062444687, 0.5637921690940857, 0.6378978490829468, 0.4749394953250885, 0.03673936426639557, -0.80000239610672, -2.118407964706421, -1.5852781534194946, -0.4102098345756531, 0.24716255068778992, 0.5683733224868774, 0.6368003487586975, 0.4679216742515564, 0.02205291949212551, -0.8268239498138428, -2.1442370414733887, -1.5507304668426514, -0.38920751214027405, 0.258299857378006, 0.5728116035461426, 0.6355683207511902, 0.4607478380203247, 0.007141305599361658, -0.8540109992027283},
                 1e-6);
  // accurate near 0: torch.log1p(1e-10), torch.expm1(1e-10)
  REQUIRE(log1p(Tensor::scalar(1e-10, DType::f64)).item() == Approx(9.999999999500001e-11).epsilon(1e-15));
  REQUIRE(expm1(Tensor::scalar(1e-10, DType::f64)).item() == Approx(1.00000000005e-10).epsilon(1e-15));
}

// r = [-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.6, -2.6, 0.49999999999999994]: torch.floor, ceil, round
// (half to even; -0.5 rounds to -0).
TEST_CASE("floor, ceil and round match PyTorch, round half to even, zero gradient", "[everyday][unary]") {
  const Tensor r = Tensor({-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.6, -2.6, 0.49999999999999994}).to(DType::f64);
  REQUIRE(floor(r).to_vector<double>() == std::vector<double>{-3, -2, -1, 0, 1, 2, 2, -3, 0});
  REQUIRE(r.ceil().to_vector<double>() == std::vector<double>{-2, -1, -0.0, 1, 2, 3, 3, -2, 1});
  REQUIRE(std::signbit(r.ceil().to_vector<double>()[2]));
  REQUIRE(round(r).to_vector<double>() == std::vector<double>{-2, -2, -0.0, 0, 2, 2, 3, -3, 0});
  REQUIRE(std::signbit(round(r).to_vector<double>()[2]));
  REQUIRE(round(r.to(DType::f32)).to_vector<float>() == std::vector<float>{-2, -2, -0.0f, 0, 2, 2, 3, -3, 0});
  for (auto op : {+[](const Tensor& t) { return floor(t); }, +[](const Tensor& t) { return ceil(t); },
                  +[](const Tensor& t) { return round(t); }}) {
    Tensor t = randn64({2, 3}, 70);
    (op(t) * t).sum().backward();  // d(round(t) t) = round(t) + 0 * t
    require_values(t.grad(), {2, 3}, op(t.detach()).to_vector<double>(), 0);
  }
}

TEST_CASE("log1p, expm1, rsqrt, reciprocal, square gradchecks: non-contiguous, an input used twice", "[everyday][unary]") {
  const std::vector<Fn> fns = {
      [](const std::vector<Tensor>& in) { return log1p(in[0] * in[0]); },
      [](const std::vector<Tensor>& in) { return expm1(in[0]); },
      [](const std::vector<Tensor>& in) { return rsqrt(in[0] * in[0] + 0.5); },
      [](const std::vector<Tensor>& in) { return reciprocal(in[0] * in[0] + 0.5); },
      [](const std::vector<Tensor>& in) { return square(in[0]); },
      [](const std::vector<Tensor>& in) { return floor(in[0]) + ceil(in[0]) + round(in[0]); },
  };
  for (size_t i = 0; i < fns.size(); ++i) {
    INFO("function " << i);
    require_gradcheck(fns[i], {randn64({2, 3, 4}, 80 + i)});
    require_gradcheck(fns[i], {transposed64(90 + i)});
  }
  require_gradcheck([](const std::vector<Tensor>& in) { return square(in[0]) * in[0]; }, {randn64({3, 4}, 100)});
  require_gradcheck([](const std::vector<Tensor>& in) { return reciprocal(in[0] + 3.0) * in[0]; }, {randn64({3, 4}, 101)});
  require_gradcheck([](const std::vector<Tensor>& in) { return rsqrt(in[0] + 4.0) * in[0]; }, {randn64({3, 4}, 102)});
  require_gradcheck([](const std::vector<Tensor>& in) { return log1p(in[0] * 0.2) * in[0]; }, {randn64({3, 4}, 103)});
  require_gradcheck([](const std::vector<Tensor>& in) { return expm1(in[0]) * in[0]; }, {randn64({3, 4}, 104)});
}

TEST_CASE("log1p, expm1, rsqrt, reciprocal, square, floor, ceil, round refuse integers naming themselves", "[everyday][unary]") {
  const Tensor i = Tensor::from_vector(std::vector<int64_t>{1, 2}, {2});
  for (const char* name : {"log1p", "expm1", "rsqrt", "reciprocal", "square", "floor", "ceil", "round"}) {
    INFO(name);
    const std::string op(name);
    auto call = [&]() {
      if (op == "log1p") return log1p(i);
      if (op == "expm1") return expm1(i);
      if (op == "rsqrt") return rsqrt(i);
      if (op == "reciprocal") return reciprocal(i);
      if (op == "square") return square(i);
      if (op == "floor") return floor(i);
      if (op == "ceil") return ceil(i);
      return round(i);
    };
    REQUIRE_THROWS_WITH(call(), Contains(op + ":") && Contains("int64"));
  }
}

// ------------------------------------------------------------------------------------------ eye, outer, unbind, flip, narrow

// torch.eye(3), torch.eye(2, 3), torch.eye(3, 2, dtype=torch.int64), torch.eye(0, 3);
// torch.outer(torch.tensor([1., 2., 3.]), torch.tensor([4., 5.])).
TEST_CASE("eye and outer match PyTorch", "[everyday][eye]") {
  require_values(Tensor::eye(3), {3, 3}, {1, 0, 0, 0, 1, 0, 0, 0, 1}, 0);
  REQUIRE(Tensor::eye(3).dtype() == DType::f32);
  require_values(Tensor::eye(2, 3, DType::f64), {2, 3}, {1, 0, 0, 0, 1, 0}, 0);
  const Tensor ei = Tensor::eye(3, 2, DType::i64);
  REQUIRE(ei.dtype() == DType::i64);
  REQUIRE(ei.to_vector<int64_t>() == std::vector<int64_t>{1, 0, 0, 1, 0, 0});
  REQUIRE(Tensor::eye(0, 3).shape() == Shape{0, 3});
  require_values(outer(Tensor({1.0, 2.0, 3.0}), Tensor({4.0, 5.0})), {3, 2}, {4, 5, 8, 10, 12, 15}, 0);
}

TEST_CASE("outer gradchecks: non-contiguous operands, an input used twice", "[everyday][eye]") {
  require_gradcheck([](const std::vector<Tensor>& in) { return outer(in[0], in[1]); }, {randn64({3}, 110), randn64({4}, 111)});
  Tensor strided = slice(randn64({8}, 112).detach(), 0, 0, 8, 2).detach().requires_grad_();
  REQUIRE_FALSE(strided.is_contiguous());
  require_gradcheck([](const std::vector<Tensor>& in) { return outer(in[0], in[1]); }, {strided, randn64({2}, 113)});
  require_gradcheck([](const std::vector<Tensor>& in) { return outer(in[0], in[0]); }, {randn64({3}, 114)});
}

TEST_CASE("eye and outer refuse bad sizes, shapes and dtypes naming themselves", "[everyday][eye]") {
  REQUIRE_THROWS_WITH(Tensor::eye(-1), Contains("eye") && Contains("non-negative"));
  REQUIRE_THROWS_WITH(outer(Tensor::zeros({2, 2}), Tensor::zeros({2})), Contains("outer") && Contains("1-D"));
  REQUIRE_THROWS_WITH(outer(Tensor::zeros({2}), Tensor::zeros({2}, DType::f64)), Contains("outer") && Contains("dtypes"));
}

TEST_CASE("flip, narrow and unbind match PyTorch", "[everyday][flip]") {
  const Tensor x = sine_input();
  // torch.flip(x, (0, 2))
  require_values(flip(x, {0, 2}), {2, 3, 4},
                 {-2.9428086901994748, -1.8752119466786463, 0.0743262763600733, 1.98890769024655, 2.5774854445694872, 0.9824233174130791, -1.0746878467104861, -2.6263565240652857, -1.9143200470438422, 0.023889551357812032, 1.9508635204713505, 2.9603158928238402, 2.0263895416534536, 2.9749944313574055, 2.5244129544236893, 0.8865606199840186, -2.6503639671604606, -2.9325903529952906, -1.8355736728281569, 0.1247419872998728, 2.9680747398701457, 2.5513098618856933, 0.9346240905401335, -1.1216299944907107},
                 0);
  // torch.flip(x, (-1,))
  require_values(x.flip({-1}), {2, 3, 4},
                 {2.0263895416534536, 2.9749944313574055, 2.5244129544236893, 0.8865606199840186, -2.6503639671604606, -2.9325903529952906, -1.8355736728281569, 0.1247419872998728, 2.9680747398701457, 2.5513098618856933, 0.9346240905401335, -1.1216299944907107, -2.9428086901994748, -1.8752119466786463, 0.0743262763600733, 1.98890769024655, 2.5774854445694872, 0.9824233174130791, -1.0746878467104861, -2.6263565240652857, -1.9143200470438422, 0.023889551357812032, 1.9508635204713505, 2.9603158928238402},
                 0);
  // torch.flip(x.transpose(0, 2), (1,))
  require_values(flip(transpose(x, 0, 2), {1}), {4, 3, 2},
                 {-1.1216299944907107, 2.9603158928238402, 0.1247419872998728, -2.6263565240652857, 0.8865606199840186, 1.98890769024655, 0.9346240905401335, 1.9508635204713505, -1.8355736728281569, -1.0746878467104861, 2.5244129544236893, 0.0743262763600733, 2.5513098618856933, 0.023889551357812032, -2.9325903529952906, 0.9824233174130791, 2.9749944313574055, -1.8752119466786463, 2.9680747398701457, -1.9143200470438422, -2.6503639671604606, 2.5774854445694872, 2.0263895416534536, -2.9428086901994748},
                 0);
  // torch.narrow(x, 2, 1, 2)
  require_values(narrow(x, 2, 1, 2), {2, 3, 2},
                 {2.5244129544236893, 2.9749944313574055, -1.8355736728281569, -2.9325903529952906, 0.9346240905401335, 2.5513098618856933, 0.0743262763600733, -1.8752119466786463, -1.0746878467104861, 0.9824233174130791, 1.9508635204713505, 0.023889551357812032},
                 0);
  // torch.narrow(x, 1, -2, 2)
  require_values(x.narrow(1, -2, 2), {2, 2, 4},
                 {0.1247419872998728, -1.8355736728281569, -2.9325903529952906, -2.6503639671604606, -1.1216299944907107, 0.9346240905401335, 2.5513098618856933, 2.9680747398701457, -2.6263565240652857, -1.0746878467104861, 0.9824233174130791, 2.5774854445694872, 2.9603158928238402, 1.9508635204713505, 0.023889551357812032, -1.9143200470438422},
                 0);
  // torch.flip on an int64 tensor and a 0-d one
  REQUIRE(flip(Tensor::arange(4), {0}).to_vector<int64_t>() == std::vector<int64_t>{3, 2, 1, 0});
  REQUIRE(flip(Tensor::scalar(2.0), {}).item() == 2.0);
  // narrow is a view, flip a copy
  REQUIRE(narrow(x, 2, 1, 2).storage() == x.storage());
  REQUIRE(flip(x, {0}).storage() != x.storage());
  // torch.unbind(x, 1)[2]: views without the axis
  const std::vector<Tensor> parts = x.unbind(1);
  REQUIRE(parts.size() == 3);
  require_values(parts[2], {2, 4},
                 {-1.1216299944907107, 0.9346240905401335, 2.5513098618856933, 2.9680747398701457, 2.9603158928238402,
                  1.9508635204713505, 0.023889551357812032, -1.9143200470438422},
                 0);
  REQUIRE(parts[2].storage() == x.storage());
  REQUIRE(unbind(x).size() == 2);
  REQUIRE(unbind(x, -1)[3].shape() == Shape{2, 3});
}

TEST_CASE("flip, narrow and unbind gradchecks: non-contiguous, an input used twice", "[everyday][flip]") {
  for (const std::vector<int64_t>& axes : std::vector<std::vector<int64_t>>{{0}, {-1}, {0, 2}, {2, 1, 0}, {}}) {
    INFO("axes " << to_string(axes));
    require_gradcheck([&](const std::vector<Tensor>& in) { return flip(in[0], axes); }, {randn64({2, 3, 4}, 120)});
    require_gradcheck([&](const std::vector<Tensor>& in) { return flip(in[0], axes); }, {transposed64(121)});
  }
  require_gradcheck([](const std::vector<Tensor>& in) { return flip(in[0], {1}) * in[0]; }, {randn64({3, 4}, 122)});
  require_gradcheck([](const std::vector<Tensor>& in) { return narrow(in[0], 1, 1, 2); }, {transposed64(123)});
  require_gradcheck([](const std::vector<Tensor>& in) { return narrow(in[0], -1, -3, 2) * narrow(in[0], -1, 0, 2); },
                    {randn64({2, 5}, 124)});
  require_gradcheck([](const std::vector<Tensor>& in) {
    const std::vector<Tensor> p = unbind(in[0], 2);
    return p[0] * p[3] + p[1] - in[0].sum(2);
  }, {transposed64(125)});
}

TEST_CASE("flip, narrow and unbind refuse bad axes and ranges naming themselves", "[everyday][flip]") {
  REQUIRE_THROWS_WITH(flip(Tensor::zeros({2, 3}), {0, -2}), Contains("flip") && Contains("more than once"));
  REQUIRE_THROWS_WITH(flip(Tensor::zeros({2, 3}), {2}), Contains("flip") && Contains("axis 2"));
  REQUIRE_THROWS_WITH(narrow(Tensor::zeros({2, 3}), 1, 2, 2), Contains("narrow") && Contains("exceeds"));
  REQUIRE_THROWS_WITH(narrow(Tensor::zeros({2, 3}), 1, -4, 1), Contains("narrow") && Contains("start -4"));
  REQUIRE_THROWS_WITH(narrow(Tensor::zeros({2, 3}), 1, 0, -1), Contains("narrow"));
  // start + length would overflow int64 (it wrapped, and slice refused the wrapped range)
  REQUIRE_THROWS_WITH(narrow(Tensor::zeros({2, 3}), 1, 1, std::numeric_limits<int64_t>::max()),
                      Contains("narrow") && Contains("exceeds"));
  REQUIRE_THROWS_WITH(unbind(Tensor::zeros({2, 3}), 2), Contains("unbind") && Contains("axis 2"));
  REQUIRE_THROWS_WITH(unbind(Tensor::scalar(1.0)), Contains("unbind") && Contains("0-d"));
  // 2^40 views of an empty tensor, each made before the vector ran out of memory (minutes, then a
  // std::bad_alloc or the OOM killer): refused at once
  REQUIRE_THROWS_WITH(unbind(Tensor::zeros({int64_t{1} << 40, 0}), 0), Contains("unbind: 1099511627776 views of [1099511627776, 0] along axis 0 need") && Contains("machine's memory"));
  REQUIRE_THROWS_WITH(unbind(Tensor::zeros({0, int64_t{1} << 62}), 1), Contains("unbind: ") && Contains("machine's memory"));
}

// ------------------------------------------------------------------------------------------ pad, prod

TEST_CASE("pad matches F.pad's constant mode: last axis first, negative pads crop", "[everyday][pad]") {
  const Tensor x = sine_input();
  // F.pad(x, (1, 2))
  require_values(pad(x, {1, 2}), {2, 3, 7},
                 {0.0, 0.8865606199840186, 2.5244129544236893, 2.9749944313574055, 2.0263895416534536, 0.0, 0.0, 0.0, 0.1247419872998728, -1.8355736728281569, -2.9325903529952906, -2.6503639671604606, 0.0, 0.0, 0.0, -1.1216299944907107, 0.9346240905401335, 2.5513098618856933, 2.9680747398701457, 0.0, 0.0, 0.0, 1.98890769024655, 0.0743262763600733, -1.8752119466786463, -2.9428086901994748, 0.0, 0.0, 0.0, -2.6263565240652857, -1.0746878467104861, 0.9824233174130791, 2.5774854445694872, 0.0, 0.0, 0.0, 2.9603158928238402, 1.9508635204713505, 0.023889551357812032, -1.9143200470438422, 0.0, 0.0},
                 0);
  // F.pad(x, (1, -1, -1, 2), value=7.5)
  require_values(pad(x, {1, -1, -1, 2}, 7.5), {2, 4, 4},
                 {7.5, 0.1247419872998728, -1.8355736728281569, -2.9325903529952906, 7.5, -1.1216299944907107, 0.9346240905401335, 2.5513098618856933, 7.5, 7.5, 7.5, 7.5, 7.5, 7.5, 7.5, 7.5, 7.5, -2.6263565240652857, -1.0746878467104861, 0.9824233174130791, 7.5, 2.9603158928238402, 1.9508635204713505, 0.023889551357812032, 7.5, 7.5, 7.5, 7.5, 7.5, 7.5, 7.5, 7.5},
                 0);
  // F.pad(x, (0, 0, 0, 0, 1, 0))
  require_values(pad(x, {0, 0, 0, 0, 1, 0}), {3, 3, 4},
                 {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.8865606199840186, 2.5244129544236893, 2.9749944313574055, 2.0263895416534536, 0.1247419872998728, -1.8355736728281569, -2.9325903529952906, -2.6503639671604606, -1.1216299944907107, 0.9346240905401335, 2.5513098618856933, 2.9680747398701457, 1.98890769024655, 0.0743262763600733, -1.8752119466786463, -2.9428086901994748, -2.6263565240652857, -1.0746878467104861, 0.9824233174130791, 2.5774854445694872, 2.9603158928238402, 1.9508635204713505, 0.023889551357812032, -1.9143200470438422},
                 0);
  // F.pad(x.transpose(1, 2), (-1, 1))
  require_values(pad(transpose(x, 1, 2), {-1, 1}), {2, 4, 3},
                 {0.1247419872998728, -1.1216299944907107, 0.0, -1.8355736728281569, 0.9346240905401335, 0.0, -2.9325903529952906, 2.5513098618856933, 0.0, -2.6503639671604606, 2.9680747398701457, 0.0, -2.6263565240652857, 2.9603158928238402, 0.0, -1.0746878467104861, 1.9508635204713505, 0.0, 0.9824233174130791, 0.023889551357812032, 0.0, 2.5774854445694872, -1.9143200470438422, 0.0},
                 0);
  REQUIRE(pad(Tensor::arange(3), {1, 1}, -1).to_vector<int64_t>() == std::vector<int64_t>{-1, 0, 1, 2, -1});
  // no pads: a copy still
  const Tensor same = pad(x, {});
  REQUIRE(same.storage() != x.storage());
  require_values(same, {2, 3, 4}, x.to_vector<double>(), 0);
}

TEST_CASE("pad gradchecks: pads and crops, non-contiguous, an input used twice", "[everyday][pad]") {
  for (const std::vector<int64_t>& pads :
       std::vector<std::vector<int64_t>>{{1, 2}, {-1, 2, 0, 1}, {2, -1, -1, 0, 1, 1}, {0, 0}, {-2, -1}}) {
    INFO("pads " << to_string(pads));
    require_gradcheck([&](const std::vector<Tensor>& in) { return pad(in[0], pads, 0.5); }, {randn64({2, 3, 4}, 130)});
    require_gradcheck([&](const std::vector<Tensor>& in) { return pad(in[0], pads); }, {transposed64(131)});
  }
  require_gradcheck([](const std::vector<Tensor>& in) { return pad(in[0], {1, 1}) * pad(in[0], {2, 0}); }, {randn64({3, 4}, 132)});
}

TEST_CASE("pad refuses an odd or too long list and crops past the size naming itself", "[everyday][pad]") {
  REQUIRE_THROWS_WITH(pad(Tensor::zeros({2, 3}), {1}), Contains("pad") && Contains("pairs"));
  REQUIRE_THROWS_WITH(pad(Tensor::zeros({2, 3}), {1, 1, 1, 1, 1, 1}), Contains("pad") && Contains("pairs"));
  REQUIRE_THROWS_WITH(pad(Tensor::zeros({2, 3}), {-2, -2}), Contains("pad") && Contains("negative size"));
  // pads whose sum with the size overflows int64 (it wrapped negative, and the message said so),
  // and INT64_MIN, whose negation overflows
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max(), kMin = std::numeric_limits<int64_t>::min();
  REQUIRE_THROWS_WITH(pad(Tensor::zeros({2, 3}), {kMax, 1}), Contains("pad") && Contains("overflows int64"));
  REQUIRE_THROWS_WITH(pad(Tensor::zeros({2, 3}), {0, 0, 1, kMax - 1}), Contains("pad") && Contains("overflows int64"));
  REQUIRE_THROWS_WITH(pad(Tensor::zeros({2, 3}), {kMin, 1}), Contains("pad") && Contains("negative size"));
  REQUIRE_THROWS_WITH(pad(Tensor::zeros({2, 3}), {kMin, kMax}), Contains("pad") && Contains("negative size"));
}

// x.prod(), x.prod(1), x.float().prod(-1, keepdim=True); y = [[1, 2, 0, 4], [0, 3, 0, 2], [1.5, -2, 1, 3]]:
// y.prod(1), y.prod(0, keepdim=True), and the gradients of (y.prod(1) * [1, 2, 3]).sum(), y.prod(0).sum(), y.prod().
TEST_CASE("prod matches PyTorch, its gradient exact with zeros in the input", "[everyday][prod]") {
  const Tensor x = sine_input();
  require_values(x.prod(), {}, {-293.5159695949888}, 1e-12);
  require_values(prod(x, 1), {2, 4},
                 {-0.12404255689493356, -4.330810602244436, -22.25874973390448, -15.940549442664501, -15.463448928260332,
                  -0.1558301903921425, -0.04401057237070039, 14.520206697411876},
                 1e-12);
  require_values(prod(x.to(DType::f32), -1, true), {2, 3, 1},
                 {13.492049217224121, -1.7796777486801147, -7.9382476806640625, 0.815773069858551, 7.147118091583252,
                  -0.26411160826683044},
                 1e-6);
  const std::vector<double> yv = {1, 2, 0, 4, 0, 3, 0, 2, 1.5, -2, 1, 3};
  Tensor y = Tensor::from_vector(yv, {3, 4}).requires_grad_();
  require_values(prod(y, 1), {3}, {0, 0, -9}, 0);
  require_values(y.prod(0, true), {1, 4}, {0, -12, 0, 24}, 0);
  (prod(y, 1) * Tensor({1.0, 2.0, 3.0}).to(DType::f64)).sum().backward();
  require_values(y.grad(), {3, 4}, {0, 0, 8, 0, 0, 0, 0, 0, -18, 13.5, -27, -9}, 0);
  y = Tensor::from_vector(yv, {3, 4}).requires_grad_();
  prod(y, 0).sum().backward();
  require_values(y.grad(), {3, 4}, {0, -6, 0, 6, 1.5, -4, 0, 12, 0, 6, 0, 8}, 0);
  y = Tensor::from_vector(yv, {3, 4}).requires_grad_();
  prod(y).backward();
  require_values(y.grad(), {3, 4}, std::vector<double>(12, 0.0), 0);
  // an empty axis: 1, as torch's
  require_values(prod(Tensor::zeros({2, 0}, DType::f64), 1), {2}, {1, 1}, 0);
}

TEST_CASE("prod gradchecks: every axis, zeros, non-contiguous, an input used twice", "[everyday][prod]") {
  for (int64_t axis = -3; axis < 3; ++axis) {
    INFO("axis " << axis);
    require_gradcheck([&](const std::vector<Tensor>& in) { return prod(in[0], axis); }, {randn64({2, 3, 4}, 140 + axis)});
    require_gradcheck([&](const std::vector<Tensor>& in) { return prod(in[0], axis, true); }, {transposed64(150)});
  }
  require_gradcheck([](const std::vector<Tensor>& in) { return prod(in[0]); }, {randn64({2, 3}, 160)});
  require_gradcheck([](const std::vector<Tensor>& in) { return prod(in[0], 1, true) * in[0]; }, {randn64({3, 4}, 161)});
  // one zero in a row (its gradient is the product of the others) and two (all zero): a
  // piecewise-polynomial function, so central differences are exact enough there too
  Tensor z = Tensor::from_vector(std::vector<double>{1.5, 0, -2, 0.5, 0, 0, 0.7, 1.2}, {2, 4}).requires_grad_();
  require_gradcheck([](const std::vector<Tensor>& in) { return prod(in[0], 1); }, {z});
}

TEST_CASE("prod refuses a bad axis and integers naming itself", "[everyday][prod]") {
  REQUIRE_THROWS_WITH(prod(Tensor::zeros({2, 3}), 2), Contains("prod") && Contains("axis 2"));
  REQUIRE_THROWS_WITH(prod(Tensor::arange(3)), Contains("prod") && Contains("int64"));
}
