// Tests of the basic layers: Linear, Embedding, Dropout, LayerNorm, GELU/ReLU, FeedForward,
// positional encodings and the init helpers. Forward values come from PyTorch 1.13 with the same
// weights: every weight and input is the "wave" sin(0.37 k + phase) * scale, built identically
// here and in this script (its output is pasted below, next to each test):
//
// /usr/bin/python3 - <<'EOF'
// import math, torch, torch.nn.functional as F
// def wave(n, phase, scale): return torch.tensor([scale*math.sin(0.37*k+phase) for k in range(n)], dtype=torch.float64)
// def show(name, t): print(name, ", ".join("%.9g" % v for v in t.flatten().tolist()))
// x = wave(12, 0.1, 1.0).view(2, 2, 3); W = wave(12, 0.5, 0.5).view(4, 3); b = wave(4, 0.9, 0.2)
// show("linear", F.linear(x, W, b)); show("linear_nobias", F.linear(x, W))
// x = wave(15, 0.2, 2.0).view(3, 5) + 0.5; w = 1 + wave(5, 0.3, 0.5); b = wave(5, 0.7, 0.3)
// show("ln", F.layer_norm(x, (5,), w, b, 1e-5)); show("ln_nobias", F.layer_norm(x, (5,), w, None, 1e-5))
// show("ln_noaffine", F.layer_norm(x, (5,), None, None, 1e-5))
// x = wave(8, 0.05, 3.0) - 1.2; show("gelu", F.gelu(x)); show("relu", F.relu(x))
// W1 = wave(24, 1.1, 0.4).view(6, 4); b1 = wave(6, 1.3, 0.1); W2 = wave(24, 1.7, 0.4).view(4, 6); b2 = wave(4, 1.9, 0.1)
// x = wave(8, 2.1, 1.0).view(2, 4)
// show("ffn_gelu", F.linear(F.gelu(F.linear(x, W1, b1)), W2, b2)); show("ffn_relu", F.linear(F.relu(F.linear(x, W1, b1)), W2, b2))
// EOF
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "nn/nn.h"
#include "support/helpers.h"

using namespace heed;
using heed::test::require_gradcheck;
using heed::test::require_values;

namespace {

// scale * sin(0.37 k + phase) for k = 0..numel-1, row-major; `offset` is added to every element.
Tensor wave(const Shape& shape, double phase, double scale, DType dtype = DType::f32, double offset = 0.0) {
  std::vector<double> v(static_cast<size_t>(numel_of(shape)));
  for (size_t k = 0; k < v.size(); ++k) v[k] = offset + scale * std::sin(0.37 * static_cast<double>(k) + phase);
  return Tensor::from_vector(v, shape).to(dtype);
}

std::vector<std::string> names_of(const nn::NamedTensors& named) {
  std::vector<std::string> out;
  for (const auto& [n, _] : named) out.push_back(n);
  return out;
}

double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double e : v) s += e;
  return s / static_cast<double>(v.size());
}

double std_of(const std::vector<double>& v) {
  const double m = mean_of(v);
  double s = 0;
  for (double e : v) s += (e - m) * (e - m);
  return std::sqrt(s / static_cast<double>(v.size()));
}

}  // namespace

// ------------------------------------------------------------------------------------ Linear

TEST_CASE("Linear forward matches PyTorch, with and without bias", "[layers]") {
  nn::Linear lin(3, 4);
  lin.weight.copy_(wave({4, 3}, 0.5, 0.5));
  lin.bias.copy_(wave({4}, 0.9, 0.2));
  Tensor x = wave({2, 2, 3}, 0.1, 1.0);
  // linear (script above)
  require_values(lin.forward(x), {2, 2, 4},
                 {0.705809547, 0.713542928, 0.115068634, -0.416610324, 1.20239038, 1.44763332, 0.271331287,
                  -1.01173273, 0.537508548, 0.786032428, 0.347836215, -0.282094253, -0.550367021, -0.536434868,
                  0.259611157, 0.961912467});

  nn::Linear nobias(3, 4, false);
  REQUIRE_FALSE(nobias.bias.defined());
  nobias.weight.copy_(wave({4, 3}, 0.5, 0.5));
  // linear_nobias
  require_values(nobias.forward(x), {2, 2, 4},
                 {0.549144165, 0.522522756, -0.0844526426, -0.597628437, 1.045725, 1.25661314, 0.0718100106,
                  -1.19275085, 0.380843166, 0.595012257, 0.148314939, -0.463112365, -0.707032403, -0.727455039,
                  0.0600898809, 0.780894354});
}

