// matmul and linear: forward values against PyTorch, gradient checks through every operand layout
// (contiguous, transposed, sliced, copied, broadcast batch axes), in-place BLAS reads, errors.
#include <string>
#include <vector>

#include "core/parallel.h"
#include "support/helpers.h"

using namespace heed;
using heed::test::randn64;
using heed::test::require_gradcheck;
using heed::test::require_values;

namespace {

// Exact small values ((7i + s) mod 11 - 5) / 4, row-major; the PyTorch commands below build the same.
Tensor pattern(const Shape& shape, int s, DType dtype = DType::f64) {
  std::vector<double> v(numel_of(shape));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>((static_cast<int>(i) * 7 + s) % 11 - 5) * 0.25;
  return Tensor::from_vector(v, shape).to(dtype);
}

// A float64 leaf that is a view of a fresh random tensor: transposed (last two axes), so BLAS must
// read it through its transpose flag.
Tensor transposed64(Shape shape, uint64_t seed) {
  std::swap(shape[shape.size() - 1], shape[shape.size() - 2]);
  return transpose(randn64(shape, seed), -1, -2).detach().requires_grad_();
}

// The product by definition, one element at a time through at(), broadcasting batch axes.
std::vector<double> reference_matmul(const Tensor& a, const Tensor& b, const Shape& out) {
  const size_t nd = out.size();
  const int64_t m = out[nd - 2], n = out[nd - 1], k = a.shape().back();
  std::vector<double> r;
  std::vector<int64_t> idx(nd, 0);
  for (int64_t flat = 0; flat < numel_of(out); ++flat) {
    int64_t rem = flat;
    for (size_t d = nd; d-- > 0;) {
      idx[d] = rem % out[d];
      rem /= out[d];
    }
    auto index_into = [&](const Tensor& t, int64_t row, int64_t col) {
      std::vector<int64_t> ti(t.dim());
      const size_t lead = nd - t.dim();
      for (size_t d = 0; d + 2 < static_cast<size_t>(t.dim()); ++d) ti[d] = t.shape()[d] == 1 ? 0 : idx[lead + d];
      ti[t.dim() - 2] = row;
      ti[t.dim() - 1] = col;
      return ti;
    };
    double acc = 0;
    for (int64_t p = 0; p < k; ++p)
      acc += a.at(index_into(a, idx[nd - 2], p)) * b.at(index_into(b, p, idx[nd - 1]));
    r.push_back(acc);
    (void)m;
    (void)n;
  }
  return r;
}

std::vector<std::string> g_ops;
void remember_op(const char* op, const char* phase, double) {
  if (std::string(phase) == "forward") g_ops.push_back(op);
}
bool copied_during(const std::function<void()>& f) {
  g_ops.clear();
  set_op_timer(remember_op);
  f();
  set_op_timer(nullptr);
  for (const auto& op : g_ops)
    if (op == "clone") return true;
  return false;
}

}  // namespace

// ------------------------------------------------------------------------------------------
// forward values

TEST_CASE("matmul 2-D matches PyTorch in float32 and float64", "[matmul]") {
  // /usr/bin/python3 -c "import torch
  // def p(shape, s):
  //     n = 1
  //     for d in shape: n *= d
  //     return torch.tensor([((i*7+s)%11-5)*0.25 for i in range(n)], dtype=torch.float64).reshape(shape)
  // print((p((2,3),0) @ p((3,4),1)).flatten().tolist())"
  const std::vector<double> expected{1.875, -1.6875, 0.9375, 2.1875, -0.5625, 0.0625, 0.0, -0.75};
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor y = matmul(pattern({2, 3}, 0, dt), pattern({3, 4}, 1, dt));
    REQUIRE(y.dtype() == dt);
    require_values(y, {2, 4}, expected, 1e-6);
  }
}

TEST_CASE("matmul broadcasts batch axes as PyTorch does", "[matmul]") {
  // same p(shape, s) as above; print((p((2,1,2,3),0) @ p((3,3,2),1)).flatten().tolist())
  const std::vector<double> expected{0.875, -1.3125, -1.6875, 1.0,    -1.9375, 0.6875, 1.375,  1.3125,
                                     -1.3125, -0.0625, 1.0,   -1.125, -1.5,    1.25,   -1.3125, 1.5,
                                     1.25,   1.25,    1.125,  1.1875, 1.25,    -1.5,   1.5,    -1.875};
  require_values(matmul(pattern({2, 1, 2, 3}, 0), pattern({3, 3, 2}, 1)), {2, 3, 2, 2}, expected, 1e-12);
}

