// sort, argsort, topk, multinomial, scatter, scatter_add, index_add. Values from /usr/bin/python3
// (torch 1.13), each with the call that gave it.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "core/heed.h"
#include "support/helpers.h"

using namespace heed;
using heed::test::randn64;
using heed::test::require_gradcheck;
using heed::test::require_values;

namespace {
const double kNaN = std::numeric_limits<double>::quiet_NaN(), kInf = std::numeric_limits<double>::infinity();

std::vector<int64_t> ints(const Tensor& t) { return t.to_vector<int64_t>(); }

// Element-wise equality that counts NaN equal to NaN (require_values' Approx does not).
void require_same(const Tensor& t, const Shape& shape, const std::vector<double>& expected) {
  REQUIRE(t.shape() == shape);
  const std::vector<double> v = t.to_vector<double>();
  REQUIRE(v.size() == expected.size());
  for (size_t i = 0; i < v.size(); ++i) {
    INFO("element " << i << ": " << v[i] << " vs " << expected[i]);
    REQUIRE((v[i] == expected[i] || (std::isnan(v[i]) && std::isnan(expected[i]))));
  }
}
}  // namespace

// x = torch.tensor([[3., nan, 1., 2., 1.], [0.5, -inf, 2., inf, -0.0]])
// torch.sort(x, dim=d, descending=s, stable=True) for d in (1, 0), s in (False, True)
TEST_CASE("sort and argsort order as torch.sort with stable=True: NaN largest, ties by index", "[sort]") {
  const Tensor x = Tensor::from_vector({3., kNaN, 1., 2., 1., 0.5, -kInf, 2., kInf, -0.0}, {2, 5});
  auto [v, i] = sort(x, 1);
  require_same(v, {2, 5}, {1, 1, 2, 3, kNaN, -kInf, -0.0, 0.5, 2, kInf});
  REQUIRE(i.dtype() == DType::i64);
  REQUIRE(ints(i) == std::vector<int64_t>{2, 4, 3, 0, 1, 1, 4, 0, 2, 3});
  auto [vd, id] = x.sort(1, true);
  require_same(vd, {2, 5}, {kNaN, 3, 2, 1, 1, kInf, 2, 0.5, -0.0, -kInf});
  REQUIRE(ints(id) == std::vector<int64_t>{1, 0, 3, 2, 4, 3, 2, 0, 4, 1});
  const ValuesIndices by0 = sort(x, 0);
  require_same(by0.values, {2, 5}, {0.5, -kInf, 1, 2, -0.0, 3, kNaN, 2, kInf, 1});
  REQUIRE(ints(by0.indices) == std::vector<int64_t>{1, 1, 0, 0, 1, 0, 0, 1, 1, 0});
  REQUIRE(ints(sort(x, -2, true).indices) == std::vector<int64_t>{0, 0, 1, 1, 0, 1, 1, 0, 0, 1});
  // torch.argsort(x, 1, descending=True) -> [[1, 0, 3, 2, 4], [3, 2, 0, 4, 1]]
  REQUIRE(ints(x.argsort(1, true)) == std::vector<int64_t>{1, 0, 3, 2, 4, 3, 2, 0, 4, 1});
  REQUIRE(ints(argsort(x)) == ints(i));
  // A transposed view orders its own axis: sort(x.T, 0) is sort(x, 1) transposed.
  REQUIRE(ints(sort(x.transpose(0, 1), 0).indices.transpose(0, 1)) == ints(i));

  // Ties among more elements than an insertion sort handles (torch's default stable=False scatters
  // them): torch.sort(torch.tensor([1., 2., 1., 2., 1., 2., 0., 2., nan] * 4), stable=True)
  std::vector<double> many;
  for (int r = 0; r < 4; ++r) many.insert(many.end(), {1, 2, 1, 2, 1, 2, 0, 2, kNaN});
  const Tensor m = Tensor::from_vector(many, {36});
  REQUIRE(ints(argsort(m)) == std::vector<int64_t>{6,  15, 24, 33, 0,  2,  4,  9,  11, 13, 18, 20,
                                                   22, 27, 29, 31, 1,  3,  5,  7,  10, 12, 14, 16,
                                                   19, 21, 23, 25, 28, 30, 32, 34, 8,  17, 26, 35});
  REQUIRE(ints(argsort(m, 0, true)) == std::vector<int64_t>{8,  17, 26, 35, 1,  3,  5,  7,  10, 12, 14, 16,
                                                            19, 21, 23, 25, 28, 30, 32, 34, 0,  2,  4,  9,
                                                            11, 13, 18, 20, 22, 27, 29, 31, 6,  15, 24, 33});

  // torch.sort(torch.tensor([[3, 1, 2, 1], [0, -5, 7, 7]]), descending=True, stable=True)
  auto [vi, ii] = sort(Tensor({{3, 1, 2, 1}, {0, -5, 7, 7}}), -1, true);
  REQUIRE(vi.dtype() == DType::i64);
  REQUIRE(ints(vi) == std::vector<int64_t>{3, 2, 1, 1, 7, 7, 0, -5});
  REQUIRE(ints(ii) == std::vector<int64_t>{0, 2, 1, 3, 2, 3, 0, 1});
  // torch.sort(torch.tensor([True, False, True])) -> [False, True, True], [1, 0, 2]
  REQUIRE(ints(Tensor({true, false, true}).argsort()) == std::vector<int64_t>{1, 0, 2});

  // torch.sort(torch.tensor(5.)) -> (tensor(5.), tensor(0)); torch.sort(torch.empty(0))
  auto [v0, i0] = Tensor::scalar(5.0).sort();
  REQUIRE(v0.shape() == Shape{});
  REQUIRE(v0.item() == 5.0);
  REQUIRE(i0.shape() == Shape{});
  REQUIRE(i0.item() == 0);
  REQUIRE(sort(Tensor::zeros({0})).indices.shape() == Shape{0});
  REQUIRE(sort(Tensor::zeros({3, 0}), 0).values.shape() == Shape{3, 0});
  REQUIRE(argsort(Tensor::zeros({0, 4})).shape() == Shape{0, 4});

  REQUIRE_THROWS_WITH(sort(x, 2), "sort: axis 2 out of range for shape [2, 5]");
  REQUIRE_THROWS_WITH(argsort(x, -3), "argsort: axis -3 out of range for shape [2, 5]");
  REQUIRE_THROWS_WITH(sort(Tensor::scalar(1.0), 1), "sort: axis 1 out of range for shape []");
}

