// Shape ops: values and strides against PyTorch, storage sharing of views, gradient checks (views,
// copies, a view used twice), and errors that name the op and the shape.
#include <vector>

#include "support/helpers.h"

using namespace heed;
using heed::test::randn64;
using heed::test::require_gradcheck;
using heed::test::require_values;

namespace {

// 0, 1, ..., n-1 in `shape` (float64), as torch.arange(n.).reshape(shape).
Tensor iota(const Shape& shape) { return reshape(Tensor::arange(numel_of(shape), DType::f64), shape); }

std::vector<double> range(double lo, double hi) {
  std::vector<double> v;
  for (double x = lo; x < hi; x += 1) v.push_back(x);
  return v;
}

}  // namespace

// The values and strides below were printed by
// /usr/bin/python3 -c "import torch; x = torch.arange(24.).reshape(2,3,4); ..." with the op named in
// each comment, printing .shape, .stride(), .storage_offset() and .flatten().tolist().

TEST_CASE("reshape and view: -1 inferred, views of contiguous data, copies otherwise", "[shape]") {
  Tensor flat = Tensor::arange(24, DType::f64);
  Tensor x = reshape(flat, {2, -1, 4});  // x.reshape(2,-1,4): (2,3,4), strides (12,4,1)
  REQUIRE(x.shape() == Shape{2, 3, 4});
  REQUIRE(x.strides() == Shape{12, 4, 1});
  REQUIRE(x.storage() == flat.storage());
  Tensor v = view(x, {6, -1});
  REQUIRE(v.shape() == Shape{6, 4});
  REQUIRE(v.storage() == flat.storage());
  require_values(v, {6, 4}, range(0, 24), 0);

  // x.transpose(0,2).reshape(-1,6): (4,6), strides (6,1), a copy
  Tensor t = transpose(x, 0, 2);
  Tensor r = reshape(t, {-1, 6});
  REQUIRE(r.strides() == Shape{6, 1});
  REQUIRE(r.storage() != x.storage());
  require_values(r, {4, 6}, {0, 12, 4, 16, 8, 20, 1, 13, 5, 17, 9, 21, 2, 14, 6, 18, 10, 22, 3, 15, 7, 19, 11, 23}, 0);
  // A scalar and back.
  Tensor one = reshape(Tensor::scalar(5.0, DType::f64), {1, 1});
  REQUIRE(one.shape() == Shape{1, 1});
  REQUIRE(reshape(one, {}).item() == 5.0);
}

// torch's rule (at::detail::computeStride): a non-contiguous input can be viewed when each group
// of axes the new shape merges or splits is evenly strided within itself.
TEST_CASE("view of a non-contiguous input: a view whenever the strides allow, as torch", "[shape]") {
  Tensor x = iota({2, 3, 4});
  // x.transpose(0,1): (3,2,4), strides (4,12,1); .view(3,2,2,2) splits the last axis: (4,12,2,1)
  Tensor t = transpose(x, 0, 1);
  Tensor v = view(t, {3, 2, 2, 2});
  REQUIRE(v.strides() == Shape{4, 12, 2, 1});
  REQUIRE(v.storage() == x.storage());
  REQUIRE(v.to_vector<double>() == t.to_vector<double>());
  REQUIRE(reshape(t, {3, 2, 2, 2}).storage() == x.storage());  // reshape views where view can
  // t.reshape(3,8) must merge axes of strides 12 and 1: a copy (t.view(3,8) raises in torch)
  REQUIRE_THROWS_WITH(view(t, {3, 8}), Catch::Contains("[3, 2, 4]") && Catch::Contains("[4, 12, 1]"));
  Tensor r = reshape(t, {3, 8});
  REQUIRE(r.storage() != x.storage());
  REQUIRE(r.to_vector<double>() == t.to_vector<double>());
  // torch.arange(24.).reshape(4,6)[:, 1:4]: (4,3), strides (6,1), offset 1; .view(2,2,3): (12,6,1), offset 1
  Tensor s = slice(iota({4, 6}), 1, 1, 4);
  Tensor sv = view(s, {2, 2, 3});
  REQUIRE(sv.strides() == Shape{12, 6, 1});
  REQUIRE(sv.offset() == 1);
  require_values(sv, {2, 2, 3}, {1, 2, 3, 7, 8, 9, 13, 14, 15, 19, 20, 21}, 0);
  // torch.arange(3.).reshape(3,1).expand(3,4).view(3,2,2): strides (1,0,0)
  Tensor e = view(expand(iota({3, 1}), {3, 4}), {3, 2, 2});
  REQUIRE(e.strides() == Shape{1, 0, 0});
  require_values(e, {3, 2, 2}, {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2}, 0);
}