TEST_CASE("Linear names, shapes and errors", "[layers]") {
  nn::Linear lin(3, 4);
  REQUIRE(names_of(lin.named_parameters()) == std::vector<std::string>{"weight", "bias"});
  REQUIRE(lin.weight.shape() == Shape{4, 3});
  REQUIRE(lin.bias.shape() == Shape{4});
  REQUIRE(lin.weight.requires_grad());
  nn::Linear nobias(3, 4, false);
  REQUIRE(names_of(nobias.named_parameters()) == std::vector<std::string>{"weight"});
  REQUIRE(nobias.num_parameters() == 12);
  REQUIRE_THROWS_AS(lin.forward(Tensor::zeros({2, 4})), Error);
  REQUIRE_THROWS_AS(nn::Linear(0, 4), Error);
}

TEST_CASE("Linear default init is PyTorch's uniform(+-1/sqrt(in)) and seedable", "[layers]") {
  Generator g1(42), g2(42), g3(43);
  nn::Linear a(64, 512, true, &g1), b(64, 512, true, &g2), c(64, 512, true, &g3);
  const double bound = 1.0 / std::sqrt(64.0);
  auto w = a.weight.to_vector<double>();
  double lo = 1, hi = -1;
  for (double v : w) lo = std::min(lo, v), hi = std::max(hi, v);
  REQUIRE(lo >= -bound);
  REQUIRE(hi < bound);
  REQUIRE(lo < -0.99 * bound);  // 32768 draws fill the interval
  REQUIRE(hi > 0.99 * bound);
  // uniform(-a, a) has std a / sqrt(3)
  REQUIRE(std_of(w) == Approx(bound / std::sqrt(3.0)).epsilon(0.02));
  for (double v : a.bias.to_vector<double>()) REQUIRE(std::abs(v) <= bound);
  REQUIRE(a.weight.to_vector<float>() == b.weight.to_vector<float>());
  REQUIRE(a.bias.to_vector<float>() == b.bias.to_vector<float>());
  REQUIRE(a.weight.to_vector<float>() != c.weight.to_vector<float>());
  // No generator: the default generator, so default-built layers differ (three Linears as a
  // port's W_query, W_key, W_value), and heed::manual_seed makes them reproducible.
  manual_seed(5);
  nn::Linear d(5, 6), e(5, 6), f(5, 6);
  REQUIRE(d.weight.to_vector<float>() != e.weight.to_vector<float>());
  REQUIRE(e.weight.to_vector<float>() != f.weight.to_vector<float>());
  REQUIRE(d.weight.to_vector<float>() != f.weight.to_vector<float>());
  manual_seed(5);
  nn::Linear d2(5, 6);
  REQUIRE(d2.weight.to_vector<float>() == d.weight.to_vector<float>());
  REQUIRE(d2.bias.to_vector<float>() == d.bias.to_vector<float>());
  // An explicit generator does not read (or move) the default one.
  Generator g4(42);
  manual_seed(6);
  nn::Linear g(64, 512, true, &g4);
  REQUIRE(g.weight.to_vector<float>() == a.weight.to_vector<float>());
  manual_seed(6);
  REQUIRE(nn::Linear(5, 6).weight.to_vector<float>() != d.weight.to_vector<float>());
}

TEST_CASE("Linear gradcheck over input, weight and bias (float64)", "[layers]") {
  Generator gen(3);
  nn::Linear lin(5, 3, true, &gen);
  lin.to(DType::f64);
  REQUIRE(lin.weight.dtype() == DType::f64);
  Tensor x = test::randn64({2, 4, 5}, 11);
  require_gradcheck([&](const std::vector<Tensor>& in) { return lin.forward(in[0]); }, {x, lin.weight, lin.bias});

  nn::Linear nobias(5, 3, false, &gen);
  nobias.to(DType::f64);
  require_gradcheck([&](const std::vector<Tensor>& in) { return nobias.forward(in[0]); }, {x, nobias.weight});
}

// ------------------------------------------------------------------------------------ Embedding

TEST_CASE("Embedding gathers rows, names, errors", "[layers]") {
  nn::Embedding emb(5, 3);
  REQUIRE(names_of(emb.named_parameters()) == std::vector<std::string>{"weight"});
  emb.weight.copy_(wave({5, 3}, 0.3, 1.0));
  std::vector<int32_t> ids = {4, 0, 2, 2, 1, 3};
  Tensor y = emb.forward(ids, {2, 3});
  REQUIRE(y.shape() == Shape{2, 3, 3});
  for (int64_t i = 0; i < 6; ++i)
    for (int64_t c = 0; c < 3; ++c) {
      const double expected = std::sin(0.37 * static_cast<double>(ids[i] * 3 + c) + 0.3);
      REQUIRE(y.at({i / 3, i % 3, c}) == Approx(expected).margin(1e-6));
    }
  REQUIRE_THROWS_AS(emb.forward({0, 5}, {2}), Error);
  REQUIRE_THROWS_AS(emb.forward({0, -1}, {2}), Error);
}

