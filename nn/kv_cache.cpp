#include "nn/kv_cache.h"

#include <algorithm>
#include <cmath>

#include "core/autograd.h"

namespace heed::nn {

KVCache::KVCache(int64_t n_layer, int64_t B, int64_t capacity, int64_t C, DType dtype)
    : B_(B), capacity_(capacity), C_(C) {
  HEED_CHECK(n_layer > 0 && B > 0 && capacity > 0 && C > 0, "KVCache: n_layer (", n_layer, "), batch (", B,
             "), capacity (", capacity, ") and width (", C, ") must be positive");
  for (int64_t l = 0; l < n_layer; ++l) kv_.push_back(Tensor::empty({B, capacity, 2 * C}, dtype));
}

Tensor KVCache::append(int64_t layer, const Tensor& src, int64_t k_offset, int64_t v_offset) {
  HEED_CHECK(layer >= 0 && layer < layers(), "KVCache: layer ", layer, " of ", layers());
  HEED_CHECK(src.dim() == 3 && src.size(0) == B_ && k_offset >= 0 && v_offset >= 0 &&
                 std::max(k_offset, v_offset) + C_ <= src.size(2),
             "KVCache: keys and values must come from a (", B_, ", n, width >= ", C_, ") tensor, got ",
             to_string(src.shape()));
  Tensor& kv = kv_[layer];
  HEED_CHECK(src.dtype() == kv.dtype(), "KVCache: ", dtype_name(src.dtype()), " keys for a ",
             dtype_name(kv.dtype()), " cache");
  const int64_t n = src.size(1);
  HEED_CHECK(length_ + n <= capacity_, "KVCache: ", length_, " + ", n, " positions exceed the capacity ",
             capacity_);
  const Tensor s = src.strides()[2] == 1 ? src : src.contiguous();
  kv.increment_version();  // views an earlier append returned see these rows change after a clear()
  visit_dtype(kv.dtype(), [&]<class T>() {
    for (int64_t b = 0; b < B_; ++b)
      for (int64_t t = 0; t < n; ++t) {
        const T* row = s.data<T>() + b * s.strides()[0] + t * s.strides()[1];
        T* dst = kv.data<T>() + (b * capacity_ + length_ + t) * 2 * C_;
        std::copy(row + k_offset, row + k_offset + C_, dst);
        std::copy(row + v_offset, row + v_offset + C_, dst + C_);
      }
  });
  return slice(kv, 1, 0, length_ + n);
}

void KVCache::advance(int64_t n) {
  HEED_CHECK(n >= 0 && length_ + n <= capacity_, "KVCache: cannot advance ", length_, " positions by ", n,
             " (capacity ", capacity_, ")");
  length_ += n;
}

namespace {

// Everything after the projections, as MultiHeadAttention's forward in eval mode (no dropout).
Tensor attend(MultiHeadAttention& attn, const HeadInput& q, const Tensor& kv, bool causal,
              const KeyPaddingMask* mask) {
  const int64_t C = attn.options().d_model;
  AttentionHeadsOptions o;
  o.n_head = attn.options().n_head;
  o.scale = 1.0 / std::sqrt(static_cast<double>(attn.head_dim()));
  o.causal = causal;
  o.key_padding = mask;
  return attn.c_proj->forward(attention_heads(q, {kv, 0}, {kv, C}, C, o));
}

// Rows [first, last) of c_attn's projection (fused: 0..C queries, C..2C keys, 2C..3C values).
Tensor fused_rows(MultiHeadAttention& attn, const Tensor& x, int64_t first, int64_t last) {
  const Tensor& w = attn.c_attn->weight;
  const Tensor& b = attn.c_attn->bias;
  return linear(x, slice(w, 0, first, last), b.defined() ? slice(b, 0, first, last) : Tensor());
}

}  // namespace

Tensor cached_self_attention(MultiHeadAttention& attn, const Tensor& x, KVCache& cache, int64_t layer,
                             bool last_only) {
  HEED_CHECK(attn.options().causal, "cached_self_attention: the attention must be causal (a cache holds the past only)");
  NoGradGuard no_grad;
  const int64_t C = attn.options().d_model, n = x.size(1);
  // The queries of the last position alone: causal attention aligns queries with the last keys.
  auto last = [&](const Tensor& t) { return last_only && n > 1 ? slice(t, 1, n - 1, n).contiguous() : t; };
  if (attn.options().fused_qkv) {
    const Tensor qkv = attn.c_attn->forward(x);  // (B, n, 3C)
    return attend(attn, {last(qkv), 0}, cache.append(layer, qkv, C, 2 * C), true, nullptr);
  }
  const Tensor kv = concat({attn.k_proj->forward(x), attn.v_proj->forward(x)}, 2);
  return attend(attn, {attn.q_proj->forward(last(x))}, cache.append(layer, kv, 0, C), true, nullptr);
}

Tensor cross_keys_values(MultiHeadAttention& attn, const Tensor& memory) {
  NoGradGuard no_grad;
  const int64_t C = attn.options().d_model;
  if (attn.options().fused_qkv) return fused_rows(attn, memory, C, 3 * C);
  return concat({attn.k_proj->forward(memory), attn.v_proj->forward(memory)}, 2);
}

Tensor cached_cross_attention(MultiHeadAttention& attn, const Tensor& query, const Tensor& memory_kv,
                              const KeyPaddingMask* memory_mask) {
  NoGradGuard no_grad;
  const int64_t C = attn.options().d_model;
  const Tensor q = attn.options().fused_qkv ? fused_rows(attn, query, 0, C) : attn.q_proj->forward(query);
  return attend(attn, {q}, memory_kv, attn.options().causal, memory_mask);
}

}  // namespace heed::nn
