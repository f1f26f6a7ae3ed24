// Integer and bool tensors and the ops for them: literals, comparisons, logical ops, where,
// masked_fill with a mask tensor, tril / triu, arange, argmax, select (x[i]), gather, stack, cat,
// min / max / abs without an axis, 1-D matmul, method syntax and printing. Values from
// /usr/bin/python3 (torch 1.13), e.g.
//   x = torch.tensor([[1., 5., 3.], [4., 2., 6.]]); x.argmax(), x.argmax(1), x.argmax(0)
//   -> tensor(5) tensor([1, 2]) tensor([1, 0, 1])
#include <catch2/catch.hpp>
#include <limits>
#include <sstream>

#include "core/heed.h"
#include "support/helpers.h"

using namespace heed;
using heed::test::randn64;
using heed::test::require_gradcheck;
using heed::test::require_values;

namespace {
std::string printed(const Tensor& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}
}  // namespace

TEST_CASE("dtypes: literals pick int64, float32 or bool as torch.tensor", "[index]") {
  Tensor f = Tensor({{1.0, 2.0}, {3.0, 4.0}});
  REQUIRE(f.dtype() == DType::f32);
  require_values(f, {2, 2}, {1, 2, 3, 4});
  Tensor i = Tensor({{1, 2}, {3, 4}});
  REQUIRE(i.dtype() == DType::i64);
  REQUIRE(i.to_vector<int64_t>() == std::vector<int64_t>{1, 2, 3, 4});
  Tensor mixed = Tensor({1, 2.5});
  REQUIRE(mixed.dtype() == DType::f32);
  Tensor b = Tensor({true, false});
  REQUIRE(b.dtype() == DType::boolean);
  REQUIRE_THROWS_WITH(Tensor({{1, 2}, {3}}), Catch::Contains("sub-lists of different shapes"));
  // The braced from_vector is no longer ambiguous, and float32 by default.
  Tensor w = Tensor::from_vector({0.43, 0.15}, {1, 2});
  REQUIRE(w.dtype() == DType::f32);
  require_values(w, {1, 2}, {0.43, 0.15});
  // Integers cannot require gradients; float kernels refuse them by name.
  REQUIRE_THROWS_WITH(i.requires_grad_(), Catch::Contains("only float tensors"));
  REQUIRE_THROWS_WITH(exp(i), Catch::Contains("got int64"));
  REQUIRE(i.to(DType::f64).dtype() == DType::f64);
  REQUIRE(Tensor::arange(2, 11, 3).to_vector<int64_t>() == std::vector<int64_t>{2, 5, 8});
  REQUIRE(Tensor::arange(5, 0, -2).to_vector<int64_t>() == std::vector<int64_t>{5, 3, 1});
  REQUIRE(Tensor::arange(3, 3).numel() == 0);
  // One default for both overloads, as torch.arange(4) and torch.arange(0, 4): int64.
  REQUIRE(Tensor::arange(4).dtype() == DType::i64);
  REQUIRE(Tensor::arange(4).to_vector<int64_t>() == Tensor::arange(0, 4).to_vector<int64_t>());
  // Bounds far apart, values past int32, and bool: torch 1.13 returns an empty tensor, wraps to
  // [0, 0, 0, 0], and refuses; heed refuses all three by name.
  const int64_t big = std::numeric_limits<int64_t>::max();
  REQUIRE(Tensor::arange(-big - 1, big, int64_t{1} << 62).to_vector<int64_t>() ==
          std::vector<int64_t>{-big - 1, -(int64_t{1} << 62), 0, int64_t{1} << 62});
  REQUIRE_THROWS_WITH(Tensor::arange(-big - 1, big), Catch::Contains("more than 2^63 - 1 elements"));
  REQUIRE_THROWS_WITH(Tensor::arange(0, int64_t{1} << 40, int64_t{1} << 38, DType::i32),
                      Catch::Contains("the value 824633720832 does not fit in int32"));
  REQUIRE(Tensor::arange(-3, 2, 2, DType::i32).to_vector<int64_t>() == std::vector<int64_t>{-3, -1, 1});
  REQUIRE_THROWS_WITH(Tensor::arange(4, DType::boolean), Catch::Contains("a bool tensor cannot count"));
}

