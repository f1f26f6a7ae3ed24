// Tests of nn::GPT against nanoGPT (the reference model in scripts/heed_torch.py, nanoGPT's
// model.py): parameter names and shapes, the parameter count, the init, the
// causal property, gradients (float64 gradcheck) and logits/loss with identical weights.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "nn/nn.h"
#include "support/helpers.h"

using namespace heed;
using heed::test::require_gradcheck;

namespace {

using NameShapes = std::vector<std::pair<std::string, Shape>>;

NameShapes names_shapes(const nn::NamedTensors& named) {
  NameShapes out;
  for (const auto& [n, t] : named) out.emplace_back(n, t.shape());
  return out;
}

nn::GPTConfig tiny_config(bool bias) {
  nn::GPTConfig c;
  c.vocab_size = 11;
  c.block_size = 8;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 16;
  c.bias = bias;
  return c;
}

// Overwrites every parameter (in named_parameters order, j) with off + 0.3 sin(0.37 k + 0.7 j),
// off = 1 for LayerNorm weights; the script below does the same to the PyTorch model.
void set_wave_weights(nn::GPT& model) {
  int64_t j = 0;
  for (auto& [name, p] : model.named_parameters()) {
    const bool ln_weight = name.find("ln_") != std::string::npos && name.size() >= 6 &&
                           name.compare(name.size() - 6, 6, "weight") == 0;
    std::vector<double> v(static_cast<size_t>(p.numel()));
    for (size_t k = 0; k < v.size(); ++k)
      v[k] = (ln_weight ? 1.0 : 0.0) + 0.3 * std::sin(0.37 * static_cast<double>(k) + 0.7 * static_cast<double>(j));
    p.copy_(Tensor::from_vector(v, p.shape()));
    ++j;
  }
}

// nanoGPT's parameter count, derived layer by layer (V vocab, T block, C embd, L layers, bias b):
//   wte V*C, wpe T*C, ln_f C (+C);
//   per block: ln_1 C (+C), c_attn 3C*C (+3C), attn.c_proj C*C (+C), ln_2 C (+C),
//              c_fc 4C*C (+4C), mlp.c_proj 4C*C (+C)
//   = 12 C^2 + 2C without biases, 12 C^2 + 13C with them. lm_head is wte (tied): not counted again.
int64_t nanogpt_params(int64_t V, int64_t T, int64_t C, int64_t L, bool bias) {
  const int64_t per_block = 12 * C * C + (bias ? 13 * C : 2 * C);
  return V * C + T * C + L * per_block + (bias ? 2 * C : C);
}

double std_of(const std::vector<double>& v, double* mean_out = nullptr) {
  double m = 0;
  for (double e : v) m += e;
  m /= static_cast<double>(v.size());
  double s = 0;
  for (double e : v) s += (e - m) * (e - m);
  if (mean_out) *mean_out = m;
  return std::sqrt(s / static_cast<double>(v.size()));
}

void reseed_dropouts(nn::Module& m, uint64_t seed) {
  if (auto* d = dynamic_cast<nn::Dropout*>(&m)) d->seed(seed);
  uint64_t i = 0;
  for (const auto& [_, child] : m.children()) reseed_dropouts(*child, seed * 31 + ++i);
}

}  // namespace

