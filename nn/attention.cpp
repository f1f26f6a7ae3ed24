// MultiHeadAttention composes ops: the projections are Linear layers, and everything between
// them (head views, q k^T, scale, masks, softmax, attention dropout, @ v, merging heads) is the
// attention_heads op of core/ops/attention.cpp. need_weights composes the same from per-head
// matmuls and attention_softmax, so that the weights it returns are differentiable.
#include "nn/attention.h"

#include <cmath>

#include "core/autograd.h"
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
  HEED_CHECK(options.kdim >= 0 && options.vdim >= 0, "MultiHeadAttention: kdim (", options.kdim, ") and vdim (",
             options.vdim, ") must be positive, or 0 for d_model");
  if (options_.kdim == 0) options_.kdim = C;
  if (options_.vdim == 0) options_.vdim = C;
  const int64_t kdim = options_.kdim, vdim = options_.vdim;
  HEED_CHECK(!options.fused_qkv || (kdim == C && vdim == C), "MultiHeadAttention: fused_qkv needs kdim and vdim ",
             "equal to d_model (", C, "), got kdim ", kdim, " and vdim ", vdim,
             "; set fused_qkv = false for separate q_proj, k_proj, v_proj (PyTorch's q/k/v_proj_weight)");
  head_dim_ = C / nh;
  const bool qkv_bias = options.qkv_bias.value_or(options.bias);
  const bool out_bias = options.out_bias.value_or(options.bias);
  if (options.fused_qkv) {
    c_attn = register_module("c_attn", std::make_shared<Linear>(C, 3 * C, qkv_bias));
  } else {
    q_proj = register_module("q_proj", std::make_shared<Linear>(C, C, qkv_bias));
    k_proj = register_module("k_proj", std::make_shared<Linear>(kdim, C, qkv_bias));
    v_proj = register_module("v_proj", std::make_shared<Linear>(vdim, C, qkv_bias));
  }
  c_proj = register_module("c_proj", std::make_shared<Linear>(C, C, out_bias));
  attn_dropout = register_module("attn_dropout", std::make_shared<Dropout>(options.dropout));
  resid_dropout = register_module("resid_dropout", std::make_shared<Dropout>(options.resid_dropout.value_or(options.dropout)));
  init::by_name(*this, seed_or_draw(options.seed));
}

static void check_input(const Tensor& t, int64_t width, const char* what) {
  HEED_CHECK(t.dim() == 3 && t.size(2) == width, "MultiHeadAttention: ", what, " must be (B, T, ", width,
             ") or unbatched (T, ", width, "), got ", to_string(t.shape()));
}

// Unbatched (T, width) inputs run as a batch of one, whose batch axis the results drop again.
static Tensor batched(bool unbatched, const Tensor& t) { return unbatched ? unsqueeze(t, 0) : t; }
static Tensor unbatched_result(bool unbatched, const Tensor& t) { return unbatched ? squeeze(t, 0) : t; }

Tensor MultiHeadAttention::forward(const Tensor& x) { return forward(x, nullptr); }

Tensor MultiHeadAttention::forward(const Tensor& x, const KeyPaddingMask* mask) {
  const bool unbatched = x.dim() == 2;
  const Tensor xb = batched(unbatched, x);
  return unbatched_result(unbatched, run(xb, xb, xb, {mask, Tensor()}, nullptr));
}

Tensor MultiHeadAttention::forward(const Tensor& query, const Tensor& memory, const KeyPaddingMask* memory_mask) {
  const bool unbatched = query.dim() == 2;
  HEED_CHECK(memory.dim() == query.dim(), "MultiHeadAttention: query ", to_string(query.shape()), " and memory ",
             to_string(memory.shape()), " must both be batched (3-D) or both unbatched (2-D)");
  const Tensor mb = batched(unbatched, memory);
  return unbatched_result(unbatched, run(batched(unbatched, query), mb, mb, {memory_mask, Tensor()}, nullptr));
}

