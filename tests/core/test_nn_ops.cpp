// NN ops (core/ops/nn_ops.cpp): embedding, masked_fill, cross_entropy, dropout and layer_norm.
// Forward values against PyTorch (pasted with the command that printed them), rows long enough to
// reach the vector paths against plain double loops, float64 gradchecks (repeated ids, broadcast
// masks, -1e9 / -inf fills under a softmax, ignored targets, non-contiguous inputs, a reseeded
// dropout mask), dropout statistics, large-logit stability and the errors.
#include <cmath>
#include <limits>
#include <vector>

#include "core/random.h"
#include "support/helpers.h"

using namespace heed;
using Catch::Matchers::Contains;
using heed::test::randn64;
using heed::test::rand64;
using heed::test::require_gradcheck;
using heed::test::require_values;
using heed::test::sine_input;

namespace {

// l[i] = 2 cos(0.9 i + 0.2), i < 20, as (4, 5): the logits of the PyTorch references below.
Tensor cosine_logits(DType dtype) {
  std::vector<double> v(20);
  for (int i = 0; i < 20; ++i) v[i] = 2 * std::cos(0.9 * i + 0.2);
  return Tensor::from_vector(v, {4, 5}).to(dtype);
}

// Mean cross-entropy and its gradient by plain double loops, independent of the kernels.
double reference_ce(const std::vector<double>& x, const std::vector<int32_t>& t, int64_t C, int32_t ignore,
                    std::vector<double>* grad) {
  const int64_t N = static_cast<int64_t>(t.size());
  double loss = 0;
  int64_t valid = 0;
  for (int64_t r = 0; r < N; ++r) valid += t[r] != ignore;
  if (grad) grad->assign(x.size(), 0.0);
  for (int64_t r = 0; r < N; ++r) {
    if (t[r] == ignore) continue;
    double m = -INFINITY, z = 0;
    for (int64_t k = 0; k < C; ++k) m = std::max(m, x[r * C + k]);
    for (int64_t k = 0; k < C; ++k) z += std::exp(x[r * C + k] - m);
    loss += m + std::log(z) - x[r * C + t[r]];
    if (grad)
      for (int64_t k = 0; k < C; ++k)
        (*grad)[r * C + k] = (std::exp(x[r * C + k] - m) / z - (k == t[r])) / static_cast<double>(valid);
  }
  return loss / static_cast<double>(valid);
}

}  // namespace

// ------------------------------------------------------------------------------------------
// embedding

TEST_CASE("embedding gathers rows as F.embedding, for float32 and float64", "[nn_ops]") {
  // /usr/bin/python3 -c "import torch, math, torch.nn.functional as F;
  //   w = torch.tensor([math.sin(0.5*i+0.1) for i in range(15)], dtype=torch.float64).view(5,3);
  //   print(F.embedding(torch.tensor([[3,0,3],[4,1,3]]), w).flatten().tolist())"
  const std::vector<double> expected = {
      -0.9936910036334644, -0.9258146823277325, -0.6312666378723216, 0.09983341664682815, 0.5646424733950354,
      0.8912073600614354,  -0.9936910036334644, -0.9258146823277325, -0.6312666378723216, -0.18216250427209588,
      0.31154136351337786, 0.7289690401258759,  0.9995736030415051,  0.8632093666488737,  0.5155013718214642,
      -0.9936910036334644, -0.9258146823277325, -0.6312666378723216};
  std::vector<double> wv(15);
  for (int i = 0; i < 15; ++i) wv[i] = std::sin(0.5 * i + 0.1);
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor w = Tensor::from_vector(wv, {5, 3}).to(dt);
    Tensor out = embedding(w, {3, 0, 3, 4, 1, 3}, {2, 3});
    REQUIRE(out.dtype() == dt);
    require_values(out, {2, 3, 3}, expected, dt == DType::f32 ? 1e-6 : 1e-12);
  }
  // A transposed (non-contiguous) weight gathers the same logical rows.
  Tensor wt = transpose(Tensor::from_vector(wv, {3, 5}), 0, 1);  // (5, 3)
  Tensor out = embedding(wt, {4, 2}, {2});
  require_values(out, {2, 3}, {wt.at({4, 0}), wt.at({4, 1}), wt.at({4, 2}), wt.at({2, 0}), wt.at({2, 1}), wt.at({2, 2})},
                 0.0);
}

TEST_CASE("embedding backward scatter-adds repeated ids", "[nn_ops]") {
  Tensor w = Tensor::zeros({4, 2}).requires_grad_();
  Tensor out = embedding(w, {1, 3, 1, 1}, {4});
  // Upstream gradient: row i is (i + 1, 10 (i + 1)).
  out.backward(Tensor::from_vector(std::vector<float>{1, 10, 2, 20, 3, 30, 4, 40}, {4, 2}));
  // id 1 is used at positions 0, 2, 3 -> 1 + 3 + 4; id 3 at position 1; ids 0 and 2 never.
  require_values(w.grad(), {4, 2}, {0, 0, 8, 80, 0, 0, 2, 20}, 0.0);

  require_gradcheck([](const std::vector<Tensor>& in) { return embedding(in[0], {3, 0, 3, 4, 1, 3, 3}, {7}); },
                    {randn64({5, 3}, 11)});
  require_gradcheck([](const std::vector<Tensor>& in) { return embedding(in[0], {2, 2, 0, 1, 2, 0}, {2, 3}); },
                    {randn64({3, 9}, 12)});
}

TEST_CASE("embedding rejects out-of-range ids, naming the id, its position and V", "[nn_ops]") {
  Tensor w = Tensor::zeros({5, 3});
  REQUIRE_THROWS_AS(embedding(w, {0, 1, 5}, {3}), heed::Error);
  REQUIRE_THROWS_WITH(embedding(w, {0, 1, 5}, {3}),
                      Contains("embedding") && Contains("id 5") && Contains("position 2") && Contains("5 embeddings"));
  REQUIRE_THROWS_WITH(embedding(w, {-1, 1}, {2}), Contains("id -1") && Contains("position 0"));
  REQUIRE_THROWS_WITH(embedding(w, {0, 1}, {3}), Contains("embedding") && Contains("[3]"));
  REQUIRE_THROWS_WITH(embedding(Tensor::zeros({5}), {0}, {1}), Contains("embedding") && Contains("[5]"));
}

