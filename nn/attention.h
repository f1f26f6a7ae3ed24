// heed::nn: multi-head attention (self, causal, cross, with key padding and arbitrary attention
// masks), as nanoGPT's CausalSelfAttention and PyTorch's nn.MultiheadAttention:
//
//   nn::MultiHeadAttention attn({.d_model = 64, .n_head = 4, .causal = true});
//   Tensor y = attn.forward(x);                     // x, y: (B, T, C)
//   Tensor z = cross.forward(query, memory, &mask);  // query (B, Tq, C), memory (B, Tk, C)
//   auto [out, w] = mha.forward(q, k, v, {.attn_mask = m, .need_weights = true});  // PyTorch's call
//
// Shapes use nanoGPT's names: B batch, T time, C = d_model, nh = n_head, hd = C / nh.
// Between the projections the whole attention (scores q k^T scaled by 1/sqrt(hd), causal,
// padding and attention masks, softmax, attention dropout, @ v) is one op, attention_heads
// (core/ops.h), so the backward writes dq, dk, dv straight into the projections' gradients. Only
// need_weights (or a mask that requires grad) takes a composed path of per-head ops.
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
  int64_t kdim = 0;        ///< width of the key input (PyTorch's kdim); 0: d_model
  int64_t vdim = 0;        ///< width of the value input (PyTorch's vdim); 0: d_model
  bool causal = false;     ///< query i attends to keys <= i only
  /// One c_attn Linear(C, 3C) (nanoGPT, PyTorch's in_proj_weight); else q_proj, k_proj, v_proj
  /// (needed when kdim or vdim differs from d_model).
  bool fused_qkv = true;
  bool bias = true;        ///< biases on the projections (both kinds below, unless set)
  std::optional<bool> qkv_bias = std::nullopt;  ///< on the q, k, v projections; none: `bias`
  std::optional<bool> out_bias = std::nullopt;  ///< on the output projection c_proj; none: `bias`
  double dropout = 0.0;    ///< on the attention weights (training mode only)
  /// On the output, after c_proj (nanoGPT's resid_dropout); none: `dropout`, as nanoGPT's
  /// CausalSelfAttention. PyTorch's nn.MultiheadAttention(dropout=p) drops the weights only:
  /// `.dropout = p, .resid_dropout = 0.0`.
  std::optional<double> resid_dropout = std::nullopt;
  /// Root seed of the weights (each Linear's default init, by name: nn::init::by_name) and of the
  /// two dropouts; none: drawn from the default generator (heed::manual_seed).
  std::optional<uint64_t> seed = std::nullopt;
};

/// The keywords of PyTorch's nn.MultiheadAttention.forward (batch_first=True).
struct AttentionArgs {
  /// (B, Tk) bool or integer, **true (non-zero) = padding**, never attended to; (Tk) for
  /// unbatched input. Undefined: none. Or float, of the inputs' dtype, added to the scaled scores
  /// of every head and query (-inf masks a key), as PyTorch 2's (and on top of a float attn_mask).
  Tensor key_padding_mask = Tensor();
  /// bool, **true = NOT allowed** (nn.MultiheadAttention's convention; the opposite of
  /// scaled_dot_product_attention's), or float, added to the scaled scores (-inf masks); shape
  /// (Tq, Tk) or (B * n_head, Tq, Tk). Combines with the key padding mask and options().causal.
  Tensor attn_mask = Tensor();
  /// Also return the attention weights, differentiable, as PyTorch's: in training mode after the
  /// attention dropout, as PyTorch returns them; computed by the composed path (per-head matmuls
  /// and attention_softmax), slower than the fused op.
  bool need_weights = false;
  bool average_attn_weights = true;  ///< weights averaged over heads (B, Tq, Tk), else (B, nh, Tq, Tk)
};

/// What PyTorch's forward returns: `auto [y, w] = attn.forward(q, k, v, {...});`
struct AttentionOutput {
  Tensor output;   ///< (B, Tq, d_model), or (Tq, d_model) for unbatched input
  Tensor weights;  ///< when need_weights: (B, Tq, Tk) or (B, nh, Tq, Tk), without B if unbatched
};

/// Multi-head scaled dot-product attention with output projection. Children (nanoGPT names):
/// "c_attn" (fused_qkv) or "q_proj", "k_proj", "v_proj"; then "c_proj", "attn_dropout",
/// "resid_dropout". Every forward takes batched (B, T, width) or unbatched (T, width) inputs.
class MultiHeadAttention : public Module {
 public:
  /// Throws heed::Error if d_model is not divisible by n_head (naming both) or either is < 1,
  /// or if fused_qkv is asked for with kdim or vdim != d_model.
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
  /// PyTorch's forward(query, key, value, ...): query (B, Tq, d_model), key (B, Tk, kdim), value
  /// (B, Tk, vdim), or all three unbatched (T, width); masks and weights as in `args`. Passing one
  /// tensor as query, key and value (or as key and value) runs the fused projection once.
  AttentionOutput forward(const Tensor& query, const Tensor& key, const Tensor& value, const AttentionArgs& args = {});

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
  struct Masks {
    const KeyPaddingMask* key_padding = nullptr;
    Tensor bias;  // the attention mask, additive, broadcasting to (B, nh, Tq, Tk)
  };
  // Batched query (B, Tq, C), key (B, Tk, kdim), value (B, Tk, vdim) -> the output, and the
  // weights (B, nh, Tq, Tk) into *weights if given.
  Tensor run(const Tensor& query, const Tensor& key, const Tensor& value, const Masks& masks, Tensor* weights);
  // q, k, v (channel ranges of projections) -> resid_dropout(c_proj(attention)) (B, Tq, C).
  Tensor attend(const HeadInput& q, const HeadInput& k, const HeadInput& v, const Masks& masks, Tensor* weights);

  MultiHeadAttentionOptions options_;
  int64_t head_dim_ = 0;
  bool keep_attention_ = false;
  Tensor last_attention_;
};

}  // namespace heed::nn