TEST_CASE("Embedding init is normal(0, 1) and seedable", "[layers]") {
  Generator g(9);
  nn::Embedding emb(1000, 64, &g);
  auto w = emb.weight.to_vector<double>();
  REQUIRE(std::abs(mean_of(w)) < 0.02);  // 64000 draws: the sample mean's sd is 0.004
  REQUIRE(std_of(w) == Approx(1.0).epsilon(0.02));
  Generator g2(9);
  nn::Embedding same(1000, 64, &g2);
  REQUIRE(same.weight.to_vector<float>() == emb.weight.to_vector<float>());
}

TEST_CASE("Embedding gradcheck over the weight, ids repeated (float64)", "[layers]") {
  Generator gen(4);
  nn::Embedding emb(6, 4, &gen);
  emb.to(DType::f64);
  std::vector<int32_t> ids = {1, 3, 1, 5, 0, 1};  // id 1 three times: its gradient sums
  require_gradcheck([&](const std::vector<Tensor>&) { return emb.forward(ids, {3, 2}); }, {emb.weight});
}

// torch 1.13: w = torch.arange(12, dtype=torch.float32).reshape(4, 3) / 10
// F.embedding(torch.tensor([[3, 0, 3], [1, 2, 0]]), w).flatten().tolist() ->
// [0.9, 1.0, 1.1, 0.0, 0.1, 0.2, 0.9, 1.0, 1.1, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.0, 0.1, 0.2] (float32)
TEST_CASE("Embedding takes an int32 or int64 id tensor of any shape, as self.wte(idx)", "[layers]") {
  nn::Embedding emb(4, 3);
  emb.weight.copy_(Tensor::arange(12, DType::f32).view({4, 3}) / 10.0);
  const std::vector<double> expected = {0.9, 1.0, 1.1, 0.0, 0.1, 0.2, 0.9, 1.0, 1.1, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.0, 0.1, 0.2};
  const Tensor ids = Tensor({{3, 0, 3}, {1, 2, 0}});  // int64
  require_values(emb.forward(ids), {2, 3, 3}, expected, 1e-7);
  require_values(emb.forward(ids.to(DType::i32)), {2, 3, 3}, expected, 1e-7);
  // The same rows as the (ids, shape) form, for any shape: (6), a scalar id, a transposed view.
  REQUIRE(emb.forward(ids).to_vector<float>() == emb.forward({3, 0, 3, 1, 2, 0}, {2, 3}).to_vector<float>());
  require_values(emb.forward(ids.view({6})), {6, 3}, expected, 1e-7);
  require_values(emb.forward(Tensor::scalar(2, DType::i64)), {3}, {0.6, 0.7, 0.8}, 1e-7);
  require_values(emb.forward(ids.transpose(0, 1))[0], {2, 3}, {0.9, 1.0, 1.1, 0.3, 0.4, 0.5}, 1e-7);
  CHECK_THROWS_WITH(emb.forward(Tensor({0, 4})), Catch::Contains("embedding: id 4 at position 1 is out of range for 4 embeddings"));
  CHECK_THROWS_WITH(emb.forward(Tensor({0.0, 1.0})), Catch::Contains("embedding: ids must be int32 or int64, got float32"));

  // Gradients (float64): a repeated id sums its rows' gradients, through a non-contiguous ids
  // view and with the weight used twice (two lookups added).
  Generator gen(5);
  nn::Embedding emb64(6, 4, &gen);
  emb64.to(DType::f64);
  const Tensor rep = Tensor({{1, 3, 1}, {5, 1, 0}}).transpose(0, 1);  // (3, 2), not contiguous; id 1 three times
  require_gradcheck([&](const std::vector<Tensor>&) { return emb64.forward(rep); }, {emb64.weight});
  require_gradcheck([&](const std::vector<Tensor>&) { return emb64.forward(rep) + emb64.forward(Tensor({{2, 1}, {1, 4}, {0, 0}})); },
                    {emb64.weight});
  emb64.weight.zero_grad();  // whatever the checks above left
  Tensor loss = emb64.forward(rep).sum();
  loss.backward();
  require_values(emb64.weight.grad().sum(1), {6}, {4, 12, 0, 4, 0, 4}, 0);  // 4 channels x (count of each id)
}

