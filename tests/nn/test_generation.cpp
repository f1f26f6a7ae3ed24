// Tests of generation (nn/generation.h) and the KV cache (nn/kv_cache.h): cached generation
// against a full recompute of the context at every step (what nanoGPT does), token for token,
// inside and across the context window, greedy and sampled, for GPT and the encoder-decoder;
// cached logits against full-forward logits in float64; the sampler and the stop conditions.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/autocast.h"
#include "nn/nn.h"

using namespace heed;

namespace {

nn::GPTConfig small_gpt(int64_t block) {
  return {.vocab_size = 13, .block_size = block, .n_layer = 2, .n_head = 2, .n_embd = 16, .bias = true};
}

// At nanoGPT's init (std 0.02) the residual stream is mostly the token's own embedding, so a
// model mostly repeats its input. Weights drawn with std 0.5 (LayerNorms left at 1 and 0) make
// its choices varied and dependent on the whole context, which these comparisons need (biases
// stay 0: a drawn output bias would outweigh the context).
void scramble(nn::Module& model, uint64_t seed) {
  Generator gen(seed);
  for (auto& [name, t] : model.named_parameters()) {
    if (name.find("ln") != std::string::npos || name.find("norm") != std::string::npos ||
        name.find("bias") != std::string::npos)
      continue;
    REQUIRE(t.dtype() == DType::f32);
    REQUIRE(t.is_contiguous());
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(gen.normal(0.0, 0.5));
  }
}

void sharpen(nn::GPT& model) { scramble(model, 99); }

size_t distinct(std::vector<int32_t> ids) {
  std::sort(ids.begin(), ids.end());
  return static_cast<size_t>(std::unique(ids.begin(), ids.end()) - ids.begin());
}

std::vector<int32_t> generate(nn::GPT& model, const std::vector<int32_t>& prompt, int64_t n, double temperature,
                              bool cache, uint64_t seed = 7) {
  Generator gen(seed);
  nn::GenerateOptions o{.max_new_tokens = n, .temperature = temperature, .top_k = 0, .generator = &gen};
  o.use_cache = cache;
  return model.generate(prompt, o);
}

}  // namespace

TEST_CASE("KVCache: append writes the new rows and returns the filled view", "[generation]") {
  nn::KVCache cache(1, 2, 4, 3, DType::f64);
  // src (B=2, n=2, width 6): keys at channels [0, 3), values at [3, 6).
  std::vector<double> v(24);
  for (size_t i = 0; i < v.size(); ++i) v[i] = double(i);
  Tensor src = Tensor::from_vector(v, {2, 2, 6});
  Tensor kv = cache.append(0, src, 0, 3);
  CHECK(kv.shape() == Shape{2, 2, 6});
  CHECK(kv.contiguous().to_vector<double>() == v);
  cache.advance(2);
  Tensor more = Tensor::from_vector(std::vector<double>(12, -1.0), {2, 1, 6});
  kv = cache.append(0, more, 0, 3);
  CHECK(kv.shape() == Shape{2, 3, 6});
  const std::vector<double> got = kv.contiguous().to_vector<double>();
  CHECK(got[0] == 0.0);
  CHECK(got[2 * 6] == -1.0);          // row 0, position 2
  CHECK(got[3 * 6] == 12.0);          // row 1, position 0
  cache.advance(1);
  CHECK_THROWS_WITH(cache.append(0, Tensor::zeros({2, 2, 6}, DType::f64), 0, 3),
                    Catch::Contains("exceed the capacity 4"));
  CHECK_THROWS(cache.append(0, Tensor::zeros({2, 1, 6}, DType::f32), 0, 3));  // dtype
  CHECK_THROWS(cache.append(1, more, 0, 3));                                  // layer
}

TEST_CASE("GPT::forward_cached: logits match the full forward in float64", "[generation]") {
  nn::GPT model(small_gpt(8), 3);
  model.to(DType::f64);
  model.eval();
  NoGradGuard no_grad;
  const std::vector<int32_t> ids{1, 5, 2, 9, 0, 12, 7, 3};
  nn::KVCache cache = model.make_cache(1);
  // A prompt of 3 positions at once, then one at a time, up to the full window.
  Tensor cached = model.forward_cached({ids.begin(), ids.begin() + 3}, 1, 3, cache);
  for (int64_t T = 3; T <= 8; ++T) {
    if (T > 3) cached = model.forward_cached({ids[T - 1]}, 1, 1, cache);
    const std::vector<double> full = model.last_logits({ids.begin(), ids.begin() + T}, 1, T).to_vector<double>();
    const std::vector<double> got = cached.to_vector<double>();
    REQUIRE(got.size() == full.size());
    for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(full[i]).margin(1e-12));
  }
  CHECK(cache.length() == 8);
  CHECK_THROWS_WITH(model.forward_cached({1}, 1, 1, cache), Catch::Contains("exceed block_size 8"));
}

