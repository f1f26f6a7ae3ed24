// heed::nn: multi-head attention (self, causal, cross, with key padding masks), as nanoGPT's
// CausalSelfAttention and PyTorch's nn.MultiheadAttention:
//
//   nn::MultiHeadAttention attn({.d_model = 64, .n_head = 4, .causal = true});
//   Tensor y = attn.forward(x);                     // x, y: (B, T, C)
//   Tensor z = cross.forward(query, memory, &mask);  // query (B, Tq, C), memory (B, Tk, C)
//
// Shapes use nanoGPT's names: B batch, T time, C = d_model, nh = n_head, hd = C / nh.
// Between the projections the whole attention (scores q k^T scaled by 1/sqrt(hd), causal and
// padding masks, softmax, attention dropout, @ v) is one op, attention_heads (core/ops.h), so the
// backward writes dq, dk, dv straight into the projections' gradients.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/ops.h"
#include "core/tensor.h"
#include "nn/dropout.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace heed::nn {

// The mask type and the fused ops live in core/ops.h; these names keep nn:: spellings working.
using heed::attention_softmax;
using heed::KeyPaddingMask;
using heed::padding_mask_from_lengths;

/// A KeyPaddingMask from a (B, T) tensor of flags (bool or integer; non-zero = padding, as
/// nn.MultiheadAttention's key_padding_mask).
KeyPaddingMask key_padding_mask(const Tensor& padding);

struct MultiHeadAttentionOptions {
  int64_t d_model = 0;
  int64_t n_head = 1;
  bool causal = false;     ///< query i attends to keys <= i only
  bool fused_qkv = true;   ///< one c_attn Linear(C, 3C) (nanoGPT); else q_proj, k_proj, v_proj
  bool bias = true;        ///< biases on the projections
  double dropout = 0.0;    ///< on the attention weights and on the output (training mode only)
  /// Root seed of the weights (each Linear's default init, by name: nn::init::by_name) and of the
  /// two dropouts; none: drawn from the default generator (heed::manual_seed).
  std::optional<uint64_t> seed = std::nullopt;
};

/// Multi-head scaled dot-product attention with output projection. Children (nanoGPT names):
/// "c_attn" (fused_qkv) or "q_proj", "k_proj", "v_proj"; then "c_proj", "attn_dropout",
/// "resid_dropout".
class MultiHeadAttention : public Module {
 public:
  /// Throws heed::Error if d_model is not divisible by n_head (naming both) or either is < 1.
  explicit MultiHeadAttention(const MultiHeadAttentionOptions& options);

  /// Self-attention (B, T, C) -> (B, T, C); causal if options().causal.
  Tensor forward(const Tensor& x);
  /// Self-attention with a key padding mask (B, T) (nullptr: none); causal if options().causal.
  Tensor forward(const Tensor& x, const KeyPaddingMask* mask);
  /// Cross-attention: queries from `query` (B, Tq, C), keys and values from `memory` (B, Tk, C);
  /// `memory_mask` (B, Tk) marks padded memory positions. With fused_qkv the rows of c_attn's
  /// weight are split: the first C project the query, the other 2C the memory (keys, values).
  /// options().causal applies here too, aligned bottom-right (key j <= i + Tk - Tq).
  Tensor forward(const Tensor& query, const Tensor& memory, const KeyPaddingMask* memory_mask = nullptr);

  /// Keep (or stop keeping) the attention weights of each forward for inspection.
  void set_keep_attention(bool on) { keep_attention_ = on; }
  /// The softmax weights (B, nh, Tq, Tk) of the last forward, before attention dropout,
  /// detached; undefined unless set_keep_attention(true) was called before that forward.
  const Tensor& last_attention() const { return last_attention_; }

  const MultiHeadAttentionOptions& options() const { return options_; }
  int64_t head_dim() const { return head_dim_; }

  std::shared_ptr<Linear> c_attn, q_proj, k_proj, v_proj, c_proj;
  std::shared_ptr<Dropout> attn_dropout, resid_dropout;

 private:
  // q, k, v (channel ranges of projections) -> resid_dropout(c_proj(attention)) (B, Tq, C).
  Tensor attend(const HeadInput& q, const HeadInput& k, const HeadInput& v, const KeyPaddingMask* mask);

  MultiHeadAttentionOptions options_;
  int64_t head_dim_ = 0;
  bool keep_attention_ = false;
  Tensor last_attention_;
};

}  // namespace heed::nn