// ------------------------------------------------------------------------------------ Dropout

TEST_CASE("Dropout is the identity in eval mode and for p = 0", "[layers]") {
  Tensor x = wave({4, 8}, 0.2, 1.0);
  nn::Dropout d(0.5, 1);
  d.eval();
  REQUIRE(d.forward(x).to_vector<float>() == x.to_vector<float>());
  nn::Dropout zero(0.0, 1);
  REQUIRE(zero.is_training());
  REQUIRE(zero.forward(x).to_vector<float>() == x.to_vector<float>());
  REQUIRE(d.named_parameters().empty());
}

TEST_CASE("Dropout rejects p < 0 and p >= 1", "[layers]") {
  REQUIRE_THROWS_AS(nn::Dropout(1.0), Error);
  REQUIRE_THROWS_AS(nn::Dropout(-0.1), Error);
  REQUIRE_THROWS_AS(nn::Dropout(1.5), Error);
  REQUIRE_NOTHROW(nn::Dropout(0.999));
}

TEST_CASE("Dropout in training keeps about 1-p of the elements, scaled by exactly 1/(1-p)", "[layers]") {
  const int64_t n = 100000;
  // Every x is in [0.5, 1.5], so a zero in the output marks a dropped element.
  Tensor x = wave({n}, 0.4, 0.5, DType::f32, 1.0);
  auto xv = x.to_vector<float>();
  for (double p : {0.1, 0.3, 0.5, 0.75}) {
    INFO("p = " << p);
    nn::Dropout d(p, 123);
    auto yv = d.forward(x).to_vector<float>();
    int64_t kept = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (yv[i] == 0.0f) continue;
      ++kept;
      if (p == 0.5 || p == 0.75) {
        // 1/(1-p) is a power of two: the scaled value is exact however it is computed
        REQUIRE(yv[i] == static_cast<float>(xv[i] / (1.0 - p)));
      } else {
        REQUIRE(yv[i] == Approx(xv[i] / (1.0 - p)).epsilon(1e-6));
      }
    }
    // Binomial(n, 1-p): 6 standard deviations.
    const double expected = static_cast<double>(n) * (1.0 - p);
    const double sd = std::sqrt(static_cast<double>(n) * p * (1.0 - p));
    REQUIRE(std::abs(static_cast<double>(kept) - expected) < 6.0 * sd);
  }
}

TEST_CASE("Dropout masks follow the seed, the gradient uses the same mask", "[layers]") {
  Tensor x = wave({1000}, 0.4, 0.5, DType::f32, 1.0);
  nn::Dropout a(0.3, 77), b(0.3, 77);
  auto ya = a.forward(x).to_vector<float>();
  REQUIRE(ya == b.forward(x).to_vector<float>());
  REQUIRE(ya != a.forward(x).to_vector<float>());  // the generator advanced
  a.seed(77);
  REQUIRE(ya == a.forward(x).to_vector<float>());

  // d(sum y)/dx is 1/(1-p) where kept and 0 where dropped.
  Tensor xg = wave({1000}, 0.4, 0.5, DType::f32, 1.0).requires_grad_();
  a.seed(77);
  Tensor y = a.forward(xg);
  sum(y).backward();
  auto g = xg.grad().to_vector<float>();
  auto yv = y.to_vector<float>();
  for (size_t i = 0; i < g.size(); ++i) {
    if (yv[i] == 0.0f) REQUIRE(g[i] == 0.0f);
    else REQUIRE(g[i] == Approx(1.0 / 0.7).epsilon(1e-6));
  }
}

TEST_CASE("Dropout gradcheck with a fixed mask (float64)", "[layers]") {
  nn::Dropout d(0.4, 5);
  Tensor x = test::randn64({3, 7}, 21);
  require_gradcheck([&](const std::vector<Tensor>& in) {
    d.seed(5);  // the same mask on every evaluation
    return d.forward(in[0]);
  }, {x});
}

// ------------------------------------------------------------------------------------ LayerNorm