// torch 1.13: xi = torch.tensor([1, 2], dtype=torch.int32); xf = torch.tensor([1.5, -2.0, 3.25])
// torch.zeros_like(xi).dtype -> torch.int32; torch.full_like(xi, 2.7) -> [2, 2];
// torch.full_like(xf, 0.1) -> [0.10000000149011612] * 3; torch.ones_like(xf, dtype=torch.float64).dtype
// -> torch.float64; torch.zeros_like(xf.requires_grad_()).requires_grad -> False
TEST_CASE("zeros_like, ones_like, full_like, empty_like, randn_like: x's shape and dtype, or the dtype given", "[index]") {
  const Tensor xi = Tensor::from_vector(std::vector<int32_t>{1, 2}, {2});
  const Tensor xf = Tensor({{1.5, -2.0, 3.25}, {0.0, 1.0, 2.0}}).transpose(0, 1).requires_grad_();  // (3, 2), strided
  REQUIRE(zeros_like(xi).dtype() == DType::i32);
  REQUIRE(zeros_like(xi).to_vector<int32_t>() == std::vector<int32_t>{0, 0});
  REQUIRE(full_like(xi, 2.7).to_vector<int32_t>() == std::vector<int32_t>{2, 2});  // truncated, as torch
  REQUIRE(full_like(xf, 0.1).to_vector<float>() == std::vector<float>(6, 0.1f));
  for (const Tensor& t : {zeros_like(xf), ones_like(xf), full_like(xf, 0.1), empty_like(xf), randn_like(xf)}) {
    REQUIRE(t.shape() == Shape{3, 2});
    REQUIRE(t.dtype() == DType::f32);
    REQUIRE(t.is_contiguous());
    REQUIRE_FALSE(t.requires_grad());  // never, though xf requires grad
    REQUIRE(t.grad_fn() == nullptr);
  }
  require_values(ones_like(xf), {3, 2}, {1, 1, 1, 1, 1, 1}, 0);
  const Tensor y = xf * 2.0;  // an op's output: only its shape and dtype are read
  REQUIRE_FALSE(zeros_like(y).requires_grad());
  // dtype= overrides
  REQUIRE(ones_like(xf, DType::f64).dtype() == DType::f64);
  REQUIRE(zeros_like(xi, DType::boolean).dtype() == DType::boolean);
  REQUIRE(full_like(xi, 0.5, DType::f64).to_vector<double>() == std::vector<double>{0.5, 0.5});
  REQUIRE(empty_like(xf, DType::i64).dtype() == DType::i64);
  REQUIRE(zeros_like(Tensor::scalar(3.0)).shape() == Shape{});
  // randn_like draws from the default generator, as Tensor::randn of x's shape.
  manual_seed(7);
  const std::vector<double> r = randn_like(xf, DType::f64).to_vector<double>();
  manual_seed(7);
  REQUIRE(r == Tensor::randn({3, 2}, 1.0, 0.0, DType::f64).to_vector<double>());
  REQUIRE(randn_like(xf).to_vector<float>() != randn_like(xf).to_vector<float>());
  CHECK_THROWS_WITH(randn_like(xi), Catch::Contains("randn_like: normal samples need float32 or float64, got int32"));
}

TEST_CASE("dtypes: tensors print nested as PyTorch", "[index]") {
  // print(torch.tensor([[1., 2.], [3., 4.]])) and the others, pasted.
  REQUIRE(printed(Tensor({{1.0, 2.0}, {3.0, 4.0}})) == "tensor([[1., 2.],\n        [3., 4.]])");
  REQUIRE(printed(Tensor::from_vector({0.43, 0.15}, {1, 2})) == "tensor([[0.4300, 0.1500]])");
  REQUIRE(printed(Tensor({1, 2})) == "tensor([1, 2])");
  REQUIRE(printed(Tensor({true, false})) == "tensor([ True, False])");
  REQUIRE(printed(Tensor::arange(24, DType::f32).reshape({2, 3, 4})) ==
          "tensor([[[ 0.,  1.,  2.,  3.],\n         [ 4.,  5.,  6.,  7.],\n         [ 8.,  9., 10., 11.]],\n\n"
          "        [[12., 13., 14., 15.],\n         [16., 17., 18., 19.],\n         [20., 21., 22., 23.]]])");
}