TEST_CASE("batched matmul matches the definition for every broadcast pattern", "[matmul]") {
  struct Case {
    Shape a, b, out;
  };
  const std::vector<Case> cases{
      {{2, 1, 3, 4}, {5, 4, 6}, {2, 5, 3, 6}},  // both sides broadcast
      {{3, 4}, {2, 4, 5}, {2, 3, 5}},           // a broadcast over b's batch
      {{2, 3, 4}, {4, 5}, {2, 3, 5}},           // b broadcast: folded into one gemm
      {{2, 3, 4}, {2, 4, 5}, {2, 3, 5}},        // plain batch
      {{1, 3, 4}, {2, 1, 4, 5}, {2, 1, 3, 5}},  // size-1 batch axes on both sides
  };
  for (const auto& c : cases) {
    INFO(to_string(c.a) << " @ " << to_string(c.b));
    Tensor a = randn64(c.a, 1), b = randn64(c.b, 2);
    require_values(matmul(a, b), c.out, reference_matmul(a, b, c.out), 1e-12);
  }
}

TEST_CASE("linear matches PyTorch's F.linear with and without bias", "[matmul]") {
  // same p(shape, s) as above;
  // print(torch.nn.functional.linear(p((2,2,3),0), p((4,3),1), p((4,),2)).flatten().tolist())
  // print(torch.nn.functional.linear(p((2,3),0), p((4,3),1)).flatten().tolist())
  for (DType dt : {DType::f32, DType::f64}) {
    require_values(linear(pattern({2, 2, 3}, 0, dt), pattern({4, 3}, 1, dt), pattern({4}, 2, dt)), {2, 2, 4},
                   {1.0, 3.0625, -1.0625, -1.75, -1.625, -0.0625, 2.1875, 1.0, -1.5, 0.25, 2.0, 1.0, -1.375,
                    0.5625, 1.8125, 1.0},
                   1e-6);
    require_values(linear(pattern({2, 3}, 0, dt), pattern({4, 3}, 1, dt)), {2, 4},
                   {1.75, 2.0625, -1.0625, -0.75, -0.875, -1.0625, 2.1875, 2.0}, 1e-6);
  }
}

TEST_CASE("linear equals matmul with the transposed weight for views of every layout", "[matmul]") {
  Tensor w = randn64({5, 4}, 3), b = randn64({5}, 4);
  const std::vector<Tensor> xs{
      randn64({3, 4}, 5),                                  // contiguous 2-D
      randn64({2, 3, 4}, 6),                               // 3-D, rows folded
      slice(randn64({2, 3, 7}, 7), 2, 1, 5),               // sliced columns: rows with a leading dim
      transposed64({3, 4}, 8),                             // a transposed matrix
      permute(randn64({3, 4, 2}, 9), {2, 0, 1}),           // rows not evenly spaced: copied
      randn64({4}, 10),                                    // a single vector
  };
  for (const Tensor& x : xs) {
    INFO("x " << to_string(x.shape()) << " strides " << to_string(x.strides()));
    Tensor y = linear(x, w, b);
    Tensor ref = add(matmul(reshape(x, {-1, 4}), transpose(w, 0, 1)), b);
    Shape out_shape(x.shape().begin(), x.shape().end() - 1);
    out_shape.push_back(5);
    require_values(y, out_shape, ref.to_vector<double>(), 1e-12);
  }
  // A transposed (column-major) weight is read in place too.
  Tensor wt = transposed64({5, 4}, 11);
  Tensor x = randn64({3, 4}, 12);
  require_values(linear(x, wt), {3, 5}, matmul(x, transpose(wt, 0, 1)).to_vector<double>(), 1e-12);
}