// ------------------------------------------------------------------------------------------
// masked_fill

TEST_CASE("masked_fill with a broadcast mask matches torch", "[nn_ops]") {
  // /usr/bin/python3 -c "import torch, math; x = torch.tensor([3*math.sin(0.7*i+0.3) for i in range(24)],
  //   dtype=torch.float64); m = torch.tensor([[(j+k)%3==0 for k in range(4)] for j in range(3)]);
  //   print(x.view(2,3,4).masked_fill(m, -2.5).flatten().tolist())"
  const std::vector<double> expected = {
      -2.5, 2.5244129544236893,  2.9749944313574055,  -2.5, 0.1247419872998728,   -1.8355736728281569,
      -2.5, -2.6503639671604606, -1.1216299944907107, -2.5, 2.5513098618856933,   2.9680747398701457,
      -2.5, 0.0743262763600733,  -1.8752119466786463, -2.5, -2.6263565240652857,  -1.0746878467104861,
      -2.5, 2.5774854445694872,  2.9603158928238402,  -2.5, 0.023889551357812032, -1.9143200470438422};
  std::vector<uint8_t> mask(12);
  for (int j = 0; j < 3; ++j)
    for (int k = 0; k < 4; ++k) mask[j * 4 + k] = (j + k) % 3 == 0;
  for (DType dt : {DType::f32, DType::f64}) {
    require_values(masked_fill(sine_input(dt), mask, {3, 4}, -2.5), {2, 3, 4}, expected,
                   dt == DType::f32 ? 1e-6 : 1e-12);
  }
  // Any nonzero byte fills; the full-shape contiguous path gives the same as the broadcast one.
  std::vector<uint8_t> full(24);
  for (int i = 0; i < 24; ++i) full[i] = mask[i % 12] ? static_cast<uint8_t>(7) : 0;
  require_values(masked_fill(sine_input(DType::f64), full, {2, 3, 4}, -2.5), {2, 3, 4}, expected, 1e-12);
  // A non-contiguous input: fill the transposed view, compare with the filled transpose.
  Tensor x = sine_input(DType::f64);
  Tensor xt = transpose(x, 0, 2);  // (4, 3, 2)
  std::vector<uint8_t> m2 = {1, 0};  // (2): fills xt[..., 0], which is x[0]
  Tensor y = masked_fill(xt, m2, {2}, -std::numeric_limits<double>::infinity());
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 3; ++j) {
      REQUIRE(y.at({i, j, 0}) == -std::numeric_limits<double>::infinity());
      REQUIRE(y.at({i, j, 1}) == x.at({1, j, i}));
    }
}

TEST_CASE("masked_fill gradient is zero at filled positions", "[nn_ops]") {
  Tensor a = Tensor::ones({2, 3}).requires_grad_();
  Tensor y = masked_fill(a, {1, 0, 1}, {1, 3}, 5.0);
  y.backward(Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}));
  require_values(a.grad(), {2, 3}, {0, 2, 0, 0, 5, 0}, 0.0);

  const std::vector<uint8_t> col = {0, 1, 0};  // (3, 1): broadcasts over the last axis
  require_gradcheck([&](const std::vector<Tensor>& in) { return masked_fill(in[0], col, {3, 1}, 0.75); },
                    {randn64({2, 3, 4}, 21)});
  const std::vector<uint8_t> row = {1, 0, 0, 1, 0};  // (5): broadcasts over the leading axes
  require_gradcheck([&](const std::vector<Tensor>& in) { return masked_fill(in[0], row, {5}, -3.0); },
                    {randn64({3, 5}, 22)});
}

TEST_CASE("masked_fill with -1e9 and -inf under a softmax (causal mask)", "[nn_ops]") {
  // A causal (T, T) mask over (B, T, T) scores: fill where key > query. Every row keeps its diagonal.
  const int64_t T = 4;
  std::vector<uint8_t> causal(T * T);
  for (int64_t q = 0; q < T; ++q)
    for (int64_t k = 0; k < T; ++k) causal[q * T + k] = k > q;
  for (double fill : {-1e9, -std::numeric_limits<double>::infinity()}) {
    INFO("fill " << fill);
    // Forward: the filled positions get exactly zero probability, the rest renormalise.
    Tensor s = randn64({2, T, T}, 31);
    Tensor p = softmax(masked_fill(s, causal, {T, T}, fill), -1);
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t q = 0; q < T; ++q) {
        double z = 0;
        for (int64_t k = 0; k <= q; ++k) z += std::exp(s.at({b, q, k}));
        for (int64_t k = 0; k < T; ++k) {
          const double want = k > q ? 0.0 : std::exp(s.at({b, q, k})) / z;
          REQUIRE(p.at({b, q, k}) == Approx(want).margin(1e-12));
        }
      }
    require_gradcheck(
        [&](const std::vector<Tensor>& in) { return softmax(masked_fill(in[0], causal, {T, T}, fill), -1); },
        {randn64({2, T, T}, 32)});
    // A key-padding mask (B, 1, T) broadcast over the queries.
    const std::vector<uint8_t> pad = {0, 0, 0, 1, 0, 1, 0, 0};
    require_gradcheck(
        [&](const std::vector<Tensor>& in) { return softmax(masked_fill(in[0], pad, {2, 1, T}, fill), -1); },
        {randn64({2, 3, T}, 33)});
  }
}