// torch 1.13's float notation (_Formatter in torch/_tensor_str.py): scientific when the nonzero
// finite magnitudes span over 1000x, pass 1e8, or (not all whole) go under 1e-4; every element padded
// to the widest nonzero finite one. Each string is print(x) pasted from
// /usr/bin/python3 -c "import torch; print(repr(str(torch.tensor([1e-5, 2e-5]))))" and so on; heed
// names a dtype without torch's "torch." (dtype=float64).
TEST_CASE("printing: scientific notation, widths, nan and empty tensors as torch", "[index]") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  auto f32 = [](std::vector<double> v, Shape shape) { return Tensor::from_vector(v, shape).to(DType::f32); };
  CHECK(printed(Tensor({1e-5, 2e-5})) == "tensor([1.0000e-05, 2.0000e-05])");
  CHECK(printed(Tensor({1e-5, 1.0, 1000.0})) == "tensor([1.0000e-05, 1.0000e+00, 1.0000e+03])");
  // torch.tensor([[1e-5, -2.5], [3e3, 0.]]): a zero in scientific notation, signs padded
  CHECK(printed(Tensor({{1e-5, -2.5}, {3e3, 0.0}})) ==
        "tensor([[ 1.0000e-05, -2.5000e+00],\n        [ 3.0000e+03,  0.0000e+00]])");
  CHECK(printed(Tensor({-1.5, 0.25, -0.125})) == "tensor([-1.5000,  0.2500, -0.1250])");
  // The 1000x ratio is strict: [0.5, 500.] stays fixed, [0.5, 500.5] does not.
  CHECK(printed(Tensor({0.5, 500.0})) == "tensor([  0.5000, 500.0000])");
  CHECK(printed(Tensor({0.5, 500.5})) == "tensor([5.0000e-01, 5.0050e+02])");
  // float32 1e-4 is 9.99999974738e-05, under 1e-4
  CHECK(printed(Tensor({1e-4, 0.01})) == "tensor([1.0000e-04, 1.0000e-02])");
  // Whole values: scientific past a 1000x ratio or 1e8, never for small ones alone.
  CHECK(printed(Tensor({1.0, 2000.0})) == "tensor([1.0000e+00, 2.0000e+03])");
  CHECK(printed(Tensor({-1e9, 0.0})) == "tensor([-1.0000e+09,  0.0000e+00])");
  CHECK(printed(Tensor({-1.0, 0.0, 12.0})) == "tensor([-1.,  0., 12.])");
  CHECK(printed(Tensor({1.0, -0.0})) == "tensor([1., -0.])");
  // nan and inf take the others' width; a lone "-0.0000" is wider and pads nothing.
  CHECK(printed(f32({1e-5, nan, inf, -inf}, {4})) == "tensor([1.0000e-05,        nan,        inf,       -inf])");
  CHECK(printed(f32({0.5, nan, -inf}, {3})) == "tensor([0.5000,    nan,   -inf])");
  CHECK(printed(f32({nan, -inf}, {2})) == "tensor([nan, -inf])");
  CHECK(printed(Tensor({-0.0, 1.5})) == "tensor([-0.0000, 1.5000])");
  CHECK(printed(Tensor({0.0, 0.0})) == "tensor([0., 0.])");
  // float64, a scalar, requires_grad
  CHECK(printed(Tensor::from_vector(std::vector<double>{1e-5, 123.456}, {2})) ==
        "tensor([1.0000e-05, 1.2346e+02], dtype=float64)");  // torch: dtype=torch.float64
  CHECK(printed(Tensor::from_vector(std::vector<double>{1e-300, 1.0}, {2})) ==
        "tensor([1.0000e-300,  1.0000e+00], dtype=float64)");
  CHECK(printed(Tensor::scalar(1e-5)) == "tensor(1.0000e-05)");
  CHECK(printed(Tensor({1e-5, 1.0}).requires_grad_()) == "tensor([1.0000e-05, 1.0000e+00], requires_grad=True)");
  // An op's output names its op, as torch's grad_fn=<MulBackward0> (torch: tensor([2., 4.], grad_fn=<MulBackward0>)).
  CHECK(printed(Tensor({1.0, 2.0}).requires_grad_() * 2.0) == "tensor([2., 4.], grad_fn=<mul_scalar>)");
  // Empty: the size unless (0,), the dtype unless float32.
  CHECK(printed(Tensor::zeros({0, 3})) == "tensor([], size=(0, 3))");
  CHECK(printed(Tensor::zeros({2, 0, 3})) == "tensor([], size=(2, 0, 3))");
  CHECK(printed(Tensor::zeros({0})) == "tensor([])");
  CHECK(printed(Tensor::zeros({0, 3}, DType::i64)) == "tensor([], size=(0, 3), dtype=int64)");
  CHECK(printed(Tensor::zeros({0}, DType::boolean)) == "tensor([], dtype=bool)");
}

