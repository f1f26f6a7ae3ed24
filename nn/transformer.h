// heed::nn: the Transformer of "Attention Is All You Need" (encoder, decoder, encoder-decoder),
// post-norm as in the paper or pre-norm as in most modern models, with PyTorch-like child names:
//
//   nn::EncoderDecoder model({.src_vocab = 100, .tgt_vocab = 100, .d_model = 64, .n_head = 4,
//                             .d_ff = 256, .n_encoder_layers = 2, .n_decoder_layers = 2,
//                             .max_len = 128});
//   Tensor logits = model.forward(src, B, Ts, tgt, Tt, &src_mask, &tgt_mask);  // (B, Tt, tgt_vocab)
//
// Masks are key padding masks (1 = padding); the decoder's self-attention is always causal.
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
#include "nn/layer_norm.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/positional.h"

namespace heed::nn {

/// Where each sublayer's LayerNorm sits: post (the paper: norm(x + f(x))) or pre (x + f(norm(x))).
enum class NormPlacement { pre, post };

struct TransformerLayerOptions {
  int64_t d_model = 0;
  int64_t n_head = 1;
  int64_t d_ff = 0;        ///< hidden width of the feed-forward sublayer
  double dropout = 0.0;    ///< on attention weights, the feed-forward hidden and each sublayer's output, as PyTorch's
  /// The feed-forward's activation, torch's `activation="relu"` (the paper's, the default) or "gelu" (exact erf form).
  Activation activation = Activation::relu;
  bool bias = true;        ///< biases on every Linear and LayerNorm
  NormPlacement norm = NormPlacement::post;
  double eps = 1e-5;       ///< LayerNorm epsilon
  /// Root seed of the layer's (or stack's) weights and dropouts, each drawn from its own dotted
  /// name (nn::init::by_name); none: drawn from the default generator (heed::manual_seed).
  std::optional<uint64_t> seed = std::nullopt;
};

/// The masks of PyTorch's TransformerEncoderLayer / TransformerEncoder forward, as tensors:
/// `layer.forward(x, {.src_key_padding_mask = pad})` is `layer(x, src_key_padding_mask=pad)`.
struct EncoderMasks {
  /// (T, T) or (B * n_head, T, T): bool, true = NOT allowed, or float, added to the scores (-inf
  /// masks), as MultiHeadAttention's attn_mask; undefined: none.
  Tensor src_mask = Tensor();
  /// (B, T): bool or integer, true (non-zero) = padding, or float, added to every head's and
  /// query's scores (-inf masks a key), as MultiHeadAttention's key_padding_mask; undefined: none.
  Tensor src_key_padding_mask = Tensor();
};

/// The masks of PyTorch's TransformerDecoderLayer / TransformerDecoder forward (batch_first), as
/// tensors: `layer.forward(tgt, memory, {.tgt_mask = m, .memory_key_padding_mask = p})` is
/// `layer(tgt, memory, tgt_mask=m, memory_key_padding_mask=p)`. Each is bool (true = masked) or
/// float (added to the scores, -inf masks; differentiable); undefined: none. Unlike PyTorch's,
/// heed's decoder self-attention is always causal (query i sees keys <= i): a tgt_mask is
/// combined with the causal mask, not instead of it. PyTorch's decoder is causal only through
/// the tgt_mask passed (nn.Transformer.generate_square_subsequent_mask), which heed does not need
/// (passing it too changes nothing).
struct DecoderMasks {
  /// Self-attention mask (Tt, Tt) or (B * n_head, Tt, Tt), as MultiHeadAttention's attn_mask.
  Tensor tgt_mask = Tensor();
  /// Cross-attention mask (Tt, Ts) or (B * n_head, Tt, Ts), as MultiHeadAttention's attn_mask.
  Tensor memory_mask = Tensor();
  /// (B, Tt): true (non-zero) = padded target position, or float, added to every head's and
  /// query's self-attention scores, as MultiHeadAttention's key_padding_mask.
  Tensor tgt_key_padding_mask = Tensor();
  /// (B, Ts): the same for the memory's keys in the cross-attention.
  Tensor memory_key_padding_mask = Tensor();
};

/// One encoder layer: self-attention then feed-forward (ReLU by default, as the paper), each with a residual.
/// Children: "self_attn", "ff", "norm1", "norm2", "dropout1", "dropout2".
class EncoderLayer : public Module {
 public:
  explicit EncoderLayer(const TransformerLayerOptions& options);
  /// (B, T, C) -> (B, T, C); src_mask (B, T) marks padded positions (nullptr: none).
  Tensor forward(const Tensor& x, const KeyPaddingMask* src_mask = nullptr);
  /// (B, T, C) -> (B, T, C) with PyTorch's masks as tensors (float ones differentiable).
  Tensor forward(const Tensor& x, const EncoderMasks& masks);
  const TransformerLayerOptions& options() const { return options_; }