// nanoGPT: q, k, v = self.c_attn(x).split(self.n_embd, dim=2); k = k.view(B, T, n_head, C // n_head).
// torch, with y = torch.arange(72.).reshape(2,3,12) for c_attn(x): k.view(2,3,2,2) has strides
// (36,12,2,1) and offset 4.
TEST_CASE("view of a split piece (nanoGPT's q, k, v) shares and writes through its input", "[shape]") {
  const int64_t B = 2, T = 3, C = 4, H = 2;
  Tensor x = Tensor::randn({B, T, C}), w = Tensor::randn({3 * C, C}), b = Tensor::randn({3 * C});
  Tensor qkv = linear(x, w, b);
  Tensor q = split(qkv, C, 2)[0].view({B, T, H, C / H});
  REQUIRE(q.strides() == Shape{T * 3 * C, 3 * C, C / H, 1});
  REQUIRE(q.storage() == qkv.storage());
  REQUIRE(q.to_vector<float>() == slice(qkv, 2, 0, C).to_vector<float>());

  Tensor y = iota({B, T, 3 * C});
  Tensor k = view(split(y, C, 2)[1], {B, T, H, C / H});
  REQUIRE(k.strides() == Shape{36, 12, 2, 1});
  REQUIRE(k.offset() == 4);
  const uint64_t v0 = y.version();
  k.fill_(-1.0);  // reaches y's columns 4..7 alone
  REQUIRE(y.version() == v0 + 1);
  const std::vector<double> got = y.to_vector<double>();
  for (int64_t i = 0; i < B * T * 3 * C; ++i) {
    INFO("element " << i);
    REQUIRE(got[i] == (i % 12 >= 4 && i % 12 < 8 ? -1.0 : static_cast<double>(i)));
  }
}

TEST_CASE("view refuses what no strides can describe, in one line naming shapes and strides", "[shape]") {
  Tensor t = transpose(iota({2, 3, 4}), 0, 2);  // torch: t.view(24) raises
  try {
    view(t, {24});
    FAIL("view of a transposed tensor as one axis did not throw");
  } catch (const std::exception& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find('\n') == std::string::npos);
    CHECK_THAT(what, Catch::StartsWith("view") && Catch::Contains("[4, 3, 2]") && Catch::Contains("[1, 4, 12]") &&
                         Catch::Contains("[24]") && Catch::Contains("use reshape"));
  }
}

TEST_CASE("transpose and permute are strided views", "[shape]") {
  Tensor x = iota({2, 3, 4});
  // x.transpose(0,2): (4,3,2), strides (1,4,12)
  Tensor t = transpose(x, 0, -1);
  REQUIRE(t.strides() == Shape{1, 4, 12});
  REQUIRE(t.storage() == x.storage());
  REQUIRE_FALSE(t.is_contiguous());
  require_values(t, {4, 3, 2}, {0, 12, 4, 16, 8, 20, 1, 13, 5, 17, 9, 21, 2, 14, 6, 18, 10, 22, 3, 15, 7, 19, 11, 23}, 0);
  // x.permute(1,2,0): (3,4,2), strides (4,1,12)
  Tensor p = permute(x, {1, 2, 0});
  REQUIRE(p.strides() == Shape{4, 1, 12});
  REQUIRE(p.storage() == x.storage());
  require_values(p, {3, 4, 2}, {0, 12, 1, 13, 2, 14, 3, 15, 4, 16, 5, 17, 6, 18, 7, 19, 8, 20, 9, 21, 10, 22, 11, 23}, 0);
  // Negative axes mean the same permutation.
  REQUIRE(permute(x, {-2, -1, 0}).strides() == p.strides());
}

