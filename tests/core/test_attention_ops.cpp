// Attention's ops (core/ops/attention.cpp): attention_softmax against masked_fill + softmax, and
// attention_heads against the same attention composed from plain ops (slices, matmul,
// attention_softmax), in values and float64 gradient checks, for separate, fused and overlapping
// inputs, strided inputs, causal and padding masks and dropout.
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

// Channels [off, off + C) of src (B, T, W) as heads (B, nh, T, C / nh).
Tensor heads_of(const Tensor& src, int64_t off, int64_t C, int64_t nh) {
  const Tensor t = slice(src, 2, off, off + C);
  return permute(reshape(t, {t.size(0), t.size(1), nh, C / nh}), {0, 2, 1, 3});
}

// attention_heads written with plain ops (no dropout).
Tensor composed_heads(const HeadInput& q, const HeadInput& k, const HeadInput& v, int64_t C,
                      const AttentionHeadsOptions& o) {
  const Tensor qh = heads_of(q.src, q.offset, C, o.n_head), kh = heads_of(k.src, k.offset, C, o.n_head);
  const Tensor p = attention_softmax(matmul(qh, transpose(kh, -1, -2)), o.scale, o.causal, o.key_padding, o.bias);
  const Tensor y = permute(matmul(p, heads_of(v.src, v.offset, C, o.n_head)), {0, 2, 1, 3});  // (B, Tq, nh, hd)
  return reshape(y, {q.src.size(0), q.src.size(1), C});
}

// softmax(scale * scores + bias) with the causal (bottom-right) and padding masks as -inf fills:
// the reference attention_softmax with a bias must equal (no row of the tests is all masked).
Tensor composed_biased_softmax(const Tensor& scores, double scale, bool causal, const KeyPaddingMask* pad,
                               const Tensor& bias) {
  const int64_t B = scores.size(0), Tq = scores.size(2), Tk = scores.size(3);
  Tensor z = scores * scale + bias;
  const double ninf = -std::numeric_limits<double>::infinity();
  if (causal) z = masked_fill(z, logical_not(tril(Tensor::ones({Tq, Tk}, DType::boolean), Tk - Tq)), ninf);
  if (pad) {
    const std::vector<uint8_t> flags = pad->pad;
    z = masked_fill(z, Tensor::from_vector(std::vector<double>(flags.begin(), flags.end()), {B, 1, 1, Tk}), ninf);
  }
  return softmax(z, -1);
}

}  // namespace

TEST_CASE("attention_softmax with an additive bias (float or bool mask, broadcast or strided) equals the composed "
          "softmax and passes gradcheck w.r.t. scores and bias",
          "[attention]") {
  const Tensor s = randn64({2, 2, 3, 5}, 31);
  const auto pad = padding_mask_from_lengths({5, 2}, 5);
  Tensor allowed = randn64({3, 5}, 32) > 0.0;
  allowed = logical_or(allowed, Tensor::arange(5) == 0);  // key 0 stays visible: no row is all masked
  const std::vector<std::pair<const char*, Tensor>> biases = {
      {"pair (Tq, Tk)", randn64({3, 5}, 33)},
      {"per batch and head", randn64({2, 2, 3, 5}, 34)},
      {"per batch and key", randn64({2, 1, 1, 5}, 35)},
      {"per query, broadcast over keys (copied)", randn64({3, 1}, 36)},
      {"transposed (non-contiguous)", randn64({5, 3}, 37)},
      {"bool mask as -inf", additive_mask(logical_not(allowed), DType::f64)},
  };
  for (const auto& [name, leaf] : biases) {
    // The transposed case is a (5, 3) leaf seen as (3, 5) with strides (1, 3).
    const bool transposed = std::string(name).find("transposed") != std::string::npos;
    auto view = [transposed](const Tensor& b) { return transposed ? transpose(b, 0, 1) : b; };
    const Tensor bias = view(leaf);
    for (bool causal : {false, true}) {
      for (const KeyPaddingMask* m : {static_cast<const KeyPaddingMask*>(nullptr), &pad}) {
        INFO(name << ", causal " << causal << ", padded " << (m != nullptr));
        const Tensor expected = composed_biased_softmax(s, 0.7, causal, m, bias);
        require_values(attention_softmax(s, 0.7, causal, m, bias), s.shape(), expected.to_vector<double>(), 1e-14);
        // The -inf mask has no gradient to check (inf - inf in the differences): scores only.
        const bool finite = std::string(name).find("bool") == std::string::npos;
        if (finite) {
          require_gradcheck(
              [&](const std::vector<Tensor>& in) { return attention_softmax(in[0], 0.7, causal, m, view(in[1])); },
              {s, leaf});
        } else {
          require_gradcheck([&](const std::vector<Tensor>& in) { return attention_softmax(in[0], 0.7, causal, m, bias); },
                            {s});
        }
      }
    }
  }
  // A float32 mask on float64 scores: converted, its gradient float32.
  Tensor b32 = Tensor::randn({3, 5}).requires_grad_();
  Tensor s64 = randn64({2, 2, 3, 5}, 38).requires_grad_();
  sum(attention_softmax(s64, 0.5, false, nullptr, b32) * randn64({2, 2, 3, 5}, 39)).backward();
  REQUIRE(b32.grad().dtype() == DType::f32);
  REQUIRE_THROWS_WITH(attention_softmax(s, 1.0, false, nullptr, randn64({4, 5}, 1)),
                      Catch::Contains("attention_softmax") && Catch::Contains("[4, 5]"));
  REQUIRE_THROWS_WITH(attention_softmax(s, 1.0, false, nullptr, allowed), Catch::Contains("additive_mask"));
}