AttentionOutput MultiHeadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                            const AttentionArgs& args) {
  const bool unbatched = query.dim() == 2;
  HEED_CHECK(key.dim() == query.dim() && value.dim() == query.dim(), "MultiHeadAttention: query ",
             to_string(query.shape()), ", key ", to_string(key.shape()), " and value ", to_string(value.shape()),
             " must all be batched (3-D) or all unbatched (2-D)");
  const Tensor q = batched(unbatched, query);
  // One tensor passed twice stays one tensor, so the fused projection runs once.
  const Tensor k = key.same(query) ? q : batched(unbatched, key);
  const Tensor v = value.same(key) ? k : batched(unbatched, value);
  check_input(q, options_.d_model, "query");
  const int64_t B = q.size(0), Tq = q.size(1), Tk = k.size(1), nh = options_.n_head;
  Masks masks;
  KeyPaddingMask padding;
  Tensor padding_bias;  // a float key_padding_mask, (B, 1, 1, Tk)
  if (args.key_padding_mask.defined()) {
    const Tensor m = batched(unbatched, args.key_padding_mask);
    HEED_CHECK(m.dim() == 2 && m.size(0) == B && m.size(1) == Tk, "MultiHeadAttention: key_padding_mask ",
               to_string(args.key_padding_mask.shape()), " must be (B, Tk) = (", B, ", ", Tk, ")",
               unbatched ? " without B for unbatched input" : "");
    if (is_floating(m.dtype())) {
      // Added to every head's and query's scores, as PyTorch 2's (-inf masks a key).
      HEED_CHECK(m.dtype() == q.dtype(), "MultiHeadAttention: a ", dtype_name(m.dtype()), " key_padding_mask for ",
                 dtype_name(q.dtype()), " inputs");
      padding_bias = reshape(m, {B, 1, 1, Tk});
    } else {
      padding = key_padding_mask(m);
      masks.key_padding = &padding;
    }
  }
  if (args.attn_mask.defined()) {
    const Tensor& m = args.attn_mask;
    const bool pair = m.dim() == 2 && m.size(0) == Tq && m.size(1) == Tk;
    const bool per_head = m.dim() == 3 && m.size(0) == B * nh && m.size(1) == Tq && m.size(2) == Tk;
    HEED_CHECK(pair || per_head, "MultiHeadAttention: attn_mask ", to_string(m.shape()), " must be (Tq, Tk) = (", Tq,
               ", ", Tk, ") or (B * n_head, Tq, Tk) = (", B * nh, ", ", Tq, ", ", Tk, ")");
    HEED_CHECK(m.dtype() == DType::boolean || is_floating(m.dtype()), "MultiHeadAttention: attn_mask must be bool ",
               "(true = not allowed) or float (added to the scores), got ", dtype_name(m.dtype()));
    masks.bias = m.dtype() == DType::boolean ? additive_mask(m, q.dtype()) : m;
    if (per_head) masks.bias = reshape(masks.bias, {B, nh, Tq, Tk});
  }
  // A float attn_mask of the other float dtype works alone (the kernels read a bias in the scores'
  // dtype): brought to it here too, where the sum with the padding needs one dtype.
  if (padding_bias.defined())
    masks.bias = masks.bias.defined() ? add(masks.bias.to(q.dtype()), padding_bias) : padding_bias;
  AttentionOutput out;
  Tensor weights;
  out.output = unbatched_result(unbatched, run(q, k, v, masks, args.need_weights ? &weights : nullptr));
  if (args.need_weights) {
    if (args.average_attn_weights) weights = mean(weights, 1);
    out.weights = unbatched_result(unbatched, weights);
  }
  return out;
}

