#include "nn/gpt.h"

#include <cmath>
#include <string>

#include "core/ops.h"
#include "core/random.h"
#include "nn/init.h"

namespace heed::nn {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

GPTBlock::GPTBlock(const GPTConfig& c) {
  ln_1 = register_module("ln_1", std::make_shared<LayerNorm>(c.n_embd, 1e-5, true, c.bias));
  MultiHeadAttentionOptions opt;
  opt.d_model = c.n_embd;
  opt.n_head = c.n_head;
  opt.causal = true;
  opt.fused_qkv = true;
  opt.bias = c.bias;
  opt.dropout = c.dropout;
  attn = register_module("attn", std::make_shared<MultiHeadAttention>(opt));
  ln_2 = register_module("ln_2", std::make_shared<LayerNorm>(c.n_embd, 1e-5, true, c.bias));
  mlp = register_module("mlp", std::make_shared<FeedForward>(c.n_embd, 4 * c.n_embd, FeedForwardOptions{.dropout = c.dropout, .bias = c.bias}));
}

Tensor GPTBlock::forward(const Tensor& x) {
  Tensor h = x + attn->forward(ln_1->forward(x));
  return h + mlp->forward(ln_2->forward(h));
}

GPTTransformer::GPTTransformer(const GPTConfig& c) {
  wte = register_module("wte", std::make_shared<Embedding>(c.vocab_size, c.n_embd));
  wpe = register_module("wpe", std::make_shared<Embedding>(c.block_size, c.n_embd));
  drop = register_module("drop", std::make_shared<Dropout>(c.dropout));
  h = register_module("h", std::make_shared<ModuleList<GPTBlock>>());
  for (int64_t i = 0; i < c.n_layer; ++i) h->push_back(std::make_shared<GPTBlock>(c));
  ln_f = register_module("ln_f", std::make_shared<LayerNorm>(c.n_embd, 1e-5, true, c.bias));
}

TiedLinear::TiedLinear(Tensor w) {
  HEED_CHECK(w.defined() && w.dim() == 2, "TiedLinear: weight must be 2-D [out, in]");
  register_parameter("weight", weight, std::move(w));
}

Tensor TiedLinear::forward(const Tensor& x) { return linear(x, weight); }

GPT::GPT(const GPTConfig& c, std::optional<uint64_t> seed) : config_(c) {
  HEED_CHECK(c.vocab_size > 0 && c.block_size > 0 && c.n_layer > 0 && c.n_head > 0 && c.n_embd > 0,
             "GPT: sizes must be positive (vocab_size ", c.vocab_size, ", block_size ", c.block_size,
             ", n_layer ", c.n_layer, ", n_head ", c.n_head, ", n_embd ", c.n_embd, ")");
  HEED_CHECK(c.n_embd % c.n_head == 0, "GPT: n_embd ", c.n_embd, " is not divisible by n_head ", c.n_head);
  transformer = register_module("transformer", std::make_shared<GPTTransformer>(c));
  lm_head = register_module("lm_head", std::make_shared<TiedLinear>(transformer->wte->weight));
  // nanoGPT's _init_weights, by name. The residual projections get a smaller std, scaled by depth
  // (GPT-2 paper), as nanoGPT.
  const double proj_std = 0.02 / std::sqrt(2.0 * static_cast<double>(c.n_layer));
  init::by_name(*this, seed_or_draw(seed), [proj_std](Module& owner, const std::string& path, Tensor& t, Generator& gen) {
    if (dynamic_cast<LayerNorm*>(&owner)) {
      init::layer_default(owner, path, t, gen);  // 1 and 0
    } else if (ends_with(path, ".bias")) {
      init::zeros_(t);
    } else {  // Linear and Embedding weights
      init::normal_(t, 0.0, ends_with(path, "c_proj.weight") ? proj_std : 0.02, gen);
    }
  });
}

Tensor GPT::embed(const std::vector<int32_t>& idx, int64_t B, int64_t T) {
  HEED_CHECK(B >= 1 && T >= 1, "GPT: batch ", B, " and length ", T, " must be positive");
  HEED_CHECK(T <= config_.block_size, "GPT: cannot forward a sequence of length ", T,
             ", block_size is only ", config_.block_size);
  HEED_CHECK(static_cast<int64_t>(idx.size()) == B * T, "GPT: idx holds ", idx.size(), " ids, expected B*T = ",
             B, "*", T);
  return transformer->wte->forward(idx, {B, T});  // (B, T, C)
}

Tensor GPT::hidden(const Tensor& tok_emb) {
  HEED_CHECK(tok_emb.dim() == 3 && tok_emb.size(2) == config_.n_embd, "GPT: embeddings ",
             to_string(tok_emb.shape()), " must be (B, T, ", config_.n_embd, ")");
  const int64_t T = tok_emb.size(1);
  HEED_CHECK(T >= 1 && T <= config_.block_size, "GPT: cannot forward a sequence of length ", T,
             ", block_size is only ", config_.block_size);
  Tensor pos = slice(transformer->wpe->weight, 0, 0, T);  // (T, C), broadcast over B
  Tensor x = transformer->drop->forward(add(tok_emb, pos));
  for (const auto& block : *transformer->h) x = block->forward(x);
  return transformer->ln_f->forward(x);
}

Tensor GPT::forward_from_embeddings(const Tensor& tok_emb) { return lm_head->forward(hidden(tok_emb)); }

// An id tensor (B, T) as the ids, B and T the vector overloads take; throws naming `op`.
static std::vector<int32_t> ids_2d(const Tensor& idx, const char* op) {
  HEED_CHECK(idx.dim() == 2 && (idx.dtype() == DType::i32 || idx.dtype() == DType::i64), op,
             ": ids must be an int32 or int64 tensor (B, T), got ", dtype_name(idx.dtype()), " ", to_string(idx.shape()));
  return idx.to(DType::i32).to_vector<int32_t>();
}

Tensor GPT::forward(const Tensor& idx) { return forward(ids_2d(idx, "GPT::forward"), idx.size(0), idx.size(1)); }

Tensor GPT::loss(const Tensor& idx, const Tensor& targets) {
  HEED_CHECK(targets.shape() == idx.shape(), "GPT::loss: targets ", to_string(targets.shape()), " differ from ids ",
             to_string(idx.shape()));
  return loss(ids_2d(idx, "GPT::loss"), ids_2d(targets, "GPT::loss"), idx.size(0), idx.size(1));
}

Tensor GPT::forward(const std::vector<int32_t>& idx, int64_t B, int64_t T) {
  return forward_from_embeddings(embed(idx, B, T));
}

Tensor GPT::loss(const std::vector<int32_t>& idx, const std::vector<int32_t>& targets, int64_t B, int64_t T) {
  HEED_CHECK(targets.size() == idx.size(), "GPT::loss: ", targets.size(), " targets for ", idx.size(), " ids");
  Tensor logits = forward(idx, B, T);
  return cross_entropy(reshape(logits, {B * T, config_.vocab_size}), targets, kIgnoreTarget);
}

Tensor GPT::last_logits(const std::vector<int32_t>& idx, int64_t B, int64_t T) {
  Tensor x = hidden(embed(idx, B, T));
  Tensor last = reshape(slice(x, 1, T - 1, T), {B, config_.n_embd});  // (B, C)
  return lm_head->forward(last);                                      // (B, V)
}

int64_t GPT::num_params(bool non_embedding) const {
  int64_t n = num_parameters();
  return non_embedding ? n - transformer->wpe->weight.numel() : n;
}

}  // namespace heed::nn
