// MultiHeadAttention: values against PyTorch, gradient checks (self, causal, padded, cross),
// causality, padding and cross-attention properties. The attention ops themselves
// (attention_softmax, attention_heads) are tested in tests/core/test_attention_ops.cpp.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cstring>
#include <cmath>
#include <limits>
#include <vector>

#include "core/heed.h"
#include "nn/attention.h"
#include "support/helpers.h"

using namespace heed;
using heed::test::randn64;
using heed::test::require_gradcheck;
using heed::test::require_values;

namespace {

// amp * sin(0.37 n + phase) over the flat index n: deterministic values both here and in PyTorch.
Tensor formula(const Shape& shape, double phase, double amp) {
  std::vector<double> v(numel_of(shape));
  for (size_t n = 0; n < v.size(); ++n) v[n] = amp * std::sin(0.37 * static_cast<double>(n) + phase);
  return Tensor::from_vector(v, shape);
}

// Sets the weights used by tests/nn ref.py below: c_attn rows [0,C) = W_q, [C,2C) = W_k, [2C,3C) = W_v.
void set_reference_weights(nn::MultiHeadAttention& m) {
  const int64_t C = m.options().d_model;
  Tensor wa = formula({3 * C, C}, 1.0, 0.3), ba = formula({3 * C}, 2.0, 0.1);
  if (m.options().fused_qkv) {
    m.c_attn->weight.copy_(wa);
    m.c_attn->bias.copy_(ba);
  } else {
    m.q_proj->weight.copy_(slice(wa, 0, 0, C));
    m.k_proj->weight.copy_(slice(wa, 0, C, 2 * C));
    m.v_proj->weight.copy_(slice(wa, 0, 2 * C, 3 * C));
    m.q_proj->bias.copy_(slice(ba, 0, 0, C));
    m.k_proj->bias.copy_(slice(ba, 0, C, 2 * C));
    m.v_proj->bias.copy_(slice(ba, 0, 2 * C, 3 * C));
  }
  m.c_proj->weight.copy_(formula({C, C}, 3.0, 0.3));
  m.c_proj->bias.copy_(formula({C}, 4.0, 0.1));
}

// Gradient check over the input(s) and every parameter of `m` (float64).
void check_module_grads(nn::Module& m, const std::vector<Tensor>& inputs, const GradcheckFn& fn,
                        int64_t max_checks = -1) {
  std::vector<Tensor> all = inputs;
  for (const auto& p : m.parameters()) all.push_back(p);
  GradcheckOptions opt = heed::test::tight_gradcheck();
  opt.max_checks = max_checks;
  require_gradcheck(fn, all, opt);
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](float x, float y) {
           return std::memcmp(&x, &y, sizeof(float)) == 0;
         });
}

}  // namespace

// The reference, a hand-written attention in PyTorch with the same formula weights:
//   /usr/bin/python3 ref.py, where ref.py is
//   import torch, math
//   def f(shape, phase, amp):
//       n = torch.arange(math.prod(shape), dtype=torch.float64)
//       return (amp * torch.sin(0.37 * n + phase)).reshape(shape)
//   B, T, C, nh = 2, 3, 8, 2; hd = C // nh
//   x = f((B, T, C), 0.5, 1.5); m = f((B, 5, C), 0.9, 1.2)
//   Wa = f((3 * C, C), 1.0, 0.3); ba = f((3 * C,), 2.0, 0.1); Wp = f((C, C), 3.0, 0.3); bp = f((C,), 4.0, 0.1)
//   def mha(xq, xkv, causal=False, pad=None):
//       q = xq @ Wa[:C].T + ba[:C]; k = xkv @ Wa[C:2*C].T + ba[C:2*C]; v = xkv @ Wa[2*C:].T + ba[2*C:]
//       Bq, Tq, Tk = q.shape[0], q.shape[1], k.shape[1]
//       q, k, v = [t.view(Bq, -1, nh, hd).transpose(1, 2) for t in (q, k, v)]
//       s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
//       if causal: s = s.masked_fill(torch.ones(Tq, Tk, dtype=torch.bool).triu(1), float('-inf'))
//       if pad is not None: s = s.masked_fill(pad[:, None, None, :], float('-inf'))
//       y = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(Bq, Tq, C)
//       return y @ Wp.T + bp
//   pad = torch.tensor([[0, 0, 0, 0, 0], [0, 0, 0, 1, 1]], dtype=torch.bool)
//   for out in (mha(x, x), mha(x, x, causal=True), mha(x, m, pad=pad)):
//       print(', '.join('%.10g' % v for v in out.flatten().tolist()))
TEST_CASE("MultiHeadAttention matches a hand-written PyTorch attention (scale applied once)",
          "[attention]") {
  const std::vector<double> self_ref = {
      -0.4098936133, 0.1850397808,  -0.3150363807, 0.05164201132, -0.1398341677, -0.05229544062, 0.08186140539,
      -0.1329303725, 0.3874326725,  -0.518844688,  0.2722587671,  -0.3997503949, 0.1608112889,   -0.1923071093,
      0.05663495014, 0.05670462526, -0.4260059843, 0.1932962295,  -0.3151653908, 0.04363934023,  -0.1239629862,
      -0.07551320266, 0.1116622232, -0.1683342352, 0.09829866712, -0.3268208521, 0.1836598763,   -0.4174900569,
      0.2843061283,  -0.4174959521, 0.376112377,   -0.3465552511, -0.2128786232, 0.05954177786,  -0.2651824137,
      0.07907154663, -0.2436451748, 0.1244831745,  -0.1620713868, 0.1701347757,  0.1019902931,   -0.330750249,
      0.1876978245,  -0.4215037669, 0.2881636077,  -0.4210703463, 0.3792861408,  -0.3492240139};
  const std::vector<double> causal_ref = {
      -0.235038012,  0.1132312948,  -0.3486364589, 0.1895457027,  -0.3775064577, 0.2773295059,   -0.328876358,
      0.3454129428,  0.3917662959,  -0.5240553087, 0.278175032,   -0.4061777453, 0.1675383591,   -0.199112677,
      0.06329521164, 0.05040869507, -0.4260059843, 0.1932962295,  -0.3151653908, 0.04363934023,  -0.1239629862,
      -0.07551320266, 0.1116622232, -0.1683342352, 0.1104304168,  -0.3540846234, 0.2251590899,   -0.4718599957,
      0.3497588164,  -0.4918789535, 0.4569795788,  -0.4312473051, -0.212699741,  0.06025149237,  -0.2667573856,
      0.08145998243, -0.2467685298, 0.1282387361,  -0.166335652,  0.1747675125,  0.1019902931,   -0.330750249,
      0.1876978245,  -0.4215037669, 0.2881636077,  -0.4210703463, 0.3792861408,  -0.3492240139};
  const std::vector<double> cross_ref = {
      -0.4000216022, 0.1692457949,  -0.2938398111, 0.02573991519, -0.1100783451, -0.08492645823, 0.1162945348,
      -0.1680332675, 0.2824225553,  -0.4332507242, 0.2088957463,  -0.3607020337, 0.1473617073,   -0.2048986018,
      0.09485344077, -0.005884034163, -0.4005106718, 0.1680526771, -0.291003742, 0.02135415994,  -0.1042871309,
      -0.09193268509, 0.124285372,  -0.1767459333, 0.0712068601,  -0.2926138196, 0.1434625295,   -0.3726243004,
      0.2362473894,  -0.3678246604, 0.3264619914,  -0.2985585432, -0.1917624649, 0.02323348349,  -0.214875995,
      0.01642134909, -0.1707114735, 0.04366442153, -0.07602533713, 0.08169108578, 0.07197878067, -0.2930098513,
      0.1434696488,  -0.3722422731, 0.2354887786,  -0.3667144133, 0.325036619,   -0.2968649192};
  const Tensor x = formula({2, 3, 8}, 0.5, 1.5);
  const Tensor memory = formula({2, 5, 8}, 0.9, 1.2);
  const auto pad = nn::padding_mask_from_lengths({5, 3}, 5);

  for (bool fused : {true, false}) {
    INFO("fused_qkv " << fused);
    nn::MultiHeadAttention plain({.d_model = 8, .n_head = 2, .fused_qkv = fused});
    nn::MultiHeadAttention causal({.d_model = 8, .n_head = 2, .causal = true, .fused_qkv = fused});
    for (auto* m : {&plain, &causal}) {
      m->to(DType::f64);
      set_reference_weights(*m);
    }
    require_values(plain.forward(x), {2, 3, 8}, self_ref, 1e-9);
    require_values(causal.forward(x), {2, 3, 8}, causal_ref, 1e-9);
    require_values(plain.forward(x, memory, &pad), {2, 3, 8}, cross_ref, 1e-9);
  }
  // And in float32, the training dtype.
  nn::MultiHeadAttention m32({.d_model = 8, .n_head = 2, .causal = true});
  set_reference_weights(m32);
  require_values(m32.forward(x.to(DType::f32)), {2, 3, 8}, causal_ref, 1e-5);
}

