// heed::nn: a key/value cache for autoregressive decoding, so that each new token costs one
// position instead of the whole context:
//
//   nn::KVCache cache = model.make_cache(1);                      // room for block_size positions
//   Tensor logits = model.forward_cached(prompt, 1, T, cache);   // fills positions [0, T)
//   logits = model.forward_cached({next}, 1, 1, cache);          // one more position
//
// Each attention layer keeps the keys and values of every position seen so far in one
// preallocated (B, capacity, 2C) buffer (keys in channels [0, C), values in [C, 2C)); a step
// appends its rows and attends over a view of the filled part, with no copy of the past.
// Inference only: the cached paths record no gradient and apply no dropout.
#pragma once

#include <cstdint>
#include <vector>

#include "core/ops.h"
#include "core/tensor.h"
#include "nn/attention.h"

namespace heed::nn {

class KVCache {
 public:
  KVCache() = default;
  /// Room for `capacity` positions of B sequences in n_layer attention layers of width C.
  KVCache(int64_t n_layer, int64_t B, int64_t capacity, int64_t C, DType dtype = DType::f32);

  int64_t length() const { return length_; }  ///< positions stored (the same in every layer)
  int64_t capacity() const { return capacity_; }
  int64_t batch() const { return B_; }
  int64_t layers() const { return static_cast<int64_t>(kv_.size()); }
  /// Forgets every position (the buffers stay allocated).
  void clear() { length_ = 0; }

  /// Writes the keys and values of n new positions, channels [k_offset, k_offset + C) and
  /// [v_offset, v_offset + C) of src (B, n, width), into `layer`'s rows [length, length + n),
  /// and returns that layer's keys and values so far, a (B, length + n, 2C) view. Throws when
  /// they would not fit. The new rows count once advance(n) is called (after the last layer).
  Tensor append(int64_t layer, const Tensor& src, int64_t k_offset, int64_t v_offset);
  /// Marks the n positions just appended to every layer as stored.
  void advance(int64_t n);

 private:
  std::vector<Tensor> kv_;  // per layer: (B, capacity, 2C)
  int64_t B_ = 0, capacity_ = 0, C_ = 0, length_ = 0;
};

/// Causal self-attention of n new positions x (B, n, C) over every position in `cache` and
/// themselves, appending their keys and values to `layer`: the last n rows of attn.forward()
/// over the whole sequence. `attn` must be causal. With last_only, the last row alone (B, 1, C)
/// (the keys and values of all n positions are still appended).
Tensor cached_self_attention(MultiHeadAttention& attn, const Tensor& x, KVCache& cache, int64_t layer,
                             bool last_only = false);

/// Cross-attention's keys and values of `memory` (B, Tk, C), computed once per source:
/// (B, Tk, 2C), keys in channels [0, C), values in [C, 2C).
Tensor cross_keys_values(MultiHeadAttention& attn, const Tensor& memory);
/// attn.forward(query, memory, memory_mask), from memory_kv = cross_keys_values(attn, memory).
Tensor cached_cross_attention(MultiHeadAttention& attn, const Tensor& query, const Tensor& memory_kv,
                              const KeyPaddingMask* memory_mask = nullptr);

}  // namespace heed::nn