TEST_CASE("LayerNorm forward matches PyTorch: affine, no bias, no affine", "[layers]") {
  Tensor x = wave({3, 5}, 0.2, 2.0, DType::f32, 0.5);
  nn::LayerNorm ln(5);
  REQUIRE(ln.weight.to_vector<float>() == std::vector<float>(5, 1.0f));
  REQUIRE(ln.bias.to_vector<float>() == std::vector<float>(5, 0.0f));
  ln.weight.copy_(wave({5}, 0.3, 0.5, DType::f32, 1.0));
  ln.bias.copy_(wave({5}, 0.7, 0.3));
  // ln
  require_values(ln.forward(x), {3, 5},
                 {-1.73814986, -0.445901218, 0.807057855, 1.61658984, 1.70612014, 1.67453935, 1.3025057,
                  0.439818611, -0.748619333, -1.96792652, 1.98675285, -0.169730407, -1.35010443, -0.886662041,
                  1.29985615});

  nn::LayerNorm nobias(5, 1e-5, true, false);
  REQUIRE_FALSE(nobias.bias.defined());
  REQUIRE(names_of(nobias.named_parameters()) == std::vector<std::string>{"weight"});
  nobias.weight.copy_(wave({5}, 0.3, 0.5, DType::f32, 1.0));
  // ln_nobias
  require_values(nobias.forward(x), {3, 5},
                 {-1.93141516, -0.709061369, 0.50962035, 1.32513175, 1.46008896, 1.48127405, 1.03934555,
                  0.142381107, -1.04007742, -2.2139577, 1.79348755, -0.432890558, -1.64754194, -1.17812013,
                  1.05382497});

  nn::LayerNorm plain(5, 1e-5, false);
  REQUIRE(plain.named_parameters().empty());
  // ln_noaffine
  require_values(plain.forward(x), {3, 5},
                 {-1.68276904, -0.541064601, 0.356078534, 0.887236253, 0.980518852, 1.29057809, 0.793095081,
                  0.0994835777, -0.696379354, -1.4867774, 1.56259792, -0.330326496, -1.15115952, -0.788805254,
                  0.707693351});
  REQUIRE(names_of(ln.named_parameters()) == std::vector<std::string>{"weight", "bias"});
  REQUIRE_THROWS_AS(ln.forward(Tensor::zeros({2, 4})), Error);
}

TEST_CASE("LayerNorm gradcheck over input, weight and bias (float64)", "[layers]") {
  nn::LayerNorm ln(6);
  ln.to(DType::f64);
  ln.weight.copy_(wave({6}, 0.3, 0.5, DType::f64, 1.0));
  ln.bias.copy_(wave({6}, 0.7, 0.3, DType::f64));
  Tensor x = test::randn64({2, 3, 6}, 31);
  require_gradcheck([&](const std::vector<Tensor>& in) { return ln.forward(in[0]); }, {x, ln.weight, ln.bias});

  nn::LayerNorm nobias(6, 1e-5, true, false);
  nobias.to(DType::f64);
  nobias.weight.copy_(wave({6}, 0.3, 0.5, DType::f64, 1.0));
  require_gradcheck([&](const std::vector<Tensor>& in) { return nobias.forward(in[0]); }, {x, nobias.weight});

  nn::LayerNorm plain(6, 1e-5, false);
  require_gradcheck([&](const std::vector<Tensor>& in) { return plain.forward(in[0]); }, {x});
}

// ------------------------------------------------------------------------------------ activations

TEST_CASE("GELU and ReLU modules match PyTorch, gradchecks", "[layers]") {
  Tensor x = wave({8}, 0.05, 3.0, DType::f32, -1.2);
  nn::GELU gelu_m;
  nn::ReLU relu_m;
  // gelu
  require_values(gelu_m.forward(x), {8},
                 {-0.154196102, 0.0118568954, 0.767275864, 1.45657599, 1.73256391, 1.55594402, 0.946424388,
                  0.1444602});
  // relu
  require_values(relu_m.forward(x), {8},
                 {0, 0.0232813592, 0.931059817, 1.55040933, 1.79750384, 1.63890026, 1.09606486, 0.242467845});
  REQUIRE(nn::apply_activation(nn::Activation::gelu, x).to_vector<float>() == gelu_m.forward(x).to_vector<float>());
  REQUIRE(nn::apply_activation(nn::Activation::relu, x).to_vector<float>() == relu_m.forward(x).to_vector<float>());
  REQUIRE(gelu_m.named_parameters().empty());
  // The other activation modules are their functions (whose values core/test_elementwise checks
  // against torch), with no parameters.
  nn::SiLU silu_m;
  nn::Sigmoid sigmoid_m;
  nn::Tanh tanh_m;
  REQUIRE(silu_m.forward(x).to_vector<float>() == silu(x).to_vector<float>());
  REQUIRE(sigmoid_m.forward(x).to_vector<float>() == sigmoid(x).to_vector<float>());
  REQUIRE(tanh_m.forward(x).to_vector<float>() == tanh(x).to_vector<float>());
  REQUIRE(silu_m.named_parameters().empty());

  Tensor x64 = wave({3, 8}, 0.05, 3.0, DType::f64, -1.2).requires_grad_();  // no element within 0.02 of 0
  for (double v : x64.to_vector<double>()) REQUIRE(std::abs(v) > 0.02);
  require_gradcheck([&](const std::vector<Tensor>& in) { return gelu_m.forward(in[0]); }, {x64});
  require_gradcheck([&](const std::vector<Tensor>& in) { return relu_m.forward(in[0]); }, {x64});
}