TEST_CASE("float32 matmul of transposed views equals the product of contiguous copies", "[matmul]") {
  Generator gen(42);
  // Big enough for OpenBLAS's blocked kernels, odd sizes so edge tiles are exercised.
  Tensor a0 = Tensor::randn({53, 37}, gen), b0 = Tensor::randn({29, 53}, gen);
  Tensor at = transpose(a0, 0, 1), bt = transpose(b0, 0, 1);  // (37, 53) and (53, 29), strides (1, ld)
  REQUIRE_FALSE(at.is_contiguous());
  Tensor y;
  REQUIRE_FALSE(copied_during([&] { y = matmul(at, bt); }));
  Tensor ref = matmul(at.contiguous(), bt.contiguous());
  require_values(y, {37, 29}, ref.to_vector<double>(), 1e-5);

  // Batched with a broadcast operand and a sliced one (leading dim > cols): still no copy.
  Tensor a3 = transpose(Tensor::randn({4, 53, 37}, gen), 1, 2);  // (4, 37, 53)
  Tensor b3 = slice(Tensor::randn({53, 40}, gen), 1, 3, 32);      // (53, 29), ld 40
  REQUIRE_FALSE(copied_during([&] { y = matmul(a3, b3); }));
  ref = matmul(a3.contiguous(), b3.contiguous());
  require_values(y, {4, 37, 29}, ref.to_vector<double>(), 1e-5);

  // The detector itself: last two axes with no unit stride must be copied.
  Tensor odd = permute(Tensor::randn({4, 3, 2}, gen), {2, 0, 1});  // (2, 4, 3), strides (1, 6, 2)
  REQUIRE(copied_during([&] { y = matmul(odd, Tensor::randn({3, 5}, gen)); }));
}

TEST_CASE("float32 one-row products (a KV-cached step) equal the float64 product, whatever the thread count",
          "[matmul]") {
  Generator gen(7);
  // k = 300: whole 64-element blocks, then whole 16-lane batches, then a scalar tail; n = 2000 rows
  // of W: several chunks of the streaming grain, so the pool splits them.
  const Tensor w = Tensor::randn({2000, 300}, gen), bias = Tensor::randn({2000}, gen);
  const Tensor wide = Tensor::randn({2000, 310}, gen);
  const Tensor w_rows = slice(wide, 1, 5, 305);  // rows 310 apart: a leading dimension > k
  const Tensor x = Tensor::randn({1, 300}, gen);
  // (1, 300) with strides (1, 3): a column of a row-major matrix, which BLAS reads transposed.
  const Tensor x_column = slice(transpose(Tensor::randn({300, 3}, gen), 0, 1), 0, 1, 2);
  for (const Tensor& weight : {w, w_rows})
    for (const Tensor& row : {x, x_column}) {
      INFO("weight strides " << to_string(weight.strides()) << ", row strides " << to_string(row.strides()));
      const Tensor ref = linear(row.to(DType::f64), weight.to(DType::f64), bias.to(DType::f64));
      const Tensor y2 = linear(row, weight, bias);
      const int before = num_threads();
      set_num_threads(1);
      const Tensor y1 = linear(row, weight, bias);
      set_num_threads(before);
      REQUIRE(y1.to_vector<float>() == y2.to_vector<float>());  // the split does not change the bits
      require_values(y2, {1, 2000}, ref.to_vector<double>(), 1e-4);
    }
}

// ------------------------------------------------------------------------------------------
// gradients

TEST_CASE("matmul gradcheck: 2-D and batched", "[matmul]") {
  auto mm = [](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); };
  require_gradcheck(mm, {randn64({3, 4}, 1), randn64({4, 5}, 2)});
  require_gradcheck(mm, {randn64({2, 3, 4}, 3), randn64({2, 4, 5}, 4)});
  require_gradcheck(mm, {randn64({2, 3, 4}, 5), randn64({4, 5}, 6)});   // b broadcast (folded gemms)
  // Only one side requires grad: the other's gradient is skipped, the needed one still right.
  Tensor fixed = randn64({4, 5}, 7).detach();
  require_gradcheck(mm, {randn64({2, 3, 4}, 8), fixed});
}

TEST_CASE("matmul gradcheck: broadcast batch axes on both sides", "[matmul]") {
  auto mm = [](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); };
  require_gradcheck(mm, {randn64({2, 1, 3, 4}, 1), randn64({5, 4, 6}, 2)});
  require_gradcheck(mm, {randn64({3, 4}, 3), randn64({2, 4, 5}, 4)});
  require_gradcheck(mm, {randn64({1, 3, 4}, 5), randn64({2, 1, 4, 2}, 6)});
}