// torch wraps each innermost row at 80 columns, and past 1000 elements shows three entries at
// each end of an axis, deciding the notation and width from those alone.
TEST_CASE("printing: rows wrap at 80 columns and summaries format what they show, as torch", "[index]") {
  // torch.arange(10.) * 1e-5
  CHECK(printed(mul(Tensor::arange(10, DType::f32), 1e-5)) ==
        "tensor([0.0000e+00, 1.0000e-05, 2.0000e-05, 3.0000e-05, 4.0000e-05, 5.0000e-05,\n"
        "        6.0000e-05, 7.0000e-05, 8.0000e-05, 9.0000e-05])");
  // torch.arange(12.).reshape(2, 6) * 1e-5 - 3e-5
  CHECK(printed(mul(Tensor::arange(12, DType::f32).reshape({2, 6}), 1e-5) - 3e-5) ==
        "tensor([[-3.0000e-05, -2.0000e-05, -1.0000e-05,  0.0000e+00,  1.0000e-05,\n"
        "          2.0000e-05],\n"
        "        [ 3.0000e-05,  4.0000e-05,  5.0000e-05,  6.0000e-05,  7.0000e-05,\n"
        "          8.0000e-05]])");
  // torch.arange(1., 16.) / 4
  CHECK(printed(div(Tensor::arange(1, 16).to(DType::f32), 4.0)) ==
        "tensor([0.2500, 0.5000, 0.7500, 1.0000, 1.2500, 1.5000, 1.7500, 2.0000, 2.2500,\n"
        "        2.5000, 2.7500, 3.0000, 3.2500, 3.5000, 3.7500])");
  // torch.arange(2000.): the ellipsis counts as an element of the row
  CHECK(printed(Tensor::arange(2000, DType::f32)) ==
        "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,\n"
        "        1.9990e+03])");
  // torch.arange(2000).reshape(2, 1000)
  CHECK(printed(Tensor::arange(2000).reshape({2, 1000})) ==
        "tensor([[   0,    1,    2,  ...,  997,  998,  999],\n        [1000, 1001, 1002,  ..., 1997, 1998, 1999]])");
  // x = torch.arange(1001.); x[500] = 1e-7: the hidden 1e-7 does not make it scientific
  Tensor x = Tensor::arange(1001, DType::f32);
  x[500].fill_(1e-7);
  CHECK(printed(x) == "tensor([   0.,    1.,    2.,  ...,  998.,  999., 1000.])");
}

TEST_CASE("compare: comparisons and logical ops broadcast into bool tensors", "[index]") {
  const Tensor x = Tensor({{1.0, 5.0, 3.0}, {4.0, 2.0, 6.0}});
  const Tensor row = Tensor({2, 5, 3});  // int64 against float32: compared as values
  REQUIRE((x > row).dtype() == DType::boolean);
  REQUIRE((x > row).to_vector<int64_t>() == std::vector<int64_t>{0, 0, 0, 1, 0, 1});
  REQUIRE((x == row).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 1, 0, 0, 0});
  REQUIRE((x <= 3.0).to_vector<int64_t>() == std::vector<int64_t>{1, 0, 1, 0, 1, 0});
  REQUIRE((x != 5.0).to_vector<int64_t>() == std::vector<int64_t>{1, 0, 1, 1, 1, 1});
  REQUIRE((x >= 4.0).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 0, 1, 0, 1});
  REQUIRE((x < 2.0).to_vector<int64_t>() == std::vector<int64_t>{1, 0, 0, 0, 0, 0});
  const Tensor a = Tensor({true, true, false, false}), b = Tensor({true, false, true, false});
  REQUIRE((a & b).to_vector<int64_t>() == std::vector<int64_t>{1, 0, 0, 0});
  REQUIRE((a | b).to_vector<int64_t>() == std::vector<int64_t>{1, 1, 1, 0});
  REQUIRE((a ^ b).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 1, 0});
  REQUIRE((~a).to_vector<int64_t>() == std::vector<int64_t>{0, 0, 1, 1});
  // A transposed (non-contiguous) operand.
  REQUIRE((x.transpose(0, 1) > 2.5).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 1, 0, 1, 1});
}

