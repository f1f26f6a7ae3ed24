// index_put and Tensor::index_put_ (core/ops/index.cpp): PyTorch's advanced-indexing writes.
// Values and gradients against PyTorch 1.13, float64 gradchecks (repeats with and without
// accumulate, broadcast values, a transposed input), the in-place form's checks, and the refusals.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "support/helpers.h"

using namespace heed;
using Catch::Contains;
using heed::test::cos_wave;
using heed::test::randn64;
using heed::test::require_gradcheck;
using heed::test::require_values;
using heed::test::sine_input;
using heed::test::transposed64;

namespace {

Tensor ids(std::vector<int64_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return Tensor::from_vector(v, {n});
}

constexpr double kTol = 1e-10;

}  // namespace

// x = (3 * torch.sin(0.7 * torch.arange(24, dtype=torch.float64) + 0.3)).reshape(2, 3, 4);
// torch.index_put(x, (torch.tensor([[1], [0]]), torch.tensor([2, 0, -1])), cos_wave((3, 4), 0.1))
// (indices broadcast to (2, 3), values to (2, 3, 4); (1, 2) and (0, 2) are written twice, the
// last write is kept); torch.index_put(x[0], (torch.tensor([2, 0]),), cos_wave((1, 4), 0.2)).
TEST_CASE("index_put matches PyTorch: broadcast indices and values, trailing axes, negative indices",
          "[index_put]") {
  const Tensor x = sine_input();
  const Tensor i0 = Tensor::from_vector(std::vector<int64_t>{1, 0}, {2, 1});
  require_values(index_put(x, {i0, ids({2, 0, -1})}, cos_wave({3, 4}, 0.1)), {2, 3, 4},
                 {-0.00920354326881, -0.370180831351, -0.681055880507, -0.899753211214, 0.1247419873, -1.83557367283,
                  -2.932590353, -2.65036396716, -0.996673165716, -0.958698082844, -0.790967711914, -0.516183571775,
                  -0.00920354326881, -0.370180831351, -0.681055880507, -0.899753211214, -2.62635652407,
                  -1.07468784671, 0.982423317413, 2.57748544457, -0.996673165716, -0.958698082844, -0.790967711914,
                  -0.516183571775},
                 kTol);
  require_values(x[0].index_put({ids({2, 0})}, cos_wave({1, 4}, 0.2)), {3, 4},
                 {0.980066577841, 0.841900975162, 0.589788025031, 0.257850032533, 0.1247419873, -1.83557367283,
                  -2.932590353, -2.65036396716, 0.980066577841, 0.841900975162, 0.589788025031, 0.257850032533},
                 kTol);
  // No index at all writes every element (torch 1.13 crashes on an empty tuple).
  REQUIRE(index_put(x[0], {}, Tensor::scalar(2.0, DType::f64)).to_vector<double>() == std::vector<double>(12, 2.0));
  require_values(index_put(x[0], {}, Tensor::scalar(1.0, DType::f64), true), {3, 4}, (x[0] + 1.0).to_vector<double>(), 0.0);
  // int32 indices too (torch 1.13 takes only int64 ones), and x itself is unchanged.
  const Tensor i32 = Tensor::from_vector(std::vector<int32_t>{2, 0}, {2});
  REQUIRE(index_put(x[0], {i32}, cos_wave({1, 4}, 0.2)).to_vector<double>() ==
          index_put(x[0], {ids({2, 0})}, cos_wave({1, 4}, 0.2)).to_vector<double>());
  REQUIRE(x.to_vector<double>() == sine_input().to_vector<double>());
}