TEST_CASE("attention_softmax with a bias: a row whose keys are all -inf gets zero weights", "[attention]") {
  const Tensor s = randn64({1, 1, 2, 3}, 40);
  const Tensor masked = Tensor({{true, true, true}, {false, true, false}});
  const Tensor y = attention_softmax(s, 1.0, false, nullptr, additive_mask(masked, DType::f64));
  const auto v = y.to_vector<double>();
  CHECK(v[0] == 0.0);
  CHECK(v[1] == 0.0);
  CHECK(v[2] == 0.0);
  CHECK(v[4] == 0.0);
  CHECK(std::abs(v[3] + v[5] - 1.0) < 1e-15);
}

TEST_CASE("attention_softmax gradcheck, with causal and padding masks and Tq != Tk", "[attention]") {
  Tensor s = randn64({2, 2, 3, 5}, 16);
  const auto mask = padding_mask_from_lengths({5, 2}, 5);
  for (bool causal : {false, true}) {
    for (const KeyPaddingMask* m : {static_cast<const KeyPaddingMask*>(nullptr), &mask}) {
      INFO("causal " << causal << " padded " << (m != nullptr));
      require_gradcheck([&](const std::vector<Tensor>& in) { return attention_softmax(in[0], 0.7, causal, m); }, {s});
    }
  }
  // Long causal rows (vector paths with a masked last batch), with padding.
  Tensor s_long = randn64({1, 2, 21, 37}, 19);
  const auto mask_long = padding_mask_from_lengths({30}, 37);
  require_gradcheck([&](const std::vector<Tensor>& in) { return attention_softmax(in[0], 0.3, true, &mask_long); },
                    {s_long});
  require_gradcheck([&](const std::vector<Tensor>& in) { return attention_softmax(in[0], 0.3, true, nullptr); },
                    {s_long});
  // A non-contiguous input (transposed scores) goes through the same kernels.
  Tensor st = randn64({2, 2, 5, 3}, 17);
  require_gradcheck(
      [&](const std::vector<Tensor>& in) { return attention_softmax(transpose(in[0], -2, -1), 0.5, true, nullptr); },
      {st});
}