TEST_CASE("matmul gradcheck: transposed views on either side", "[matmul]") {
  auto mm = [](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); };
  require_gradcheck(mm, {transposed64({3, 4}, 1), randn64({4, 5}, 2)});
  require_gradcheck(mm, {randn64({3, 4}, 3), transposed64({4, 5}, 4)});
  require_gradcheck(mm, {transposed64({3, 4}, 5), transposed64({4, 5}, 6)});
  require_gradcheck(mm, {transposed64({2, 3, 4}, 7), randn64({4, 5}, 8)});
  require_gradcheck(mm, {randn64({2, 3, 4}, 9), transposed64({2, 4, 5}, 10)});
  // q @ k^T as attention does it: the transpose taken inside the function.
  require_gradcheck([](const std::vector<Tensor>& in) { return matmul(in[0], transpose(in[1], -1, -2)); },
                    {randn64({2, 3, 4}, 11), randn64({2, 5, 4}, 12)});
}

TEST_CASE("matmul gradcheck: sliced and copied operands", "[matmul]") {
  auto mm = [](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); };
  Tensor a = slice(randn64({3, 7}, 1), 1, 2, 6).detach().requires_grad_();     // (3, 4), ld 7
  Tensor b = slice(randn64({6, 5}, 2), 0, 1, 5).detach().requires_grad_();     // (4, 5), offset 5
  require_gradcheck(mm, {a, b});
  Tensor ab = slice(randn64({3, 3, 4}, 3), 0, 1, 3).detach().requires_grad_();  // batch slice
  require_gradcheck(mm, {ab, b});
  Tensor odd = permute(randn64({4, 3, 2}, 4), {2, 0, 1}).detach().requires_grad_();  // copied
  require_gradcheck(mm, {odd, randn64({3, 5}, 5)});
  // Slicing inside the function: the slice's own backward sees matmul's gradient.
  require_gradcheck([](const std::vector<Tensor>& in) { return matmul(slice(in[0], -1, 1, -1), in[1]); },
                    {randn64({2, 3, 6}, 6), randn64({4, 2}, 7)});
}

TEST_CASE("matmul gradcheck: a tensor used on both sides", "[matmul]") {
  require_gradcheck([](const std::vector<Tensor>& in) { return matmul(in[0], in[0]); }, {randn64({3, 3}, 1)});
  require_gradcheck([](const std::vector<Tensor>& in) { return matmul(in[0], transpose(in[0], -1, -2)); },
                    {randn64({2, 3, 4}, 2)});
  // d(x x)/dx by hand: with upstream G, dx = G x^T + x^T G.
  Tensor x = Tensor::from_vector(std::vector<double>{1, 2, 3, 4}, {2, 2}).requires_grad_();
  matmul(x, x).backward(Tensor::ones({2, 2}, DType::f64));
  require_values(x.grad(), {2, 2}, {3 + 4, 7 + 4, 3 + 6, 7 + 6}, 1e-12);
}

TEST_CASE("linear gradcheck: with and without bias, 2-D and 3-D x, views", "[matmul]") {
  auto lin = [](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); };
  auto lin_nb = [](const std::vector<Tensor>& in) { return linear(in[0], in[1]); };
  require_gradcheck(lin, {randn64({3, 4}, 1), randn64({5, 4}, 2), randn64({5}, 3)});
  require_gradcheck(lin_nb, {randn64({3, 4}, 4), randn64({5, 4}, 5)});
  require_gradcheck(lin, {randn64({2, 3, 4}, 6), randn64({5, 4}, 7), randn64({5}, 8)});
  require_gradcheck(lin_nb, {randn64({2, 3, 4}, 9), randn64({5, 4}, 10)});
  require_gradcheck(lin, {randn64({4}, 11), randn64({2, 4}, 12), randn64({2}, 13)});
  // Views: transposed x and w, a column slice of x, a strided bias, a permuted (copied) x.
  require_gradcheck(lin, {transposed64({3, 4}, 14), transposed64({5, 4}, 15),
                          slice(randn64({10}, 16), 0, 2, 7).detach().requires_grad_()});
  require_gradcheck(lin, {slice(randn64({2, 3, 7}, 17), 2, 1, 5).detach().requires_grad_(), randn64({5, 4}, 18),
                          randn64({5}, 19)});
  require_gradcheck(lin_nb, {permute(randn64({3, 4, 2}, 20), {2, 0, 1}).detach().requires_grad_(),  // (2, 3, 4)
                             randn64({5, 4}, 21)});
  // Rows of one weight, as fused q/k/v projections take them.
  require_gradcheck([](const std::vector<Tensor>& in) { return linear(in[0], slice(in[1], 0, 2, 5), slice(in[2], 0, 2, 5)); },
                    {randn64({2, 3, 4}, 22), randn64({6, 4}, 23), randn64({6}, 24)});
}