// torch.index_put(x[0], (torch.tensor([1, 1, 2]), torch.tensor([3, 3, 0])), torch.tensor([10., 20., 30.]),
// accumulate=True): x[0][1][3] gets 10 + 20.
TEST_CASE("index_put with accumulate adds repeated positions up", "[index_put]") {
  const Tensor x = sine_input();
  const Tensor v = Tensor::from_vector({10.0, 20.0, 30.0}, {3}, DType::f64);
  require_values(index_put(x[0], {ids({1, 1, 2}), ids({3, 3, 0})}, v, true), {3, 4},
                 {0.886560619984, 2.52441295442, 2.97499443136, 2.02638954165, 0.1247419873, -1.83557367283,
                  -2.932590353, 27.3496360328, 28.8783700055, 0.93462409054, 2.55130986189, 2.96807473987},
                 kTol);
  // Integer tensors too (no gradient).
  const Tensor counts = index_put(Tensor::zeros({4}, DType::i64), {ids({1, 3, 1})}, Tensor({1}), true);
  REQUIRE(counts.to_vector<int64_t>() == std::vector<int64_t>{0, 2, 0, 1});
  // An integer sum past its type's range wraps, as torch's (the C++ sum's overflow was undefined
  // behaviour: the sanitized build stops at it): torch.tensor([2**63 - 1, 5]).index_put(
  // (torch.tensor([0, 0, 1]),), torch.tensor([1, 1, 2]), accumulate=True) is [-2**63 + 1, 7], and
  // the same in int32 from 2**31 - 1 is [-2**31 + 1, 7].
  const Tensor big64 = Tensor::from_vector(std::vector<int64_t>{std::numeric_limits<int64_t>::max(), 5}, {2});
  REQUIRE(index_put(big64, {ids({0, 0, 1})}, Tensor({1, 1, 2}), true).to_vector<int64_t>() ==
          std::vector<int64_t>{std::numeric_limits<int64_t>::min() + 1, 7});
  const Tensor big32 = Tensor({2147483647, 5}).to(DType::i32);
  Tensor put32 = big32.clone();
  put32.index_put_({ids({0, 0, 1})}, Tensor({1, 1, 2}).to(DType::i32), true);
  REQUIRE(put32.to_vector<int64_t>() == std::vector<int64_t>{-2147483647, 7});
}

// m = x[0] > 1.0; torch.index_put(x[0], (m,), torch.tensor(-7.0)) (x[0][m] = -7);
// torch.index_put(x, (torch.tensor([True, False]),), cos_wave((3, 4), 0.3)) (a mask over axis 0 only).
TEST_CASE("index_put with a bool mask, as torch x(mask) = v", "[index_put]") {
  const Tensor x = sine_input();
  const Tensor m = x[0] > 1.0;
  require_values(index_put(x[0], {m}, Tensor::scalar(-7.0, DType::f64)), {3, 4},
                 {0.886560619984, -7, -7, -7, 0.1247419873, -1.83557367283, -2.932590353, -2.65036396716,
                  -1.12162999449, 0.93462409054, -7, -7},
                 kTol);
  require_values(index_put(x, {Tensor({true, false})}, cos_wave({3, 4}, 0.3)), {2, 3, 4},
                 {0.955336489126, 0.783821665881, 0.506220257233, 0.160104311555, -0.207681001609, -0.54735766548,
                  -0.8129520371, -0.968517164228, -0.992998036698, -0.883081283265, -0.653643620864, -0.335738360759,
                  1.98890769025, 0.0743262763601, -1.87521194668, -2.9428086902, -2.62635652407, -1.07468784671,
                  0.982423317413, 2.57748544457, 2.96031589282, 1.95086352047, 0.0238895513578, -1.91432004704},
                 kTol);
  // The mask picks its true elements in row-major order: values of the selection's length go there.
  const Tensor picked = index_put(x[0], {m}, Tensor::from_vector({1.0, 2.0, 3.0, 4.0, 5.0}, {5}, DType::f64));
  require_values(picked, {3, 4},
                 {0.886560619984, 1, 2, 3, 0.1247419873, -1.83557367283, -2.932590353, -2.65036396716, -1.12162999449,
                  0.93462409054, 4, 5},
                 kTol);
  // A mask with an index after it: rows {0} by mask, then column 1.
  require_values(index_put(x[0], {Tensor({true, false, false}), ids({1})}, Tensor::scalar(9.0, DType::f64)), {3, 4},
                 {0.886560619984, 9, 2.97499443136, 2.02638954165, 0.1247419873, -1.83557367283, -2.932590353,
                  -2.65036396716, -1.12162999449, 0.93462409054, 2.55130986189, 2.96807473987},
                 kTol);
}

