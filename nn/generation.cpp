// The sampling step and the generation loops of GPT and EncoderDecoder (their ::generate).
#include "nn/generation.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/autocast.h"
#include "core/autograd.h"
#include "core/check.h"
#include "core/ops.h"
#include "core/ops/gemm_bf16.h"
#include "core/random.h"
#include "nn/gpt.h"
#include "nn/kv_cache.h"
#include "nn/transformer.h"

namespace heed::nn {

int32_t sample_token(std::vector<double> row, double temperature, int64_t top_k, Generator& gen) {
  HEED_CHECK(!row.empty(), "sample_token: no logits");
  HEED_CHECK(temperature >= 0.0, "sample_token: temperature ", temperature, " must not be negative");
  const auto top = std::max_element(row.begin(), row.end());
  // Greedy at temperature 0, and where the largest logit over the temperature overflows (1e-310,
  // say): the distribution's limit as the temperature goes to 0 (inf - inf would make every
  // weight NaN).
  if (temperature == 0.0 || std::isinf(*top / temperature)) return static_cast<int32_t>(top - row.begin());
  const int64_t V = static_cast<int64_t>(row.size());
  for (double& v : row) v /= temperature;
  if (top_k > 0 && top_k < V) {  // keep the k largest logits
    std::vector<double> sorted = row;
    std::nth_element(sorted.begin(), sorted.begin() + (top_k - 1), sorted.end(), std::greater<>());
    const double kth = sorted[top_k - 1];
    for (double& v : row)
      if (v < kth) v = -std::numeric_limits<double>::infinity();
  }
  const double mx = *std::max_element(row.begin(), row.end());
  for (double& v : row) v = std::exp(v - mx);
  // torch.multinomial(probs, 1) as nanoGPT draws, from the unnormalised weights: one uniform draw.
  return static_cast<int32_t>(multinomial(Tensor::from_vector(row, {V}), 1, true, &gen).item());
}

bool reached_stop(const std::vector<int32_t>& out, const GenerateOptions& o) {
  if (out.empty()) return false;
  if (std::find(o.stop_tokens.begin(), o.stop_tokens.end(), out.back()) != o.stop_tokens.end()) return true;
  for (const auto& s : o.stop_sequences)
    if (!s.empty() && s.size() <= out.size() && std::equal(s.rbegin(), s.rend(), out.rbegin())) return true;
  return false;
}

namespace {

// Under bf16 autocast, a batch-1 step's products are one-row products over constant weights: their
// bf16 copies are rounded and packed once for the whole generation (core/ops/gemm_bf16.h), not at
// every step. Without autocast it holds nothing.
struct Bf16Weights {
  Bf16WeightCache cache;
  explicit Bf16Weights(const Module& m) {
    if (!autocast_bf16()) return;
    for (const Tensor& p : m.parameters())
      if (p.dtype() == DType::f32 && p.is_contiguous()) cache.add(p.data<float>(), p.numel());
  }
};

// Puts a module tree in eval mode for the life of the scope, then back as it was.
// Each module's own mode comes back, not the root's for all of them: a dropout a user had put in
// eval mode inside a training model stays in eval (nanoGPT's generate never touches modes).
struct EvalScope {
  std::vector<std::pair<Module*, bool>> modes;  // pre-order: a parent's train() before its children's
  explicit EvalScope(Module& module) {
    for (const auto& [path, m] : module.named_modules()) modes.emplace_back(m, m->is_training());
    module.eval();
  }
  ~EvalScope() {
    for (const auto& [m, was_training] : modes) m->train(was_training);
  }
};

std::vector<double> row_of(const Tensor& logits, int64_t row) {  // logits (B, V)
  return slice(logits, 0, row, row + 1).to_vector<double>();
}

}  // namespace

// ------------------------------------------------------------------------------------------
// GPT

KVCache GPT::make_cache(int64_t B) const {
  return KVCache(config_.n_layer, B, config_.block_size, config_.n_embd, transformer->wte->weight.dtype());
}

Tensor GPTBlock::forward_cached(const Tensor& x, KVCache& cache, int64_t layer, bool last_only) {
  const int64_t n = x.size(1);
  const Tensor a = cached_self_attention(*attn, ln_1->forward(x), cache, layer, last_only);
  Tensor h = (last_only && n > 1 ? slice(x, 1, n - 1, n) : x) + a;
  return h + mlp->forward(ln_2->forward(h));
}

Tensor GPT::forward_cached(const std::vector<int32_t>& idx, int64_t B, int64_t T, KVCache& cache) {
  NoGradGuard no_grad;
  const int64_t t0 = cache.length();
  HEED_CHECK(cache.batch() == B && cache.layers() == config_.n_layer, "GPT::forward_cached: a cache for ",
             cache.batch(), " rows and ", cache.layers(), " layers, not ", B, " and ", config_.n_layer);
  HEED_CHECK(t0 + T <= config_.block_size, "GPT::forward_cached: ", t0, " cached + ", T,
             " new positions exceed block_size ", config_.block_size);
  const Tensor pos = slice(transformer->wpe->weight, 0, t0, t0 + T);  // the new positions' rows
  Tensor x = add(embed(idx, B, T), pos);
  // Only the last position's logits are asked for: the last layer computes that row alone.
  for (int64_t l = 0; l < config_.n_layer; ++l)
    x = (*transformer->h)[l]->forward_cached(x, cache, l, /*last_only=*/l == config_.n_layer - 1);
  cache.advance(T);
  Tensor last = reshape(x, {B, config_.n_embd});
  return lm_head->forward(transformer->ln_f->forward(last));  // (B, V)
}

std::vector<int32_t> GPT::generate(const std::vector<int32_t>& prompt, const GenerateOptions& o) {
  HEED_CHECK(!prompt.empty(), "GPT::generate: the prompt must hold at least one token");
  HEED_CHECK(o.max_new_tokens >= 0, "GPT::generate: max_new_tokens ", o.max_new_tokens, " is negative");
  for (int32_t id : prompt)
    HEED_CHECK(id >= 0 && id < config_.vocab_size, "GPT::generate: token ", id, " outside the vocabulary of ",
               config_.vocab_size);
  NoGradGuard no_grad;
  EvalScope eval(*this);
  const Bf16Weights bf16_weights(*this);
  Generator& gen = o.generator ? *o.generator : default_generator();
  const int64_t block = config_.block_size;
  std::vector<int32_t> ids = prompt, out;
  KVCache cache;
  if (o.use_cache) cache = make_cache(1);
  for (int64_t step = 0; step < o.max_new_tokens; ++step) {
    const int64_t T = std::min<int64_t>(static_cast<int64_t>(ids.size()), block);
    Tensor logits;  // (1, V)
    if (!o.use_cache) {
      logits = last_logits(std::vector<int32_t>(ids.end() - T, ids.end()), 1, T);
    } else if (cache.length() > 0 && cache.length() + 1 == T) {  // one more position inside the window
      logits = forward_cached({ids.back()}, 1, 1, cache);
    } else {
      // The first step, or the window slid: every position moved, so every cached key and value
      // (which depend on the position embedding they were computed with) is stale. Recompute
      // the last block_size tokens, as nanoGPT does at every step.
      cache.clear();
      logits = forward_cached(std::vector<int32_t>(ids.end() - T, ids.end()), 1, T, cache);
    }
    const int32_t next = sample_token(row_of(logits, 0), o.temperature, o.top_k, gen);
    ids.push_back(next);
    out.push_back(next);
    if (o.on_token && !o.on_token(0, next)) break;
    if (reached_stop(out, o)) break;
  }
  return out;
}

// ------------------------------------------------------------------------------------------
// EncoderDecoder

namespace {

// One decoder layer over n new target positions, its self-attention keys and values cached and
// its cross-attention's precomputed: DecoderLayer::forward in eval mode (no dropout).
Tensor decoder_layer_cached(DecoderLayer& d, const Tensor& x, KVCache& cache, int64_t layer, const Tensor& memory_kv,
                            const KeyPaddingMask* memory_mask) {
  if (d.options().norm == NormPlacement::pre) {
    Tensor h = x + cached_self_attention(*d.self_attn, d.norm1->forward(x), cache, layer);
    h = h + cached_cross_attention(*d.cross_attn, d.norm2->forward(h), memory_kv, memory_mask);
    return h + d.ff->forward(d.norm3->forward(h));
  }
  Tensor h = d.norm1->forward(x + cached_self_attention(*d.self_attn, x, cache, layer));
  h = d.norm2->forward(h + cached_cross_attention(*d.cross_attn, h, memory_kv, memory_mask));
  return d.norm3->forward(h + d.ff->forward(h));
}

}  // namespace

std::vector<std::vector<int32_t>> EncoderDecoder::generate(const std::vector<int32_t>& src, int64_t B, int64_t Ts,
                                                           int32_t start_token, const GenerateOptions& o,
                                                           const KeyPaddingMask* src_mask) {
  HEED_CHECK(o.max_new_tokens >= 0, "EncoderDecoder::generate: max_new_tokens ", o.max_new_tokens, " is negative");
  HEED_CHECK(o.max_new_tokens < options_.max_len, "EncoderDecoder::generate: ", o.max_new_tokens,
             " new tokens and the start token exceed max_len ", options_.max_len);
  HEED_CHECK(start_token >= 0 && start_token < options_.tgt_vocab, "EncoderDecoder::generate: start token ",
             start_token, " outside the target vocabulary of ", options_.tgt_vocab);
  NoGradGuard no_grad;
  EvalScope eval(*this);
  const Bf16Weights bf16_weights(*this);
  Generator& gen = o.generator ? *o.generator : default_generator();
  const Tensor memory = encode(src, B, Ts, src_mask);
  const int64_t n_layer = static_cast<int64_t>(decoder->layers->size());
  // Cross-attention's keys and values depend on the source only: once per layer, not per step.
  std::vector<Tensor> memory_kv;
  KVCache cache;
  if (o.use_cache) {
    for (const auto& layer : *decoder->layers) memory_kv.push_back(cross_keys_values(*layer->cross_attn, memory));
    cache = KVCache(n_layer, B, o.max_new_tokens + 1, options_.d_model, memory.dtype());
  }
  std::vector<std::vector<int32_t>> out(B);
  std::vector<int32_t> last(B, start_token);            // each row's latest target
  std::vector<std::vector<int32_t>> fed(B, {start_token});  // each row's targets so far (uncached path)
  std::vector<bool> done(B, false);
  const double scale = std::sqrt(static_cast<double>(options_.d_model));
  for (int64_t step = 0; step < o.max_new_tokens; ++step) {
    Tensor logits;  // (B, V)
    if (o.use_cache) {
      const int64_t t = cache.length();
      Tensor x = mul(tgt_embed->forward(last, {B, 1}), scale);
      x = add(x, slice(pos_encoding->table(x.dtype()), 0, t, t + 1));
      for (int64_t l = 0; l < n_layer; ++l)
        x = decoder_layer_cached(*(*decoder->layers)[l], x, cache, l, memory_kv[l], src_mask);
      cache.advance(1);
      if (decoder->norm) x = decoder->norm->forward(x);
      logits = reshape(generator->forward(x), {B, options_.tgt_vocab});
    } else {
      const int64_t Tt = step + 1;
      std::vector<int32_t> tgt(B * Tt);
      for (int64_t b = 0; b < B; ++b) std::copy(fed[b].begin(), fed[b].end(), tgt.begin() + b * Tt);
      Tensor full = decode(tgt, B, Tt, memory, nullptr, src_mask);  // (B, Tt, V)
      logits = reshape(slice(full, 1, Tt - 1, Tt), {B, options_.tgt_vocab});
    }
    bool all_done = true, go_on = true;
    for (int64_t b = 0; b < B; ++b) {
      // A finished row keeps feeding its last token (the batch stays rectangular; rows do not
      // see each other), draws nothing and records nothing.
      if (!done[b]) {
        last[b] = sample_token(row_of(logits, b), o.temperature, o.top_k, gen);
        out[b].push_back(last[b]);
        if (o.on_token && !o.on_token(b, last[b])) go_on = false;
        done[b] = reached_stop(out[b], o);
      }
      if (!o.use_cache) fed[b].push_back(last[b]);
      all_done = all_done && done[b];
    }
    if (all_done || !go_on) break;
  }
  return out;
}

}  // namespace heed::nn