// torch's method forms: x.eq(row), x.ne(5.0), x.lt(2) (an int literal is the scalar), ...
TEST_CASE("compare: eq ne lt le gt ge as Tensor methods, against a tensor or a scalar", "[index]") {
  const Tensor x = Tensor({{1.0, 5.0, 3.0}, {4.0, 2.0, 6.0}});
  const Tensor row = Tensor({2, 5, 3});
  auto flags = [](const Tensor& t) {
    REQUIRE(t.dtype() == DType::boolean);
    return t.to_vector<int64_t>();
  };
  using V = std::vector<int64_t>;
  CHECK(flags(x.eq(row)) == V{0, 1, 1, 0, 0, 0});
  CHECK(flags(x.ne(row)) == V{1, 0, 0, 1, 1, 1});
  CHECK(flags(x.lt(row)) == V{1, 0, 0, 0, 1, 0});
  CHECK(flags(x.le(row)) == V{1, 1, 1, 0, 1, 0});
  CHECK(flags(x.gt(row)) == V{0, 0, 0, 1, 0, 1});
  CHECK(flags(x.ge(row)) == V{0, 1, 1, 1, 0, 1});
  CHECK(flags(x.eq(5.0)) == V{0, 1, 0, 0, 0, 0});
  CHECK(flags(x.ne(0.0)) == V{1, 1, 1, 1, 1, 1});
  CHECK(flags(x.lt(2)) == V{1, 0, 0, 0, 0, 0});
  CHECK(flags(x.le(3.0)) == V{1, 0, 1, 0, 1, 0});
  CHECK(flags(x.gt(4.0)) == V{0, 1, 0, 0, 0, 1});
  CHECK(flags(x.ge(4)) == V{0, 1, 0, 1, 0, 1});
  // As the free functions and the operators: float32 against a double scalar rounds it first.
  CHECK(flags(Tensor({0.1, 0.2}).eq(0.2)) == V{0, 1});
}

// torch 1.13: c = torch.tensor([True, False, True]); x = torch.tensor([1.5, -2.0, 3.25])
// torch.where(c, x, 0.1) -> float32 [1.5, 0.10000000149011612, 3.25]; torch.where(c, 0.1, x) ->
// [0.10000000149011612, -2.0, 0.10000000149011612]; torch.where(c, x.double(), 0.1) -> float64
// [1.5, 0.1, 3.25]; the gradient of torch.where(c, x, 0.0).sum() is c as 1s and 0s.
TEST_CASE("where with a scalar: the scalar takes the tensor's dtype, as torch.where(c, x, 0.0)", "[index]") {
  const Tensor c = Tensor({true, false, true});
  const Tensor x = Tensor({1.5, -2.0, 3.25});
  CHECK(where(c, x, 0.1).dtype() == DType::f32);
  CHECK(where(c, x, 0.1).to_vector<float>() == std::vector<float>{1.5f, 0.1f, 3.25f});
  CHECK(where(c, 0.1, x).to_vector<float>() == std::vector<float>{0.1f, -2.0f, 0.1f});
  CHECK(where(c, x.to(DType::f64), 0.1).to_vector<double>() == std::vector<double>{1.5, 0.1, 3.25});
  CHECK(where(c, x, 0).to_vector<float>() == std::vector<float>{1.5f, 0.0f, 3.25f});  // an int literal is the scalar
  // Broadcasting: a (2, 1) condition against a (3) tensor.
  require_values(where(Tensor({{true}, {false}}), Tensor({1.0, 2.0, 3.0}), -1.0), {2, 3}, {1, 2, 3, -1, -1, -1}, 0);
  Tensor xl = x.detach().requires_grad_();
  where(c, xl, 0.0).sum().backward();
  require_values(xl.grad(), {3}, {1, 0, 1}, 0);
  CHECK_THROWS_WITH(where(c, Tensor({1, 2, 3}), 0.0),
                    Catch::Contains("where: a scalar takes the tensor's dtype, which must be float32 or float64, got int64"));
  // float64 gradchecks: a transposed input, on either side, and an input used twice.
  const Tensor cond = Tensor({{true, false, true}, {false, false, true}});
  const Tensor t = randn64({3, 2}, 31).transpose(0, 1).detach().requires_grad_();  // (2, 3), strided
  require_gradcheck([&](const std::vector<Tensor>& in) { return where(cond, in[0], 0.5); }, {t});
  require_gradcheck([&](const std::vector<Tensor>& in) { return where(cond, -0.5, in[0]); }, {t});
  require_gradcheck([&](const std::vector<Tensor>& in) { return where(cond, in[0], 0.0) * where(cond, 2.0, in[0]); }, {t});
}