// xx = x[0].clone().requires_grad_(); v = torch.tensor([10., 20., 30.], requires_grad=True);
// (torch.index_put(xx, (torch.tensor([1, 1, 2]), torch.tensor([3, 3, 0])), v, accumulate=True) * cos_wave((3, 4), 0.4)).sum().backward()
// and the same without accumulate at positions (1, 3), (0, 3), (2, 0).
TEST_CASE("index_put gradients match PyTorch with and without accumulate", "[index_put]") {
  const Tensor w = cos_wave({3, 4}, 0.4);
  {
    Tensor xx = sine_input()[0].detach().requires_grad_();
    Tensor v = Tensor::from_vector({10.0, 20.0, 30.0}, {3}, DType::f64).requires_grad_();
    sum(index_put(xx, {ids({1, 1, 2}), ids({3, 3, 0})}, v, true) * w).backward();
    require_values(xx.grad(), {3, 4}, w.to_vector<double>(), 0.0);
    require_values(v.grad(), {3}, {-0.988531820827, -0.988531820827, -0.976243775672}, kTol);
  }
  {
    Tensor xx = sine_input()[0].detach().requires_grad_();
    Tensor v = Tensor::from_vector({10.0, 20.0, 30.0}, {3}, DType::f64).requires_grad_();
    sum(index_put(xx, {ids({1, 0, 2}), ids({3, 3, 0})}, v) * w).backward();
    require_values(xx.grad(), {3, 4},
                   {0.921060994003, 0.717910669611, 0.417594503958, 0, -0.30430017106, -0.628173622723,
                    -0.867026721446, 0, 0, -0.831825715247, -0.574823946533, -0.240022453278},
                   kTol);
    require_values(v.grad(), {3}, {-0.988531820827, 0.0607588812194, -0.976243775672}, kTol);
  }
  // Repeated positions without accumulate: the last write wins and alone gets the gradient, as
  // heed's scatter. torch 1.13 (its winner unspecified) writes [3, 2, 0] here too, but gives
  // every repeat the gradient: v.grad [6, 6, 5].
  Tensor xx = Tensor::zeros({3}, DType::f64).requires_grad_();
  Tensor v = Tensor::from_vector({1.0, 2.0, 3.0}, {3}, DType::f64).requires_grad_();
  const Tensor out = index_put(xx, {ids({1, 1, 0})}, v);
  REQUIRE(out.to_vector<double>() == std::vector<double>{3, 2, 0});
  sum(out * Tensor::from_vector({5.0, 6.0, 7.0}, {3}, DType::f64)).backward();
  REQUIRE(v.grad().to_vector<double>() == std::vector<double>{0, 6, 5});
  REQUIRE(xx.grad().to_vector<double>() == std::vector<double>{0, 0, 7});
}