TEST_CASE("slice takes negative bounds and keeps strides", "[shape]") {
  Tensor x = iota({2, 3, 4});
  // x[:, :, -3:-1]: (2,3,2), strides (12,4,1), offset 1
  Tensor s = slice(x, -1, -3, -1);
  REQUIRE(s.strides() == Shape{12, 4, 1});
  REQUIRE(s.offset() == 1);
  REQUIRE(s.storage() == x.storage());
  require_values(s, {2, 3, 2}, {1, 2, 5, 6, 9, 10, 13, 14, 17, 18, 21, 22}, 0);
  // x[:, -2:, :]: (2,2,4), offset 4
  Tensor s2 = slice(x, 1, -2, 3);
  REQUIRE(s2.shape() == Shape{2, 2, 4});
  REQUIRE(s2.offset() == 4);
  // An empty slice is allowed.
  REQUIRE(slice(x, 0, 1, 1).shape() == Shape{0, 3, 4});
}

TEST_CASE("concat joins three parts along a middle axis", "[shape]") {
  // torch.cat([arange(6).reshape(2,1,3), arange(6,18).reshape(2,2,3), arange(18,36).reshape(2,3,3)], 1)
  Tensor a = iota({2, 1, 3});
  Tensor b = add(iota({2, 2, 3}), 6.0);
  Tensor c = add(iota({2, 3, 3}), 18.0);
  Tensor cc = concat({a, b, c}, 1);
  REQUIRE(cc.strides() == Shape{18, 3, 1});
  require_values(cc, {2, 6, 3}, {0,  1,  2,  6,  7,  8,  9,  10, 11, 18, 19, 20, 21, 22, 23, 24, 25, 26,
                                  3,  4,  5,  12, 13, 14, 15, 16, 17, 27, 28, 29, 30, 31, 32, 33, 34, 35}, 0);
  // Non-contiguous parts are read through their strides.
  Tensor tc = concat({transpose(iota({3, 2}), 0, 1), iota({1, 3})}, 0);
  require_values(tc, {3, 3}, {0, 2, 4, 1, 3, 5, 0, 1, 2}, 0);
}

TEST_CASE("split makes views with a shorter last piece", "[shape]") {
  // torch.split(torch.arange(14.).reshape(2,7), 3, 1): (2,3) off 0, (2,3) off 3, (2,1) off 6, strides (7,1)
  Tensor y = iota({2, 7});
  auto parts = split(y, 3, 1);
  REQUIRE(parts.size() == 3);
  const std::vector<Shape> shapes{{2, 3}, {2, 3}, {2, 1}};
  const std::vector<int64_t> offsets{0, 3, 6};
  const std::vector<std::vector<double>> values{{0, 1, 2, 7, 8, 9}, {3, 4, 5, 10, 11, 12}, {6, 13}};
  for (size_t i = 0; i < 3; ++i) {
    REQUIRE(parts[i].strides() == Shape{7, 1});
    REQUIRE(parts[i].offset() == offsets[i]);
    REQUIRE(parts[i].storage() == y.storage());
    require_values(parts[i], shapes[i], values[i], 0);
  }
  REQUIRE(split(y, 7, -1).size() == 1);
}