// Names and shapes printed by nanoGPT's model (state_dict() keys in order; named_parameters()
// is the same list without the tied lm_head.weight):
// /usr/bin/python3 - <<'EOF'
// import sys, types; sys.path.insert(0, "scripts")
// import heed_torch as m
// for bias in (True, False):
//     cfg = types.SimpleNamespace(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=16, dropout=0.0, bias=bias)
//     g = m.GPT(cfg)
//     print("bias", bias, "state_dict:", ", ".join('{"%s", {%s}}' % (k, ", ".join(map(str, v.shape))) for k, v in g.state_dict().items()))
//     print("named_parameters:", ", ".join('"%s"' % k for k, _ in g.named_parameters()))
//     print("num_params", g.num_params(False), g.num_params())
// EOF
TEST_CASE("GPT names and shapes equal nanoGPT's state_dict (bias on and off)", "[gpt]") {
  const NameShapes with_bias = {
      {"transformer.wte.weight", {11, 16}}, {"transformer.wpe.weight", {8, 16}},
      {"transformer.h.0.ln_1.weight", {16}}, {"transformer.h.0.ln_1.bias", {16}},
      {"transformer.h.0.attn.c_attn.weight", {48, 16}}, {"transformer.h.0.attn.c_attn.bias", {48}},
      {"transformer.h.0.attn.c_proj.weight", {16, 16}}, {"transformer.h.0.attn.c_proj.bias", {16}},
      {"transformer.h.0.ln_2.weight", {16}}, {"transformer.h.0.ln_2.bias", {16}},
      {"transformer.h.0.mlp.c_fc.weight", {64, 16}}, {"transformer.h.0.mlp.c_fc.bias", {64}},
      {"transformer.h.0.mlp.c_proj.weight", {16, 64}}, {"transformer.h.0.mlp.c_proj.bias", {16}},
      {"transformer.h.1.ln_1.weight", {16}}, {"transformer.h.1.ln_1.bias", {16}},
      {"transformer.h.1.attn.c_attn.weight", {48, 16}}, {"transformer.h.1.attn.c_attn.bias", {48}},
      {"transformer.h.1.attn.c_proj.weight", {16, 16}}, {"transformer.h.1.attn.c_proj.bias", {16}},
      {"transformer.h.1.ln_2.weight", {16}}, {"transformer.h.1.ln_2.bias", {16}},
      {"transformer.h.1.mlp.c_fc.weight", {64, 16}}, {"transformer.h.1.mlp.c_fc.bias", {64}},
      {"transformer.h.1.mlp.c_proj.weight", {16, 64}}, {"transformer.h.1.mlp.c_proj.bias", {16}},
      {"transformer.ln_f.weight", {16}}, {"transformer.ln_f.bias", {16}}, {"lm_head.weight", {11, 16}}};
  const NameShapes without_bias = {
      {"transformer.wte.weight", {11, 16}}, {"transformer.wpe.weight", {8, 16}},
      {"transformer.h.0.ln_1.weight", {16}}, {"transformer.h.0.attn.c_attn.weight", {48, 16}},
      {"transformer.h.0.attn.c_proj.weight", {16, 16}}, {"transformer.h.0.ln_2.weight", {16}},
      {"transformer.h.0.mlp.c_fc.weight", {64, 16}}, {"transformer.h.0.mlp.c_proj.weight", {16, 64}},
      {"transformer.h.1.ln_1.weight", {16}}, {"transformer.h.1.attn.c_attn.weight", {48, 16}},
      {"transformer.h.1.attn.c_proj.weight", {16, 16}}, {"transformer.h.1.ln_2.weight", {16}},
      {"transformer.h.1.mlp.c_fc.weight", {64, 16}}, {"transformer.h.1.mlp.c_proj.weight", {16, 64}},
      {"transformer.ln_f.weight", {16}}, {"lm_head.weight", {11, 16}}};

  for (bool bias : {true, false}) {
    INFO("bias " << bias);
    nn::GPT model(tiny_config(bias));
    const NameShapes& expected = bias ? with_bias : without_bias;
    REQUIRE(names_shapes(model.named_tensors()) == expected);
    NameShapes params(expected.begin(), expected.end() - 1);  // without lm_head.weight
    REQUIRE(names_shapes(model.named_parameters()) == params);
    REQUIRE(model.lm_head->weight.same(model.transformer->wte->weight));
    REQUIRE(model.transformer->children()[2].first == "drop");
  }
}