// The attention between the projections, written with plain ops: per-head matmuls and the
// masked softmax. It checks the fused kernels at lengths past their blocking (column blocks and
// summation pieces of 64 keys), where the small-T gradchecks never reach.
Tensor reference_attention(nn::MultiHeadAttention& m, const Tensor& xq, const Tensor& xkv, const nn::KeyPaddingMask* mask) {
  const int64_t C = m.options().d_model, nh = m.options().n_head, hd = C / nh;
  const Tensor& w = m.c_attn->weight;
  const Tensor& b = m.c_attn->bias;
  auto heads = [&](const Tensor& src, int64_t role) {  // (B, T, C) projection -> (B, nh, T, hd)
    Tensor t = linear(src, slice(w, 0, role * C, (role + 1) * C), slice(b, 0, role * C, (role + 1) * C));
    return permute(reshape(t, {t.size(0), t.size(1), nh, hd}), {0, 2, 1, 3});
  };
  Tensor q = heads(xq, 0), k = heads(xkv, 1), v = heads(xkv, 2);
  Tensor p = nn::attention_softmax(matmul(q, transpose(k, -1, -2)), 1.0 / std::sqrt(static_cast<double>(hd)),
                                   m.options().causal, mask);
  Tensor y = permute(matmul(p, v), {0, 2, 1, 3});  // (B, Tq, nh, hd)
  return m.c_proj->forward(reshape(y, {xq.size(0), xq.size(1), C}));
}