TEST_CASE("masked_fill rejects a mask that does not broadcast, naming the shapes", "[nn_ops]") {
  Tensor a = Tensor::zeros({2, 3});
  REQUIRE_THROWS_AS(masked_fill(a, {0, 1}, {2}, 0.0), heed::Error);
  REQUIRE_THROWS_WITH(masked_fill(a, {0, 1}, {2}, 0.0), Contains("masked_fill") && Contains("[2]") && Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(masked_fill(a, std::vector<uint8_t>(12), {2, 2, 3}, 0.0),
                      Contains("masked_fill") && Contains("[2, 2, 3]") && Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(masked_fill(a, {0, 1}, {3}, 0.0), Contains("masked_fill") && Contains("[3]"));
}

// ------------------------------------------------------------------------------------------
// cross_entropy

TEST_CASE("cross_entropy matches F.cross_entropy, with ignored rows", "[nn_ops]") {
  // /usr/bin/python3 -c "import torch, math, torch.nn.functional as F;
  //   l = torch.tensor([2*math.cos(0.9*i+0.2) for i in range(20)], dtype=torch.float64).view(4,5);
  //   print(F.cross_entropy(l, torch.tensor([1,-100,4,0])).item());
  //   print(F.cross_entropy(l, torch.tensor([1,3,4,0])).item());
  //   print(F.cross_entropy(l, torch.tensor([2,3,2,0]), ignore_index=2).item())"
  for (DType dt : {DType::f32, DType::f64}) {
    const double tol = dt == DType::f32 ? 1e-6 : 1e-12;
    require_values(cross_entropy(cosine_logits(dt), {1, -100, 4, 0}), {}, {0.8792558747388095}, tol);
    require_values(cross_entropy(cosine_logits(dt), {1, 3, 4, 0}), {}, {1.126493133736075}, tol);
    require_values(cross_entropy(cosine_logits(dt), {2, 3, 2, 0}, 2), {}, {1.2211461040667086}, tol);
  }
  // torch gives nan when every target is ignored (0 / 0); the gradient is then zero, not NaN.
  Tensor l = cosine_logits(DType::f64).requires_grad_();
  Tensor none = cross_entropy(l, {-100, -100, -100, -100});
  REQUIRE(std::isnan(none.item()));
  none.backward();
  require_values(l.grad(), {4, 5}, std::vector<double>(20, 0.0), 0.0);
}

TEST_CASE("cross_entropy gradient matches torch, zero on ignored rows", "[nn_ops]") {
  // /usr/bin/python3 -c "import torch, math, torch.nn.functional as F;
  //   l = torch.tensor([2*math.cos(0.9*i+0.2) for i in range(20)], dtype=torch.float64).view(4,5).requires_grad_();
  //   F.cross_entropy(l, torch.tensor([1,-100,4,0])).backward(); print(l.grad.flatten().tolist())"
  const std::vector<double> expected = {
      0.22841433669698835, -0.25363725867595394, 0.013995479955483609, 0.00461407659398431, 0.006613365429497673,
      0.0,                 0.0,                  0.0,                  0.0,                 0.0,
      0.0036003567814383453, 0.005309957486837201, 0.02552278506826174, 0.12185852998445663, -0.15629162932099386,
      -0.14559377151805036, 0.03296138817725097,  0.011374791993332543, 0.01726032789595549, 0.08399726345151137};
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor l = cosine_logits(dt).requires_grad_();
    cross_entropy(l, {1, -100, 4, 0}).backward();
    require_values(l.grad(), {4, 5}, expected, dt == DType::f32 ? 1e-6 : 1e-12);
  }
  // The upstream gradient scales the whole result.
  Tensor l = cosine_logits(DType::f64).requires_grad_();
  cross_entropy(l, {1, -100, 4, 0}).backward(Tensor::scalar(-3.0, DType::f64));
  REQUIRE(l.grad().at({0, 1}) == Approx(3 * 0.25363725867595394).margin(1e-12));
}

TEST_CASE("cross_entropy on rows long enough for the vector paths, float32 and float64", "[nn_ops]") {
  // C = 37 leaves a tail after the 16-lane (float) and 8-lane (double) batches; N = 9 with two ignored.
  const int64_t N = 9, C = 37;
  Generator gen(5);
  std::vector<double> x(N * C);
  for (auto& v : x) v = 3 * gen.normal();
  std::vector<int32_t> t(N);
  for (int64_t r = 0; r < N; ++r) t[r] = static_cast<int32_t>((r * 7 + 3) % C);
  t[2] = t[6] = -100;
  std::vector<double> want_grad;
  const double want = reference_ce(x, t, C, -100, &want_grad);
  for (DType dt : {DType::f32, DType::f64}) {
    const double tol = dt == DType::f32 ? 2e-6 : 1e-12;
    Tensor l = Tensor::from_vector(x, {N, C}).to(dt).detach().requires_grad_();
    Tensor loss = cross_entropy(l, t);
    REQUIRE(loss.dtype() == dt);
    require_values(loss, {}, {want}, tol);
    loss.backward();
    require_values(l.grad(), {N, C}, want_grad, tol);
  }
}

TEST_CASE("cross_entropy float64 gradchecks: ignored rows, non-contiguous logits", "[nn_ops]") {
  const std::vector<int32_t> t = {3, -100, 10, 0, 7, -100};
  require_gradcheck([&](const std::vector<Tensor>& in) { return cross_entropy(in[0], t); }, {randn64({6, 11}, 41)});
  // Transposed logits: (11, 6) stored, (6, 11) seen.
  Tensor lt = transpose(randn64({11, 6}, 42).detach(), 0, 1).requires_grad_();
  REQUIRE_FALSE(lt.is_contiguous());
  require_gradcheck([&](const std::vector<Tensor>& in) { return cross_entropy(in[0], t); }, {lt});
  // The transposed input gives the loss of its contiguous copy.
  REQUIRE(cross_entropy(lt, t).item() == Approx(cross_entropy(lt.detach().contiguous(), t).item()).epsilon(1e-14));
  // Another ignore_index, used as a padding class.
  require_gradcheck([](const std::vector<Tensor>& in) { return cross_entropy(in[0], {0, 2, 0, 1}, 0); },
                    {randn64({4, 3}, 43)});
  // Through a log-domain composition, so the upstream gradient is not 1.
  require_gradcheck([&](const std::vector<Tensor>& in) { return exp(mul(cross_entropy(in[0], t), 0.5)); },
                    {randn64({6, 11}, 44)});
}

TEST_CASE("cross_entropy is stable for logits around 1e4", "[nn_ops]") {
  // Row r: logits 1e4 + d[k] with small spreads d; the loss depends on d only. exp(1e4) is inf, so
  // an unshifted log-sum-exp would give inf / nan.
  const int64_t N = 3, C = 21;
  Generator gen(9);
  std::vector<double> d(N * C), x(N * C);
  for (int64_t i = 0; i < N * C; ++i) {
    // Integer-and-quarter spreads, exactly representable at 1e4 in float32 (ulp 2^-10).
    d[i] = std::round(gen.normal() * 8) / 4;
    x[i] = 1e4 + d[i];
  }
  x[C + 4] = -1e4;  // one very negative logit: exp underflows to 0, harmlessly
  d[C + 4] = -2e4;
  const std::vector<int32_t> t = {5, 4, 20};
  std::vector<double> want_grad;
  const double want = reference_ce(d, t, C, -100, &want_grad);
  REQUIRE(std::isfinite(want));
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor l = Tensor::from_vector(x, {N, C}).to(dt).detach().requires_grad_();
    Tensor loss = cross_entropy(l, t);
    REQUIRE(std::isfinite(loss.item()));
    REQUIRE(loss.item() == Approx(want).margin(dt == DType::f32 ? 2e-3 : 1e-9));
    loss.backward();
    auto g = l.grad().to_vector<double>();
    for (size_t i = 0; i < g.size(); ++i) {
      REQUIRE(std::isfinite(g[i]));
      REQUIRE(g[i] == Approx(want_grad[i]).margin(dt == DType::f32 ? 1e-4 : 1e-9));
    }
  }
  // /usr/bin/python3 -c "import torch, torch.nn.functional as F;
  //   big = torch.tensor([[1e4, 1e4-1, 1e4-2],[-1e4, 1e4, 0.]], dtype=torch.float32);
  //   print(F.cross_entropy(big, torch.tensor([1,0])).item())"  -> 10000.7041015625
  Tensor big = Tensor::from_vector(std::vector<float>{1e4f, 1e4f - 1, 1e4f - 2, -1e4f, 1e4f, 0.f}, {2, 3});
  REQUIRE(cross_entropy(big, {1, 0}).item() == 10000.7041015625);
}