// Parameter counts: 6896 / 6768 (bias) and 6528 / 6400 (no bias) are the "num_params" line of
// the script above (all, non-embedding). For V=65 (tiny shakespeare), T=16, C=32, L=2, the
// reference prints "params" / "params_non_embedding" in its JSON summary:
//   /usr/bin/python3 scripts/torch_reference.py --n_layer 2 --n_head 2 --n_embd 32
//     --block_size 16 --batch_size 2 --bench 1 --threads 1 --bias      -> 28064 / 27552
//   (same command with --no-bias)                                     -> 27328 / 26816
// (one command line, split here for width)
TEST_CASE("GPT parameter count equals nanoGPT's formula and reference model", "[gpt]") {
  REQUIRE(nanogpt_params(11, 8, 16, 2, true) == 6896);
  REQUIRE(nanogpt_params(11, 8, 16, 2, false) == 6528);
  REQUIRE(nanogpt_params(65, 16, 32, 2, true) == 28064);
  REQUIRE(nanogpt_params(65, 16, 32, 2, false) == 27328);

  nn::GPT a(tiny_config(true)), b(tiny_config(false));
  REQUIRE(a.num_params(false) == 6896);
  REQUIRE(a.num_params() == 6768);
  REQUIRE(b.num_params(false) == 6528);
  REQUIRE(b.num_params() == 6400);

  for (bool bias : {true, false}) {
    nn::GPTConfig c;
    c.vocab_size = 65, c.block_size = 16, c.n_layer = 2, c.n_head = 2, c.n_embd = 32, c.bias = bias;
    nn::GPT m(c);
    REQUIRE(m.num_params(false) == (bias ? 28064 : 27328));
    REQUIRE(m.num_params(true) == (bias ? 27552 : 26816));
    REQUIRE(m.num_parameters() == m.num_params(false));
  }
  // nanoGPT's default CPU config (V=65, T=64, C=128, L=4, no bias), by the formula.
  nn::GPT def(nn::GPTConfig{});
  REQUIRE(def.num_params(false) == nanogpt_params(65, 64, 128, 4, false));
  REQUIRE(def.num_params(false) == 804096);
}

TEST_CASE("GPT init follows nanoGPT: N(0, 0.02), c_proj N(0, 0.02/sqrt(2L)), LN 1/0, biases 0", "[gpt]") {
  nn::GPTConfig c;
  c.vocab_size = 65, c.block_size = 64, c.n_layer = 4, c.n_head = 4, c.n_embd = 256, c.bias = true;
  nn::GPT model(c, 7);
  const double proj_std = 0.02 / std::sqrt(8.0);
  int64_t n_proj = 0, n_normal = 0;
  for (const auto& [name, t] : model.named_parameters()) {
    INFO(name);
    auto v = t.to_vector<double>();
    const bool is_weight = name.size() >= 6 && name.compare(name.size() - 6, 6, "weight") == 0;
    if (name.find("ln_") != std::string::npos) {
      REQUIRE(v == std::vector<double>(v.size(), is_weight ? 1.0 : 0.0));
    } else if (!is_weight) {
      REQUIRE(v == std::vector<double>(v.size(), 0.0));
    } else {
      double mean = 0;
      const double s = std_of(v, &mean);
      // >= 16640 draws per tensor: the sample std is within 1.1% (2 sd) of the truth
      const bool proj = name.find("c_proj.weight") != std::string::npos;
      REQUIRE(s == Approx(proj ? proj_std : 0.02).epsilon(0.03));
      REQUIRE(std::abs(mean) < 0.05 * s);
      ++(proj ? n_proj : n_normal);
    }
  }
  REQUIRE(n_proj == 8);     // attn.c_proj and mlp.c_proj in 4 blocks
  REQUIRE(n_normal == 10);  // wte, wpe, c_attn and c_fc in 4 blocks
}