// A float32 tensor against a double scalar compares with the scalar rounded to float32, as torch
// does (torch 1.13: x = torch.tensor([0.1, 0.2, 0.3]); x > 0.1 -> [False, True, True];
// x == 0.3 -> [False, False, True]; x <= 0.3 -> all True; x.masked_fill(x == 0.2, -1.) ->
// [0.1, -1, 0.3]). Compared with the double 0.1, the float 0.1f (0.10000000149...) is above it.
TEST_CASE("compare: a scalar is rounded to a float tensor's dtype first, as torch", "[index]") {
  const Tensor x = Tensor({0.1, 0.2, 0.3});
  REQUIRE(x.dtype() == DType::f32);
  CHECK((x > 0.1).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 1});
  CHECK((x == 0.3).to_vector<int64_t>() == std::vector<int64_t>{0, 0, 1});
  CHECK((x <= 0.3).to_vector<int64_t>() == std::vector<int64_t>{1, 1, 1});
  CHECK((x != 0.2).to_vector<int64_t>() == std::vector<int64_t>{1, 0, 1});
  CHECK((x >= 0.2).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 1});
  CHECK((x < 0.2).to_vector<int64_t>() == std::vector<int64_t>{1, 0, 0});
  const auto filled = x.masked_fill(x == 0.2, -1.0).to_vector<float>();
  CHECK(filled == std::vector<float>{0.1f, -1.0f, 0.3f});
  // float64 keeps the double; integer tensors compare exactly.
  const Tensor d = Tensor::from_vector(std::vector<double>{0.1, 0.2}, {2});
  CHECK((d == 0.1).to_vector<int64_t>() == std::vector<int64_t>{1, 0});
  CHECK((Tensor({1, 2, 3}) > 2.5).to_vector<int64_t>() == std::vector<int64_t>{0, 0, 1});
}

TEST_CASE("copies and prints keep int64 values past 2^53, and NaN prints as nan", "[index]") {
  const int64_t big = (int64_t{1} << 53) + 1;  // not a double
  const Tensor a = Tensor::from_vector(std::vector<int64_t>{big, 1, 2, 3}, {2, 2});
  CHECK(a.transpose(0, 1).contiguous().to_vector<int64_t>() == std::vector<int64_t>{big, 2, 1, 3});
  CHECK(a.transpose(0, 1).reshape({4}).to_vector<int64_t>() == std::vector<int64_t>{big, 2, 1, 3});
  CHECK(printed(a) == "tensor([[9007199254740993,                1],\n        [               2,                3]])");
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK(printed(Tensor::from_vector({-nan, 1.5}, {2})) == "tensor([   nan, 1.5000])");
  // torch 1.13: print(torch.tensor([1., float('nan'), -float('inf')])) -> tensor([1., nan, -inf])
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(printed(Tensor::from_vector({1.0, nan, -inf}, {3})) == "tensor([1., nan, -inf])");
}

TEST_CASE("where and masked_fill: values and float64 gradients", "[index]") {
  // x.masked_fill(torch.tensor([True, False, True]), -1.) -> [[-1, 5, -1], [-1, 2, -1]]
  const Tensor x = Tensor({{1.0, 5.0, 3.0}, {4.0, 2.0, 6.0}});
  require_values(x.masked_fill(Tensor({true, false, true}), -1.0), {2, 3}, {-1, 5, -1, -1, 2, -1});
  require_values(where(x > 2.5, x, Tensor::scalar(0.0)), {2, 3}, {0, 5, 3, 4, 0, 6});
  REQUIRE_THROWS_WITH(masked_fill(Tensor::zeros({3}), Tensor({{true}, {false}}), 1.0),
                      Catch::Contains("does not broadcast"));
  // Gradients: broadcasting a row and a scalar, a transposed input, an input used twice, masks of
  // several dtypes.
  const Tensor cond = Tensor({{true, false, true}, {false, false, true}, {true, true, false}, {false, true, true}});
  const Tensor a = randn64({4, 3}, 1), b = randn64({3}, 2), c = randn64({3, 4}, 3);
  require_gradcheck([&](const std::vector<Tensor>& in) { return where(cond, in[0], in[1]); }, {a, b});
  require_gradcheck([&](const std::vector<Tensor>& in) { return where(cond, in[0].transpose(0, 1), in[0].transpose(0, 1) * 2.0); }, {c});
  require_gradcheck([&](const std::vector<Tensor>& in) { return where(in[0] > 0.0, in[0], in[0] * in[0]); }, {a});
  const Tensor int_mask = Tensor({1, 0, 2});
  require_gradcheck([&](const std::vector<Tensor>& in) { return masked_fill(in[0], int_mask, -3.0) * in[0]; }, {a});
  require_gradcheck([&](const std::vector<Tensor>& in) { return masked_fill(in[0].transpose(0, 1), cond, 0.5); }, {c});
}