// torch 1.13, float64, f(shape, phase, amp) = amp sin(0.37 n + phase) over the flat index n:
//   logits = f((4, 5), 0.3, 2.0); tgt = [1, 4, -1, 0]; w = 0.5 + f((5,), 1.1, 0.4).abs()
//   F.cross_entropy(logits, tgt, weight=w, ignore_index=-1, reduction=r, label_smoothing=s)
//   l4 = f((2, 3, 2, 2), 0.7, 1.5); t3 = [[[0, 2], [1, 1]], [[2, 0], [-100, 1]]]
//   F.cross_entropy(l4, t3), reduction='none', and weight=[0.5, 1, 2] with label_smoothing=0.1
//   F.cross_entropy(f((5,), 0.2, 1.0), torch.tensor(3))
//   p = torch.softmax(f((4, 5), 0.9, 1.0), 1): F.cross_entropy(logits, p, reduction=r), and
//   weight=w with label_smoothing=0.3; F.cross_entropy(l4, softmax(f((2, 3, 2, 2), 0.1, 1.0), 1), reduction='none')
TEST_CASE("cross_entropy's class weights, (N, C, d) and (C) shapes and probability targets match torch's", "[nn_ops]") {
  using R = CrossEntropyOptions::Reduction;
  auto f = [](const Shape& shape, double phase, double amp) {
    std::vector<double> v(static_cast<size_t>(numel_of(shape)));
    for (size_t n = 0; n < v.size(); ++n) v[n] = amp * std::sin(0.37 * static_cast<double>(n) + phase);
    return Tensor::from_vector(v, shape);
  };
  const Tensor logits = f({4, 5}, 0.3, 2.0), tgt = Tensor({1, 4, -1, 0});
  const Tensor w = add(abs(f({5}, 1.1, 0.4)), 0.5);
  const double tol = 1e-13;
  auto weighted = [&](R r, double s) {
    return cross_entropy(logits, tgt, {.ignore_index = -1, .reduction = r, .label_smoothing = s, .weight = w});
  };
  require_values(weighted(R::mean, 0.0), {}, {2.8574602294740901}, tol);
  require_values(weighted(R::mean, 0.2), {}, {2.6732686650897093}, tol);
  require_values(weighted(R::sum, 0.0), {}, {7.0506878112358571}, tol);
  require_values(weighted(R::sum, 0.2), {}, {6.5962012694664072}, tol);
  require_values(weighted(R::none, 0.0), {4}, {1.7807276600787403, 2.402020850586899, 0, 2.8679393005702178}, tol);
  require_values(weighted(R::none, 0.2), {4}, {1.7164544908154082, 2.2451130039019729, 0, 2.6346337747490254}, tol);

  const Tensor l4 = f({2, 3, 2, 2}, 0.7, 1.5);
  const Tensor t3 = Tensor({{{0, 2}, {1, 1}}, {{2, 0}, {-100, 1}}});
  require_values(cross_entropy(l4, t3), {}, {1.5684404713295581}, tol);
  require_values(cross_entropy(l4, t3, {.reduction = R::none}), {2, 2, 2},
                 {0.90940676076429927, 3.0122848948045151, 1.4712224559651013, 1.893093975276831, 0.36662231072433416,
                  2.90413192127845, 0, 0.4223209804933778},
                 tol);
  require_values(cross_entropy(l4, t3, {.label_smoothing = 0.1, .weight = Tensor({0.5, 1.0, 2.0}).to(DType::f64)}), {},
                 {1.5753413960740736}, tol);
  require_values(cross_entropy(f({5}, 0.2, 1.0), Tensor::scalar(3, DType::i64)), {}, {1.3859154802610261}, tol);

  const Tensor p = softmax(f({4, 5}, 0.9, 1.0), 1);
  require_values(cross_entropy(logits, p), {}, {1.6591677313789222}, tol);
  require_values(cross_entropy(logits, p, {.reduction = R::sum}), {}, {6.6366709255156886}, tol);
  require_values(cross_entropy(logits, p, {.reduction = R::none}), {4},
                 {1.7223707827204326, 1.5857229634990464, 1.5996055084352148, 1.7289716708609952}, tol);
  require_values(cross_entropy(logits, p, {.label_smoothing = 0.3, .weight = w}), {}, {1.4362092338068815}, tol);
  require_values(cross_entropy(l4, softmax(f({2, 3, 2, 2}, 0.1, 1.0), 1), {.reduction = R::none}), {2, 2, 2},
                 {1.141190300566626, 1.1663847989210909, 1.1572414014369516, 1.0662316463266415, 0.85111873614264966,
                  0.90104057377842806, 1.0200567308609263, 1.1125322421036639},
                 tol);
}

