// scaled_dot_product_attention: values against PyTorch's reference formula (torch 1.13 has no
// F.scaled_dot_product_attention, so the script computes softmax(q k^T * scale + mask) @ v):
//   n = lambda *s: (torch.arange(1, 1 + prod(s), dtype=torch.float64).reshape(s) * 0.37).sin()
//   q = n(1,2,3,4); k = n(1,2,5,4) * 1.3; v = n(1,2,5,2) * 0.7
//   m = torch.tensor([[1,0,1,1,0],[1,1,1,0,0],[0,1,1,1,1]], dtype=torch.bool)
// and float64 gradchecks of every path (fused, bool mask, float mask, causal, dropout).
#include <catch2/catch.hpp>
#include <cmath>

#include "core/heed.h"
#include "support/helpers.h"

using namespace heed;
using heed::test::randn64;
using heed::test::require_gradcheck;
using heed::test::require_values;

namespace {
Tensor wave(const Shape& s, double gain) {
  std::vector<double> v(numel_of(s));
  for (size_t i = 0; i < v.size(); ++i) v[i] = gain * std::sin(0.37 * static_cast<double>(i + 1));
  return Tensor::from_vector(v, s);
}
const Tensor kMask = Tensor({{true, false, true, true, false}, {true, true, true, false, false}, {false, true, true, true, true}});
}  // namespace

TEST_CASE("sdpa: values match PyTorch's formula", "[sdpa]") {
  const Tensor q = wave({1, 2, 3, 4}, 1.0), k = wave({1, 2, 5, 4}, 1.3), v = wave({1, 2, 5, 2}, 0.7);
  require_values(scaled_dot_product_attention(q, k, v), {1, 2, 3, 2},
                 {0.24875876739553984, 0.28210462408921705, 0.35034923113237937, 0.3863670043518318,
                  0.4999893845676918, 0.3550310877833871, -0.4419727684669027, -0.25394065809482647,
                  -0.04723980961459043, 0.04604908293493304, -0.03614711347672095, 0.014378050265202391},
                 1e-12);
  require_values(scaled_dot_product_attention(q, k, v, kMask), {1, 2, 3, 2},
                 {0.279825898498824, 0.45717211598100765, 0.475113224193272, 0.593902983185905, 0.5090760064017837,
                  0.3507255204471718, -0.4082259685788441, -0.19333097689348874, -0.5700190807444997,
                  -0.6200861427608308, 0.3225803557845152, 0.4854816490042878},
                 1e-12);
  // is_causal with L != S: top-left aligned (key j <= i), scale given.
  require_values(scaled_dot_product_attention(q, k, v, Tensor(), true, 0.0, 0.3), {1, 2, 3, 2},
                 {0.25313080237547336, 0.4720015381397015, 0.4521390265941586, 0.5918323661134596,
                  0.6051035048788365, 0.5733910959123605, -0.5604667475230724, -0.6741916514013214,
                  -0.5975478465009997, -0.6607591822178756, -0.5775334759337644, -0.6321213021605897},
                 1e-12);
  // A float mask of 0 / -inf equals the bool mask; the fused causal path equals the composed one.
  const Tensor additive = where(kMask, Tensor::scalar(0.0, DType::f64), Tensor::scalar(-INFINITY, DType::f64));
  require_values(scaled_dot_product_attention(q, k, v, additive), {1, 2, 3, 2},
                 scaled_dot_product_attention(q, k, v, kMask).to_vector<double>(), 1e-14);
  const Tensor kq = wave({2, 4, 4}, 0.9);
  const Tensor causal_mask = tril(Tensor::ones({4, 4}, DType::boolean));
  require_values(scaled_dot_product_attention(kq, kq, kq, Tensor(), true), {2, 4, 4},
                 scaled_dot_product_attention(kq, kq, kq, causal_mask).to_vector<double>(), 1e-12);
  REQUIRE_THROWS_WITH(scaled_dot_product_attention(q, k, v, kMask, true), Catch::Contains("not both"));
  REQUIRE_THROWS_WITH(scaled_dot_product_attention(q, v, v), Catch::Contains("do not fit"));
}