// x = wave(8, 0.05, 3.0) - 1.2; show("gelu_tanh", nn.GELU(approximate="tanh")(x))
TEST_CASE("GELU(GeluApproximation::tanh) is nn.GELU(approximate='tanh'), gradcheck, and the default stays exact", "[layers]") {
  Tensor x = wave({8}, 0.05, 3.0, DType::f32, -1.2);
  nn::GELU tanh_m(GeluApproximation::tanh), exact_m;
  REQUIRE(tanh_m.approximate() == GeluApproximation::tanh);
  REQUIRE(exact_m.approximate() == GeluApproximation::none);
  require_values(tanh_m.forward(x), {8},
                 {-0.154366137, 0.0118568953, 0.767147532, 1.45637292, 1.73249618, 1.55577779, 0.946239333,
                  0.144459108}, 1e-6);
  REQUIRE(tanh_m.forward(x).to_vector<float>() == gelu(x, GeluApproximation::tanh).to_vector<float>());
  REQUIRE(exact_m.forward(x).to_vector<float>() == gelu(x).to_vector<float>());
  REQUIRE(tanh_m.named_parameters().empty());
  Tensor x64 = wave({3, 8}, 0.05, 3.0, DType::f64, -1.2).transpose(0, 1).detach().requires_grad_();  // strided
  require_gradcheck([&](const std::vector<Tensor>& in) { return tanh_m.forward(in[0]); }, {x64});
  require_gradcheck([&](const std::vector<Tensor>& in) { return tanh_m.forward(in[0]) * in[0]; }, {x64});
}

// ------------------------------------------------------------------------------------ FeedForward

TEST_CASE("FeedForward has nanoGPT's MLP names and matches PyTorch (GELU and ReLU)", "[layers]") {
  for (auto act : {nn::Activation::gelu, nn::Activation::relu}) {
    nn::FeedForward ff(4, 6, {.activation = act});
    REQUIRE(names_of(ff.named_parameters()) ==
            std::vector<std::string>{"c_fc.weight", "c_fc.bias", "c_proj.weight", "c_proj.bias"});
    REQUIRE(ff.c_fc->weight.shape() == Shape{6, 4});
    REQUIRE(ff.c_proj->weight.shape() == Shape{4, 6});
    REQUIRE(ff.children().size() == 3);
    REQUIRE(ff.children()[2].first == "dropout");
    ff.c_fc->weight.copy_(wave({6, 4}, 1.1, 0.4));
    ff.c_fc->bias.copy_(wave({6}, 1.3, 0.1));
    ff.c_proj->weight.copy_(wave({4, 6}, 1.7, 0.4));
    ff.c_proj->bias.copy_(wave({4}, 1.9, 0.1));
    Tensor x = wave({2, 4}, 2.1, 1.0);
    if (act == nn::Activation::gelu) {
      // ffn_gelu
      require_values(ff.forward(x), {2, 4},
                     {0.287285081, -0.242403338, 0.241057582, 0.0987328162, 0.392456631, -0.328257157,
                      0.239692274, 0.186237435});
    } else {
      // ffn_relu
      require_values(ff.forward(x), {2, 4},
                     {0.425935604, -0.515582536, 0.432709267, 0.140185091, 0.510859432, -0.552618106,
                      0.392565315, 0.225758895});
    }
  }
  nn::FeedForward nobias(4, 16, {.dropout = 0.1, .bias = false});
  REQUIRE(names_of(nobias.named_parameters()) == std::vector<std::string>{"c_fc.weight", "c_proj.weight"});
  REQUIRE(nobias.dropout->p() == 0.1);
}

// The settings are named: the positional (dropout, bias) pair that took (64, 256, true, 0.1) as
// dropout 1.0 with a bias is gone.
static_assert(!std::is_constructible_v<nn::FeedForward, int64_t, int64_t, bool, double>);
static_assert(!std::is_constructible_v<nn::FeedForward, int64_t, int64_t, double, bool>);
static_assert(std::is_constructible_v<nn::FeedForward, int64_t, int64_t, nn::FeedForwardOptions>);