TEST_CASE("MultiHeadAttention at long contexts equals per-head matmuls and softmax, values and gradients",
          "[attention]") {
  struct Case {
    int64_t Tq, Tk;
    bool causal, cross, padded;
    DType dtype;
    int64_t C = 24, nh = 2;
  };
  // 131 and 133 keys: three column blocks and three summation pieces, the last ones ragged;
  // Tq != Tk aligns the causal mask bottom-right; head_dim 12 is below one AVX-512 batch. The
  // float32 cases with head_dim 32 and 20 go through the 16 x 16 register transposes of keys and
  // values (whole tiles, ragged rows past 128, ragged columns past 16); 64 x 32 is the baby
  // config's head.
  for (const Case& c : {Case{131, 131, true, false, false, DType::f64}, Case{70, 133, false, true, true, DType::f64},
                        Case{70, 133, true, true, true, DType::f64}, Case{131, 131, true, false, false, DType::f32},
                        Case{97, 97, false, false, true, DType::f64}, Case{131, 131, true, false, false, DType::f32, 64},
                        Case{70, 133, true, true, true, DType::f32, 40}, Case{64, 64, true, false, false, DType::f32, 128, 4}}) {
    INFO("Tq " << c.Tq << " Tk " << c.Tk << " causal " << c.causal << " cross " << c.cross << " padded " << c.padded
               << " " << dtype_name(c.dtype) << " C " << c.C << " heads " << c.nh);
    const int64_t B = 2, C = c.C;
    nn::MultiHeadAttention m({.d_model = C, .n_head = c.nh, .causal = c.causal, .seed = 31});
    m.to(c.dtype);
    Generator gen(32);
    Tensor xq = Tensor::randn({B, c.Tq, C}, gen).to(c.dtype).requires_grad_();
    Tensor xkv = c.cross ? Tensor::randn({B, c.Tk, C}, gen).to(c.dtype).requires_grad_() : xq;
    const auto mask = nn::padding_mask_from_lengths({c.Tk, c.Tk - 40}, c.Tk);
    const nn::KeyPaddingMask* pm = c.padded ? &mask : nullptr;
    Tensor g = Tensor::randn({B, c.Tq, C}, gen).to(c.dtype);

    auto run = [&](bool fused) {  // output, then the gradients of the inputs and every parameter
      Tensor y = fused ? (c.cross ? m.forward(xq, xkv, pm) : m.forward(xq, pm)) : reference_attention(m, xq, xkv, pm);
      y.backward(g);
      std::vector<std::vector<double>> out = {y.to_vector<double>(), xq.grad().to_vector<double>()};
      if (c.cross) out.push_back(xkv.grad().to_vector<double>());
      for (auto& p : m.parameters()) out.push_back(p.grad().to_vector<double>());
      m.zero_grad();
      xq.zero_grad();
      xkv.zero_grad();
      return out;
    };
    const auto fused = run(true), reference = run(false);
    const double tol = c.dtype == DType::f64 ? 1e-10 : 2e-4;
    REQUIRE(fused.size() == reference.size());
    for (size_t i = 0; i < fused.size(); ++i) {
      INFO("tensor " << i << " (0: output, 1: d query input, then d memory input / parameters)");
      REQUIRE(fused[i].size() == reference[i].size());
      double worst = 0, scale = 1e-30;
      for (size_t j = 0; j < fused[i].size(); ++j) {
        worst = std::max(worst, std::abs(fused[i][j] - reference[i][j]));
        scale = std::max(scale, std::abs(reference[i][j]));
      }
      CHECK(worst <= tol * scale);
    }
  }
}

TEST_CASE("MultiHeadAttention rejects d_model not divisible by n_head, naming both", "[attention]") {
  REQUIRE_THROWS_AS(nn::MultiHeadAttention({.d_model = 10, .n_head = 3}), Error);
  REQUIRE_THROWS_WITH(nn::MultiHeadAttention({.d_model = 10, .n_head = 3}),
                      Catch::Contains("d_model (10)") && Catch::Contains("n_head (3)"));
  REQUIRE_NOTHROW(nn::MultiHeadAttention({.d_model = 12, .n_head = 3}));
  nn::MultiHeadAttention m({.d_model = 12, .n_head = 3});
  REQUIRE(m.head_dim() == 4);
  // Shape errors name the module and the shapes.
  REQUIRE_THROWS_WITH(m.forward(Tensor::zeros({2, 3, 8})), Catch::Contains("MultiHeadAttention") &&
                                                               Catch::Contains("[2, 3, 8]"));
  const auto bad = nn::padding_mask_from_lengths({3, 3, 3}, 3);
  REQUIRE_THROWS_WITH(m.forward(Tensor::zeros({2, 3, 12}), &bad), Catch::Contains("padding mask"));
}

TEST_CASE("MultiHeadAttention children use nanoGPT names", "[attention]") {
  auto names = [](const nn::Module& m) {
    std::vector<std::string> out;
    for (const auto& [n, _] : m.named_parameters()) out.push_back(n);
    return out;
  };
  nn::MultiHeadAttention fused({.d_model = 8, .n_head = 2});
  REQUIRE(names(fused) == std::vector<std::string>{"c_attn.weight", "c_attn.bias", "c_proj.weight", "c_proj.bias"});
  REQUIRE(fused.c_attn->weight.shape() == Shape{24, 8});
  nn::MultiHeadAttention sep({.d_model = 8, .n_head = 2, .fused_qkv = false, .bias = false});
  REQUIRE(names(sep) == std::vector<std::string>{"q_proj.weight", "k_proj.weight", "v_proj.weight", "c_proj.weight"});
  REQUIRE(fused.children().size() == 4);  // c_attn, c_proj, attn_dropout, resid_dropout
  REQUIRE(fused.children()[2].first == "attn_dropout");
  REQUIRE(fused.children()[3].first == "resid_dropout");
  // The seed fixes the init; different seeds differ; without a seed each module draws its own
  // root seed from the default generator, so two default-built modules differ.
  nn::MultiHeadAttention seeded({.d_model = 8, .n_head = 2, .seed = 3});
  nn::MultiHeadAttention again({.d_model = 8, .n_head = 2, .seed = 3});
  nn::MultiHeadAttention other({.d_model = 8, .n_head = 2, .seed = 7});
  nn::MultiHeadAttention unseeded({.d_model = 8, .n_head = 2});
  REQUIRE(again.c_attn->weight.to_vector<float>() == seeded.c_attn->weight.to_vector<float>());
  REQUIRE(again.c_proj->bias.to_vector<float>() == seeded.c_proj->bias.to_vector<float>());
  REQUIRE(other.c_attn->weight.to_vector<float>() != seeded.c_attn->weight.to_vector<float>());
  REQUIRE(unseeded.c_attn->weight.to_vector<float>() != fused.c_attn->weight.to_vector<float>());
}

TEST_CASE("MultiHeadAttention gradcheck: self-attention, non-causal", "[attention]") {
  for (bool fused : {true, false}) {
    INFO("fused_qkv " << fused);
    nn::MultiHeadAttention m({.d_model = 8, .n_head = 2, .fused_qkv = fused, .seed = 1});
    m.to(DType::f64);
    Tensor x = randn64({2, 4, 8}, 11);
    check_module_grads(m, {x}, [&](const std::vector<Tensor>& in) { return m.forward(in[0]); });
  }
}