  std::shared_ptr<MultiHeadAttention> self_attn;
  std::shared_ptr<FeedForward> ff;
  std::shared_ptr<LayerNorm> norm1, norm2;
  std::shared_ptr<Dropout> dropout1, dropout2;

 private:
  // The two sublayers around `attend`, the self-attention of its argument.
  template <class Attend>
  Tensor layer(const Tensor& x, Attend&& attend);
  TransformerLayerOptions options_;
};

/// One decoder layer: causal self-attention, cross-attention over the encoder's memory, then
/// feed-forward. Children: "self_attn", "cross_attn", "ff", "norm1", "norm2", "norm3",
/// "dropout1", "dropout2", "dropout3".
class DecoderLayer : public Module {
 public:
  explicit DecoderLayer(const TransformerLayerOptions& options);
  /// x (B, Tt, C), memory (B, Ts, C) -> (B, Tt, C); tgt_mask (B, Tt) pads x's keys in the
  /// self-attention, memory_mask (B, Ts) pads memory's keys in the cross-attention.
  Tensor forward(const Tensor& x, const Tensor& memory, const KeyPaddingMask* tgt_mask = nullptr,
                 const KeyPaddingMask* memory_mask = nullptr);
  /// x (B, Tt, C), memory (B, Ts, C) -> (B, Tt, C) with PyTorch's masks as tensors (float ones
  /// differentiable); the self-attention stays causal, any tgt_mask on top (see DecoderMasks).
  Tensor forward(const Tensor& x, const Tensor& memory, const DecoderMasks& masks);
  const TransformerLayerOptions& options() const { return options_; }

  std::shared_ptr<MultiHeadAttention> self_attn, cross_attn;
  std::shared_ptr<FeedForward> ff;
  std::shared_ptr<LayerNorm> norm1, norm2, norm3;
  std::shared_ptr<Dropout> dropout1, dropout2, dropout3;

 private:
  // The three sublayers around `self_attend` (the causal self-attention of its argument) and
  // `cross_attend` (its argument's attention over the memory).
  template <class SelfAttend, class CrossAttend>
  Tensor layer(const Tensor& x, SelfAttend&& self_attend, CrossAttend&& cross_attend);
  TransformerLayerOptions options_;
};

/// A stack of n_layers EncoderLayers ("layers"), plus a final LayerNorm "norm" when pre-norm.
class Encoder : public Module {
 public:
  Encoder(const TransformerLayerOptions& options, int64_t n_layers);
  /// (B, T, C) -> (B, T, C).
  Tensor forward(const Tensor& x, const KeyPaddingMask* src_mask = nullptr);
  /// The same with PyTorch's masks as tensors, each layer given both.
  Tensor forward(const Tensor& x, const EncoderMasks& masks);

  std::shared_ptr<ModuleList<EncoderLayer>> layers;
  std::shared_ptr<LayerNorm> norm;  ///< null for post-norm
};

/// A stack of n_layers DecoderLayers ("layers"), plus a final LayerNorm "norm" when pre-norm.
class Decoder : public Module {
 public:
  Decoder(const TransformerLayerOptions& options, int64_t n_layers);
  /// x (B, Tt, C), memory (B, Ts, C) -> (B, Tt, C).
  Tensor forward(const Tensor& x, const Tensor& memory, const KeyPaddingMask* tgt_mask = nullptr,
                 const KeyPaddingMask* memory_mask = nullptr);
  /// The same with PyTorch's masks as tensors, each layer given all four (torch's
  /// TransformerDecoder's forward(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask,
  /// memory_key_padding_mask)); the self-attention stays causal (see DecoderMasks).
  Tensor forward(const Tensor& x, const Tensor& memory, const DecoderMasks& masks);