TEST_CASE("add_linear equals r + linear and passes gradcheck, residual views and reuse included", "[matmul]") {
  // Values: r + x w^T + b against the two-op form, float32 and float64, with and without bias.
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor x = pattern({2, 3, 4}, 0, dt), w = pattern({5, 4}, 1, dt), b = pattern({5}, 2, dt), r = pattern({2, 3, 5}, 3, dt);
    require_values(add_linear(r, x, w, b), {2, 3, 5}, add(r, linear(x, w, b)).to_vector<double>(), 1e-6);
    require_values(add_linear(r, x, w), {2, 3, 5}, add(r, linear(x, w)).to_vector<double>(), 1e-6);
  }
  auto fused = [](const std::vector<Tensor>& in) { return add_linear(in[0], in[1], in[2], in[3]); };
  auto fused_nb = [](const std::vector<Tensor>& in) { return add_linear(in[0], in[1], in[2]); };
  require_gradcheck(fused, {randn64({3, 5}, 1), randn64({3, 4}, 2), randn64({5, 4}, 3), randn64({5}, 4)});
  require_gradcheck(fused_nb, {randn64({2, 3, 5}, 5), randn64({2, 3, 4}, 6), randn64({5, 4}, 7)});
  // A transposed (non-contiguous) residual, and a strided bias.
  require_gradcheck(fused, {transposed64({3, 5}, 8), randn64({3, 4}, 9), randn64({5, 4}, 10),
                            slice(randn64({12}, 11), 0, 2, 7).detach().requires_grad_()});
  // One tensor as both the residual and the input (a square layer: y = x + x w^T).
  require_gradcheck([](const std::vector<Tensor>& in) { return add_linear(in[0], in[0], in[1]); },
                    {randn64({3, 4}, 12), randn64({4, 4}, 13)});
}

TEST_CASE("add_linear rejects a residual of the wrong shape or dtype, naming it", "[matmul]") {
  Tensor x = Tensor::zeros({2, 3}), w = Tensor::zeros({4, 3});
  REQUIRE_THROWS_WITH(add_linear(Tensor::zeros({2, 5}), x, w),
                      Catch::Contains("add_linear") && Catch::Contains("residual") && Catch::Contains("[2, 5]") &&
                          Catch::Contains("[2, 4]"));
  REQUIRE_THROWS_WITH(add_linear(Tensor::zeros({2, 4}, DType::f64), x, w),
                      Catch::Contains("add_linear") && Catch::Contains("float64"));
  REQUIRE_THROWS_WITH(add_linear(Tensor(), x, w), Catch::Contains("add_linear") && Catch::Contains("undefined"));
  REQUIRE_THROWS_WITH(add_linear(Tensor::zeros({2, 4}), x, Tensor::zeros({4, 5})),
                      Catch::Contains("add_linear") && Catch::Contains("inner dims"));
}

TEST_CASE("linear skips the gradients nobody needs", "[matmul]") {
  Tensor x = randn64({3, 4}, 1).detach(), w = randn64({5, 4}, 2), b = randn64({5}, 3).detach();
  Tensor y = linear(x, w, b);
  y.backward(Tensor::ones({3, 5}, DType::f64));
  REQUIRE(w.grad().defined());
  REQUIRE_FALSE(x.grad().defined());
  // dw = g^T x with g all ones: every row of dw is the column sum of x.
  std::vector<double> colsum(4, 0.0);
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t c = 0; c < 4; ++c) colsum[c] += x.at({r, c});
  std::vector<double> expected;
  for (int i = 0; i < 5; ++i) expected.insert(expected.end(), colsum.begin(), colsum.end());
  require_values(w.grad(), {5, 4}, expected, 1e-12);
}