// t = torch.tensor([[1., 3., 3., 2., 3., 1.], [4., 0., 5., 5., 0., 4.]])
TEST_CASE("topk: values as torch.topk, and the lowest indices on ties", "[sort]") {
  const Tensor t = Tensor({{1.0, 3.0, 3.0, 2.0, 3.0, 1.0}, {4.0, 0.0, 5.0, 5.0, 0.0, 4.0}});
  // torch.topk(t, 4) -> values [[3, 3, 3, 2], [5, 5, 4, 4]], indices [[2, 4, 1, 3], [2, 3, 5, 0]];
  // largest=False -> [[1, 1, 2, 3], [0, 0, 4, 4]], [[5, 0, 3, 2], [1, 4, 0, 5]]. torch's picks among
  // ties are unspecified (not even index order); heed's are the lowest indices, in index order.
  auto [v, i] = topk(t, 4);
  require_values(v, {2, 4}, {3, 3, 3, 2, 5, 5, 4, 4}, 0);
  REQUIRE(ints(i) == std::vector<int64_t>{1, 2, 4, 3, 2, 3, 0, 5});
  auto [vs, is] = t.topk(4, -1, false);
  require_values(vs, {2, 4}, {1, 1, 2, 3, 0, 0, 4, 4}, 0);
  REQUIRE(ints(is) == std::vector<int64_t>{0, 5, 3, 1, 1, 4, 0, 5});
  // torch.topk(t, 2) -> [[3, 3], [5, 5]], [[2, 4], [2, 3]]; heed: [[1, 2], [2, 3]]
  REQUIRE(ints(topk(t, 2).indices) == std::vector<int64_t>{1, 2, 2, 3});
  // torch.topk(t, 1, dim=0) -> [[4, 3, 5, 5, 3, 4]], [[1, 0, 1, 1, 0, 1]] (no ties)
  auto [v0, i0] = topk(t, 1, 0);
  require_values(v0, {1, 6}, {4, 3, 5, 5, 3, 4}, 0);
  REQUIRE(ints(i0) == std::vector<int64_t>{1, 0, 1, 1, 0, 1});
  // torch.topk(torch.tensor([1., 3., 3., 2., 3., 1., nan, 5.]), 3) -> [nan, 5, 3], [6, 7, 4]: NaN
  // is the largest (heed's 3 is the first one, index 1); largest=False -> [1, 1, 2], [0, 5, 3]
  const Tensor withnan = Tensor::from_vector({1, 3, 3, 2, 3, 1, kNaN, 5}, {8});
  require_same(topk(withnan, 3).values, {3}, {kNaN, 5, 3});
  REQUIRE(ints(topk(withnan, 3).indices) == std::vector<int64_t>{6, 7, 1});
  REQUIRE(ints(topk(withnan, 3, 0, false, false).indices) == std::vector<int64_t>{0, 5, 3});
  // The whole row: sort's order (torch.topk(t, 6)'s values).
  REQUIRE(ints(topk(t, 6).indices) == ints(argsort(t, -1, true)));
  // torch.topk(torch.tensor([1., 2.]), 0) -> empty; torch.topk(torch.tensor(5.), 1) -> (5., 0)
  REQUIRE(topk(Tensor({1.0, 2.0}), 0).values.shape() == Shape{0});
  REQUIRE(topk(Tensor::scalar(5.0), 1).indices.item() == 0);
  REQUIRE(topk(Tensor::zeros({0, 3}), 2).values.shape() == Shape{0, 2});
  // torch: "selected index k out of range"
  REQUIRE_THROWS_WITH(topk(t, 7), "topk: k = 7 out of range for axis 1 of size 6 in [2, 6]");
  REQUIRE_THROWS_WITH(topk(t, -1, 0), "topk: k = -1 out of range for axis 0 of size 2 in [2, 6]");
  REQUIRE_THROWS_WITH(topk(t, 1, 2), "topk: axis 2 out of range for shape [2, 6]");
  // k = 0 of a 0-d tensor: its results would be 0-d and empty (reshape refused, naming itself)
  REQUIRE_THROWS_WITH(topk(Tensor::scalar(1.0), 0), "topk: k = 0 for a 0-d tensor, whose 0-d result holds one element");
  REQUIRE(topk(Tensor::scalar(1.5), 1).values.item() == 1.5);
}