// torch 1.13: [t.shape[0] for t in torch.chunk(torch.zeros(n), k)] for (n, k) = (5, 4), (6, 4),
// (0, 3), (2, 5) gives [2, 2, 1], [2, 2, 2], [0, 0, 0], [1, 1]; torch.split(torch.zeros(0), 2)
// gives one empty piece.
TEST_CASE("chunk makes torch's pieces, views of the input, and the gradient reaches every piece", "[shape]") {
  auto sizes = [](const std::vector<Tensor>& parts) {
    std::vector<int64_t> out;
    for (const Tensor& p : parts) out.push_back(p.size(0));
    return out;
  };
  CHECK(sizes(chunk(Tensor::zeros({5}), 4)) == std::vector<int64_t>{2, 2, 1});
  CHECK(sizes(chunk(Tensor::zeros({6}), 4)) == std::vector<int64_t>{2, 2, 2});
  CHECK(sizes(chunk(Tensor::zeros({0}), 3)) == std::vector<int64_t>{0, 0, 0});
  CHECK(sizes(chunk(Tensor::zeros({2}), 5)) == std::vector<int64_t>{1, 1});
  CHECK(sizes(split(Tensor::zeros({0}), 2)) == std::vector<int64_t>{0});
  Tensor y = iota({2, 7});
  const auto parts = chunk(y, 3, -1);  // pieces of 3, 3, 1 along the last axis
  REQUIRE(parts.size() == 3);
  CHECK(parts[2].storage() == y.storage());
  require_values(parts[1], {2, 3}, {3, 4, 5, 10, 11, 12}, 0);
  CHECK_THROWS_WITH(chunk(y, 0), Catch::Contains("chunk: the number of chunks must be positive"));
  CHECK(sizes(chunk(Tensor::zeros({5}), INT64_MAX)) == std::vector<int64_t>{1, 1, 1, 1, 1});  // no overflow
  // The gradient of a sum over pieces weighted differently reaches each piece's elements.
  require_gradcheck([](const std::vector<Tensor>& in) {
    const auto p = chunk(in[0], 2, 1);
    return p[0] * 2.0 + p[1] * p[1];  // (3, 2) each: the second used twice
  }, {randn64({3, 4}, 60)});
}

TEST_CASE("unsqueeze squeeze and expand are views", "[shape]") {
  Tensor x = iota({2, 3, 4});
  // x.unsqueeze(1): (2,1,3,4), strides (12,12,4,1); x.unsqueeze(-1): (2,3,4,1), strides (12,4,1,1)
  Tensor u = unsqueeze(x, 1);
  REQUIRE(u.shape() == Shape{2, 1, 3, 4});
  REQUIRE(u.strides() == Shape{12, 12, 4, 1});
  REQUIRE(u.storage() == x.storage());
  Tensor u2 = unsqueeze(x, -1);
  REQUIRE(u2.shape() == Shape{2, 3, 4, 1});
  REQUIRE(u2.strides() == Shape{12, 4, 1, 1});
  REQUIRE(squeeze(u, 1).strides() == x.strides());
  REQUIRE(squeeze(u2, -1).shape() == x.shape());
  // torch.arange(3.).reshape(3,1).squeeze(1): (3,), stride (1,)
  Tensor q = iota({3, 1});
  Tensor sq = squeeze(q, 1);
  REQUIRE(sq.shape() == Shape{3});
  REQUIRE(sq.strides() == Shape{1});
  // torch.arange(3.).reshape(3,1).expand(2,3,4): strides (0,1,0)
  Tensor e = expand(q, {2, 3, 4});
  REQUIRE(e.strides() == Shape{0, 1, 0});
  REQUIRE(e.storage() == q.storage());
  require_values(e, {2, 3, 4}, {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2}, 0);
}

