// MultiHeadAttention composes ops: the projections are Linear layers, and everything between
// them (head views, q k^T, scale, masks, softmax, attention dropout, @ v, merging heads) is the
// attention_heads op of core/ops/attention.cpp.
#include "nn/attention.h"

#include <cmath>

#include "core/ops.h"
#include "core/random.h"
#include "nn/init.h"

namespace heed::nn {

// ------------------------------------------------------------------------------------------
// MultiHeadAttention

MultiHeadAttention::MultiHeadAttention(const MultiHeadAttentionOptions& options) : options_(options) {
  const int64_t C = options.d_model, nh = options.n_head;
  HEED_CHECK(C > 0 && nh > 0, "MultiHeadAttention: d_model (", C, ") and n_head (", nh,
             ") must be positive");
  HEED_CHECK(C % nh == 0, "MultiHeadAttention: d_model (", C, ") is not divisible by n_head (", nh,
             "); head_dim = d_model / n_head must be an integer");
  head_dim_ = C / nh;
  if (options.fused_qkv) {
    c_attn = register_module("c_attn", std::make_shared<Linear>(C, 3 * C, options.bias));
  } else {
    q_proj = register_module("q_proj", std::make_shared<Linear>(C, C, options.bias));
    k_proj = register_module("k_proj", std::make_shared<Linear>(C, C, options.bias));
    v_proj = register_module("v_proj", std::make_shared<Linear>(C, C, options.bias));
  }
  c_proj = register_module("c_proj", std::make_shared<Linear>(C, C, options.bias));
  attn_dropout = register_module("attn_dropout", std::make_shared<Dropout>(options.dropout));
  resid_dropout = register_module("resid_dropout", std::make_shared<Dropout>(options.dropout));
  init::by_name(*this, seed_or_draw(options.seed));
}

static void check_input(const Tensor& t, int64_t C, const char* what) {
  HEED_CHECK(t.dim() == 3 && t.size(2) == C, "MultiHeadAttention: ", what, " must be (B, T, ", C,
             "), got ", to_string(t.shape()));
}

Tensor MultiHeadAttention::forward(const Tensor& x) { return forward(x, nullptr); }

Tensor MultiHeadAttention::forward(const Tensor& x, const KeyPaddingMask* mask) {
  const int64_t C = options_.d_model;
  check_input(x, C, "input");
  if (options_.fused_qkv) {
    const Tensor qkv = c_attn->forward(x);  // (B, T, 3C): q, k, v side by side
    return attend({qkv, 0}, {qkv, C}, {qkv, 2 * C}, mask);
  }
  return attend({q_proj->forward(x)}, {k_proj->forward(x)}, {v_proj->forward(x)}, mask);
}

Tensor MultiHeadAttention::forward(const Tensor& query, const Tensor& memory, const KeyPaddingMask* memory_mask) {
  const int64_t C = options_.d_model;
  check_input(query, C, "query");
  check_input(memory, C, "memory");
  HEED_CHECK(query.size(0) == memory.size(0), "MultiHeadAttention: query ", to_string(query.shape()),
             " and memory ", to_string(memory.shape()), " have different batch sizes");
  if (options_.fused_qkv) {
    // Rows [0, C) of c_attn project queries, rows [C, 3C) keys and values: the same weights a
    // self-attention call uses, applied to two different inputs.
    const Tensor& w = c_attn->weight;
    const Tensor& b = c_attn->bias;
    const Tensor q = linear(query, slice(w, 0, 0, C), b.defined() ? slice(b, 0, 0, C) : Tensor());
    const Tensor kv = linear(memory, slice(w, 0, C, 3 * C), b.defined() ? slice(b, 0, C, 3 * C) : Tensor());
    return attend({q, 0}, {kv, 0}, {kv, C}, memory_mask);
  }
  return attend({q_proj->forward(query)}, {k_proj->forward(memory)}, {v_proj->forward(memory)}, memory_mask);
}

Tensor MultiHeadAttention::attend(const HeadInput& q, const HeadInput& k, const HeadInput& v,
                                  const KeyPaddingMask* mask) {
  if (!keep_attention_) last_attention_ = Tensor();  // never a stale one, and its memory goes
  AttentionHeadsOptions o;
  o.n_head = options_.n_head;
  o.scale = 1.0 / std::sqrt(static_cast<double>(head_dim_));
  o.causal = options_.causal;
  o.key_padding = mask;
  o.dropout = attn_dropout->active() ? attn_dropout->p() : 0.0;
  o.gen = &attn_dropout->generator();
  o.weights = keep_attention_ ? &last_attention_ : nullptr;
  return resid_dropout->forward(c_proj->forward(attention_heads(q, k, v, options_.d_model, o)));
}

KeyPaddingMask key_padding_mask(const Tensor& padding) {
  HEED_CHECK(padding.dim() == 2, "key_padding_mask: padding must be (B, T), got ", to_string(padding.shape()));
  KeyPaddingMask m{{}, padding.size(0), padding.size(1)};
  m.pad.reserve(padding.numel());
  for (double v : padding.to_vector<double>()) m.pad.push_back(v != 0 ? 1 : 0);
  return m;
}

}  // namespace heed::nn
