// heed::nn: a GPT language model equivalent to nanoGPT's model.py, parameter names included, so
// named_tensors() lists exactly nanoGPT's state_dict keys:
//
//   transformer.wte.weight, transformer.wpe.weight,
//   transformer.h.{i}.ln_1.weight/.bias, transformer.h.{i}.attn.c_attn.weight/.bias,
//   transformer.h.{i}.attn.c_proj.weight/.bias, transformer.h.{i}.ln_2.weight/.bias,
//   transformer.h.{i}.mlp.c_fc.weight/.bias, transformer.h.{i}.mlp.c_proj.weight/.bias,
//   transformer.ln_f.weight/.bias, lm_head.weight   (biases only with config.bias)
//
// lm_head.weight is the same tensor as transformer.wte.weight (weight tying): named_parameters()
// yields it once, as PyTorch does. Shapes: B batch, T time (<= block_size), C n_embd, V vocab.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/tensor.h"
#include "nn/attention.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/feed_forward.h"
#include "nn/generation.h"
#include "nn/kv_cache.h"
#include "nn/layer_norm.h"
#include "nn/module.h"

namespace heed::nn {

struct GPTConfig {
  int64_t vocab_size = 65;
  int64_t block_size = 64;  ///< the longest context (rows of wpe)
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_embd = 128;
  double dropout = 0.0;
  bool bias = false;  ///< biases in the Linear and LayerNorm layers
};

/// One pre-norm transformer block: x + attn(ln_1(x)), then x + mlp(ln_2(x)).
class GPTBlock : public Module {
 public:
  /// Children "ln_1", "attn" (causal, fused c_attn), "ln_2", "mlp" (c_fc 4C, GELU, c_proj).
  /// Its weights are drawn by GPT's init (by name).
  explicit GPTBlock(const GPTConfig& config);
  /// x (B, T, C) -> (B, T, C).
  Tensor forward(const Tensor& x);
  /// The same for n new positions x (B, n, C) after those in `cache` (layer `layer` of it), in
  /// eval mode: the last n rows of forward() over the whole sequence (nn/kv_cache.h).
  /// With last_only, only the last row (B, 1, C): every position's keys and values still go into
  /// the cache, but one query, one attention output and one MLP row are computed (the last
  /// layer of a step that needs the last position's logits alone).
  Tensor forward_cached(const Tensor& x, KVCache& cache, int64_t layer, bool last_only = false);

  std::shared_ptr<LayerNorm> ln_1;
  std::shared_ptr<MultiHeadAttention> attn;
  std::shared_ptr<LayerNorm> ln_2;
  std::shared_ptr<FeedForward> mlp;
};

/// The embedding and block stack, nanoGPT's `transformer` ModuleDict.
class GPTTransformer : public Module {
 public:
  /// Children "wte", "wpe", "drop", "h", "ln_f", in nanoGPT's order.
  explicit GPTTransformer(const GPTConfig& config);

  std::shared_ptr<Embedding> wte;
  std::shared_ptr<Embedding> wpe;
  std::shared_ptr<Dropout> drop;
  std::shared_ptr<ModuleList<GPTBlock>> h;
  std::shared_ptr<LayerNorm> ln_f;
};

/// The output projection whose weight is shared with another module (the tied lm_head).
class TiedLinear : public Module {
 public:
  /// Registers `weight` ([out, in], an existing parameter) as "weight"; no bias.
  explicit TiedLinear(Tensor weight);
  /// x (..., in) -> (..., out).
  Tensor forward(const Tensor& x);

  Tensor weight;
};

class GPT : public Module {
 public:
  /// Builds the model and initialises it as nanoGPT: Linear and Embedding weights normal(0, 0.02),
  /// biases 0, LayerNorms 1 and 0, every "*c_proj.weight" normal(0, 0.02 / sqrt(2 n_layer)).
  /// `seed` is the root seed: each parameter is drawn from derive_seed(seed, its dotted name) and
  /// each dropout seeded from its path (nn::init::by_name), so a block's weights do not depend on
  /// how many blocks precede it. Without a seed the root is drawn from the default generator
  /// (heed::manual_seed). (The seed is not part of GPTConfig, which describes the architecture a
  /// checkpoint records.) Throws on non-positive sizes or n_embd % n_head.
  explicit GPT(const GPTConfig& config, std::optional<uint64_t> seed = std::nullopt);

  /// idx: B*T token ids (row-major (B, T)) -> logits (B, T, V). Throws if T > block_size.
  Tensor forward(const std::vector<int32_t>& idx, int64_t B, int64_t T);
  /// The target id loss() ignores: nanoGPT's ignore_index, not cross_entropy's default -100.
  static constexpr int32_t kIgnoreTarget = -1;
  /// Mean cross-entropy of forward(idx) against targets (B*T ids), as nanoGPT's loss: a target
  /// of kIgnoreTarget (-1) is ignored.
  Tensor loss(const std::vector<int32_t>& idx, const std::vector<int32_t>& targets, int64_t B, int64_t T);
  /// idx: an int32 / int64 tensor of ids (B, T) -> logits (B, T, V) (nanoGPT's forward).
  Tensor forward(const Tensor& idx);
  /// Mean cross-entropy of forward(idx) against targets, both (B, T) id tensors (-1: ignored).
  Tensor loss(const Tensor& idx, const Tensor& targets);
  /// Logits (B, T, V) from token embeddings tok_emb (B, T, C) (what wte would give): adds the
  /// position embeddings and runs the rest of the model. Lets a gradcheck perturb the embeddings.
  Tensor forward_from_embeddings(const Tensor& tok_emb);
  /// Logits of the last position only, (B, V): what sampling needs, without the lm_head
  /// product for the other T - 1 positions.
  Tensor last_logits(const std::vector<int32_t>& idx, int64_t B, int64_t T);

  /// Generates up to options.max_new_tokens tokens after `prompt` (at least one token) and returns
  /// them, as nanoGPT's generate: each step sees the last block_size tokens (nn/generation.h).
  /// Runs in eval mode without gradients and restores the training mode. With the KV cache,
  /// inside the window a step costs one position; once the window slides every position moves,
  /// so each step recomputes the window (the tokens are those of a full recompute).
  std::vector<int32_t> generate(const std::vector<int32_t>& prompt, const GenerateOptions& options);
  /// An empty cache for B sequences, room for block_size positions, in the weights' dtype.
  KVCache make_cache(int64_t B) const;
  /// Logits (B, V) of the last of T new positions idx (B*T ids, row-major) that follow the
  /// cache.length() positions in `cache`, which grows by T; no gradient, eval mode expected
  /// (no dropout is applied). Throws if cache.length() + T > block_size.
  Tensor forward_cached(const std::vector<int32_t>& idx, int64_t B, int64_t T, KVCache& cache);

  const GPTConfig& config() const { return config_; }
  /// Parameters, the tied matrix counted once; non_embedding leaves out wpe, as nanoGPT.
  int64_t num_params(bool non_embedding = true) const;

  std::shared_ptr<GPTTransformer> transformer;
  std::shared_ptr<TiedLinear> lm_head;

 private:
  // tok_emb (B, T, C) -> the final hidden states after ln_f (B, T, C).
  Tensor hidden(const Tensor& tok_emb);
  Tensor embed(const std::vector<int32_t>& idx, int64_t B, int64_t T);

  GPTConfig config_;
};

}  // namespace heed::nn