TEST_CASE("cross_entropy float64 gradchecks: weights, (N, C, d), probabilities, a transposed input used twice",
          "[nn_ops]") {
  using R = CrossEntropyOptions::Reduction;
  const Tensor tgt = Tensor({1, 4, -1, 0});
  // Logits and class weights, both checked; a mean divides by the weights of the targets.
  for (R r : {R::mean, R::sum, R::none}) {
    INFO("reduction " << static_cast<int>(r));
    require_gradcheck([&](const std::vector<Tensor>& in) {
      return cross_entropy(in[0], tgt, {.ignore_index = -1, .reduction = r, .label_smoothing = 0.2, .weight = in[1]});
    }, {randn64({4, 5}, 41), rand64({5}, 42, 0.5, 1.5)});
  }
  // (N, C, d1, d2) from a transposed leaf (classes on axis 1 of a non-contiguous view), used
  // twice: once as the logits, once inside the probability targets.
  const Tensor t3 = Tensor({{{0, 2}, {1, 1}}, {{2, 0}, {-100, 1}}});
  require_gradcheck([&](const std::vector<Tensor>& in) {
    const Tensor l4 = in[0].transpose(1, 3);  // (2, 3, 2, 2) viewed from (2, 2, 2, 3)
    return cross_entropy(l4, t3, {.reduction = R::none}) + cross_entropy(l4, softmax(l4 * 0.5, 1));
  }, {randn64({2, 2, 2, 3}, 43)});
  // Probability targets are differentiable too (torch's are).
  require_gradcheck([&](const std::vector<Tensor>& in) { return cross_entropy(in[0], softmax(in[1], 1)); },
                    {randn64({3, 4}, 44), randn64({3, 4}, 45)});
  // Unbatched.
  require_gradcheck([&](const std::vector<Tensor>& in) { return cross_entropy(in[0], Tensor::scalar(2, DType::i64)); },
                    {randn64({5}, 46)});
}

TEST_CASE("cross_entropy refuses mismatched weights, targets and shapes of its other forms", "[nn_ops]") {
  const Tensor x = Tensor::zeros({3, 4}, DType::f64);
  REQUIRE_THROWS_WITH(cross_entropy(x, Tensor({0, 1, 2}), {.weight = Tensor::ones({3}, DType::f64)}),
                      Contains("weight of shape [3] for 4 classes"));
  REQUIRE_THROWS_WITH(cross_entropy(x, Tensor({0, 1, 2}), {.weight = Tensor::ones({4})}),
                      Contains("weight is float32 but the logits are float64"));
  REQUIRE_THROWS_WITH(cross_entropy(x, Tensor::zeros({3, 3}, DType::f64)),
                      Contains("probability targets float64 [3, 3] must match the logits, float64 [3, 4]"));
  REQUIRE_THROWS_WITH(cross_entropy(Tensor::zeros({2, 3, 5}), Tensor::zeros({2, 5})),
                      Contains("targets of shape [2, 5] for logits [2, 3, 5]: expected [2, 3, 5] (class probabilities)"));
  REQUIRE_THROWS_WITH(cross_entropy(x, Tensor::zeros({3, 4})), Contains("must match the logits"));
  REQUIRE_THROWS_WITH(cross_entropy(Tensor::zeros({2, 3, 5}), Tensor({{0, 1}, {1, 2}})),
                      Contains("targets of shape [2, 2] for logits [2, 3, 5]: expected [2, 5] (class ids)"));
  REQUIRE_THROWS_WITH(cross_entropy(Tensor::scalar(1.0), Tensor::scalar(0, DType::i64)), Contains("got a scalar"));
  REQUIRE_THROWS_WITH(cross_entropy(Tensor::zeros({2, 3, 5}), Tensor::full({2, 5}, 3, DType::i64)),
                      Contains("target 3 in row 0 is out of range for 3 classes"));
  // No classes (torch refuses with a size mismatch): the rows were reshaped to (-1, 0), which
  // reshape refused naming itself.
  REQUIRE_THROWS_WITH(cross_entropy(Tensor::zeros({2, 0, 5}), Tensor::zeros({2, 5}, DType::i64)),
                      Contains("cross_entropy: target 0 in row 0 is out of range for 0 classes"));
}

TEST_CASE("cross_entropy rejects bad targets and shapes, naming row and value", "[nn_ops]") {
  Tensor l = Tensor::zeros({3, 4});
  REQUIRE_THROWS_AS(cross_entropy(l, {0, 4, 1}), heed::Error);
  REQUIRE_THROWS_WITH(cross_entropy(l, {0, 4, 1}),
                      Contains("cross_entropy") && Contains("target 4") && Contains("row 1") && Contains("4 classes"));
  // -1 is not the ignore_index here, so it is out of range.
  REQUIRE_THROWS_WITH(cross_entropy(l, {0, 1, -1}), Contains("target -1") && Contains("row 2"));
  REQUIRE_NOTHROW(cross_entropy(l, {0, 1, -1}, -1));
  REQUIRE_THROWS_WITH(cross_entropy(l, {0, 1}), Contains("cross_entropy") && Contains("[3, 4]"));
  REQUIRE_THROWS_WITH(cross_entropy(Tensor::zeros({2, 3, 4}), {0, 1}), Contains("cross_entropy") && Contains("[2, 3, 4]"));
}

// ------------------------------------------------------------------------------------------
// dropout