TEST_CASE("GPT::forward_cached: a batch of rows, each its own sequence", "[generation]") {
  nn::GPT model(small_gpt(8), 4);
  model.to(DType::f64);
  model.eval();
  NoGradGuard no_grad;
  const std::vector<int32_t> a{1, 2, 3, 4}, b{9, 8, 7, 6};
  nn::KVCache cache = model.make_cache(2);
  model.forward_cached({1, 2, 9, 8}, 2, 2, cache);
  const std::vector<double> got = model.forward_cached({3, 4, 7, 6}, 2, 2, cache).to_vector<double>();
  const std::vector<double> full = model.last_logits({1, 2, 3, 4, 9, 8, 7, 6}, 2, 4).to_vector<double>();
  REQUIRE(got.size() == full.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(full[i]).margin(1e-12));
}

TEST_CASE("GPT::generate: the cache gives a full recompute's tokens, inside and across the window",
          "[generation]") {
  for (DType dt : {DType::f64, DType::f32}) {
    nn::GPT model(small_gpt(6), 11);
    sharpen(model);
    model.to(dt);
    for (double temperature : {0.0, 1.0}) {
      CAPTURE(dtype_name(dt), temperature);
      // 20 tokens from a 2-token prompt with block_size 6: 4 steps inside the window, 16 past it.
      const auto cached = generate(model, {3, 1}, 20, temperature, true);
      const auto full = generate(model, {3, 1}, 20, temperature, false);
      CHECK(cached.size() == 20);
      // A varied sequence, or the comparison would prove little (greedy decoding of a random
      // model falls into a short cycle soon, sampling does not).
      CHECK(distinct(cached) >= (temperature == 0.0 ? 2u : 4u));
      CHECK(cached == full);
      // A prompt longer than the window starts cropped.
      const std::vector<int32_t> long_prompt{1, 2, 3, 4, 5, 6, 7, 8, 9};
      CHECK(generate(model, long_prompt, 5, temperature, true) == generate(model, long_prompt, 5, temperature, false));
    }
    // Sampling depends on the generator's seed (the test would prove nothing if it did not).
    CHECK(generate(model, {3, 1}, 20, 1.0, true, 1) != generate(model, {3, 1}, 20, 1.0, true, 2));
  }
}

TEST_CASE("GPT::generate under bf16 autocast: the cache (weights packed once) gives a full recompute's tokens",
          "[generation][bf16]") {
  // A cached step's products are one-row products over a Bf16WeightCache; a full recompute's are
  // blocked products rounding the weights at every call. Every kernel the CPU has; emulated and
  // avx512_bf16 give the same bits, so the same tokens (AMX's bits are its own).
  nn::GPT model(small_gpt(6), 11);
  sharpen(model);
  std::vector<std::vector<int32_t>> by_kernel;
  for (Bf16Kernel kernel : bf16_kernels_here()) {
    AutocastBF16 bf16(true, kernel);
    for (double temperature : {0.0, 1.0}) {
      CAPTURE(static_cast<int>(kernel), temperature);
      const auto cached = generate(model, {3, 1}, 20, temperature, true);
      CHECK(distinct(cached) >= (temperature == 0.0 ? 2u : 4u));
      CHECK(cached == generate(model, {3, 1}, 20, temperature, false));
      if (temperature == 1.0 && kernel != Bf16Kernel::amx_bf16) by_kernel.push_back(cached);
    }
  }
  if (by_kernel.size() == 2) CHECK(by_kernel[0] == by_kernel[1]);
}

TEST_CASE("GPT::generate: restores the training mode and records no graph", "[generation]") {
  nn::GPTConfig c = small_gpt(6);
  c.dropout = 0.5;
  nn::GPT model(c, 2);
  model.train();
  // Dropout off (eval) during generation: cached and recomputed agree even with dropout 0.5.
  CHECK(generate(model, {0}, 10, 0.0, true) == generate(model, {0}, 10, 0.0, false));
  CHECK(model.is_training());
  // Each module's own mode comes back: a dropout the user put in eval stays there (helper-14
  // found generate setting every module to the root's mode).
  model.transformer->drop->eval();
  generate(model, {0}, 3, 0.0, true);
  CHECK(model.is_training());
  CHECK((*model.transformer->h)[0]->attn->is_training());
  CHECK_FALSE(model.transformer->drop->is_training());
  model.eval();
  (*model.transformer->h)[1]->train();
  generate(model, {0}, 3, 0.0, false);
  CHECK_FALSE(model.is_training());
  CHECK((*model.transformer->h)[1]->is_training());
  CHECK((*model.transformer->h)[1]->mlp->dropout->is_training());
}