  std::shared_ptr<ModuleList<DecoderLayer>> layers;
  std::shared_ptr<LayerNorm> norm;  ///< null for post-norm
};

struct EncoderDecoderOptions {
  int64_t src_vocab = 0;
  int64_t tgt_vocab = 0;
  int64_t d_model = 0;
  int64_t n_head = 1;
  int64_t d_ff = 0;
  int64_t n_encoder_layers = 1;
  int64_t n_decoder_layers = 1;
  int64_t max_len = 0;     ///< longest source or target sequence (positional encoding table)
  double dropout = 0.0;
  Activation activation = Activation::relu;  ///< every layer's feed-forward, as nn.Transformer's `activation`
  NormPlacement norm = NormPlacement::post;  ///< one default with TransformerLayerOptions (PyTorch's)
  /// Root seed of every weight and dropout in the model, each drawn from its own dotted name
  /// (nn::init::by_name); none: drawn from the default generator (heed::manual_seed).
  std::optional<uint64_t> seed = std::nullopt;
};

/// The sequence-to-sequence Transformer. Children: "src_embed", "tgt_embed" (Embeddings drawn
/// normal(0, 1/sqrt(d_model)), scaled by sqrt(d_model) on the way in), "pos_encoding" (sinusoidal), "dropout" (on embeddings + positions),
/// "encoder", "decoder", "generator" (Linear d_model -> tgt_vocab, producing logits).
class EncoderDecoder : public Module {
 public:
  explicit EncoderDecoder(const EncoderDecoderOptions& options);
  /// Source ids (B * Ts, row-major) -> memory (B, Ts, d_model).
  Tensor encode(const std::vector<int32_t>& src, int64_t B, int64_t Ts, const KeyPaddingMask* src_mask = nullptr);
  /// Target ids (B * Tt) and memory -> logits (B, Tt, tgt_vocab); position t sees targets <= t.
  Tensor decode(const std::vector<int32_t>& tgt, int64_t B, int64_t Tt, const Tensor& memory,
                const KeyPaddingMask* tgt_mask = nullptr, const KeyPaddingMask* src_mask = nullptr);
  /// decode(tgt, encode(src)): logits (B, Tt, tgt_vocab).
  Tensor forward(const std::vector<int32_t>& src, int64_t B, int64_t Ts, const std::vector<int32_t>& tgt,
                 int64_t Tt, const KeyPaddingMask* src_mask = nullptr, const KeyPaddingMask* tgt_mask = nullptr);
  /// The same from id tensors: src (B, Ts), tgt (B, Tt), int32 or int64; masks are bool (or any
  /// integer) tensors (B, Ts) / (B, Tt) where true marks padding (nn.Transformer's
  /// src_key_padding_mask), or undefined.
  Tensor forward(const Tensor& src, const Tensor& tgt, const Tensor& src_padding = Tensor(),
                 const Tensor& tgt_padding = Tensor());
  /// Decodes each of the B sources (B * Ts ids, src_mask marking padding) from `start_token`,
  /// up to options.max_new_tokens (< max_len) tokens per row, a row ending at a stop token or
  /// sequence (nn/generation.h). The encoder memory and every cross-attention's keys and values
  /// are computed once; the decoder's self-attention is KV-cached. Eval mode, no gradients.
  /// Returns each row's generated tokens (without the start token).
  std::vector<std::vector<int32_t>> generate(const std::vector<int32_t>& src, int64_t B, int64_t Ts,
                                             int32_t start_token, const GenerateOptions& options,
                                             const KeyPaddingMask* src_mask = nullptr);
  const EncoderDecoderOptions& options() const { return options_; }

  std::shared_ptr<Embedding> src_embed, tgt_embed;
  std::shared_ptr<SinusoidalPositionalEncoding> pos_encoding;
  std::shared_ptr<Dropout> dropout;
  std::shared_ptr<Encoder> encoder;
  std::shared_ptr<Decoder> decoder;
  std::shared_ptr<Linear> generator;

 private:
  Tensor embed(Embedding& table, const std::vector<int32_t>& ids, int64_t B, int64_t T);
  EncoderDecoderOptions options_;
};

}  // namespace heed::nn