TEST_CASE("FeedForward gradcheck over input and every parameter (float64)", "[layers]") {
  Generator gen(8);
  nn::FeedForward ff(4, 8, {.gen = &gen});
  ff.to(DType::f64);
  Tensor x = test::randn64({2, 3, 4}, 41);
  std::vector<Tensor> inputs = {x};
  for (auto& p : ff.parameters()) inputs.push_back(p);
  REQUIRE(inputs.size() == 5);
  require_gradcheck([&](const std::vector<Tensor>& in) { return ff.forward(in[0]); }, inputs);

  // With dropout in training mode, reseeded so each evaluation sees the same mask.
  nn::FeedForward drop(4, 8, {.dropout = 0.25, .gen = &gen, .dropout_seed = 99});
  drop.to(DType::f64);
  std::vector<Tensor> inputs2 = {x};
  for (auto& p : drop.parameters()) inputs2.push_back(p);
  require_gradcheck([&](const std::vector<Tensor>& in) {
    drop.dropout->seed(99);
    return drop.forward(in[0]);
  }, inputs2);
}

TEST_CASE("residual connections around Linear and FeedForward (r + f(x), x + f(x)) pass gradcheck (float64)",
          "[layers]") {
  // Blocks write their residual connections with add (there is no second, fused forward): the
  // gradient must flow into both the residual and the sublayer, and into x twice when it is both.
  Generator gen(9);
  nn::Linear lin(4, 4, true, &gen);
  lin.to(DType::f64);
  Tensor x = test::randn64({2, 3, 4}, 51), r = test::randn64({2, 3, 4}, 52);
  require_gradcheck([&](const std::vector<Tensor>& in) { return in[1] + lin.forward(in[0]); },
                    {x, r, lin.weight, lin.bias});
  require_gradcheck([&](const std::vector<Tensor>& in) { return in[0] + lin.forward(in[0]); },
                    {x, lin.weight, lin.bias});
  REQUIRE_THROWS_WITH(lin.forward(test::randn64({2, 5}, 53)), Catch::Contains("Linear") && Catch::Contains("in_features"));

  for (double p : {0.0, 0.25}) {
    INFO("dropout " << p);
    nn::FeedForward ff(4, 8, {.dropout = p, .bias = false, .gen = &gen, .dropout_seed = 7});
    ff.to(DType::f64);
    Tensor fx = test::randn64({2, 3, 4}, 55), fr = test::randn64({2, 3, 4}, 56);
    std::vector<Tensor> inputs = {fx, fr};
    for (auto& param : ff.parameters()) inputs.push_back(param);
    require_gradcheck([&](const std::vector<Tensor>& in) {
      ff.dropout->seed(7);  // the same mask on every evaluation
      return in[1] + ff.forward(in[0]);
    }, inputs);
    inputs.erase(inputs.begin() + 1);
    require_gradcheck([&](const std::vector<Tensor>& in) {
      ff.dropout->seed(7);
      return in[0] + ff.forward(in[0]);
    }, inputs);
  }
}

TEST_CASE("SinusoidalPositionalEncoding follows the paper's formula", "[layers]") {
  nn::SinusoidalPositionalEncoding pe(6, 10);
  REQUIRE(pe.named_parameters().empty());
  const Tensor& t = pe.table(DType::f64);
  REQUIRE(t.shape() == Shape{10, 6});
  // PE[1, 0] = sin(1), PE[1, 1] = cos(1); PE[0, 2i] = 0, PE[0, 2i+1] = 1.
  REQUIRE(t.at({1, 0}) == Approx(0.8414709848078965).margin(1e-15));
  REQUIRE(t.at({1, 1}) == Approx(0.5403023058681398).margin(1e-15));
  for (int64_t i = 0; i < 3; ++i) {
    REQUIRE(t.at({0, 2 * i}) == 0.0);
    REQUIRE(t.at({0, 2 * i + 1}) == 1.0);
  }
  for (int64_t pos : {2, 5, 9})
    for (int64_t i : {0, 1, 2}) {
      const double angle = static_cast<double>(pos) / std::pow(10000.0, 2.0 * static_cast<double>(i) / 6.0);
      REQUIRE(t.at({pos, 2 * i}) == Approx(std::sin(angle)).margin(1e-12));
      REQUIRE(t.at({pos, 2 * i + 1}) == Approx(std::cos(angle)).margin(1e-12));
    }
  // PE[7, 4] with d = 6: angle 7 / 10000^(4/6) = 7 / 464.158883 = 0.0150810...
  REQUIRE(t.at({7, 4}) == Approx(std::sin(7.0 / 464.15888336127773)).margin(1e-12));
  // An odd width ends on a sine column.
  nn::SinusoidalPositionalEncoding odd(5, 4);
  REQUIRE(odd.table(DType::f64).at({3, 4}) == Approx(std::sin(3.0 / std::pow(10000.0, 0.8))).margin(1e-12));
}