TEST_CASE("dropout with p == 0 is the identity: same tensor, nothing recorded, no draws", "[nn_ops]") {
  Tensor x = randn64({3, 4}, 51);
  Generator gen(7);
  const auto before = gen.state();
  Tensor y = dropout(x, 0.0, gen);
  REQUIRE(y.same(x));
  REQUIRE(y.grad_fn() == nullptr);
  REQUIRE(gen.state() == before);
}

TEST_CASE("dropout rejects p < 0 and p >= 1", "[nn_ops]") {
  Tensor x = Tensor::ones({4});
  Generator gen(1);
  for (double p : {-0.1, 1.0, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    INFO("p " << p);
    REQUIRE_THROWS_AS(dropout(x, p, gen), heed::Error);
    REQUIRE_THROWS_WITH(dropout(x, p, gen), Contains("dropout") && Contains("[0, 1)"));
  }
}

TEST_CASE("dropout statistics: kept fraction 1 - p, kept values scaled by exactly 1/(1-p)", "[nn_ops]") {
  const int64_t n = 1000000;
  for (double p : {0.1, 0.25, 0.5}) {
    INFO("p " << p);
    Generator gen(1234);
    Generator xgen(99);
    Tensor x = Tensor::rand({1000, 1000}, xgen, 0.5, 1.5);
    Tensor y = dropout(x, p, gen);
    // The mask costs exactly one uniform() per element, drawn in row-major order.
    Generator replay(1234);
    for (int64_t i = 0; i < n; ++i) replay.uniform();
    REQUIRE(gen.state() == replay.state());
    const float* px = x.data<float>();
    const float* py = y.data<float>();
    const float s = static_cast<float>(1.0 / (1.0 - p));
    Generator mask_gen(1234);
    int64_t kept = 0;
    for (int64_t i = 0; i < n; ++i) {
      const bool keep = mask_gen.uniform() >= p;
      if (keep) {
        if (py[i] != px[i] * s) FAIL("element " << i << ": " << py[i] << " != " << px[i] << " * " << s);
        ++kept;
      } else if (py[i] != 0.0f) {
        FAIL("element " << i << " should be dropped, got " << py[i]);
      }
    }
    // Binomial(n, 1 - p): 5 standard deviations is at most 2,500 of 1e6 (0.25%).
    const double sd = std::sqrt(n * p * (1 - p));
    REQUIRE(std::abs(static_cast<double>(kept) - n * (1 - p)) <= 5 * sd);
  }
}

TEST_CASE("dropout backward reuses the forward mask", "[nn_ops]") {
  Generator gen(3);
  Tensor x = randn64({50, 40}, 52);
  Tensor y = dropout(x, 0.4, gen);
  sum(y).backward();
  // d sum / dx is 1/(1-p) exactly where the element was kept, 0 where dropped.
  auto yv = y.to_vector<double>();
  auto g = x.grad().to_vector<double>();
  int64_t kept = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const bool k = yv[i] != 0.0;
    kept += k;
    REQUIRE(g[i] == (k ? 1.0 / 0.6 : 0.0));
  }
  REQUIRE(kept > 0);
  REQUIRE(kept < 2000);
  // Two calls on one generator draw different masks; a reseeded generator repeats one.
  Generator a(8), b(8);
  Tensor y1 = dropout(x.detach(), 0.5, a), y2 = dropout(x.detach(), 0.5, a), y3 = dropout(x.detach(), 0.5, b);
  REQUIRE(y1.to_vector<double>() != y2.to_vector<double>());
  REQUIRE(y1.to_vector<double>() == y3.to_vector<double>());
}

TEST_CASE("dropout float64 gradcheck with a reseeded generator", "[nn_ops]") {
  // The generator is reseeded on every call, so each finite-difference forward sees one mask.
  require_gradcheck(
      [](const std::vector<Tensor>& in) {
        Generator gen(2024);
        return dropout(in[0], 0.3, gen);
      },
      {randn64({4, 7}, 53)});
  // A transposed input: the mask follows the logical (row-major) order of the view.
  Tensor xt = transpose(randn64({7, 4}, 54).detach(), 0, 1).requires_grad_();
  require_gradcheck(
      [](const std::vector<Tensor>& in) {
        Generator gen(77);
        return mul(dropout(in[0], 0.5, gen), in[0]);
      },
      {xt});
}

// ------------------------------------------------------------------------------------------
// layer_norm

TEST_CASE("layer_norm matches F.layer_norm with and without affine", "[nn_ops]") {
  // /usr/bin/python3 -c "import torch, math, torch.nn.functional as F;
  //   x = torch.tensor([3*math.sin(0.7*i+0.3) for i in range(24)], dtype=torch.float64).view(2,3,4);
  //   lw = torch.tensor([1+0.1*i for i in range(4)], dtype=torch.float64);
  //   lb = torch.tensor([0.05*i-0.1 for i in range(4)], dtype=torch.float64);
  //   print(F.layer_norm(x, (4,), lw, lb, 1e-5).flatten().tolist());
  //   print(F.layer_norm(x, (4,), None, None, 1e-5).flatten().tolist())"
  const std::vector<double> affine = {
      -1.6628675357122573, 0.5453991702356333,  1.3441576972642577,  -0.07809660710094263, 1.5306375569458648,
      -0.06116551267885756, -1.1140266750801453, -0.8497709867996054, -1.6266406204593677, -0.3225981963961247,
      0.909157827659457,   1.3718733314645501,  1.319095152060662,   0.3948313557703268,   -0.754605022441645,
      -1.5030447074592834, -1.409677380338895,  -0.6279120994300587, 0.6172894333029793,   1.7668374016281623,
      1.0806599944972843,  0.6542019385608462,  -0.4698577059151746, -1.8080841327678492};
  const std::vector<double> plain = {
      -1.5628675357122572, 0.5412719729414848,  1.1201314143868815,   -0.09853585161610973, 1.6306375569458649,
      -0.010150466071688688, -0.9283555625667878, -0.6921315283073888,  -1.5266406204593677, -0.24781654217829516,
      0.7576315230495475,  1.0168256395881154,  1.419095152060662,    0.40439214160938797,  -0.6288375187013708,
      -1.1946497749686795, -1.3096773803388948, -0.5253746358455078,  0.514407861085816,    1.3206441550985863,
      1.1806599944972844,  0.6401835805098601,  -0.39154808826264553, -1.4292954867444994};
  std::vector<double> wv(4), bv(4);
  for (int i = 0; i < 4; ++i) wv[i] = 1 + 0.1 * i, bv[i] = 0.05 * i - 0.1;
  for (DType dt : {DType::f32, DType::f64}) {
    const double tol = dt == DType::f32 ? 2e-6 : 1e-12;
    Tensor w = Tensor::from_vector(wv, {4}).to(dt), b = Tensor::from_vector(bv, {4}).to(dt);
    require_values(layer_norm(sine_input(dt), w, b, 1e-5), {2, 3, 4}, affine, tol);
    require_values(layer_norm(sine_input(dt), Tensor(), Tensor(), 1e-5), {2, 3, 4}, plain, tol);
    // Weight only and bias only are the affine pieces of the plain result.
    Tensor ow = layer_norm(sine_input(dt), w, Tensor(), 1e-5), ob = layer_norm(sine_input(dt), Tensor(), b, 1e-5);
    for (int64_t i = 0; i < 24; ++i) {
      REQUIRE(ow.to_vector<double>()[i] == Approx(plain[i] * wv[i % 4]).margin(tol));
      REQUIRE(ob.to_vector<double>()[i] == Approx(plain[i] + bv[i % 4]).margin(tol));
    }
  }
}