TEST_CASE("MultiHeadAttention gradcheck: causal self-attention", "[attention]") {
  nn::MultiHeadAttention m({.d_model = 8, .n_head = 2, .causal = true, .seed = 2});
  m.to(DType::f64);
  Tensor x = randn64({2, 5, 8}, 12);
  check_module_grads(m, {x}, [&](const std::vector<Tensor>& in) { return m.forward(in[0]); });
}

TEST_CASE("MultiHeadAttention gradcheck: padded batch of different lengths", "[attention]") {
  const auto mask = nn::padding_mask_from_lengths({5, 3, 1}, 5);
  for (bool causal : {false, true}) {
    INFO("causal " << causal);
    nn::MultiHeadAttention m({.d_model = 8, .n_head = 2, .causal = causal, .seed = 3});
    m.to(DType::f64);
    Tensor x = randn64({3, 5, 8}, 13);
    check_module_grads(m, {x}, [&](const std::vector<Tensor>& in) { return m.forward(in[0], &mask); });
  }
}

TEST_CASE("MultiHeadAttention gradcheck: cross-attention with Tq != Tk and a memory mask", "[attention]") {
  const auto mask = nn::padding_mask_from_lengths({6, 4}, 6);
  for (bool fused : {false, true}) {
    INFO("fused_qkv " << fused);
    nn::MultiHeadAttention m({.d_model = 8, .n_head = 2, .fused_qkv = fused, .seed = 4});
    m.to(DType::f64);
    Tensor q = randn64({2, 3, 8}, 14), mem = randn64({2, 6, 8}, 15);
    check_module_grads(m, {q, mem}, [&](const std::vector<Tensor>& in) { return m.forward(in[0], in[1], &mask); });
  }
}

TEST_CASE("MultiHeadAttention gradcheck in training mode with dropout (masks replayed by reseeding)",
          "[attention]") {
  for (bool causal : {false, true}) {
    INFO("causal " << causal);
    nn::MultiHeadAttention m({.d_model = 8, .n_head = 2, .causal = causal, .dropout = 0.3, .seed = 14});
    m.to(DType::f64);
    Tensor x = randn64({2, 5, 8}, 18);
    auto run = [&](const std::vector<Tensor>& in) {
      m.attn_dropout->seed(3);
      m.resid_dropout->seed(4);
      return m.forward(in[0]);
    };
    check_module_grads(m, {x}, run);
    // The dropout really acted: eval mode gives other values.
    const auto train_out = run({x}).to_vector<double>();
    m.eval();
    REQUIRE(m.forward(x).to_vector<double>() != train_out);
  }
}

TEST_CASE("residual connections around MultiHeadAttention (r + attn(x), x + attn(x)), with and without dropout, "
          "gradcheck",
          "[attention]") {
  for (double p : {0.0, 0.3}) {
    INFO("dropout " << p);
    nn::MultiHeadAttention m({.d_model = 8, .n_head = 2, .causal = true, .bias = true, .dropout = p, .seed = 21});
    m.to(DType::f64);
    Tensor x = randn64({2, 5, 8}, 22), r = randn64({2, 5, 8}, 23);
    check_module_grads(m, {x, r}, [&](const std::vector<Tensor>& in) {
      m.attn_dropout->seed(3);  // the same masks on every evaluation
      m.resid_dropout->seed(4);
      return in[1] + m.forward(in[0]);
    });
    // x as its own residual, as a pre-norm block without the norm would use it.
    check_module_grads(m, {x}, [&](const std::vector<Tensor>& in) {
      m.attn_dropout->seed(3);
      m.resid_dropout->seed(4);
      return in[0] + m.forward(in[0]);
    });
  }
}

TEST_CASE("attention with every key masked gives zero weights and no NaN", "[attention]") {
  nn::MultiHeadAttention m({.d_model = 8, .n_head = 2, .seed = 5});
  m.set_keep_attention(true);
  Generator gen(6);
  Tensor x = Tensor::randn({2, 3, 8}, gen).requires_grad_();
  const auto mask = nn::padding_mask_from_lengths({3, 0}, 3);  // row 1 is all padding
  Tensor y = m.forward(x, &mask);
  for (float v : y.to_vector<float>()) REQUIRE(std::isfinite(v));
  for (float v : slice(m.last_attention(), 0, 1, 2).to_vector<float>()) REQUIRE(v == 0.0f);
  // Zero attention output: row 1 is c_proj(0) = c_proj.bias at every position.
  const auto bias = m.c_proj->bias.to_vector<float>();
  for (int64_t t = 0; t < 3; ++t)
    for (int64_t c = 0; c < 8; ++c) REQUIRE(y.at({1, t, c}) == bias[c]);
  sum(y).backward();
  for (float v : x.grad().to_vector<float>()) REQUIRE(std::isfinite(v));
}

TEST_CASE("causal attention: changing x at position t leaves outputs before t bitwise unchanged",
          "[attention]") {
  const int64_t B = 2, T = 6, C = 16;
  nn::MultiHeadAttention m({.d_model = C, .n_head = 4, .causal = true, .seed = 6});
  Generator gen(7);
  Tensor x = Tensor::randn({B, T, C}, gen);
  const Tensor y0 = m.forward(x);
  for (int64_t t : {0, 2, 5}) {
    Tensor x2 = x.clone();
    slice(x2, 1, t, t + 1).copy_(Tensor::randn({B, 1, C}, gen));
    const Tensor y1 = m.forward(x2);
    INFO("changed position " << t);
    if (t > 0) REQUIRE(bitwise_equal(slice(y0, 1, 0, t).to_vector<float>(), slice(y1, 1, 0, t).to_vector<float>()));
    REQUIRE(slice(y0, 1, t, T).to_vector<float>() != slice(y1, 1, t, T).to_vector<float>());
  }
  // The kept weights: rows sum to 1, the upper triangle is exactly zero.
  m.set_keep_attention(true);
  m.forward(x);
  const Tensor& a = m.last_attention();
  REQUIRE(a.shape() == Shape{B, 4, T, T});
  for (int64_t i = 0; i < T; ++i) {
    double row = 0;
    for (int64_t j = 0; j < T; ++j) {
      if (j > i) REQUIRE(a.at({1, 3, i, j}) == 0.0);
      row += a.at({1, 3, i, j});
    }
    REQUIRE(row == Approx(1.0).epsilon(1e-6));
  }
}