// torch 1.13, x = torch.arange(24.).reshape(2, 3, 4):
// x.flatten().shape -> [24]; x.flatten(1) -> [2, 12]; x.flatten(0, 1) -> [6, 4]; x.flatten(-2, -1) ->
// [2, 12]; x.flatten(1, 1) -> [2, 3, 4]; torch.tensor(5.).flatten() -> [1];
// t = x.transpose(0, 1): t.flatten(1) is a copy (is_contiguous True, data_ptr != x's), first values
// [0, 1, 2, 3, 12, 13]; t.flatten(0, 1) is a copy too.
// torch.zeros(1, 3, 1, 2, 1).squeeze().shape -> [3, 2]; torch.zeros(1, 1).squeeze() -> []; torch.zeros(3).squeeze() -> [3]
TEST_CASE("flatten merges a range of axes through reshape: a view when it can be, as torch", "[shape]") {
  Tensor x = iota({2, 3, 4});
  REQUIRE(flatten(x).shape() == Shape{24});
  REQUIRE(x.flatten(1).shape() == Shape{2, 12});
  REQUIRE(x.flatten(0, 1).shape() == Shape{6, 4});
  REQUIRE(x.flatten(-2, -1).shape() == Shape{2, 12});
  REQUIRE(x.flatten(1, 1).same(x));  // nothing to merge: x itself, as torch returns self
  REQUIRE(flatten(Tensor::scalar(5.0)).shape() == Shape{1});
  REQUIRE(flatten(Tensor::scalar(5.0), -1, 0).shape() == Shape{1});
  for (const Tensor& v : {flatten(x), x.flatten(1), x.flatten(0, 1)}) REQUIRE(v.storage() == x.storage());
  require_values(x.flatten(0, 1), {6, 4}, range(0, 24), 0);
  // Non-contiguous: a transposed input merges what its strides allow, and copies otherwise.
  Tensor t = x.transpose(0, 1);  // (3, 2, 4), strides (4, 12, 1)
  REQUIRE(t.flatten(1).storage() != x.storage());
  require_values(t.flatten(1)[0], {8}, {0, 1, 2, 3, 12, 13, 14, 15}, 0);
  REQUIRE(t.flatten(0, 1).storage() != x.storage());
  Tensor s = slice(x, 2, 1, 3);  // (2, 3, 2): axes 0 and 1 still chain (stride 12 = 3 x 4)
  REQUIRE(s.flatten(0, 1).storage() == x.storage());
  REQUIRE(s.flatten(0, 1).strides() == Shape{4, 1});
  REQUIRE_THROWS_WITH(x.flatten(2, 1), Catch::Contains("flatten: start_dim 2 comes after end_dim 1 for shape [2, 3, 4]"));
  REQUIRE_THROWS_WITH(x.flatten(0, 3), Catch::Contains("flatten: axis 3 out of range for shape [2, 3, 4]"));
}

TEST_CASE("squeeze without an axis drops every size-1 axis, as torch's x.squeeze()", "[shape]") {
  Tensor x = iota({1, 3, 1, 2, 1});
  Tensor q = squeeze(x);
  REQUIRE(q.shape() == Shape{3, 2});
  REQUIRE(q.storage() == x.storage());
  REQUIRE(q.strides() == Shape{2, 1});
  REQUIRE(x.squeeze().shape() == Shape{3, 2});
  REQUIRE(iota({1, 1}).squeeze().shape() == Shape{});
  REQUIRE(iota({3}).squeeze().shape() == Shape{3});
  REQUIRE(Tensor::zeros({0, 1}).squeeze().shape() == Shape{0});
  // A strided input stays a view: x.transpose(1, 3) is (1, 2, 1, 3, 1).
  Tensor t = iota({1, 3, 1, 2, 1}).transpose(1, 3);
  REQUIRE(t.squeeze().strides() == Shape{1, 2});
  require_values(t.squeeze(), {2, 3}, {0, 2, 4, 1, 3, 5}, 0);
  // The one-axis form keeps refusing an axis whose size is not 1 (stricter than torch).
  REQUIRE_THROWS_WITH(squeeze(x, 1), Catch::Contains("squeeze: axis 1 of shape [1, 3, 1, 2, 1] is not 1"));
}

// ------------------------------------------------------------------------------------------
// gradients