TEST_CASE("index_put gradchecks: repeats, broadcast values, masks, a transposed input", "[index_put]") {
  const Tensor rows = ids({2, 0, 2}), cols = ids({1, 3, 1});
  for (bool accumulate : {false, true}) {
    INFO("accumulate " << accumulate);
    require_gradcheck([&](const std::vector<Tensor>& in) { return index_put(in[0], {rows, cols}, in[1], accumulate); },
                      {randn64({3, 4}, 1), randn64({3}, 2)});
    // One index over axis 0 of a (3, 2, 4) input: values (4) broadcast to the indexed (3, 2, 4).
    require_gradcheck([&](const std::vector<Tensor>& in) { return index_put(in[0], {rows}, in[1], accumulate); },
                      {randn64({3, 2, 4}, 3), randn64({4}, 4)});
    // -1 is 1 on axis 0 of the (2, 3, 4) view: one position twice.
    require_gradcheck([&](const std::vector<Tensor>& in) { return index_put(in[0], {ids({1, -1})}, in[1], accumulate); },
                      {transposed64(5), randn64({2, 1, 4}, 6)});
    const Tensor mask = Tensor({{true, false, true, false}, {false, false, true, true}, {true, true, false, false}});
    require_gradcheck([&](const std::vector<Tensor>& in) { return index_put(in[0], {mask}, in[1], accumulate); },
                      {randn64({3, 4}, 7), randn64({6}, 8)});
    // One tensor as both the input and the values.
    require_gradcheck([&](const std::vector<Tensor>& in) { return index_put(in[0], {ids({0, 0})}, in[0][1], accumulate); },
                      {randn64({2, 3}, 9)});
  }
}

// y = x[0].clone(); y[torch.tensor([0, 2]), torch.tensor([1, 3])] = torch.tensor([5., 6.]).
TEST_CASE("index_put_ writes in place, as torch x(idx) = v: views, overlapping values, version counted",
          "[index_put]") {
  Tensor y = sine_input()[0].clone().detach();
  const uint64_t before = y.version();
  Tensor& same = y.index_put_({ids({0, 2}), ids({1, 3})}, Tensor::from_vector({5.0, 6.0}, {2}, DType::f64));
  REQUIRE(&same == &y);
  REQUIRE(y.version() == before + 1);
  require_values(y, {3, 4},
                 {0.886560619984, 5, 2.97499443136, 2.02638954165, 0.1247419873, -1.83557367283, -2.932590353,
                  -2.65036396716, -1.12162999449, 0.93462409054, 2.55130986189, 6},
                 kTol);
  // Into a transposed view: element (r, c) of y.T is y's (c, r).
  Tensor t = transpose(y, 0, 1);
  t.index_put_({ids({3}), ids({0})}, Tensor::scalar(8.0, DType::f64));
  REQUIRE(y.at({0, 3}) == 8.0);
  // Values that are a view of the tensor written are read before any write: z = z.T row by row
  // would otherwise read row 0's new values into row 1.
  Tensor z = Tensor::from_vector({1.0, 2.0, 3.0, 4.0}, {2, 2}, DType::f64);
  z.index_put_({ids({0, 1})}, transpose(z, 0, 1));
  REQUIRE(z.to_vector<double>() == std::vector<double>{1, 3, 2, 4});
  Tensor zz = Tensor::from_vector({1.0, 2.0, 3.0, 4.0}, {2, 2}, DType::f64);
  zz.index_put_({ids({1})}, zz[0]);  // zz[1] = zz[0], zz[0] a view of zz
  REQUIRE(zz.to_vector<double>() == std::vector<double>{1, 2, 1, 2});
  // A mask and accumulate.
  Tensor c = Tensor::zeros({2, 3});
  c.index_put_({c == 0.0}, Tensor::scalar(1.5f), true);
  c.index_put_({Tensor({false, true})}, Tensor({1.0f, 2.0f, 3.0f}), true);
  REQUIRE(c.to_vector<float>() == std::vector<float>{1.5f, 1.5f, 1.5f, 2.5f, 3.5f, 4.5f});
}