TEST_CASE("sort and topk gradients: the values' gradient goes back to where they came from", "[sort]") {
  // randn64: no ties, where the gradient would be ambiguous.
  const Tensor a = randn64({4, 5}, 31);
  require_gradcheck([](const std::vector<Tensor>& in) { return sort(in[0], 1).values; }, {a});
  require_gradcheck([](const std::vector<Tensor>& in) { return sort(in[0], 0, true).values; }, {a});
  // Non-contiguous inputs: a transposed and a sliced view.
  require_gradcheck([](const std::vector<Tensor>& in) { return sort(in[0].transpose(0, 1), 1, true).values; }, {a});
  require_gradcheck([](const std::vector<Tensor>& in) { return topk(slice(in[0], 1, 1, 4), 2, 1).values; }, {a});
  require_gradcheck([](const std::vector<Tensor>& in) { return topk(in[0].transpose(0, 1), 3, 1, false).values; },
                    {a});
  // An input used twice: the k largest of each row times the row's first k entries.
  require_gradcheck([](const std::vector<Tensor>& in) { return topk(in[0], 3).values * slice(in[0], 1, 0, 3); },
                    {a});
  require_gradcheck([](const std::vector<Tensor>& in) { return sort(in[0]).values * in[0]; }, {a});

  // By hand: sort([2, 0, 1]) = [0, 1, 2]; upstream [10, 20, 30] goes back to [30, 10, 20].
  Tensor x = Tensor({2.0, 0.0, 1.0}).requires_grad_();
  sort(x).values.backward(Tensor({10.0, 20.0, 30.0}));
  require_values(x.grad(), {3}, {30, 10, 20}, 0);
  REQUIRE_FALSE(argsort(x).requires_grad());
}