TEST_CASE("SinusoidalPositionalEncoding adds the first T rows of PE in x's dtype, errors, gradcheck", "[layers]") {
  nn::SinusoidalPositionalEncoding pe(6, 10);
  Tensor x = wave({2, 3, 6}, 0.6, 1.0);
  Tensor y = pe.forward(x);
  REQUIRE(y.dtype() == DType::f32);
  REQUIRE(y.shape() == Shape{2, 3, 6});
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t s = 0; s < 3; ++s)
      for (int64_t c = 0; c < 6; ++c)
        REQUIRE(y.at({b, s, c}) == Approx(x.at({b, s, c}) + pe.table(DType::f64).at({s, c})).margin(1e-6));
  REQUIRE_THROWS_AS(pe.forward(Tensor::zeros({1, 11, 6})), Error);
  REQUIRE_THROWS_AS(pe.forward(Tensor::zeros({1, 3, 5})), Error);
  REQUIRE_NOTHROW(pe.forward(Tensor::zeros({1, 10, 6})));

  Tensor x64 = test::randn64({2, 4, 6}, 51);
  Tensor y64 = pe.forward(x64);
  REQUIRE(y64.dtype() == DType::f64);
  require_gradcheck([&](const std::vector<Tensor>& in) { return pe.forward(in[0]); }, {x64});
}

TEST_CASE("LearnedPositionalEmbedding returns the first T rows, gradcheck", "[layers]") {
  Generator gen(6);
  nn::LearnedPositionalEmbedding wpe(8, 4, &gen);
  REQUIRE(names_of(wpe.named_parameters()) == std::vector<std::string>{"weight"});
  REQUIRE(wpe.weight.shape() == Shape{8, 4});
  Tensor p = wpe.forward(3);
  REQUIRE(p.shape() == Shape{3, 4});
  auto w = wpe.weight.to_vector<float>();
  auto pv = p.to_vector<float>();
  REQUIRE(std::vector<float>(w.begin(), w.begin() + 12) == pv);
  REQUIRE_THROWS_AS(wpe.forward(9), Error);
  REQUIRE_THROWS_AS(wpe.forward(0), Error);

  wpe.to(DType::f64);
  require_gradcheck([&](const std::vector<Tensor>&) { return mul(wpe.forward(5), 1.0); }, {wpe.weight});
}

// ------------------------------------------------------------------------------------ init

TEST_CASE("init helpers fill in place, keep aliases, and draw the requested distributions", "[layers]") {
  Generator gen(12);
  nn::Linear lin(128, 256, true, &gen);
  Tensor alias = lin.weight;
  nn::init::normal_(lin.weight, 0.0, 0.02, gen);
  auto w = alias.to_vector<double>();  // the alias sees the new values
  REQUIRE(std::abs(mean_of(w)) < 0.001);  // 32768 draws: sd of the mean is 1.1e-4
  REQUIRE(std_of(w) == Approx(0.02).epsilon(0.02));
  nn::init::normal_(lin.weight, 3.0, 0.5, gen);  // torch's order: mean, then std
  REQUIRE(mean_of(alias.to_vector<double>()) == Approx(3.0).epsilon(0.01));
  REQUIRE(std_of(alias.to_vector<double>()) == Approx(0.5).epsilon(0.02));

  nn::init::uniform_(lin.bias, -0.25, 0.75, gen);
  for (double v : lin.bias.to_vector<double>()) REQUIRE((v >= -0.25 && v < 0.75));
  REQUIRE(mean_of(lin.bias.to_vector<double>()) == Approx(0.25).margin(0.06));
  nn::zeros_(lin.bias);
  REQUIRE(lin.bias.to_vector<float>() == std::vector<float>(256, 0.0f));
  nn::ones_(lin.bias);
  REQUIRE(lin.bias.to_vector<float>() == std::vector<float>(256, 1.0f));
  REQUIRE(lin.bias.requires_grad());
  REQUIRE(lin.bias.grad_fn() == nullptr);  // outside autograd: still a leaf

  Tensor d = Tensor::zeros({1000}, DType::f64);
  nn::init::normal_(d, 0.0, 1.0, gen);
  REQUIRE(d.dtype() == DType::f64);
  REQUIRE(std_of(d.to_vector<double>()) == Approx(1.0).epsilon(0.1));
}