TEST_CASE("GPT init is reproducible from the seed", "[gpt]") {
  nn::GPT a(tiny_config(true), 5), b(tiny_config(true), 5), c(tiny_config(true), 6);
  auto pa = a.parameters(), pb = b.parameters(), pc = c.parameters();
  REQUIRE(pa.size() == pb.size());
  bool any_differs = false;
  for (size_t i = 0; i < pa.size(); ++i) {
    REQUIRE(pa[i].to_vector<float>() == pb[i].to_vector<float>());
    if (pa[i].to_vector<float>() != pc[i].to_vector<float>()) any_differs = true;
  }
  REQUIRE(any_differs);
}

TEST_CASE("GPT is causal: changing token t leaves logits before t bitwise unchanged", "[gpt]") {
  nn::GPT model(tiny_config(true), 3);
  set_wave_weights(model);  // larger than the init, so any leak would show
  const int64_t B = 2, T = 8, V = 11, t = 5;
  std::vector<int32_t> idx(B * T);
  for (int64_t i = 0; i < B * T; ++i) idx[i] = static_cast<int32_t>((7 * i + 3) % V);
  Tensor before = model.forward(idx, B, T);
  REQUIRE(before.shape() == Shape{B, T, V});
  std::vector<int32_t> changed = idx;
  changed[0 * T + t] = static_cast<int32_t>((idx[t] + 4) % V);
  Tensor after = model.forward(changed, B, T);
  auto vb = before.to_vector<float>(), va = after.to_vector<float>();
  for (int64_t s = 0; s < t; ++s)
    for (int64_t v = 0; v < V; ++v) REQUIRE(va[s * V + v] == vb[s * V + v]);
  for (int64_t s = t; s < T; ++s) {
    bool differs = false;
    for (int64_t v = 0; v < V; ++v) differs |= va[s * V + v] != vb[s * V + v];
    REQUIRE(differs);
  }
  // The other row of the batch is unaffected.
  for (int64_t k = T * V; k < 2 * T * V; ++k) REQUIRE(va[k] == Approx(vb[k]).margin(1e-6));
}