TEST_CASE("layer_norm on long rows (vector paths) against a double reference", "[nn_ops]") {
  // C = 37: two 16-lane float batches plus a tail; rows offset by 100 to test the two-pass variance.
  const int64_t N = 5, C = 37;
  Generator gen(61);
  std::vector<double> x(N * C), w(C), b(C), want(N * C);
  for (auto& v : x) v = 100 + gen.normal();
  for (int64_t k = 0; k < C; ++k) w[k] = 1 + 0.3 * gen.normal(), b[k] = gen.normal();
  for (int64_t r = 0; r < N; ++r) {
    double m = 0, var = 0;
    for (int64_t k = 0; k < C; ++k) m += x[r * C + k] / C;
    for (int64_t k = 0; k < C; ++k) var += (x[r * C + k] - m) * (x[r * C + k] - m) / C;
    for (int64_t k = 0; k < C; ++k) want[r * C + k] = (x[r * C + k] - m) / std::sqrt(var + 1e-5) * w[k] + b[k];
  }
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor out = layer_norm(Tensor::from_vector(x, {N, C}).to(dt), Tensor::from_vector(w, {C}).to(dt),
                            Tensor::from_vector(b, {C}).to(dt), 1e-5);
    require_values(out, {N, C}, want, dt == DType::f32 ? 2e-5 : 1e-10);
  }
}

TEST_CASE("layer_norm float64 gradchecks with and without w/b, on a transposed input", "[nn_ops]") {
  Tensor x = randn64({3, 2, 11}, 71), w = randn64({11}, 72), b = randn64({11}, 73);
  require_gradcheck([](const std::vector<Tensor>& in) { return layer_norm(in[0], in[1], in[2], 1e-5); }, {x, w, b});
  require_gradcheck([](const std::vector<Tensor>& in) { return layer_norm(in[0], Tensor(), Tensor(), 1e-5); }, {x});
  require_gradcheck([](const std::vector<Tensor>& in) { return layer_norm(in[0], in[1], Tensor(), 1e-5); }, {x, w});
  require_gradcheck([](const std::vector<Tensor>& in) { return layer_norm(in[0], Tensor(), in[1], 1e-5); }, {x, b});
  // Normalising over a strided axis: (2, 6, 11) stored, (2, 11, 6) seen, C = 6 with stride 11.
  Tensor xt = transpose(randn64({2, 6, 11}, 74).detach(), 1, 2).requires_grad_();
  REQUIRE_FALSE(xt.is_contiguous());
  Tensor w6 = randn64({6}, 75), b6 = randn64({6}, 76);
  require_gradcheck([](const std::vector<Tensor>& in) { return layer_norm(in[0], in[1], in[2], 1e-5); }, {xt, w6, b6});
  require_gradcheck([](const std::vector<Tensor>& in) { return layer_norm(in[0], Tensor(), Tensor(), 1e-5); }, {xt});
  // Parameters that do not require grad get none, and the input's gradient is unchanged.
  Tensor x2 = randn64({4, 6}, 77);
  Tensor wf = randn64({6}, 78).detach();
  require_gradcheck([&](const std::vector<Tensor>& in) { return layer_norm(in[0], wf, Tensor(), 1e-5); }, {x2});
}

TEST_CASE("layer_norm float32 backward agrees with float64", "[nn_ops]") {
  // Same inputs in both dtypes; the float64 gradients are themselves gradchecked above. 150 rows
  // span three of the backward's 64-row blocks (the last one partial), whose column sums run
  // down whole batches of columns and then the tail (C = 37); with and without a bias.
  for (int64_t N : {6, 150}) {
    for (bool bias : {true, false}) {
      INFO("N " << N << " bias " << bias);
      Tensor x64 = randn64({N, 37}, 81), w64 = randn64({37}, 82), b64 = bias ? randn64({37}, 83) : Tensor();
      Tensor gy = randn64({N, 37}, 84).detach();
      layer_norm(x64, w64, b64, 1e-5).backward(gy);
      Tensor x32 = x64.detach().to(DType::f32).requires_grad_(), w32 = w64.detach().to(DType::f32).requires_grad_();
      Tensor b32 = bias ? b64.detach().to(DType::f32).requires_grad_() : Tensor();
      layer_norm(x32, w32, b32, 1e-5).backward(gy.to(DType::f32));
      require_values(x32.grad(), {N, 37}, x64.grad().to_vector<double>(), 1e-4);
      require_values(w32.grad(), {37}, w64.grad().to_vector<double>(), 1e-4);
      if (bias) require_values(b32.grad(), {37}, b64.grad().to_vector<double>(), 1e-4);
    }
  }
}