// x = torch.arange(12.).reshape(3, 4); idx = torch.tensor([[2, 0, 1, 2], [0, 1, 2, 0]])
// src = torch.tensor([[10., 20., 30., 40., 50.], [60., 70., 80., 90., 100.]])
TEST_CASE("scatter, scatter_add, index_add: values as torch's out-of-place forms", "[scatter]") {
  const Tensor x = Tensor::arange(12, DType::f32).reshape({3, 4});
  const Tensor idx = Tensor({{2, 0, 1, 2}, {0, 1, 2, 0}});
  const Tensor src = Tensor({{10.0, 20.0, 30.0, 40.0, 50.0}, {60.0, 70.0, 80.0, 90.0, 100.0}});
  // torch.scatter(x, 0, idx, src); torch.scatter_add(x, 0, idx, src)
  require_values(scatter(x, 0, idx, src), {3, 4}, {60, 20, 2, 90, 4, 70, 30, 7, 10, 9, 80, 40}, 0);
  require_values(x.scatter_add(0, idx, src), {3, 4}, {60, 21, 2, 93, 4, 75, 36, 7, 18, 9, 90, 51}, 0);
  // i1 = torch.tensor([[3, 0, 1], [1, 2, 2]]): torch.scatter(x[:2], 1, i1, src) (position (1, 2)
  // written twice: torch 1.13's CPU result holds the later write, 80, as heed's rule says) and
  // torch.scatter_add(x[:2], 1, i1, src)
  const Tensor i1 = Tensor({{3, 0, 1}, {1, 2, 2}});
  require_values(slice(x, 0, 0, 2).scatter(1, i1, src), {2, 4}, {20, 30, 2, 10, 4, 60, 80, 7}, 0);
  require_values(scatter_add(slice(x, 0, 0, 2), -1, i1, src), {2, 4}, {20, 31, 2, 13, 4, 65, 156, 7}, 0);
  // torch.index_add(x, 0, torch.tensor([2, 0, 2]), torch.tensor([[1., 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]]))
  const Tensor rows = Tensor({{1.0, 2.0, 3.0, 4.0}, {5.0, 6.0, 7.0, 8.0}, {9.0, 10.0, 11.0, 12.0}});
  require_values(index_add(x, 0, Tensor({2, 0, 2}), rows), {3, 4}, {5, 7, 9, 11, 4, 5, 6, 7, 18, 21, 24, 27}, 0);
  // torch.index_add(x, 1, torch.tensor([3, 3]), torch.ones(3, 2), alpha=2.)
  require_values(x.index_add(1, Tensor({3, 3}), Tensor::ones({3, 2}), 2.0), {3, 4},
                 {0, 1, 2, 7, 4, 5, 6, 11, 8, 9, 10, 15}, 0);
  // x itself is untouched (out of place), and integer tensors scatter too.
  require_values(x, {3, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, 0);
  const Tensor xi = Tensor({{1, 2}, {3, 4}});
  REQUIRE(ints(scatter_add(xi, 1, Tensor({{1}, {1}}), Tensor({{10}, {20}}))) == std::vector<int64_t>{1, 12, 3, 24});
  // An empty index writes nothing: torch.scatter(x, 0, torch.zeros(0, 4, dtype=torch.long), src) == x
  require_values(scatter(x, 0, Tensor::zeros({0, 4}, DType::i64), src), {3, 4}, x.to_vector<double>(), 0);
}

TEST_CASE("scatter, scatter_add, index_add gradients w.r.t. x and src", "[scatter]") {
  const Tensor x = randn64({3, 4}, 41), src = randn64({2, 5}, 42);
  const Tensor idx = Tensor({{2, 0, 1, 2}, {0, 1, 2, 0}});
  const Tensor dup = Tensor({{3, 0, 3}, {1, 1, 2}});  // repeats: (0, 3) and (1, 1) are written twice
  for (const Tensor& i : {idx, dup}) {
    const int64_t axis = i.same(idx) ? 0 : 1;
    const auto xs = [&](const Tensor& t) { return i.same(idx) ? t : slice(t, 0, 0, 2); };
    require_gradcheck([&](const std::vector<Tensor>& in) { return scatter(xs(in[0]), axis, i, in[1]); }, {x, src});
    require_gradcheck([&](const std::vector<Tensor>& in) { return scatter_add(xs(in[0]), axis, i, in[1]); }, {x, src});
  }
  // Non-contiguous x and src; x used twice (as the target and, transposed, as src).
  const Tensor sq = randn64({4, 4}, 43);
  const Tensor i4 = Tensor({{1, 1, 0, 3}, {2, 0, 0, 1}});
  require_gradcheck([&](const std::vector<Tensor>& in) { return scatter(in[0].transpose(0, 1), 0, i4, in[0]); }, {sq});
  require_gradcheck([&](const std::vector<Tensor>& in) { return scatter_add(in[0], 0, i4, in[0].transpose(0, 1)); },
                    {sq});
  require_gradcheck([&](const std::vector<Tensor>& in) { return in[0].index_add(1, Tensor({3, 0, 3}), in[1], 0.5); },
                    {sq, randn64({4, 3}, 44)});

  // By hand, last write wins: position 0 is written by src[0] then src[2]; src[2] alone gets its
  // gradient, x none there. torch gives src[0] the gradient too (every writer, winner or not).
  Tensor a = Tensor({1.0, 2.0, 3.0}).requires_grad_(), b = Tensor({10.0, 20.0, 30.0}).requires_grad_();
  Tensor out = scatter(a, 0, Tensor({0, 2, 0}), b);
  require_values(out, {3}, {30, 2, 20}, 0);
  out.backward(Tensor({1.0, 2.0, 3.0}));
  require_values(a.grad(), {3}, {0, 2, 0}, 0);
  require_values(b.grad(), {3}, {0, 3, 1}, 0);
}

TEST_CASE("scatter, scatter_add, index_add refuse bad input by name", "[scatter]") {
  const Tensor x = Tensor::arange(12, DType::f32).reshape({3, 4});
  const Tensor src = Tensor::ones({2, 5});
  const Tensor idx = Tensor({{2, 0, 1, 2}, {0, 1, 2, 0}});
  REQUIRE_THROWS_WITH(scatter(x, 0, Tensor({{3}}), src), "scatter: index 3 out of range for axis 0 of size 3");
  REQUIRE_THROWS_WITH(scatter_add(x, 2, idx, src), "scatter_add: axis 2 out of range for shape [3, 4]");
  REQUIRE_THROWS_WITH(scatter(x, 0, idx, src.to(DType::f64)), "scatter: src is float64 but input is float32");
  REQUIRE_THROWS_WITH(scatter(x, 0, idx.to(DType::f32), src), "scatter: index must be int32 or int64, got float32");
  REQUIRE_THROWS_WITH(scatter(x, 0, Tensor::zeros({4, 4}, DType::i64), src),
                      "scatter: index [4, 4] is larger than src [2, 5] on axis 0");
  REQUIRE_THROWS_WITH(scatter(x, 0, Tensor::zeros({2, 5}, DType::i64), src),
                      "scatter: index [2, 5] is larger than input [3, 4] on axis 1");
  REQUIRE_THROWS_WITH(scatter(x, 0, Tensor({0}), src), "scatter: index [1] must have as many dims as input [3, 4]");
  REQUIRE_THROWS_WITH(scatter(x, 0, idx, Tensor::ones({5})), "scatter: src [5] must have as many dims as input [3, 4]");
  REQUIRE_THROWS_WITH(scatter_add(Tensor({true}), 0, Tensor({0}), Tensor({true})), "scatter_add: cannot add bool tensors");
  REQUIRE_THROWS_WITH(index_add(x, 0, Tensor({3}), Tensor::ones({1, 4})), "index_add: index 3 out of range for axis 0 of size 3");
  REQUIRE_THROWS_WITH(index_add(x, 0, Tensor({0}), Tensor::ones({2, 4})),
                      "index_add: src [2, 4] must be input [3, 4] with axis 0 of index's size 1");
  REQUIRE_THROWS_WITH(index_add(x, 0, Tensor({{0}}), Tensor::ones({1, 4})), "index_add: index must be 1-D, got [1, 1]");
  REQUIRE_THROWS_WITH(index_add(Tensor({1, 2}), 0, Tensor({1}), Tensor({5}), 2.0),
                      "index_add: alpha = 2 needs a float src, got int64");
  REQUIRE(ints(index_add(Tensor({1, 2}), 0, Tensor({1}), Tensor({5}))) == std::vector<int64_t>{1, 7});
}

// Their C++ sum overflowed (undefined behaviour: the sanitized build stops at it).
TEST_CASE("scatter_add and index_add wrap an integer sum past its type's range, as torch's", "[scatter]") {
  // torch.scatter_add(torch.tensor([2147483647, 5], dtype=torch.int32), 0, torch.tensor([0, 0, 1]),
  //                   torch.tensor([1, 2147483647, -7], dtype=torch.int32))
  const Tensor x32 = Tensor({2147483647, 5}).to(DType::i32);
  const Tensor s32 = Tensor({1, 2147483647, -7}).to(DType::i32);
  const Tensor out32 = scatter_add(x32, 0, Tensor({0, 0, 1}), s32);
  REQUIRE(out32.dtype() == DType::i32);
  REQUIRE(ints(out32) == std::vector<int64_t>{-1, -2});
  // torch.index_add(torch.tensor([2**63 - 1, -2**63]), 0, torch.tensor([0, 1]), torch.tensor([2, -1]))
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max(), kMin = std::numeric_limits<int64_t>::min();
  const Tensor x64 = Tensor::from_vector(std::vector<int64_t>{kMax, kMin}, {2});
  REQUIRE(ints(index_add(x64, 0, Tensor({0, 1}), Tensor({2, -1}))) == std::vector<int64_t>{kMin + 1, kMax});
}

TEST_CASE("multinomial draws in proportion to the weights, within a chi-square bound", "[multinomial]") {
  // Unnormalised weights with a zero, as torch.multinomial takes them; 1e5 draws with replacement.
  const std::vector<double> w = {1, 2, 3, 0, 4};
  Generator gen(2026);
  const int64_t N = 100000;
  const Tensor draws = multinomial(Tensor::from_vector(w, {5}).to(DType::f32), N, true, &gen);
  REQUIRE(draws.shape() == Shape{N});
  REQUIRE(draws.dtype() == DType::i64);
  std::vector<double> count(5, 0);
  for (int64_t d : ints(draws)) ++count.at(d);
  REQUIRE(count[3] == 0);
  double chi2 = 0;
  for (int j : {0, 1, 2, 4}) chi2 += std::pow(count[j] - N * w[j] / 10, 2) / (N * w[j] / 10);
  INFO("chi-square " << chi2);
  REQUIRE(chi2 < 16.27);  // 3 degrees of freedom: exceeded with probability 0.001 by a right sampler

  // Without replacement, two draws a row: distinct, never the zero, and the ordered pair (i, j)
  // drawn with probability p_i p_j / (1 - p_i) (a draw, then another from what is left).
  const int64_t R = 50000;
  const Tensor rows = expand(Tensor::from_vector(w, {1, 5}), {R, 5});
  const Tensor pairs = rows.multinomial(2, false, &gen);
  REQUIRE(pairs.shape() == Shape{R, 2});
  std::vector<double> pc(25, 0);
  const std::vector<int64_t> p = ints(pairs);
  for (int64_t r = 0; r < R; ++r) {
    REQUIRE(p[2 * r] != p[2 * r + 1]);
    ++pc[p[2 * r] * 5 + p[2 * r + 1]];
  }
  double chi2_pairs = 0;
  for (int i : {0, 1, 2, 4})
    for (int j : {0, 1, 2, 4})
      if (i != j) {
        const double expected = R * (w[i] / 10) * (w[j] / 10) / (1 - w[i] / 10);
        chi2_pairs += std::pow(pc[i * 5 + j] - expected, 2) / expected;
      }
  INFO("chi-square of the pairs " << chi2_pairs);
  REQUIRE(chi2_pairs < 31.26);  // 11 degrees of freedom, p = 0.001

  // As many draws as non-zero weights: each row a permutation of them.
  const Tensor all = multinomial(Tensor({{0.0, 5.0, 1.0, 0.0, 2.0}, {1.0, 1.0, 1.0, 1.0, 1.0}}), 3, false, &gen);
  std::vector<int64_t> first = ints(slice(all, 0, 0, 1).reshape({3}));
  std::sort(first.begin(), first.end());
  REQUIRE(first == std::vector<int64_t>{1, 2, 4});
  std::vector<int64_t> second = ints(slice(all, 0, 1, 2).reshape({3}));
  std::sort(second.begin(), second.end());
  REQUIRE(std::unique(second.begin(), second.end()) == second.end());
  // One draw is the same with or without replacement, and the seed fixes the draws.
  Generator g1(5), g2(5);
  REQUIRE(ints(multinomial(Tensor({0.2, 0.5, 0.3}), 1, false, &g1)) ==
          ints(multinomial(Tensor({0.2, 0.5, 0.3}), 1, true, &g2)));
  REQUIRE(multinomial(Tensor::zeros({0, 3}), 2).shape() == Shape{0, 2});
}

// Each draw used to walk the row (and, without replacement, sum what was left afresh): 10^5 draws
// from 10^5 weights were 10^10 steps, 10^6 from 10^6 half an hour (torch: 0.1 s). Now a binary
// search a draw with replacement and the exponential race without: the same laws, checked above.
TEST_CASE("multinomial draws many samples from many weights: a permutation without replacement", "[multinomial]") {
  const int64_t n = 100000;
  std::vector<double> w(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) w[i] = 1.0 + static_cast<double>(i % 7);
  Generator gen(11);
  std::vector<int64_t> all = ints(multinomial(Tensor::from_vector(w, {n}), n, false, &gen));
  std::sort(all.begin(), all.end());
  for (int64_t i = 0; i < n; ++i) REQUIRE(all[i] == i);
  // With replacement, every draw a category of positive weight, the heaviest drawn most.
  w[3] = 0;
  const std::vector<int64_t> drawn = ints(multinomial(Tensor::from_vector(w, {n}), n, true, &gen));
  REQUIRE(std::count(drawn.begin(), drawn.end(), 3) == 0);
  REQUIRE(*std::min_element(drawn.begin(), drawn.end()) >= 0);
  REQUIRE(*std::max_element(drawn.begin(), drawn.end()) < n);
  int64_t heavy = 0;  // weight 7 is 7/28 of the total minus w[3]'s share: about a quarter of the draws
  for (int64_t d : drawn) heavy += d % 7 == 6;
  REQUIRE(heavy > n / 5);
  REQUIRE(heavy < n * 3 / 10);
}

// The race's key w / E overflowed to inf for weights near the largest double (1e308 / E for any E
// below 0.56), and inf keys tie, going to the lower index: the first draw of {1e307, 1e308, 1e307}
// took index 0 about 0.10 of the time where its weight is 1/12 = 0.083.
TEST_CASE("multinomial without replacement keeps its law for weights near the largest double", "[multinomial]") {
  const int64_t R = 40000;
  const Tensor rows = expand(Tensor::from_vector(std::vector<double>{1e307, 1e308, 1e307}, {1, 3}), {R, 3});
  Generator gen(17);
  const std::vector<int64_t> d = ints(rows.multinomial(2, false, &gen));
  double first0 = 0;
  for (int64_t r = 0; r < R; ++r) first0 += d[2 * r] == 0;
  INFO("share of rows drawing index 0 first: " << first0 / R);
  REQUIRE(std::fabs(first0 / R - 1.0 / 12) < 0.008);  // sd 0.0014: six of them
}

// torch.multinomial refuses the same (torch 1.13's messages): "cannot sample n_sample <= 0
// samples", "probability tensor contains either `inf`, `nan` or element < 0", "invalid multinomial
// distribution (sum of probabilities <= 0)", "prob_dist must be 1 or 2 dim", "multinomial only
// supports floating-point dtypes". torch.multinomial(torch.tensor([0., 1., 2.]), 3) returns
// [2, 1, 0], drawing the zero; heed refuses more draws than non-zero weights.
TEST_CASE("multinomial refuses bad probabilities and counts by name", "[multinomial]") {
  const Tensor p = Tensor({0.0, 1.0, 2.0});
  REQUIRE_THROWS_WITH(multinomial(p, 0), "multinomial: num_samples = 0 must be positive");
  REQUIRE_THROWS_WITH(multinomial(p, 3), "multinomial: cannot draw 3 samples without replacement from 2 non-zero probabilities");
  REQUIRE(multinomial(p, 4, true).shape() == Shape{4});
  REQUIRE_THROWS_WITH(multinomial(Tensor({{1.0, 1.0}, {0.0, 0.0}}), 1), "multinomial: every probability in row 1 is zero");
  REQUIRE_THROWS_WITH(multinomial(Tensor({0.5, -1.0}), 1),
                      "multinomial: probability -1 at index 1 is not finite and non-negative");
  REQUIRE_THROWS_WITH(multinomial(Tensor::from_vector({1.0, 1.0, kNaN}, {1, 3}), 1),
                      "multinomial: probability nan at row 0, index 2 is not finite and non-negative");
  REQUIRE_THROWS_WITH(multinomial(Tensor::from_vector({kInf, 1.0}, {2}), 1),
                      "multinomial: probability inf at index 0 is not finite and non-negative");
  REQUIRE_THROWS_WITH(multinomial(Tensor::from_vector({1e308, 1e308}, {2}, DType::f64), 1),
                      "multinomial: the probabilities sum past the largest double");
  REQUIRE_THROWS_WITH(multinomial(Tensor::ones({2, 2, 2}), 1), "multinomial: probs must be 1-D or 2-D, got [2, 2, 2]");
  REQUIRE_THROWS_WITH(multinomial(Tensor({1, 2}), 1), "multinomial: probs must be float32 or float64, got int64");
  REQUIRE_THROWS_WITH(multinomial(Tensor::zeros({2, 0}), 1), "multinomial: every probability in row 0 is zero");
}