TEST_CASE("sdpa: float64 gradients of every path", "[sdpa]") {
  const Tensor q = randn64({2, 3, 4}, 1), k = randn64({2, 5, 4}, 2), v = randn64({2, 5, 3}, 3);
  const Tensor add_mask = randn64({3, 5}, 4);
  using In = std::vector<Tensor>;
  require_gradcheck([](const In& in) { return scaled_dot_product_attention(in[0], in[1], in[2]); }, {q, k, v});
  require_gradcheck([](const In& in) { return scaled_dot_product_attention(in[0], in[1], in[2], kMask); }, {q, k, v});
  require_gradcheck([](const In& in) { return scaled_dot_product_attention(in[0], in[1], in[2], in[3]); },
                    {q, k, v, add_mask});
  require_gradcheck([](const In& in) { return scaled_dot_product_attention(in[0], in[1], in[2], Tensor(), true, 0.0, 0.7); },
                    {q, k, v});
  // Fused causal (L == S), a tensor used three times, a transposed (non-contiguous) input.
  const Tensor x = randn64({2, 4, 3}, 5);
  require_gradcheck([](const In& in) { return scaled_dot_product_attention(in[0], in[0], in[0], Tensor(), true); }, {x});
  const Tensor kt = randn64({2, 4, 5}, 6);
  require_gradcheck([](const In& in) {
    return scaled_dot_product_attention(in[0], in[1].transpose(-2, -1), in[2]);
  }, {q, kt, v});
  // Dropout: the same mask on every call of one check.
  require_gradcheck([](const In& in) {
    Generator gen(11);
    return scaled_dot_product_attention(in[0], in[1], in[2], kMask, false, 0.3, std::nullopt, &gen);
  }, {q, k, v});
}

namespace {
// The formula written out with plain ops: softmax(q k^T * scale + mask) @ v, a bool mask as a
// -inf fill where it is false.
Tensor composed_sdpa(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, double scale) {
  Tensor scores = matmul(q, transpose(k, -2, -1)) * scale;
  if (mask.defined() && mask.dtype() == DType::boolean)
    scores = masked_fill(scores, logical_not(mask), -INFINITY);
  else if (mask.defined())
    scores = scores + mask;
  return matmul(softmax(scores, -1), v);
}
}  // namespace

TEST_CASE("sdpa: every mask kind runs fused and equals the composed formula, also for 2-D, 3-D and 5-D inputs",
          "[sdpa]") {
  const double scale = 0.45;
  struct Case {
    const char* name;
    Shape q, k, v, mask;
  };
  const std::vector<Case> cases = {
      {"2-D", {3, 4}, {5, 4}, {5, 2}, {3, 5}},
      {"3-D, mask per batch", {2, 3, 4}, {2, 5, 4}, {2, 5, 2}, {2, 3, 5}},
      {"4-D, mask per key", {2, 2, 3, 4}, {2, 2, 5, 4}, {2, 2, 5, 2}, {5}},
      {"4-D, mask per head", {2, 2, 3, 4}, {2, 2, 5, 4}, {2, 2, 5, 2}, {2, 1, 3, 5}},
      {"5-D", {2, 1, 2, 3, 4}, {2, 1, 2, 5, 4}, {2, 1, 2, 5, 2}, {2, 3, 5}},
  };
  uint64_t seed = 50;
  for (const Case& c : cases) {
    const Tensor q = randn64(c.q, ++seed), k = randn64(c.k, ++seed), v = randn64(c.v, ++seed);
    Tensor allowed = randn64(c.mask, ++seed) > -0.3;
    allowed = logical_or(allowed, Tensor::arange(5) == 0);  // no query loses every key
    const Tensor additive = randn64(c.mask, ++seed);
    for (const Tensor& mask : {allowed, additive}) {
      INFO(c.name << (mask.dtype() == DType::boolean ? ", bool mask" : ", float mask"));
      const Tensor expected = composed_sdpa(q, k, v, mask, scale);
      require_values(scaled_dot_product_attention(q, k, v, mask, false, 0.0, scale), expected.shape(),
                     expected.to_vector<double>(), 1e-12);
      using In = std::vector<Tensor>;
      if (mask.dtype() == DType::boolean)
        require_gradcheck([&](const In& in) { return scaled_dot_product_attention(in[0], in[1], in[2], mask); },
                          {q, k, v});
      else
        require_gradcheck([&](const In& in) { return scaled_dot_product_attention(in[0], in[1], in[2], in[3]); },
                          {q, k, v, mask});
    }
  }
  // A query with every key masked: zero weights, a zero output (no NaN).
  const Tensor q = randn64({2, 4}, 70), k = randn64({3, 4}, 71), v = randn64({3, 2}, 72);
  const Tensor keep = Tensor({{true, true, false}, {false, false, false}});
  const auto out = scaled_dot_product_attention(q, k, v, keep).to_vector<double>();
  CHECK(out[2] == 0.0);
  CHECK(out[3] == 0.0);
  CHECK(std::isfinite(out[0]));
}