TEST_CASE("attention_softmax equals masked_fill(-inf) then softmax of the scaled scores", "[attention]") {
  // Small rows take the scalar paths; long ones the vector paths, including the masked partial
  // batch at the end of causal rows; rows of up to 4 batches (64 floats with AVX-512) are kept in
  // registers, unless the row's buffer (Tk) ends inside their last batch (45). Causal is
  // bottom-right aligned (key j <= i + Tk - Tq), and the padding leaves every row a key. The
  // gradient is checked against softmax's own backward, in both dtypes.
  for (auto [Tq, Tk] : {std::pair<int64_t, int64_t>{4, 6}, {40, 45}, {33, 33}, {64, 64}, {70, 70}}) {
    for (DType dt : {DType::f64, DType::f32}) {
      INFO("Tq " << Tq << " Tk " << Tk << " " << dtype_name(dt));
      Generator gen(5);
      const Tensor s = Tensor::randn({2, 3, Tq, Tk}, gen, 2.0, 0.0, dt);
      const Tensor upstream = Tensor::randn({2, 3, Tq, Tk}, gen, 1.0, 0.0, dt);
      const double scale = 0.35;
      const auto pad = padding_mask_from_lengths({Tk, Tk - 2}, Tk);
      for (bool causal : {false, true}) {
        for (bool padded : {false, true}) {
          INFO("causal " << causal << " padded " << padded);
          std::vector<uint8_t> full(2 * Tq * Tk, 0);
          for (int64_t b = 0; b < 2; ++b)
            for (int64_t i = 0; i < Tq; ++i)
              for (int64_t j = 0; j < Tk; ++j)
                full[(b * Tq + i) * Tk + j] = (causal && j > i + Tk - Tq) || (padded && pad.pad[b * Tk + j]);
          const Tensor s_ref = s.detach().requires_grad_(), s_got = s.detach().requires_grad_();
          const Tensor expected = softmax(masked_fill(mul(s_ref, scale), full, {2, 1, Tq, Tk},
                                                      -std::numeric_limits<double>::infinity()), -1);
          const Tensor got = attention_softmax(s_got, scale, causal, padded ? &pad : nullptr);
          const double tol = dt == DType::f64 ? 1e-12 : 1e-6;
          require_values(got, expected.shape(), expected.to_vector<double>(), tol);
          sum(expected * upstream).backward();
          sum(got * upstream).backward();
          require_values(s_got.grad(), s.shape(), s_ref.grad().to_vector<double>(), tol);
          // Masked weights are exactly zero.
          const auto g = got.to_vector<double>();
          for (int64_t b = 0; b < 2; ++b)
            for (int64_t h = 0; h < 3; ++h)
              for (int64_t i = 0; i < Tq; ++i)
                for (int64_t j = 0; j < Tk; ++j)
                  if (full[(b * Tq + i) * Tk + j]) REQUIRE(g[((b * 3 + h) * Tq + i) * Tk + j] == 0.0);
        }
      }
    }
  }
}

TEST_CASE("attention_heads equals the composed attention and passes gradcheck: separate, fused, overlapping, "
          "strided inputs",
          "[attention]") {
  const int64_t B = 2, Tq = 3, Tk = 5, C = 4, nh = 2;
  const auto pad = padding_mask_from_lengths({5, 3}, Tk);
  // Separate q, k, v with Tq != Tk (cross-attention), taken from wider tensors at an offset.
  const Tensor q = randn64({B, Tq, C + 2}, 1), k = randn64({B, Tk, C}, 2), v = randn64({B, Tk, C + 1}, 3);
  // One fused (B, Tk, 3C) projection read at offsets 0, C, 2C.
  const Tensor qkv = randn64({B, Tk, 3 * C}, 4);
  // x itself as q, k and v (overlapping roles on one tensor: its gradient sums all three).
  const Tensor x = randn64({B, Tk, C}, 5);
  // A source whose last stride is not 1: the transpose of a (B, C, Tk) tensor.
  const Tensor xt = randn64({B, C, Tk}, 6);
  for (bool causal : {false, true}) {
    for (bool padded : {false, true}) {
      INFO("causal " << causal << " padded " << padded);
      AttentionHeadsOptions o;
      o.n_head = nh, o.scale = 0.6, o.causal = causal, o.key_padding = padded ? &pad : nullptr;
      struct Case {
        const char* name;
        std::vector<Tensor> inputs;
        std::function<std::array<HeadInput, 3>(const std::vector<Tensor>&)> roles;
      };
      const std::vector<Case> cases = {
          {"separate", {q, k, v}, [](const std::vector<Tensor>& in) {
             return std::array<HeadInput, 3>{HeadInput{in[0], 2}, HeadInput{in[1], 0}, HeadInput{in[2], 1}};
           }},
          {"fused", {qkv}, [](const std::vector<Tensor>& in) {
             return std::array<HeadInput, 3>{HeadInput{in[0], 0}, HeadInput{in[0], C}, HeadInput{in[0], 2 * C}};
           }},
          {"overlapping", {x}, [](const std::vector<Tensor>& in) {
             return std::array<HeadInput, 3>{HeadInput{in[0], 0}, HeadInput{in[0], 0}, HeadInput{in[0], 0}};
           }},
          {"strided", {xt}, [](const std::vector<Tensor>& in) {
             const Tensor t = transpose(in[0], 1, 2);
             return std::array<HeadInput, 3>{HeadInput{t, 0}, HeadInput{t, 0}, HeadInput{t, 0}};
           }},
      };
      for (const Case& c : cases) {
        INFO(c.name);
        auto fused = [&](const std::vector<Tensor>& in) {
          const auto r = c.roles(in);
          return attention_heads(r[0], r[1], r[2], C, o);
        };
        auto composed = [&](const std::vector<Tensor>& in) {
          const auto r = c.roles(in);
          return composed_heads(r[0], r[1], r[2], C, o);
        };
        const Tensor expected = composed(c.inputs);
        require_values(fused(c.inputs), expected.shape(), expected.to_vector<double>(), 1e-12);
        require_gradcheck(fused, c.inputs);
      }
    }
  }
}