TEST_CASE("matmul and linear accept empty dims", "[matmul]") {
  // k = 0: the product is all zeros, and so are the gradients.
  Tensor a = Tensor::zeros({3, 0}, DType::f64).requires_grad_(), b = Tensor::zeros({0, 2}, DType::f64).requires_grad_();
  Tensor y = matmul(a, b);
  require_values(y, {3, 2}, std::vector<double>(6, 0.0));
  y.backward(Tensor::ones({3, 2}, DType::f64));
  REQUIRE(a.grad().shape() == Shape{3, 0});
  // An empty batch: the broadcast operand's gradient is zero, not uninitialised.
  Tensor c = randn64({1, 2, 3}, 1), d = randn64({0, 3, 2}, 2);
  Tensor z = matmul(c, d);
  REQUIRE(z.shape() == Shape{0, 2, 2});
  z.backward(Tensor::zeros({0, 2, 2}, DType::f64));
  require_values(c.grad(), {1, 2, 3}, std::vector<double>(6, 0.0));
  // linear with no rows and with bias: the weight gradient is zero, the output empty.
  Tensor w = randn64({2, 3}, 3), bias = randn64({2}, 4);
  Tensor e = linear(Tensor::zeros({0, 3}, DType::f64), w, bias);
  REQUIRE(e.shape() == Shape{0, 2});
  e.backward(Tensor::zeros({0, 2}, DType::f64));
  require_values(w.grad(), {2, 3}, std::vector<double>(6, 0.0));
  require_values(bias.grad(), {2}, {0.0, 0.0});
}

// ------------------------------------------------------------------------------------------
// errors and threads

TEST_CASE("matmul errors name the op and both shapes", "[matmul]") {
  Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({4, 5});
  REQUIRE_THROWS_WITH(matmul(a, b), Catch::Contains("matmul") && Catch::Contains("inner dims") &&
                                        Catch::Contains("[2, 3]") && Catch::Contains("[4, 5]"));
  // 1-D operands follow torch.matmul now (tests/core/test_index.cpp); a 0-d one is still refused.
  REQUIRE_THROWS_WITH(matmul(Tensor::scalar(3.0), Tensor::zeros({3, 2})),
                      Catch::Contains("matmul") && Catch::Contains("at least 1 dim") && Catch::Contains("[]") &&
                          Catch::Contains("[3, 2]"));
  REQUIRE_THROWS_WITH(matmul(a, Tensor::zeros({3, 2}, DType::f64)),
                      Catch::Contains("matmul") && Catch::Contains("dtypes differ") && Catch::Contains("[2, 3]") &&
                          Catch::Contains("[3, 2]") && Catch::Contains("float64"));
  REQUIRE_THROWS_WITH(matmul(Tensor::zeros({2, 2, 3}), Tensor::zeros({3, 3, 4})),
                      Catch::Contains("matmul") && Catch::Contains("broadcast") && Catch::Contains("[2, 2, 3]") &&
                          Catch::Contains("[3, 3, 4]"));
}

TEST_CASE("linear errors name the op and the shapes", "[matmul]") {
  Tensor x = Tensor::zeros({2, 3}), w = Tensor::zeros({4, 3});
  REQUIRE_THROWS_WITH(linear(x, Tensor::zeros({4, 5})), Catch::Contains("linear") && Catch::Contains("inner dims") &&
                                                            Catch::Contains("[2, 3]") && Catch::Contains("[4, 5]"));
  REQUIRE_THROWS_WITH(linear(x, Tensor::zeros({3})), Catch::Contains("linear") && Catch::Contains("[3]"));
  REQUIRE_THROWS_WITH(linear(x, w, Tensor::zeros({3})),
                      Catch::Contains("linear") && Catch::Contains("bias [3]") && Catch::Contains("[4, 3]"));
  REQUIRE_THROWS_WITH(linear(x, Tensor::zeros({4, 3}, DType::f64)),
                      Catch::Contains("linear") && Catch::Contains("dtypes differ") && Catch::Contains("[2, 3]") &&
                          Catch::Contains("[4, 3]"));
}

TEST_CASE("set_num_threads drives OpenBLAS and is remembered", "[matmul]") {
  const int before = num_threads();
  REQUIRE(before >= 1);
  set_num_threads(2);
  REQUIRE(num_threads() == 2);
  // Results do not depend on the thread count beyond rounding.
  Generator gen(5);
  Tensor a = Tensor::randn({64, 96}, gen, 1.0, 0.0, DType::f64), b = Tensor::randn({96, 80}, gen, 1.0, 0.0, DType::f64);
  Tensor two = matmul(a, b);
  set_num_threads(1);
  REQUIRE(num_threads() == 1);
  require_values(matmul(a, b), {64, 80}, two.to_vector<double>(), 1e-12);
  REQUIRE_THROWS_WITH(set_num_threads(0), Catch::Contains("set_num_threads") && Catch::Contains("0"));
  set_num_threads(before);
}