Tensor MultiHeadAttention::run(const Tensor& query, const Tensor& key, const Tensor& value, const Masks& masks,
                               Tensor* weights) {
  const int64_t C = options_.d_model;
  check_input(query, C, "query");
  check_input(key, options_.kdim, "key");
  check_input(value, options_.vdim, "value");
  HEED_CHECK(query.size(0) == key.size(0) && key.size(0) == value.size(0) && key.size(1) == value.size(1),
             "MultiHeadAttention: query ", to_string(query.shape()), ", key ", to_string(key.shape()), " and value ",
             to_string(value.shape()), " disagree on batch size or key count");
  if (!options_.fused_qkv)
    return attend({q_proj->forward(query)}, {k_proj->forward(key)}, {v_proj->forward(value)}, masks, weights);
  if (query.same(key) && key.same(value)) {
    const Tensor qkv = c_attn->forward(query);  // (B, T, 3C): q, k, v side by side
    return attend({qkv, 0}, {qkv, C}, {qkv, 2 * C}, masks, weights);
  }
  // Rows [0, C) of c_attn project queries, [C, 2C) keys, [2C, 3C) values: the same weights a
  // self-attention call uses, applied to different inputs.
  const Tensor& w = c_attn->weight;
  const Tensor& b = c_attn->bias;
  auto rows = [&](const Tensor& x, int64_t from, int64_t to) {
    return linear(x, slice(w, 0, from, to), b.defined() ? slice(b, 0, from, to) : Tensor());
  };
  const Tensor q = rows(query, 0, C);
  if (key.same(value)) {
    const Tensor kv = rows(key, C, 3 * C);
    return attend({q, 0}, {kv, 0}, {kv, C}, masks, weights);
  }
  return attend({q, 0}, {rows(key, C, 2 * C), 0}, {rows(value, 2 * C, 3 * C), 0}, masks, weights);
}

// Channels [offset, offset + C) of a projection (B, T, width) as heads (B, nh, T, hd).
static Tensor heads_of(const HeadInput& in, int64_t C, int64_t nh) {
  const Tensor t = slice(in.src, 2, in.offset, in.offset + C);
  return permute(reshape(t, {t.size(0), t.size(1), nh, C / nh}), {0, 2, 1, 3});
}

Tensor MultiHeadAttention::attend(const HeadInput& q, const HeadInput& k, const HeadInput& v, const Masks& masks,
                                  Tensor* weights) {
  if (!keep_attention_) last_attention_ = Tensor();  // never a stale one, and its memory goes
  const int64_t C = options_.d_model, nh = options_.n_head;
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim_));
  const bool mask_grad = masks.bias.defined() && masks.bias.requires_grad() && grad_mode_enabled();
  Tensor y;
  if (weights || mask_grad) {
    // Composed: the weights are an op's output, differentiable (and so is the mask).
    const Tensor att = attention_softmax(matmul(heads_of(q, C, nh), transpose(heads_of(k, C, nh), -1, -2)), scale,
                                         options_.causal, masks.key_padding, masks.bias);
    const Tensor dropped = attn_dropout->forward(att);
    const Tensor heads = matmul(dropped, heads_of(v, C, nh));  // (B, nh, Tq, hd)
    y = reshape(permute(heads, {0, 2, 1, 3}), {q.src.size(0), q.src.size(1), C});
    if (weights) *weights = dropped;  // PyTorch returns the weights it multiplied v by
    if (keep_attention_) last_attention_ = att.detach();
  } else {
    AttentionHeadsOptions o;
    o.n_head = nh;
    o.scale = scale;
    o.causal = options_.causal;
    o.key_padding = masks.key_padding;
    o.bias = masks.bias;
    o.dropout = attn_dropout->active() ? attn_dropout->p() : 0.0;
    o.gen = &attn_dropout->generator();
    o.weights = keep_attention_ ? &last_attention_ : nullptr;
    y = attention_heads(q, k, v, C, o);
  }
  return resid_dropout->forward(c_proj->forward(y));
}

KeyPaddingMask key_padding_mask(const Tensor& padding) {
  HEED_CHECK(padding.dim() == 2, "key_padding_mask: padding must be (B, T), got ", to_string(padding.shape()));
  KeyPaddingMask m{{}, padding.size(0), padding.size(1)};
  m.pad.reserve(padding.numel());
  for (double v : padding.to_vector<double>()) m.pad.push_back(v != 0 ? 1 : 0);
  return m;
}

}  // namespace heed::nn