TEST_CASE("attention_heads with dropout: gradcheck with the mask replayed, weights kept before dropout",
          "[attention]") {
  const int64_t B = 2, T = 5, C = 4;
  const Tensor qkv = randn64({B, T, 3 * C}, 7);
  for (bool causal : {false, true}) {
    INFO("causal " << causal);
    Generator gen(0);
    Tensor weights;
    AttentionHeadsOptions o;
    o.n_head = 2, o.scale = 0.5, o.causal = causal, o.dropout = 0.3, o.gen = &gen, o.weights = &weights;
    auto run = [&](const std::vector<Tensor>& in) {
      gen.seed_(11);  // the same mask on every evaluation
      return attention_heads({in[0], 0}, {in[0], C}, {in[0], 2 * C}, C, o);
    };
    require_gradcheck(run, {qkv});
    // The weights are the softmax before dropout: rows sum to 1; the dropout acted on the output.
    const Tensor y = run({qkv});
    REQUIRE(weights.shape() == Shape{B, 2, T, T});
    for (int64_t i = 0; i < T; ++i) {
      double row = 0;
      for (int64_t j = 0; j < T; ++j) row += weights.at({1, 1, i, j});
      REQUIRE(row == Approx(1.0).epsilon(1e-12));
    }
    AttentionHeadsOptions plain = o;
    plain.dropout = 0.0, plain.weights = nullptr;
    REQUIRE(attention_heads({qkv, 0}, {qkv, C}, {qkv, 2 * C}, C, plain).to_vector<double>() != y.to_vector<double>());
  }
}

TEST_CASE("attention_heads rejects bad shapes, masks and dropout settings, naming them", "[attention]") {
  const Tensor q = Tensor::zeros({2, 3, 8}), k = Tensor::zeros({2, 5, 8});
  AttentionHeadsOptions o;
  o.n_head = 2;
  REQUIRE_NOTHROW(attention_heads({q}, {k}, {k}, 8, o));
  REQUIRE_THROWS_WITH(attention_heads({q, 4}, {k}, {k}, 8, o),
                      Catch::Contains("attention_heads") && Catch::Contains("[4, 12)") && Catch::Contains("[2, 3, 8]"));
  REQUIRE_THROWS_WITH(attention_heads({q}, {k}, {Tensor::zeros({2, 4, 8})}, 8, o),
                      Catch::Contains("attention_heads") && Catch::Contains("[2, 4, 8]"));
  REQUIRE_THROWS_WITH(attention_heads({q}, {k}, {k.to(DType::f64)}, 8, o), Catch::Contains("dtype"));
  o.n_head = 3;
  REQUIRE_THROWS_WITH(attention_heads({q}, {k}, {k}, 8, o), Catch::Contains("n_head 3"));
  o.n_head = 2;
  const auto bad = padding_mask_from_lengths({3, 3}, 3);
  o.key_padding = &bad;
  REQUIRE_THROWS_WITH(attention_heads({q}, {k}, {k}, 8, o), Catch::Contains("padding mask"));
  o.key_padding = nullptr;
  o.dropout = 0.5;  // no generator
  REQUIRE_THROWS_WITH(attention_heads({q}, {k}, {k}, 8, o), Catch::Contains("dropout"));
  REQUIRE_THROWS_WITH(padding_mask_from_lengths({2, 4}, 3), Catch::Contains("length 4"));
}