TEST_CASE("key padding: padded keys get exactly zero weight and do not affect other positions",
          "[attention]") {
  const int64_t B = 3, T = 5, C = 8;
  const auto mask = nn::padding_mask_from_lengths({5, 3, 2}, T);
  nn::MultiHeadAttention m({.d_model = C, .n_head = 2, .seed = 8});
  m.set_keep_attention(true);
  Generator gen(9);
  Tensor x = Tensor::randn({B, T, C}, gen);
  const Tensor y0 = m.forward(x, &mask);
  const Tensor a = m.last_attention();
  REQUIRE(a.shape() == Shape{B, 2, T, T});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j)
          if (mask.pad[b * T + j]) REQUIRE(a.at({b, h, i, j}) == 0.0);
          else REQUIRE(a.at({b, h, i, j}) > 0.0);
  // Rewrite the padded positions' inputs (large values): no output at a non-padded position may change.
  const std::vector<int64_t> lengths = {5, 3, 2};
  Tensor x2 = x.clone();
  for (int64_t b = 0; b < B; ++b)
    if (lengths[b] < T)
      slice(slice(x2, 0, b, b + 1), 1, lengths[b], T).copy_(Tensor::randn({1, T - lengths[b], C}, gen, 10.0));
  const Tensor y1 = m.forward(x2, &mask);
  for (int64_t b = 0; b < B; ++b) {
    INFO("row " << b);
    REQUIRE(bitwise_equal(slice(slice(y0, 0, b, b + 1), 1, 0, lengths[b]).to_vector<float>(),
                          slice(slice(y1, 0, b, b + 1), 1, 0, lengths[b]).to_vector<float>()));
  }
  // The padded queries themselves did change, and so does everything when a real key changes.
  REQUIRE(slice(y0, 0, 1, 2).to_vector<float>() != slice(y1, 0, 1, 2).to_vector<float>());
  Tensor x3 = x.clone();
  slice(slice(x3, 0, 1, 2), 1, 0, 1).copy_(Tensor::randn({1, 1, C}, gen));
  const Tensor y3 = m.forward(x3, &mask);
  for (int64_t t = 0; t < T; ++t) REQUIRE(y3.at({1, t, 0}) != y0.at({1, t, 0}));
}

TEST_CASE("cross-attention reads keys and values from the memory", "[attention]") {
  const int64_t B = 2, Tq = 3, Tk = 7, C = 8;
  for (bool fused : {false, true}) {
    INFO("fused_qkv " << fused);
    nn::MultiHeadAttention m({.d_model = C, .n_head = 2, .fused_qkv = fused, .seed = 10});
    m.set_keep_attention(true);
    Generator gen(11);
    Tensor q = Tensor::randn({B, Tq, C}, gen), mem = Tensor::randn({B, Tk, C}, gen);
    const Tensor y0 = m.forward(q, mem);
    REQUIRE(y0.shape() == Shape{B, Tq, C});
    REQUIRE(m.last_attention().shape() == Shape{B, 2, Tq, Tk});
    // Another memory: every output changes.
    const Tensor y1 = m.forward(q, Tensor::randn({B, Tk, C}, gen));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < Tq; ++t) REQUIRE(y0.at({b, t, 0}) != y1.at({b, t, 0}));
    // Another query at one position: only that position's output changes (no query mixing).
    Tensor q2 = q.clone();
    slice(q2, 1, 1, 2).copy_(Tensor::randn({B, 1, C}, gen));
    const Tensor y2 = m.forward(q2, mem);
    for (int64_t t : {0, 2})
      REQUIRE(bitwise_equal(slice(y0, 1, t, t + 1).to_vector<float>(), slice(y2, 1, t, t + 1).to_vector<float>()));
    REQUIRE(slice(y0, 1, 1, 2).to_vector<float>() != slice(y2, 1, 1, 2).to_vector<float>());
    // A memory of another length works.
    REQUIRE(m.forward(q, Tensor::randn({B, 2, C}, gen)).shape() == Shape{B, Tq, C});
  }
}

TEST_CASE("attention dropout drops weights with probability p and scales the rest by 1/(1-p)",
          "[attention]") {
  // q = k = 0 makes every weight 1/T (non-causal); v = x = one-hot rows and c_proj = identity
  // then put weight (i, j) at output (i, j): the dropped-out weights can be read off directly.
  const int64_t B = 64, T = 16, C = 16;
  const double p = 0.3;
  for (bool causal : {false, true}) {
    INFO("causal " << causal);
    nn::MultiHeadAttention m({.d_model = C, .n_head = 1, .causal = causal, .dropout = p, .seed = 15});
    std::vector<float> w(3 * C * C, 0.0f), eye(C * C, 0.0f);
    for (int64_t c = 0; c < C; ++c) w[(2 * C + c) * C + c] = 1.0f, eye[c * C + c] = 1.0f;
    m.c_attn->weight.copy_(Tensor::from_vector(w, {3 * C, C}));
    m.c_attn->bias.fill_(0.0);
    m.c_proj->weight.copy_(Tensor::from_vector(eye, {C, C}));
    m.c_proj->bias.fill_(0.0);
    m.train();
    m.resid_dropout->eval();  // only the attention weights are dropped here
    std::vector<float> x(B * T * C, 0.0f);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) x[(b * T + t) * C + t] = 1.0f;
    const auto y = m.forward(Tensor::from_vector(x, {B, T, C})).to_vector<float>();
    int64_t kept = 0, visible = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j) {
          const float v = y[(b * T + i) * C + j];
          if (causal && j > i) {
            REQUIRE(v == 0.0f);
            continue;
          }
          const double weight = 1.0 / static_cast<double>(causal ? i + 1 : T);
          ++visible;
          if (v != 0.0f) {
            ++kept;
            REQUIRE(v == Approx(weight / (1 - p)).epsilon(1e-5));
          }
        }
    // kept / visible ~ 1 - p; 5 standard deviations of a binomial proportion.
    const double sd = std::sqrt(p * (1 - p) / static_cast<double>(visible));
    REQUIRE(std::abs(static_cast<double>(kept) / static_cast<double>(visible) - (1 - p)) < 5 * sd);
  }
}