// Identical weights in heed and nanoGPT (the wave of set_wave_weights), float64:
// /usr/bin/python3 - <<'EOF'
// import sys, types, math, torch; sys.path.insert(0, "scripts")
// import heed_torch as m
// torch.set_default_dtype(torch.float64)
// for bias in (True, False):
//     cfg = types.SimpleNamespace(vocab_size=7, block_size=6, n_layer=2, n_head=2, n_embd=8, dropout=0.0, bias=bias)
//     g = m.GPT(cfg).double().eval()
//     with torch.no_grad():
//         for j, (name, p) in enumerate(g.named_parameters()):
//             off = 1.0 if ("ln_" in name and name.endswith("weight")) else 0.0
//             p.copy_(torch.tensor([off + 0.3 * math.sin(0.37 * k + 0.7 * j) for k in range(p.numel())]).view(p.shape))
//         idx = torch.tensor([(3 * i + 1) % 7 for i in range(10)]).view(2, 5)
//         tgt = torch.tensor([(5 * i + 2) % 7 for i in range(10)]).view(2, 5)
//         t = g.transformer
//         x = t.drop(t.wte(idx) + t.wpe(torch.arange(5)))
//         for blk in t.h: x = blk(x)
//         logits = g.lm_head(t.ln_f(x))
//         print("bias", bias, "loss %.15g" % g(idx, tgt).item())
//         print("logits[0,4]", ", ".join("%.15g" % v for v in logits[0, 4].tolist()))
//         print("logits[1,2]", ", ".join("%.15g" % v for v in logits[1, 2].tolist()))
// EOF
TEST_CASE("GPT logits and loss equal nanoGPT's with the same weights", "[gpt]") {
  struct Expected {
    bool bias;
    double loss;
    std::vector<double> l04, l12;
  };
  const std::vector<Expected> cases = {
      {true, 2.11141993385888,
       {0.919638294174714, -1.08310611624704, 1.21095558867857, -1.29898233376137, 1.34429155906738,
        -1.34539325377984, 1.30225118825619},
       {0.0908181897048076, 0.00311816942490074, -0.0969519863870878, 0.187597501023487, -0.272073801690021,
        0.347602853650883, -0.41170085578961}},
      {false, 2.01526512073293,
       {0.414529423879336, -0.420579028490708, 0.412797734482212, -0.39144143261699, 0.357212432867687,
        -0.311236368690374, 0.255025180147445},
       {0.338487944359307, -0.288090779290656, 0.228219641218674, -0.160843414906593, 0.0881777927508098,
        -0.0126124109079195, -0.0633677347838615}}};
  std::vector<int32_t> idx(10), tgt(10);
  for (int32_t i = 0; i < 10; ++i) idx[i] = (3 * i + 1) % 7, tgt[i] = (5 * i + 2) % 7;

  for (const auto& e : cases) {
    for (DType dt : {DType::f64, DType::f32}) {
      INFO("bias " << e.bias << ", " << dtype_name(dt));
      const double tol = dt == DType::f64 ? 1e-10 : 2e-5;
      nn::GPTConfig c;
      c.vocab_size = 7, c.block_size = 6, c.n_layer = 2, c.n_head = 2, c.n_embd = 8, c.bias = e.bias;
      nn::GPT model(c);
      model.to(dt);
      set_wave_weights(model);
      model.eval();
      REQUIRE(model.loss(idx, tgt, 2, 5).item() == Approx(e.loss).epsilon(tol).margin(tol));
      Tensor logits = model.forward(idx, 2, 5);
      REQUIRE(logits.dtype() == dt);
      for (int64_t v = 0; v < 7; ++v) {
        REQUIRE(logits.at({0, 4, v}) == Approx(e.l04[v]).epsilon(tol).margin(tol));
        REQUIRE(logits.at({1, 2, v}) == Approx(e.l12[v]).epsilon(tol).margin(tol));
      }
      // last_logits is the last position of forward.
      Tensor last = model.last_logits(idx, 2, 5);
      REQUIRE(last.shape() == Shape{2, 7});
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t v = 0; v < 7; ++v) REQUIRE(last.at({b, v}) == Approx(logits.at({b, 4, v})).margin(tol));
    }
  }
}

TEST_CASE("GPT gradcheck over every parameter and the input embeddings (float64)", "[gpt]") {
  nn::GPTConfig c;
  c.vocab_size = 7, c.block_size = 4, c.n_layer = 2, c.n_head = 2, c.n_embd = 8, c.bias = true;
  nn::GPT model(c, 11);
  model.to(DType::f64);
  set_wave_weights(model);  // O(0.3) weights: the gradients are far from zero
  const int64_t B = 2, T = 4;
  std::vector<int32_t> idx = {1, 4, 2, 6, 0, 3, 3, 5}, tgt = {4, 2, 6, 0, 3, 3, 5, 1};
  auto params = model.parameters();
  REQUIRE(params.size() == 2 + 2 * 12 + 2);

  // The loss through the token ids, every element of every parameter: wte gets its gradient
  // from both the lookup and lm_head.
  require_gradcheck([&](const std::vector<Tensor>&) { return model.loss(idx, tgt, B, T); }, params);

  // The logits from embeddings given as an input (B, T, C): every embedding element, then 24
  // elements spread over each parameter tensor (all of them were checked above).
  Tensor emb = test::randn64({B, T, 8}, 77);
  auto fwd = [&](const std::vector<Tensor>& in) { return model.forward_from_embeddings(in[0]); };
  require_gradcheck(fwd, {emb});
  std::vector<Tensor> inputs = {emb};
  for (auto& p : params) inputs.push_back(p);
  GradcheckOptions opt = heed::test::tight_gradcheck();
  opt.max_checks = 24;
  auto r = gradcheck(fwd, inputs, opt);
  INFO(r.report());
  REQUIRE(r.ok);
  int64_t expected_checks = 0;
  for (auto& t : inputs) expected_checks += std::min<int64_t>(t.numel(), 24);
  REQUIRE(r.checked == expected_checks);
}