TEST_CASE("GPT::generate: stop tokens, stop sequences and the callback", "[generation]") {
  nn::GPT model(small_gpt(6), 11);
  sharpen(model);
  const auto all = generate(model, {3}, 12, 0.0, true);
  REQUIRE(all.size() == 12);
  Generator gen(7);
  nn::GenerateOptions o{.max_new_tokens = 12, .temperature = 0.0, .generator = &gen};
  o.stop_tokens = {all[4]};
  const auto first_hit = std::find(all.begin(), all.end(), all[4]) - all.begin();
  CHECK(model.generate({3}, o) == std::vector<int32_t>(all.begin(), all.begin() + first_hit + 1));
  o.stop_tokens.clear();
  o.stop_sequences = {{all[5], all[6]}};
  const auto got = model.generate({3}, o);
  CHECK(got.size() <= 7);
  CHECK(got.size() >= 2);
  CHECK(std::equal(got.begin(), got.end(), all.begin()));
  CHECK(got[got.size() - 2] == all[5]);
  CHECK(got.back() == all[6]);
  o.stop_sequences.clear();
  std::vector<int32_t> seen;
  o.on_token = [&](int64_t row, int32_t id) {
    CHECK(row == 0);
    seen.push_back(id);
    return seen.size() < 3;
  };
  const auto three = model.generate({3}, o);
  CHECK(three == std::vector<int32_t>(all.begin(), all.begin() + 3));
  CHECK(seen == three);
  CHECK_THROWS(model.generate({}, o));
  CHECK_THROWS(model.generate({13}, o));  // outside the vocabulary
}

TEST_CASE("sample_token: greedy, temperature and top-k", "[generation]") {
  Generator gen(1);
  CHECK(nn::sample_token({0.1, 3.0, -2.0, 2.9}, 0.0, 0, gen) == 1);
  // top_k 1 is greedy whatever the temperature; top_k 2 never picks outside the two largest.
  for (int i = 0; i < 50; ++i) CHECK(nn::sample_token({0.1, 3.0, -2.0, 2.9}, 5.0, 1, gen) == 1);
  std::vector<int> counts(4, 0);
  for (int i = 0; i < 2000; ++i) ++counts[nn::sample_token({0.1, 3.0, -2.0, 2.9}, 1.0, 2, gen)];
  CHECK(counts[0] == 0);
  CHECK(counts[2] == 0);
  // p(1) / p(3) = e^0.1 = 1.105: about 1050 against 950.
  CHECK(counts[1] > 950);
  CHECK(counts[3] > 850);
  // A temperature whose logit / temperature overflows is the greedy limit, not NaN weights (whose
  // draw fell on the last candidate).
  CHECK(nn::sample_token({0.1, 3.0, -2.0, 2.9}, 1e-310, 0, gen) == 1);
  CHECK(nn::sample_token({-5.0, -3.0, -4.0}, 1e-310, 0, gen) == 1);
  CHECK_THROWS(nn::sample_token({}, 1.0, 0, gen));
  CHECK_THROWS(nn::sample_token({1.0}, -1.0, 0, gen));
  // A NaN logit makes NaN weights, which the draw (multinomial) refuses; it used to return the
  // last candidate.
  CHECK_THROWS_WITH(nn::sample_token({1.0, std::nan(""), 2.0}, 1.0, 0, gen),
                    Catch::Contains("multinomial: probability nan"));
}

TEST_CASE("EncoderDecoder::generate: the cache gives a full recompute's tokens", "[generation]") {
  for (nn::NormPlacement norm : {nn::NormPlacement::pre, nn::NormPlacement::post}) {
    nn::EncoderDecoder model({.src_vocab = 9, .tgt_vocab = 9, .d_model = 16, .n_head = 2, .d_ff = 32,
                              .n_encoder_layers = 2, .n_decoder_layers = 2, .max_len = 16, .norm = norm, .seed = 5});
    scramble(model, 98);
    model.to(DType::f64);
    // Two sources of lengths 5 and 3 (padded).
    const std::vector<int32_t> src{1, 2, 3, 4, 5, 6, 7, 8, 0, 0};
    const KeyPaddingMask mask = padding_mask_from_lengths({5, 3}, 5);
    for (double temperature : {0.0, 1.0}) {
      Generator g1(3), g2(3);
      nn::GenerateOptions o{.max_new_tokens = 12, .temperature = temperature, .generator = &g1};
      const auto cached = model.generate(src, 2, 5, 0, o, &mask);
      o.generator = &g2;
      o.use_cache = false;
      const auto full = model.generate(src, 2, 5, 0, o, &mask);
      CAPTURE(temperature);
      CHECK(cached.size() == 2);
      CHECK(cached[0].size() == 12);
      if (temperature > 0.0) CHECK(distinct(cached[0]) >= 3);  // varied (greedy soon repeats itself)
      CHECK(cached == full);
    }
    // A stop token ends its row only.
    Generator gen(3);
    nn::GenerateOptions o{.max_new_tokens = 12, .temperature = 0.0, .generator = &gen};
    const auto all = model.generate(src, 2, 5, 0, o, &mask);
    o.stop_tokens = {all[0][2]};
    const auto stopped = model.generate(src, 2, 5, 0, o, &mask);
    const auto hit = std::find(all[0].begin(), all[0].end(), all[0][2]) - all[0].begin();
    CHECK(stopped[0] == std::vector<int32_t>(all[0].begin(), all[0].begin() + hit + 1));
    CHECK(std::equal(stopped[1].begin(), stopped[1].end(), all[1].begin()));
    CHECK_THROWS(model.generate(src, 2, 5, 0, {.max_new_tokens = 16}, &mask));  // past max_len
  }
}