TEST_CASE("attention dropout is active in training and off in eval", "[attention]") {
  nn::MultiHeadAttention m({.d_model = 8, .n_head = 2, .dropout = 0.5, .seed = 12});
  Generator gen(13);
  Tensor x = Tensor::randn({2, 4, 8}, gen);
  m.eval();
  const auto e0 = m.forward(x).to_vector<float>();
  REQUIRE(m.forward(x).to_vector<float>() == e0);  // deterministic in eval
  m.train();
  REQUIRE(m.forward(x).to_vector<float>() != e0);
}

// PyTorch's nn.MultiheadAttention drops the weights only, and returns them dropped; nanoGPT's
// attention also drops the output (resid_dropout, heed's default).
TEST_CASE("attention dropout in training: the weights returned are the dropped ones, and resid_dropout is optional",
          "[attention]") {
  nn::MultiHeadAttention torch_like({.d_model = 16, .n_head = 4, .dropout = 0.5, .resid_dropout = 0.0, .seed = 3});
  nn::MultiHeadAttention nanogpt({.d_model = 16, .n_head = 4, .dropout = 0.5, .seed = 3});
  REQUIRE(torch_like.resid_dropout->p() == 0.0);
  REQUIRE(nanogpt.resid_dropout->p() == 0.5);
  Tensor x = randn64({2, 6, 16}, 4).detach();
  torch_like.to(DType::f64);
  torch_like.train();
  const auto [y, w] = torch_like.forward(x, x, x, {.need_weights = true, .average_attn_weights = false});
  // Dropped weights: some exact zeros, the rest scaled by 2, so rows no longer sum to 1.
  const std::vector<double> wv = w.to_vector<double>();
  REQUIRE(std::count(wv.begin(), wv.end(), 0.0) > static_cast<std::ptrdiff_t>(wv.size() / 4));
  const std::vector<double> rows = sum(w, -1).to_vector<double>();
  REQUIRE(std::any_of(rows.begin(), rows.end(), [](double r) { return std::abs(r - 1.0) > 1e-6; }));
  // And they are what multiplied v: y = c_proj(w @ v) with no dropout after c_proj.
  NoGradGuard no_grad;
  const Tensor v = reshape(slice(torch_like.c_attn->forward(x), 2, 32, 48), {2, 6, 4, 4}).permute({0, 2, 1, 3});
  const Tensor heads = reshape(matmul(w, v).permute({0, 2, 1, 3}), {2, 6, 16});
  require_values(y, {2, 6, 16}, torch_like.c_proj->forward(heads).to_vector<double>(), 1e-12);
}

// torch 1.13: mha(x, x, x, key_padding_mask=kpm) with a float kpm equals mha(x, x, x,
// attn_mask=kpm.view(B, 1, 1, Tk).expand(B, nh, 1, Tk).reshape(B * nh, 1, Tk).expand(B * nh, Tq, Tk)),
// outputs and weights to 0.0 (checked there); PyTorch 2 adds it to a float attn_mask too.
TEST_CASE("a float key_padding_mask is added to every head's scores, as PyTorch's, and is differentiable",
          "[attention]") {
  nn::MultiHeadAttention m({.d_model = 8, .n_head = 2, .seed = 5});
  m.to(DType::f64);
  m.eval();
  const Tensor x = randn64({2, 3, 8}, 6).detach();
  const Tensor kpm = Tensor({{0.0, -1.0, 0.5}, {0.0, 0.0, -INFINITY}}).to(DType::f64);
  const Tensor per_head = expand(reshape(expand(reshape(kpm, {2, 1, 1, 3}), {2, 2, 3, 3}), {4, 3, 3}), {4, 3, 3});
  const auto [y, w] = m.forward(x, x, x, {.key_padding_mask = kpm, .need_weights = true, .average_attn_weights = false});
  const auto [y_ref, w_ref] =
      m.forward(x, x, x, {.attn_mask = per_head.contiguous(), .need_weights = true, .average_attn_weights = false});
  require_values(y, {2, 3, 8}, y_ref.to_vector<double>(), 1e-14);
  require_values(w, {2, 2, 3, 3}, w_ref.to_vector<double>(), 1e-14);
  // The fused path (no weights asked for) agrees, and -inf is a bool mask's padding.
  require_values(m.forward(x, x, x, {.key_padding_mask = kpm}).output, {2, 3, 8}, y_ref.to_vector<double>(), 1e-14);
  const Tensor bool_pad = Tensor({{false, false, false}, {false, false, true}});
  const Tensor inf_pad = Tensor({{0.0, 0.0, 0.0}, {0.0, 0.0, -INFINITY}}).to(DType::f64);
  require_values(m.forward(x, x, x, {.key_padding_mask = inf_pad}).output, {2, 3, 8},
                 m.forward(x, x, x, {.key_padding_mask = bool_pad}).output.to_vector<double>(), 1e-14);
  // On top of a float attn_mask: the two are added.
  const Tensor fm = randn64({3, 3}, 7).detach();
  require_values(m.forward(x, x, x, {.key_padding_mask = kpm, .attn_mask = fm}).output, {2, 3, 8},
                 m.forward(x, x, x, {.attn_mask = add(per_head, fm).contiguous()}).output.to_vector<double>(), 1e-14);
  // A float32 attn_mask, taken alone for float64 inputs, is taken beside the float64 padding too
  // (the sum was refused: "add: dtypes differ", naming no attention).
  const Tensor fm32 = fm.to(DType::f32);
  require_values(m.forward(x, x, x, {.key_padding_mask = kpm, .attn_mask = fm32}).output, {2, 3, 8},
                 m.forward(x, x, x, {.key_padding_mask = kpm, .attn_mask = fm32.to(DType::f64)}).output.to_vector<double>(),
                 0);
  // Differentiable w.r.t. the mask (finite values), as an attn_mask is.
  require_gradcheck([&](const std::vector<Tensor>& in) { return m.forward(x, x, x, {.key_padding_mask = in[0]}).output; },
                    {randn64({2, 3}, 8)});
  REQUIRE_THROWS_WITH(m.forward(x, x, x, {.key_padding_mask = Tensor::zeros({2, 3})}),
                      Catch::Contains("a float32 key_padding_mask for float64 inputs"));
}