TEST_CASE("index_put_ is refused where heed's other in-place writes are", "[index_put]") {
  Tensor x = Tensor::ones({3}, DType::f64).requires_grad_();
  Tensor y = x * 2.0;
  REQUIRE_THROWS_WITH(y.index_put_({ids({0})}, Tensor::scalar(1.0, DType::f64)),
                      Contains("index_put_: this tensor is the output of 'mul_scalar'"));
  Tensor e = expand(Tensor::zeros({1, 3}), {2, 3});
  REQUIRE_THROWS_WITH(e.index_put_({ids({0})}, Tensor::scalar(1.0f)),
                      Contains("index_put_: more than one element of this tensor of shape [2, 3] is one memory location"));
  // A graph that saved the tensor refuses its backward after the write.
  Tensor a = Tensor::ones({3}, DType::f64).requires_grad_();
  Tensor w = Tensor::ones({3}, DType::f64);
  Tensor loss = sum(a * w);
  w.index_put_({ids({1})}, Tensor::scalar(5.0, DType::f64));
  REQUIRE_THROWS_WITH(loss.backward(), Contains("mul"));
}

TEST_CASE("index_put refuses bad indices and values, naming itself", "[index_put]") {
  const Tensor x = Tensor::zeros({3, 4}, DType::f64);
  const Tensor one = Tensor::scalar(1.0, DType::f64);
  REQUIRE_THROWS_WITH(index_put(x, {ids({3})}, one), Contains("index_put: index 3 is out of range for axis 0 of size 3"));
  REQUIRE_THROWS_WITH(index_put(x, {ids({0}), ids({-5})}, one), Contains("index_put: index -5 is out of range for axis 1"));
  REQUIRE_THROWS_WITH(index_put(x, {ids({0}), ids({0}), ids({0})}, one),
                      Contains("index_put: too many indices (3) for a tensor of shape [3, 4]"));
  REQUIRE_THROWS_WITH(index_put(x, {ids({1})}, Tensor::ones({3}, DType::f64)),
                      Contains("index_put: values of shape [3] do not broadcast to the indexed shape [1, 4]"));
  REQUIRE_THROWS_WITH(index_put(x, {ids({1})}, Tensor::scalar(1.0f)),
                      Contains("index_put: values are float32 but the tensor is float64"));
  REQUIRE_THROWS_WITH(index_put(x, {Tensor({1.0f})}, one), Contains("index_put: index 0 must be int64, int32 or bool, got float32"));
  REQUIRE_THROWS_WITH(index_put(x, {Tensor({true, false})}, one),
                      Contains("index_put: the bool mask 0 of shape [2] must match the shape [3, 4]"));
  REQUIRE_THROWS_WITH(index_put(x, {ids({0, 1}), ids({0, 1, 2})}, one), Contains("index_put") && Contains("[2]") && Contains("[3]"));
  REQUIRE_THROWS_WITH(index_put(x, {Tensor()}, one), Contains("index_put: index 0 is an undefined tensor"));
  REQUIRE_THROWS_WITH(index_put(Tensor::zeros({2}, DType::boolean), {ids({0})}, Tensor({true}), true),
                      Contains("index_put: cannot accumulate into a bool tensor"));
}

// Index tensors expanded (stride 0) to (2^25, 1) and (1, 2^25) pick 2^50 positions, whose offsets
// (8 PB) no machine holds: a bare std::bad_alloc escaped. (2^40, 1) and (1, 2^40) broadcast past
// int64: refused by numel_of, which named no op (it takes the op now).
TEST_CASE("index_put refuses indices broadcast past memory or int64, naming itself", "[index_put]") {
  const Tensor zero = Tensor::from_vector(std::vector<int64_t>{0}, {1, 1});
  const Tensor one = Tensor::scalar(1.0, DType::f64);
  for (int64_t n : {int64_t{1} << 25, int64_t{1} << 40}) {
    INFO("n = " << n);
    const std::vector<Tensor> idx{expand(zero, {n, 1}), expand(zero, {1, n})};
    const std::string why = n < (int64_t{1} << 32) ? "bytes of this machine's memory" : "overflows int64";
    Tensor x = Tensor::zeros({2, 3}, DType::f64);
    REQUIRE_THROWS_WITH(index_put(x, idx, one), Contains("index_put: ") && Contains(why));
    REQUIRE_THROWS_WITH(x.index_put_(idx, one), Contains("index_put_: ") && Contains(why));
  }
}