// torch 1.13: labels.masked_fill(pad, -100) builds cross_entropy's ignored targets; heed refused
// an integer tensor there, naming `where`.
//   torch.tensor([[3, 1, 4], [1, 5, 9]]).masked_fill(torch.tensor([False, True, True]), -100)
//   -> [[3, -100, -100], [1, -100, -100]], int64; int32 stays int32; torch.tensor([1, 2]).masked_fill(m, 2.7)
//   truncates to 2; torch.tensor([True, False]).masked_fill(torch.tensor([False, True]), 1) -> [True, True];
//   torch.tensor([2**53 + 1, 5]).masked_fill(torch.tensor([False, True]), -100) -> [9007199254740993, -100]
TEST_CASE("masked_fill of integer and bool tensors, as torch's labels.masked_fill(pad, -100)", "[index]") {
  const Tensor labels = Tensor({{3, 1, 4}, {1, 5, 9}});
  const Tensor pad = Tensor({false, true, true});
  Tensor filled = labels.masked_fill(pad, -100);
  REQUIRE(filled.dtype() == DType::i64);
  REQUIRE(filled.to_vector<int64_t>() == std::vector<int64_t>{3, -100, -100, 1, -100, -100});
  // A transposed input and an integer mask (non-zero = true), and int32 kept.
  const Tensor t32 = labels.to(DType::i32).transpose(0, 1);  // (3, 2)
  Tensor f32 = masked_fill(t32, Tensor({{1}, {0}, {2}}), 7.0);
  REQUIRE(f32.dtype() == DType::i32);
  REQUIRE(f32.to_vector<int32_t>() == std::vector<int32_t>{7, 7, 1, 5, 7, 7});
  REQUIRE(masked_fill(Tensor({1, 2}), Tensor({true, false}), 2.7).to_vector<int64_t>() == std::vector<int64_t>{2, 2});
  REQUIRE(masked_fill(Tensor({true, false}), Tensor({false, true}), 1.0).to_vector<int64_t>() ==
          std::vector<int64_t>{1, 1});
  REQUIRE(masked_fill(Tensor({true, false}), Tensor({false, true}), 1.0).dtype() == DType::boolean);
  const Tensor big = Tensor::from_vector(std::vector<int64_t>{(int64_t{1} << 53) + 1, 5}, {2});
  REQUIRE(masked_fill(big, Tensor({false, true}), -100).to_vector<int64_t>() ==
          std::vector<int64_t>{(int64_t{1} << 53) + 1, -100});
  // The porter's use: the filled labels are ignored by cross_entropy, as torch's.
  const Tensor logits = randn64({2, 3, 3}, 4);  // (N, C, T)
  const Tensor targets = Tensor({{2, 1, 0}, {1, 0, 2}}).masked_fill(pad, -100);
  const Tensor a = cross_entropy(logits, targets, {.ignore_index = -100});
  const Tensor b = cross_entropy(slice(logits, 2, 0, 1).reshape({2, 3}), Tensor({2, 1}));
  require_values(a, {}, {b.item()}, 1e-15);
  REQUIRE_THROWS_WITH(masked_fill(Tensor({1, 2}), Tensor({true, false}), NAN), Catch::Contains("cannot be converted to int64"));
}