TEST_CASE("shape ops gradcheck", "[shape]") {
  using In = const std::vector<Tensor>&;
  require_gradcheck([](In in) { return reshape(in[0], {3, -1}); }, {randn64({2, 3, 4}, 1)});
  require_gradcheck([](In in) { return view(in[0], {4, 6}); }, {randn64({2, 3, 4}, 2)});
  require_gradcheck([](In in) { return transpose(in[0], 0, 2); }, {randn64({2, 3, 4}, 3)});
  require_gradcheck([](In in) { return permute(in[0], {2, 0, 1}); }, {randn64({2, 3, 4}, 4)});
  // permute then reshape: the reshape must copy, and the gradient must flow back through both.
  require_gradcheck([](In in) { return reshape(permute(in[0], {1, 2, 0}), {-1, 4}); }, {randn64({2, 3, 4}, 5)});
  require_gradcheck([](In in) { return slice(in[0], 1, -2, 3); }, {randn64({2, 3, 4}, 6)});
  // A slice and an overlapping slice of the same tensor, combined: both gradients accumulate.
  require_gradcheck([](In in) { return mul(slice(in[0], -1, 0, 3), slice(in[0], -1, 1, 4)); }, {randn64({2, 4}, 7)});
  require_gradcheck([](In in) { return concat({in[0], in[1], in[2]}, 1); },
                    {randn64({2, 1, 3}, 8), randn64({2, 2, 3}, 9), randn64({2, 3, 3}, 10)});
  // split, with its pieces reordered so each piece's gradient lands somewhere different.
  require_gradcheck([](In in) {
    auto p = split(in[0], 3, 1);
    return concat({p[2], mul(p[0], 2.0), p[1]}, 1);
  }, {randn64({2, 7}, 11)});
  require_gradcheck([](In in) { return unsqueeze(in[0], 1); }, {randn64({2, 3}, 12)});
  require_gradcheck([](In in) { return squeeze(in[0], -2); }, {randn64({2, 1, 3}, 13)});
  require_gradcheck([](In in) { return expand(in[0], {2, 3, 4}); }, {randn64({3, 1}, 14)});
  require_gradcheck([](In in) { return flatten(in[0], 1); }, {randn64({2, 3, 4}, 18)});
  require_gradcheck([](In in) { return squeeze(in[0]); }, {randn64({1, 3, 1, 2}, 19)});
  // Views of non-contiguous inputs.
  Tensor t = transpose(randn64({4, 3}, 15), 0, 1).detach().requires_grad_();
  require_gradcheck([](In in) { return reshape(in[0], {-1}); }, {t});
  require_gradcheck([](In in) { return slice(unsqueeze(in[0], 0), 2, 1, 3); }, {t});
  require_gradcheck([](In in) { return in[0].flatten(); }, {t});  // a copy
  require_gradcheck([](In in) { return mul(in[0].flatten(), in[0].flatten()); }, {t});  // used twice
  require_gradcheck([](In in) { return unsqueeze(in[0], 1).squeeze() * in[0]; }, {t});
  Tensor u = transpose(randn64({1, 4, 1, 3}, 20), 1, 3).detach().requires_grad_();  // (1, 3, 1, 4), strided
  require_gradcheck([](In in) { return in[0].squeeze() + in[0].flatten(0, 2).squeeze(); }, {u});
  // view of non-contiguous data: a split piece; a transposed leaf, alone and used twice; two pieces
  // of one tensor, viewed as heads and multiplied (nanoGPT's q and k).
  require_gradcheck([](In in) { return view(split(in[0], 4, 2)[1], {2, 3, 2, 2}); }, {randn64({2, 3, 12}, 16)});
  require_gradcheck([](In in) { return view(in[0], {3, 2, 2}); }, {t});
  require_gradcheck([](In in) { return mul(view(in[0], {3, 2, 2}), view(in[0], {3, 2, 2})); }, {t});
  require_gradcheck([](In in) {
    auto p = split(in[0], 4, 2);
    return matmul(view(p[0], {2, 3, 2, 2}), transpose(view(p[1], {2, 3, 2, 2}), 2, 3));
  }, {randn64({2, 3, 12}, 17)});
}

TEST_CASE("a view's gradient reaches the base leaf", "[shape]") {
  Tensor x = Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3}).requires_grad_();
  // y = x[:, 1:] * x.T[1:, :].T = x[:, 1:]^2, seeded with ones: dx = 2 x on columns 1.., 0 elsewhere.
  Tensor y = mul(slice(x, 1, 1, 3), transpose(slice(transpose(x, 0, 1), 0, 1, 3), 0, 1));
  y.backward(Tensor::ones({2, 2}, DType::f64));
  require_values(x.grad(), {2, 3}, {0, 4, 6, 0, 10, 12}, 1e-12);
}

// ------------------------------------------------------------------------------------------
// errors