// ------------------------------------------------------------------------------------------
// PyTorch's nn.MultiheadAttention options: kdim / vdim, bias switches, attention masks,
// unbatched input, weights. Values against PyTorch: tests/nn/test_torch_attention.cpp.

namespace {
// A bool (Tq, Tk) mask, true = NOT allowed, that leaves key 0 to every query.
Tensor not_allowed(int64_t Tq, int64_t Tk, uint64_t seed) {
  return logical_and(randn64({Tq, Tk}, seed) > 0.3, Tensor::arange(Tk) != 0);
}
}  // namespace

TEST_CASE("MultiHeadAttention options: kdim, vdim and the bias switches shape the projections", "[attention]") {
  nn::MultiHeadAttention m({.d_model = 8, .n_head = 2, .kdim = 6, .vdim = 3, .fused_qkv = false, .out_bias = false});
  CHECK(m.q_proj->weight.shape() == Shape{8, 8});
  CHECK(m.k_proj->weight.shape() == Shape{8, 6});
  CHECK(m.v_proj->weight.shape() == Shape{8, 3});
  CHECK(m.k_proj->bias.defined());
  CHECK(!m.c_proj->bias.defined());
  nn::MultiHeadAttention n({.d_model = 8, .n_head = 2, .bias = false, .out_bias = true});
  CHECK(!n.c_attn->bias.defined());
  CHECK(n.c_proj->bias.defined());
  nn::MultiHeadAttention none({.d_model = 8, .n_head = 2, .bias = false});
  CHECK(!none.c_attn->bias.defined());
  CHECK(!none.c_proj->bias.defined());
  REQUIRE_THROWS_WITH(nn::MultiHeadAttention({.d_model = 8, .n_head = 2, .kdim = 6}),
                      Catch::Contains("fused_qkv") && Catch::Contains("kdim 6") && Catch::Contains("d_model (8)"));
  const Tensor q = Tensor::randn({2, 4, 8}), k = Tensor::randn({2, 5, 6}), v = Tensor::randn({2, 5, 3});
  CHECK(m.forward(q, k, v).output.shape() == Shape{2, 4, 8});
  REQUIRE_THROWS_WITH(m.forward(q, v, k), Catch::Contains("key must be (B, T, 6)"));
  REQUIRE_THROWS_WITH(m.forward(q, k, v, {.attn_mask = Tensor::zeros({5, 4})}),
                      Catch::Contains("attn_mask [5, 4]") && Catch::Contains("(B * n_head, Tq, Tk) = (4, 4, 5)"));
  REQUIRE_THROWS_WITH(m.forward(q, k, v, {.key_padding_mask = Tensor::zeros({2, 4})}),
                      Catch::Contains("key_padding_mask [2, 4]"));
  REQUIRE_THROWS_WITH(m.forward(q, k, v, {.attn_mask = Tensor::zeros({4, 5}, DType::i32)}),
                      Catch::Contains("bool") && Catch::Contains("int32"));
}

TEST_CASE("MultiHeadAttention masks: bool and float attention masks combine with padding and causal, the fused and "
          "the weights-returning paths agree",
          "[attention]") {
  const int64_t B = 2, Tq = 4, Tk = 6, nh = 2;
  const Tensor q = randn64({B, Tq, 8}, 80), kv = randn64({B, Tk, 8}, 81);
  const Tensor pad = Tensor({{false, false, false, false, false, false}, {false, false, false, false, true, true}});
  const Tensor bool_mask = not_allowed(Tq, Tk, 82);
  const Tensor float_mask = randn64({B * nh, Tq, Tk}, 83).detach();  // a constant: the fused path
  for (bool causal : {false, true}) {
    nn::MultiHeadAttention m({.d_model = 8, .n_head = nh, .causal = causal, .seed = 5});
    m.to(DType::f64);
    for (const Tensor& mask : {bool_mask, float_mask}) {
      INFO("causal " << causal << ", " << dtype_name(mask.dtype()) << " mask");
      const nn::AttentionArgs args{.key_padding_mask = pad, .attn_mask = mask};
      nn::AttentionArgs with_weights = args;
      with_weights.need_weights = true;
      with_weights.average_attn_weights = false;
      const auto fused = m.forward(q, kv, kv, args);
      const auto composed = m.forward(q, kv, kv, with_weights);
      require_values(fused.output, {B, Tq, 8}, composed.output.to_vector<double>(), 1e-12);
      REQUIRE(composed.weights.shape() == Shape{B, nh, Tq, Tk});
      // The weights: padded keys, masked pairs and (causal) keys j > i + Tk - Tq get exactly 0.
      const auto w = composed.weights.to_vector<double>();
      const auto bm = bool_mask.to_vector<double>(), pm = pad.to_vector<double>();
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < nh; ++h)
          for (int64_t i = 0; i < Tq; ++i) {
            double row = 0;
            for (int64_t j = 0; j < Tk; ++j) {
              const double x = w[((b * nh + h) * Tq + i) * Tk + j];
              row += x;
              const bool masked = pm[b * Tk + j] != 0 || (causal && j > i + Tk - Tq) ||
                                  (mask.dtype() == DType::boolean && bm[i * Tk + j] != 0);
              if (masked) REQUIRE(x == 0.0);
              else REQUIRE(x > 0.0);
            }
            REQUIRE(std::abs(row - 1.0) < 1e-12);
          }
      // Averaged weights are the mean over heads.
      const auto avg = m.forward(q, kv, kv, {.key_padding_mask = pad, .attn_mask = mask, .need_weights = true});
      require_values(avg.weights, {B, Tq, Tk}, mean(composed.weights, 1).to_vector<double>(), 1e-15);
    }
  }
}