TEST_CASE("tril, triu, argmax, select, gather, stack, cat", "[index]") {
  const Tensor m = Tensor::arange(0, 12).reshape({3, 4});
  // torch.tril(torch.arange(12).reshape(3,4), -1), torch.triu(..., 1)
  REQUIRE(tril(m, -1).to_vector<int64_t>() == std::vector<int64_t>{0, 0, 0, 0, 4, 0, 0, 0, 8, 9, 0, 0});
  REQUIRE(triu(m, 1).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 0, 0, 6, 7, 0, 0, 0, 11});
  REQUIRE(tril(Tensor::ones({3, 3}, DType::boolean)).to_vector<int64_t>() ==
          std::vector<int64_t>{1, 0, 0, 1, 1, 0, 1, 1, 1});
  const Tensor x = Tensor({{1.0, 5.0, 3.0}, {4.0, 2.0, 6.0}});
  REQUIRE(argmax(x).item() == 5);
  REQUIRE(argmax(x).dtype() == DType::i64);
  REQUIRE(x.argmax(1).to_vector<int64_t>() == std::vector<int64_t>{1, 2});
  REQUIRE(x.argmax(0).to_vector<int64_t>() == std::vector<int64_t>{1, 0, 1});
  REQUIRE(x.argmax(-1, true).shape() == Shape{2, 1});
  REQUIRE(Tensor({3.0, 7.0, 7.0}).argmax().item() == 1);  // the first maximum
  // x[i], negative indices, and an error naming the range.
  require_values(x[1], {3}, {4, 2, 6});
  require_values(x[-2], {3}, {1, 5, 3});
  REQUIRE(x[1][2].item() == 6);
  REQUIRE_THROWS_WITH(x[2], Catch::Contains("index 2 out of range"));
  // torch.gather(x, 1, torch.tensor([[2, 0], [1, 1]])) -> [[3, 1], [2, 2]]
  require_values(gather(x, 1, Tensor({{2, 0}, {1, 1}})), {2, 2}, {3, 1, 2, 2});
  REQUIRE_THROWS_WITH(gather(x, 1, Tensor({{3, 0}, {1, 1}})), Catch::Contains("index 3 out of range"));
  require_values(stack({x[0], x[1]}, 1), {3, 2}, {1, 4, 5, 2, 3, 6});
  require_values(cat({x, x[0].unsqueeze(0)}), {3, 3}, {1, 5, 3, 4, 2, 6, 1, 5, 3});
  require_values(x.max(), {}, {6});
  require_values(x.min(), {}, {1});
  require_values(x.min(1), {2}, {1, 2});
  require_values(abs(Tensor({-2.0, 0.0, 3.0})), {3}, {2, 0, 3});

  const Tensor a = randn64({3, 4}, 4), t = randn64({4, 3}, 5);
  const Tensor idx = Tensor({{0, 2, 2}, {1, 0, 3}});
  require_gradcheck([&](const std::vector<Tensor>& in) { return gather(in[0], 1, idx); }, {a});  // repeats: scatter-add
  require_gradcheck([&](const std::vector<Tensor>& in) { return gather(in[0].transpose(0, 1), 1, idx) * in[0].max(); }, {t});
  require_gradcheck([&](const std::vector<Tensor>& in) { return tril(in[0]) + triu(in[0], 1) * 3.0; }, {a});
  require_gradcheck([&](const std::vector<Tensor>& in) { return stack({in[0], in[1].transpose(0, 1)}, 1) * in[0][1][2]; }, {a, t});
  require_gradcheck([&](const std::vector<Tensor>& in) { return abs(in[0]) + in[0].min() + in[0].min(0); }, {a});
}

TEST_CASE("matmul: PyTorch's rules for 1-D operands", "[index][matmul]") {
  // m @ a, a @ m.T, a @ a  ->  tensor([7., 2.]) tensor([7., 2.]) tensor(14.)
  const Tensor a = Tensor({1.0, 2.0, 3.0}), m = Tensor({{1.0, 0.0, 2.0}, {0.0, 1.0, 0.0}});
  require_values(m.matmul(a), {2}, {7, 2});
  require_values(a.matmul(m.transpose(0, 1)), {2}, {7, 2});
  require_values(matmul(a, a), {}, {14});
  const Tensor v = randn64({3}, 6), w = randn64({3, 4}, 7), b = randn64({2, 4, 3}, 8);
  require_gradcheck([&](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); }, {v, w});
  require_gradcheck([&](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); }, {b, v});
  require_gradcheck([&](const std::vector<Tensor>& in) { return matmul(in[0], in[0]); }, {v});
}

TEST_CASE("embedding and cross_entropy take tensors of ids", "[index]") {
  Generator gen(3);
  const Tensor weight = Tensor::randn({5, 4}, gen, 1.0, 0.0, DType::f64);
  const Tensor ids = Tensor({{4, 0}, {2, 2}});
  const Tensor e = embedding(weight, ids);
  REQUIRE(e.shape() == Shape{2, 2, 4});
  REQUIRE(e.to_vector<double>() == embedding(weight, std::vector<int32_t>{4, 0, 2, 2}, {2, 2}).to_vector<double>());
  REQUIRE_THROWS_WITH(embedding(weight, Tensor({1.0, 2.0})), Catch::Contains("ids must be int32 or int64"));
  REQUIRE_THROWS(embedding(weight, Tensor::from_vector(std::vector<int64_t>{int64_t{1} << 32}, {1})));
  const Tensor logits = randn64({3, 5}, 9);
  const Tensor targets = Tensor({1, 4, 0});
  REQUIRE(cross_entropy(logits, targets).item() ==
          Approx(cross_entropy(logits, std::vector<int32_t>{1, 4, 0}).item()).epsilon(1e-15));
}