TEST_CASE("attention_heads with an attention bias (float, bool, per head) equals the composed attention and passes "
          "gradcheck, with causal and padding masks",
          "[attention]") {
  const int64_t B = 2, Tq = 3, Tk = 5, C = 4, nh = 2;
  const auto pad = padding_mask_from_lengths({5, 3}, Tk);
  const Tensor q = randn64({B, Tq, C + 2}, 41), k = randn64({B, Tk, C}, 42), v = randn64({B, Tk, C + 1}, 43);
  const Tensor kt = randn64({B, C, Tk}, 44);  // transposed: keys with a non-unit last stride
  Tensor allowed = logical_or(randn64({Tq, Tk}, 45) > 0.0, Tensor::arange(Tk) == 0);
  const std::vector<std::pair<const char*, Tensor>> biases = {
      {"float (Tq, Tk)", randn64({Tq, Tk}, 46).detach()},
      {"float per head (B, nh, Tq, Tk)", randn64({B, nh, Tq, Tk}, 47).detach()},
      {"bool as -inf", additive_mask(logical_not(allowed), DType::f64)},
  };
  for (const auto& [name, bias] : biases) {
    for (bool causal : {false, true}) {
      for (bool padded : {false, true}) {
        INFO(name << ", causal " << causal << ", padded " << padded);
        AttentionHeadsOptions o;
        o.n_head = nh, o.scale = 0.6, o.causal = causal, o.key_padding = padded ? &pad : nullptr, o.bias = bias;
        auto fused = [&](const std::vector<Tensor>& in) {
          return attention_heads({in[0], 2}, {in[1], 0}, {in[2], 1}, C, o);
        };
        const std::vector<Tensor> inputs{q, k, v};
        const Tensor expected = composed_heads({q, 2}, {k, 0}, {v, 1}, C, o);
        require_values(fused(inputs), expected.shape(), expected.to_vector<double>(), 1e-12);
        require_gradcheck(fused, inputs);
        require_gradcheck([&](const std::vector<Tensor>& in) { return fused({in[0], transpose(in[1], 1, 2), in[2]}); },
                          {q, kt, v});
      }
    }
  }
  AttentionHeadsOptions o;
  o.n_head = nh;
  o.bias = randn64({Tq, Tk}, 48).requires_grad_();
  REQUIRE_THROWS_WITH(attention_heads({q, 0}, {k, 0}, {v, 0}, C, o), Catch::Contains("attention_softmax"));
  o.bias = randn64({Tk, Tq}, 48).detach();
  REQUIRE_THROWS_WITH(attention_heads({q, 0}, {k, 0}, {v, 0}, C, o), Catch::Contains("[5, 3]"));
}

TEST_CASE("attention_heads with an attention bias under bf16 autocast stays close to float32", "[attention][bf16]") {
  const int64_t B = 2, Tq = 6, Tk = 6, C = 8, nh = 2;
  const Tensor x = Tensor::randn({B, Tq, 3 * C}).requires_grad_();
  const Tensor bias = Tensor::randn({B, nh, Tq, Tk});
  AttentionHeadsOptions o;
  o.n_head = nh, o.scale = 0.5, o.causal = true, o.bias = bias;
  const Tensor ref = attention_heads({x, 0}, {x, C}, {x, 2 * C}, C, o);
  Tensor low;
  {
    AutocastBF16 guard;
    low = attention_heads({x, 0}, {x, C}, {x, 2 * C}, C, o);
  }
  const auto a = ref.to_vector<float>(), b = low.to_vector<float>();
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, static_cast<double>(std::abs(a[i] - b[i])));
  INFO("worst " << worst);
  CHECK(worst < 3e-2);
  CHECK(worst > 0.0);  // the bf16 products really ran
}