TEST_CASE("MultiHeadAttention unbatched (T, C) input equals a batch of one, for self and cross attention",
          "[attention]") {
  nn::MultiHeadAttention m({.d_model = 8, .n_head = 2, .kdim = 5, .vdim = 5, .fused_qkv = false, .seed = 6});
  nn::MultiHeadAttention self({.d_model = 8, .n_head = 2, .causal = true, .seed = 7});
  const Tensor q = Tensor::randn({3, 8}), mem = Tensor::randn({4, 5}), x = Tensor::randn({3, 8});
  const Tensor mask = not_allowed(3, 4, 84), pad = Tensor({false, false, true, false});
  const auto un = m.forward(q, mem, mem, {.key_padding_mask = pad, .attn_mask = mask, .need_weights = true});
  const auto batched = m.forward(unsqueeze(q, 0), unsqueeze(mem, 0), unsqueeze(mem, 0),
                                 {.key_padding_mask = unsqueeze(pad, 0), .attn_mask = mask, .need_weights = true});
  require_values(un.output, {3, 8}, batched.output.to_vector<double>(), 0.0);
  require_values(un.weights, {3, 4}, batched.weights.to_vector<double>(), 0.0);
  require_values(self.forward(x), {3, 8}, self.forward(unsqueeze(x, 0)).to_vector<double>(), 0.0);
  const Tensor x2 = Tensor::randn({5, 8});
  require_values(self.forward(x, x2), {3, 8}, self.forward(unsqueeze(x, 0), unsqueeze(x2, 0)).to_vector<double>(), 0.0);
  REQUIRE_THROWS_WITH(self.forward(x, unsqueeze(x2, 0)), Catch::Contains("both unbatched"));
}

TEST_CASE("MultiHeadAttention gradcheck: attention masks (bool, float, with padding and causal), kdim != vdim, "
          "unbatched, non-contiguous inputs, returned weights",
          "[attention]") {
  const int64_t Tq = 3, Tk = 4;
  const Tensor pad = Tensor({{false, false, false, false}, {false, false, false, true}});
  const Tensor bool_mask = not_allowed(Tq, Tk, 85);
  const Tensor float_mask = randn64({Tq, Tk}, 86).detach();  // a constant: the fused path
  const Tensor q = randn64({2, Tq, 8}, 87);
  // Keys and values non-contiguous: transposes of (B, width, Tk) tensors.
  const Tensor kt = randn64({2, 5, Tk}, 88), vt = randn64({2, 3, Tk}, 89);
  using In = std::vector<Tensor>;
  // (Catch runs the test case once per SECTION, each time only the code outside the others.)
  SECTION("bool and float masks, with and without padding and causal, kdim 5 and vdim 3") {
    for (bool causal : {false, true}) {
      nn::MultiHeadAttention m(
          {.d_model = 8, .n_head = 2, .kdim = 5, .vdim = 3, .causal = causal, .fused_qkv = false, .out_bias = false,
           .seed = 8});
      m.to(DType::f64);
      for (const Tensor& mask : {bool_mask, float_mask}) {
        for (bool padded : {false, true}) {
          INFO("causal " << causal << ", " << dtype_name(mask.dtype()) << " mask, padded " << padded);
          const nn::AttentionArgs args{.key_padding_mask = padded ? pad : Tensor(), .attn_mask = mask};
          check_module_grads(m, {q, kt, vt}, [&](const In& in) {
            return m.forward(in[0], transpose(in[1], 1, 2), transpose(in[2], 1, 2), args).output;
          });
        }
      }
    }
  }
  nn::MultiHeadAttention m({.d_model = 8, .n_head = 2, .kdim = 5, .vdim = 3, .fused_qkv = false, .seed = 9});
  m.to(DType::f64);
  SECTION("unbatched, with a float mask that requires grad (the composed path)") {
    const Tensor mask = randn64({Tq, Tk}, 90);
    check_module_grads(m, {randn64({Tq, 8}, 93), randn64({5, Tk}, 94), mask}, [&](const In& in) {
      return m.forward(in[0], transpose(in[1], 0, 1), slice(transpose(in[1], 0, 1), 1, 0, 3),
                       {.key_padding_mask = Tensor({false, true, false, false}), .attn_mask = in[2]})
          .output;
    });
  }
  SECTION("the returned weights, per head and averaged, are differentiable") {
    for (bool average : {false, true}) {
      INFO("average " << average);
      check_module_grads(m, {q, kt, vt}, [&](const In& in) {
        const auto r = m.forward(in[0], transpose(in[1], 1, 2), transpose(in[2], 1, 2),
                                 {.attn_mask = bool_mask, .need_weights = true, .average_attn_weights = average});
        return r.weights;
      });
    }
  }
  SECTION("fused projection: self-attention with a per-head bool mask, one tensor used three times") {
    nn::MultiHeadAttention f({.d_model = 8, .n_head = 2, .causal = true, .qkv_bias = false, .seed = 10});
    f.to(DType::f64);
    const Tensor x = randn64({2, Tq, 8}, 91);
    Tensor per_head = logical_and(randn64({4, Tq, Tq}, 92) > 0.3, Tensor::arange(Tq) != 0);
    check_module_grads(f, {x}, [&](const In& in) {
      return f.forward(in[0], in[0], in[0], {.key_padding_mask = slice(pad, 1, 0, 3), .attn_mask = per_head}).output;
    });
  }
}