TEST_CASE("layer_norm rejects mismatched weight and bias, naming the op", "[nn_ops]") {
  Tensor x = Tensor::zeros({2, 3, 4});
  REQUIRE_THROWS_AS(layer_norm(x, Tensor::ones({3}), Tensor(), 1e-5), heed::Error);
  REQUIRE_THROWS_WITH(layer_norm(x, Tensor::ones({3}), Tensor(), 1e-5),
                      Contains("layer_norm") && Contains("weight") && Contains("[3]") && Contains("[2, 3, 4]"));
  REQUIRE_THROWS_WITH(layer_norm(x, Tensor(), Tensor::zeros({4, 1}), 1e-5),
                      Contains("layer_norm") && Contains("bias") && Contains("[4, 1]"));
  REQUIRE_THROWS_WITH(layer_norm(x, Tensor::ones({4}, DType::f64), Tensor(), 1e-5),
                      Contains("layer_norm") && Contains("float64"));
  REQUIRE_THROWS_WITH(layer_norm(Tensor::scalar(1.0), Tensor(), Tensor(), 1e-5), Contains("layer_norm"));
}

// torch 1.13: F.mse_loss(a, b) with a = [[0.5, -1.25, 2.0], [1.5, -0.75, 0.3]],
// b = [[1.2, 0.8, -2.5], [-0.4, 1.7, 3.1]] (float64) is 7.065833333.
TEST_CASE("mse_loss matches F.mse_loss, gradchecks on both sides, refuses shapes that differ", "[nn_ops]") {
  const Tensor a = Tensor::from_vector(std::vector<double>{0.5, -1.25, 2.0, 1.5, -0.75, 0.3}, {2, 3});
  const Tensor b = Tensor::from_vector(std::vector<double>{1.2, 0.8, -2.5, -0.4, 1.7, 3.1}, {2, 3});
  CHECK(mse_loss(a, b).item() == Approx(7.065833333).epsilon(1e-9));
  CHECK(mse_loss(a.to(DType::f32), b.to(DType::f32)).item() == Approx(7.065833333).epsilon(1e-6));
  Tensor t = transpose(randn64({3, 2}, 70).detach(), 0, 1).detach().requires_grad_();  // a view
  require_gradcheck([](const std::vector<Tensor>& in) { return mse_loss(in[0], in[1]); }, {randn64({2, 3}, 71), t});
  require_gradcheck([](const std::vector<Tensor>& in) { return mse_loss(in[0], in[0] * 0.5); }, {randn64({4}, 72)});
  CHECK_THROWS_WITH(mse_loss(a, Tensor::zeros({3}, DType::f64)),
                    Catch::Contains("mse_loss: input [2, 3] and target [3] differ in shape"));
}

// F.cross_entropy(x, t, reduction=..., label_smoothing=...) in float64, torch 1.13, with
// x[i][j] = 0.5 ((7 i + 3 j) mod 11) - 2 + 0.1 j (4 x 5) and t = [1, -100, 4, 0]: the losses, and
// the first row of x.grad after l.sum().backward().
TEST_CASE("cross_entropy's reductions and label smoothing match torch's, values and gradients", "[nn_ops]") {
  using R = CrossEntropyOptions::Reduction;
  std::vector<double> xv;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j) xv.push_back(0.5 * ((i * 7 + j * 3) % 11) - 2.0 + 0.1 * j);
  const Tensor targets = Tensor({1, -100, 4, 0});
  struct Case {
    R reduction;
    double smoothing;
    std::vector<double> loss, grad_row0;
  };
  const std::vector<Case> cases = {
      {R::none, 0.0, {3.4399065679594987, 0.0, 2.609805150375867, 0.48682257861269645},
       {0.0064743532020618, -0.9679323186632016, 0.15883226543633266, 0.786701360746287, 0.015924339278520154}},
      {R::none, 0.1, {3.389906567959499, 0.0, 2.599805150375867, 0.7168225786126965},
       {-0.0135256467979382, -0.8879323186632017, 0.13883226543633267, 0.766701360746287, -0.004075660721479846}},
      {R::sum, 0.0, {6.536534296948062},
       {0.0064743532020618, -0.9679323186632016, 0.15883226543633266, 0.786701360746287, 0.015924339278520154}},
      {R::sum, 0.1, {6.706534296948062},
       {-0.0135256467979382, -0.8879323186632017, 0.13883226543633267, 0.766701360746287, -0.004075660721479846}},
      {R::mean, 0.0, {2.178844765649354},
       {0.0021581177340205997, -0.32264410622106715, 0.05294408847877755, 0.262233786915429, 0.005308113092840051}},
      {R::mean, 0.1, {2.2355114323160206},
       {-0.004508548932646067, -0.29597743955440053, 0.04627742181211088, 0.25556712024876227, -0.0013585535738266168}},
  };
  for (const Case& c : cases) {
    INFO("reduction " << static_cast<int>(c.reduction) << " label_smoothing " << c.smoothing);
    Tensor x = Tensor::from_vector(xv, {4, 5}).requires_grad_();
    const Tensor loss = cross_entropy(x, targets, {.reduction = c.reduction, .label_smoothing = c.smoothing});
    require_values(loss, c.reduction == R::none ? Shape{4} : Shape{}, c.loss, 1e-14);
    sum(loss).backward();
    require_values(slice(x.grad(), 0, 0, 1), {1, 5}, c.grad_row0, 1e-14);
    if (c.reduction != R::mean || c.smoothing != 0) {  // the composed path: a float64 gradcheck
      require_gradcheck([&](const std::vector<Tensor>& in) {
        return cross_entropy(in[0], targets, {.reduction = c.reduction, .label_smoothing = c.smoothing});
      }, {randn64({4, 5}, 31)});
    }
  }
  // The defaults are the fused op's bits.
  const Tensor x = Tensor::from_vector(xv, {4, 5});
  REQUIRE(cross_entropy(x, targets, CrossEntropyOptions{}).item() == cross_entropy(x, targets).item());
  REQUIRE_THROWS_WITH(cross_entropy(x, targets, {.label_smoothing = 1.5}), Contains("label_smoothing must be in [0, 1]"));
  REQUIRE_THROWS_WITH(cross_entropy(x, Tensor({1, 7, 0, 0}), {.reduction = R::sum}), Contains("target 7 in row 1"));
}