TEST_CASE("GPT gradcheck with dropout in training mode (masks reseeded per evaluation)", "[gpt]") {
  nn::GPTConfig c;
  c.vocab_size = 5, c.block_size = 4, c.n_layer = 1, c.n_head = 2, c.n_embd = 4, c.bias = false, c.dropout = 0.2;
  nn::GPT model(c, 13);
  model.to(DType::f64);
  set_wave_weights(model);
  model.train();
  std::vector<int32_t> idx = {1, 4, 2, 0, 3, 3}, tgt = {4, 2, 0, 3, 3, 1};
  require_gradcheck([&](const std::vector<Tensor>&) {
    reseed_dropouts(model, 5);
    return model.loss(idx, tgt, 2, 3);
  }, model.parameters());
}

TEST_CASE("GPT dropout: active in training, off in eval (then equal to a dropout-free model)", "[gpt]") {
  nn::GPTConfig c = tiny_config(true);
  c.dropout = 0.3;
  nn::GPT drop(c, 21);
  c.dropout = 0.0;
  nn::GPT plain(c, 21);
  std::vector<int32_t> idx = {1, 2, 3, 4, 5, 6, 7, 8};
  drop.eval();
  REQUIRE(drop.forward(idx, 1, 8).to_vector<float>() == plain.forward(idx, 1, 8).to_vector<float>());
  drop.train();
  REQUIRE(drop.forward(idx, 1, 8).to_vector<float>() != plain.forward(idx, 1, 8).to_vector<float>());
}

// nanoGPT's loss is F.cross_entropy(..., ignore_index=-1): a target of -1 adds nothing, and the
// mean is over the other targets.
TEST_CASE("GPT::loss ignores targets of -1, as nanoGPT's", "[gpt]") {
  nn::GPT model(tiny_config(false));
  model.eval();
  const std::vector<int32_t> idx{1, 2, 3, 4};
  const double full = model.loss(idx, {2, -1, 4, -1}, 1, 4).item();
  Tensor logits = reshape(model.forward(idx, 1, 4), {4, model.config().vocab_size});
  const double kept = cross_entropy(concat({slice(logits, 0, 0, 1), slice(logits, 0, 2, 3)}, 0), {2, 4}).item();
  REQUIRE(full == Approx(kept).epsilon(1e-6));
  REQUIRE(nn::GPT::kIgnoreTarget == -1);
  REQUIRE_THROWS_AS(model.loss(idx, {2, -100, 4, 1}, 1, 4), Error);  // not an id, not ignored
}

TEST_CASE("GPT rejects bad sizes and inputs", "[gpt]") {
  nn::GPT model(tiny_config(false));
  std::vector<int32_t> nine(9, 1);
  REQUIRE_THROWS_AS(model.forward(nine, 1, 9), Error);  // T > block_size
  REQUIRE_THROWS_AS(model.forward(std::vector<int32_t>(6, 1), 2, 4), Error);  // B*T mismatch
  REQUIRE_THROWS_AS(model.forward({0, 11}, 1, 2), Error);  // id out of range
  REQUIRE_THROWS_AS(model.loss({0, 1}, {0}, 1, 2), Error);
  REQUIRE_THROWS_AS(model.forward_from_embeddings(Tensor::zeros({1, 9, 16})), Error);
  REQUIRE(model.config().n_embd == 16);
  nn::GPTConfig bad = tiny_config(false);
  bad.n_head = 3;  // 16 % 3 != 0
  REQUIRE_THROWS_AS(nn::GPT(bad), Error);
  bad = tiny_config(false);
  bad.n_layer = 0;
  REQUIRE_THROWS_AS(nn::GPT(bad), Error);
}