TEST_CASE("shape op errors name the op and the shape", "[shape]") {
  Tensor x = Tensor::zeros({2, 3, 4});
#define NAMES(op, shape) (Catch::Contains(op) && Catch::Contains(shape))
  // reshape's errors come from the view it delegates to; they name both shapes.
  REQUIRE_THROWS_WITH(reshape(x, {5, -1}), NAMES("[2, 3, 4]", "[5, -1]"));
  REQUIRE_THROWS_WITH(reshape(x, {-1, -1}), NAMES("more than one -1", "[-1, -1]"));
  REQUIRE_THROWS_WITH(view(x, {7}), NAMES("view", "[2, 3, 4]"));
  REQUIRE_THROWS_WITH(transpose(x, 0, 3), NAMES("transpose", "[2, 3, 4]"));
  REQUIRE_THROWS_WITH(permute(x, {0, 1}), NAMES("permute", "[2, 3, 4]"));
  REQUIRE_THROWS_WITH(permute(x, {0, 0, 1}), NAMES("permute", "repeated"));
  REQUIRE_THROWS_WITH(permute(x, {0, 1, -4}), NAMES("permute", "[2, 3, 4]"));
  REQUIRE_THROWS_WITH(slice(x, 3, 0, 1), NAMES("slice", "[2, 3, 4]"));
  REQUIRE_THROWS_WITH(slice(x, 1, 0, 4), NAMES("slice", "[2, 3, 4]"));
  REQUIRE_THROWS_WITH(slice(x, 1, 2, 1), NAMES("slice", "[2, 3, 4]"));
  REQUIRE_THROWS_WITH(concat({x, Tensor::zeros({2, 5, 3})}, 1), NAMES("concat", "[2, 5, 3]"));
  REQUIRE_THROWS_WITH(concat({x, Tensor::zeros({2, 3, 4}, DType::f64)}, 0), NAMES("concat", "float64"));
  REQUIRE_THROWS_WITH(concat({x}, -4), NAMES("concat", "[2, 3, 4]"));
  REQUIRE_THROWS_WITH(split(x, 0, 1), NAMES("split", "positive"));
  REQUIRE_THROWS_WITH(split(x, 2, 3), NAMES("split", "[2, 3, 4]"));
  REQUIRE_THROWS_WITH(unsqueeze(x, 4), NAMES("unsqueeze", "[2, 3, 4]"));
  REQUIRE_THROWS_WITH(squeeze(x, 1), NAMES("squeeze", "[2, 3, 4]"));
  REQUIRE_THROWS_WITH(squeeze(x, -4), NAMES("squeeze", "[2, 3, 4]"));
  REQUIRE_THROWS_WITH(expand(x, {2, 5, 4}), NAMES("expand", "[2, 3, 4]"));
  REQUIRE_THROWS_WITH(expand(x, {3, 4}), NAMES("expand", "[2, 3, 4]"));
  REQUIRE_THROWS_WITH(expand(x, {-1, 2, 3, 4}), NAMES("expand", "-1"));
  REQUIRE_THROWS_WITH(expand(Tensor::zeros({3, 1}), {3, -2}), NAMES("expand", "-2"));
}

// torch: x.expand(-1, 4) keeps x's size on that axis; a new leading axis cannot be -1.
TEST_CASE("expand: -1 keeps an axis's size", "[shape]") {
  Tensor x = Tensor::from_vector({1.0, 2.0, 3.0}, {3, 1});
  REQUIRE(expand(x, {-1, 4}).shape() == Shape{3, 4});
  REQUIRE(expand(x, {2, -1, 4}).shape() == Shape{2, 3, 4});
  REQUIRE(expand(x, {-1, -1}).shape() == Shape{3, 1});
  REQUIRE(expand(x, {-1, 4}).to_vector<float>() == expand(x, {3, 4}).to_vector<float>());
}

// reshape delegates to view; its errors must still name the op the user called.
TEST_CASE("reshape errors name reshape", "[shape]") {
  Tensor x = Tensor::zeros({2, 3, 4});
  REQUIRE_THROWS_WITH(reshape(x, {5, -1}), Catch::StartsWith("reshape"));
}
#undef NAMES
