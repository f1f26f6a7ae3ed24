// The Transformer's layers and stacks, composed from MultiHeadAttention, FeedForward and
// LayerNorm. Every sublayer is `x + dropout(f(...))`; only where the norm sits differs. Dropout
// sits where PyTorch's nn.Transformer*Layer puts it: on the attention weights, on the
// feed-forward's hidden activations, and once on each sublayer's output (the layer's dropoutN;
// the attention's own output dropout and the feed-forward's output dropout are off).
#include "nn/transformer.h"

#include "nn/init.h"
#include "core/autograd.h"

#include <cmath>

#include "core/ops.h"
#include "core/random.h"

namespace heed::nn {

// Every layer and stack below builds its children, then draws all of their weights and dropout
// seeds from its root seed by name (nn::init::by_name): in a stack, layer i's weights come from
// "layers.i....", so no two layers start alike and none depends on its neighbours.

static MultiHeadAttentionOptions attention_options(const TransformerLayerOptions& o, bool causal, bool fused_qkv) {
  return {.d_model = o.d_model, .n_head = o.n_head, .causal = causal, .fused_qkv = fused_qkv, .bias = o.bias,
          .dropout = o.dropout, .resid_dropout = 0.0};
}

static std::shared_ptr<LayerNorm> make_norm(const TransformerLayerOptions& o) {
  return std::make_shared<LayerNorm>(o.d_model, o.eps, true, o.bias);
}

// ReLU, as the paper and PyTorch's nn.Transformer* layers, and the dropout on the hidden layer.
static std::shared_ptr<FeedForward> make_ff(const TransformerLayerOptions& o) {
  return std::make_shared<FeedForward>(o.d_model, o.d_ff,
                                       FeedForwardOptions{.dropout = o.dropout,
                                                          .bias = o.bias,
                                                          .activation = o.activation,
                                                          .dropout_on = FeedForwardDropout::hidden});
}

// ------------------------------------------------------------------------------------------
// EncoderLayer

EncoderLayer::EncoderLayer(const TransformerLayerOptions& options) : options_(options) {
  HEED_CHECK(options.d_ff > 0, "EncoderLayer: d_ff must be positive, got ", options.d_ff);
  self_attn =
      register_module("self_attn", std::make_shared<MultiHeadAttention>(attention_options(options, false, true)));
  ff = register_module("ff", make_ff(options));
  norm1 = register_module("norm1", make_norm(options));
  norm2 = register_module("norm2", make_norm(options));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(options.dropout));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(options.dropout));
  init::by_name(*this, seed_or_draw(options.seed));
}

template <class Attend>
Tensor EncoderLayer::layer(const Tensor& x, Attend&& attend) {
  if (options_.norm == NormPlacement::pre) {
    Tensor h = x + dropout1->forward(attend(norm1->forward(x)));
    return h + dropout2->forward(ff->forward(norm2->forward(h)));
  }
  Tensor h = norm1->forward(x + dropout1->forward(attend(x)));
  return norm2->forward(h + dropout2->forward(ff->forward(h)));
}

Tensor EncoderLayer::forward(const Tensor& x, const KeyPaddingMask* src_mask) {
  return layer(x, [&](const Tensor& t) { return self_attn->forward(t, src_mask); });
}

Tensor EncoderLayer::forward(const Tensor& x, const EncoderMasks& masks) {
  // One tensor as query, key and value: the fused projection runs once.
  return layer(x, [&](const Tensor& t) {
    return self_attn->forward(t, t, t, {.key_padding_mask = masks.src_key_padding_mask, .attn_mask = masks.src_mask})
        .output;
  });
}

// ------------------------------------------------------------------------------------------
// DecoderLayer

DecoderLayer::DecoderLayer(const TransformerLayerOptions& options) : options_(options) {
  HEED_CHECK(options.d_ff > 0, "DecoderLayer: d_ff must be positive, got ", options.d_ff);
  self_attn =
      register_module("self_attn", std::make_shared<MultiHeadAttention>(attention_options(options, true, true)));
  // Separate projections: queries come from the decoder, keys and values from the memory.
  cross_attn =
      register_module("cross_attn", std::make_shared<MultiHeadAttention>(attention_options(options, false, false)));
  ff = register_module("ff", make_ff(options));
  norm1 = register_module("norm1", make_norm(options));
  norm2 = register_module("norm2", make_norm(options));
  norm3 = register_module("norm3", make_norm(options));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(options.dropout));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(options.dropout));
  dropout3 = register_module("dropout3", std::make_shared<Dropout>(options.dropout));
  init::by_name(*this, seed_or_draw(options.seed));
}

template <class SelfAttend, class CrossAttend>
Tensor DecoderLayer::layer(const Tensor& x, SelfAttend&& self_attend, CrossAttend&& cross_attend) {
  if (options_.norm == NormPlacement::pre) {
    Tensor h = x + dropout1->forward(self_attend(norm1->forward(x)));
    h = h + dropout2->forward(cross_attend(norm2->forward(h)));
    return h + dropout3->forward(ff->forward(norm3->forward(h)));
  }
  Tensor h = norm1->forward(x + dropout1->forward(self_attend(x)));
  h = norm2->forward(h + dropout2->forward(cross_attend(h)));
  return norm3->forward(h + dropout3->forward(ff->forward(h)));
}

Tensor DecoderLayer::forward(const Tensor& x, const Tensor& memory, const KeyPaddingMask* tgt_mask,
                             const KeyPaddingMask* memory_mask) {
  return layer(
      x, [&](const Tensor& t) { return self_attn->forward(t, tgt_mask); },
      [&](const Tensor& t) { return cross_attn->forward(t, memory, memory_mask); });
}

Tensor DecoderLayer::forward(const Tensor& x, const Tensor& memory, const DecoderMasks& masks) {
  // self_attn is causal: the tgt_mask combines with it. One tensor as query, key and value: the
  // fused projection runs once.
  return layer(
      x,
      [&](const Tensor& t) {
        return self_attn->forward(t, t, t, {.key_padding_mask = masks.tgt_key_padding_mask, .attn_mask = masks.tgt_mask})
            .output;
      },
      [&](const Tensor& t) {
        return cross_attn
            ->forward(t, memory, memory,
                      {.key_padding_mask = masks.memory_key_padding_mask, .attn_mask = masks.memory_mask})
            .output;
      });
}

// ------------------------------------------------------------------------------------------
// Stacks

Encoder::Encoder(const TransformerLayerOptions& options, int64_t n_layers) {
  HEED_CHECK(n_layers > 0, "Encoder: n_layers must be positive, got ", n_layers);
  layers = register_module("layers", std::make_shared<ModuleList<EncoderLayer>>());
  for (int64_t i = 0; i < n_layers; ++i) layers->push_back(std::make_shared<EncoderLayer>(options));
  if (options.norm == NormPlacement::pre) norm = register_module("norm", make_norm(options));
  init::by_name(*this, seed_or_draw(options.seed));
}

Tensor Encoder::forward(const Tensor& x, const KeyPaddingMask* src_mask) {
  Tensor h = x;
  for (const auto& layer : *layers) h = layer->forward(h, src_mask);
  return norm ? norm->forward(h) : h;
}

Tensor Encoder::forward(const Tensor& x, const EncoderMasks& masks) {
  Tensor h = x;
  for (const auto& layer : *layers) h = layer->forward(h, masks);
  return norm ? norm->forward(h) : h;
}

Decoder::Decoder(const TransformerLayerOptions& options, int64_t n_layers) {
  HEED_CHECK(n_layers > 0, "Decoder: n_layers must be positive, got ", n_layers);
  layers = register_module("layers", std::make_shared<ModuleList<DecoderLayer>>());
  for (int64_t i = 0; i < n_layers; ++i) layers->push_back(std::make_shared<DecoderLayer>(options));
  if (options.norm == NormPlacement::pre) norm = register_module("norm", make_norm(options));
  init::by_name(*this, seed_or_draw(options.seed));
}

Tensor Decoder::forward(const Tensor& x, const Tensor& memory, const KeyPaddingMask* tgt_mask,
                        const KeyPaddingMask* memory_mask) {
  Tensor h = x;
  for (const auto& layer : *layers) h = layer->forward(h, memory, tgt_mask, memory_mask);
  return norm ? norm->forward(h) : h;
}

Tensor Decoder::forward(const Tensor& x, const Tensor& memory, const DecoderMasks& masks) {
  Tensor h = x;
  for (const auto& layer : *layers) h = layer->forward(h, memory, masks);
  return norm ? norm->forward(h) : h;
}

// ------------------------------------------------------------------------------------------
// EncoderDecoder

EncoderDecoder::EncoderDecoder(const EncoderDecoderOptions& o) : options_(o) {
  HEED_CHECK(o.src_vocab > 0 && o.tgt_vocab > 0 && o.max_len > 0, "EncoderDecoder: src_vocab (", o.src_vocab,
             "), tgt_vocab (", o.tgt_vocab, ") and max_len (", o.max_len, ") must be positive");
  src_embed = register_module("src_embed", std::make_shared<Embedding>(o.src_vocab, o.d_model));
  tgt_embed = register_module("tgt_embed", std::make_shared<Embedding>(o.tgt_vocab, o.d_model));
  pos_encoding = register_module("pos_encoding", std::make_shared<SinusoidalPositionalEncoding>(o.d_model, o.max_len));
  dropout = register_module("dropout", std::make_shared<Dropout>(o.dropout));
  const TransformerLayerOptions layer{.d_model = o.d_model, .n_head = o.n_head, .d_ff = o.d_ff, .dropout = o.dropout,
                                      .activation = o.activation, .bias = true, .norm = o.norm, .eps = 1e-5};
  encoder = register_module("encoder", std::make_shared<Encoder>(layer, o.n_encoder_layers));
  decoder = register_module("decoder", std::make_shared<Decoder>(layer, o.n_decoder_layers));
  generator = register_module("generator", std::make_shared<Linear>(o.d_model, o.tgt_vocab, true));
  // The embeddings are multiplied by sqrt(d_model) in embed(); drawn N(0, 1) they would be
  // sqrt(d_model) times the unit sinusoids and drown the positions (copy stalled at 0.81 exact
  // match). N(0, 1/sqrt(d_model)) puts both at the same scale. Every other parameter takes its
  // layer's default init.
  const double sd = 1.0 / std::sqrt(static_cast<double>(o.d_model));
  init::by_name(*this, seed_or_draw(o.seed), [&](Module& owner, const std::string& path, Tensor& t, Generator& gen) {
    if (&owner == src_embed.get() || &owner == tgt_embed.get()) {
      normal_(t, 0.0, sd, gen);
    } else {
      init::layer_default(owner, path, t, gen);
    }
  });
}

// dropout(embedding * sqrt(d_model) + PE): the paper's input scaling; with the N(0, 1/sqrt(d_model))
// init above, token vectors and the unit-amplitude positional encoding start at the same scale.
Tensor EncoderDecoder::embed(Embedding& table, const std::vector<int32_t>& ids, int64_t B, int64_t T) {
  HEED_CHECK(B > 0 && T > 0 && static_cast<int64_t>(ids.size()) == B * T, "EncoderDecoder: ", ids.size(),
             " ids for B=", B, ", T=", T);
  HEED_CHECK(T <= options_.max_len, "EncoderDecoder: sequence length ", T, " exceeds max_len ", options_.max_len);
  Tensor x = mul(table.forward(ids, {B, T}), std::sqrt(static_cast<double>(options_.d_model)));
  return dropout->forward(pos_encoding->forward(x));
}

Tensor EncoderDecoder::encode(const std::vector<int32_t>& src, int64_t B, int64_t Ts, const KeyPaddingMask* src_mask) {
  return encoder->forward(embed(*src_embed, src, B, Ts), src_mask);
}

Tensor EncoderDecoder::decode(const std::vector<int32_t>& tgt, int64_t B, int64_t Tt, const Tensor& memory,
                              const KeyPaddingMask* tgt_mask, const KeyPaddingMask* src_mask) {
  return generator->forward(decoder->forward(embed(*tgt_embed, tgt, B, Tt), memory, tgt_mask, src_mask));
}

Tensor EncoderDecoder::forward(const std::vector<int32_t>& src, int64_t B, int64_t Ts, const std::vector<int32_t>& tgt,
                               int64_t Tt, const KeyPaddingMask* src_mask, const KeyPaddingMask* tgt_mask) {
  return decode(tgt, B, Tt, encode(src, B, Ts, src_mask), tgt_mask, src_mask);
}

Tensor EncoderDecoder::forward(const Tensor& src, const Tensor& tgt, const Tensor& src_padding,
                               const Tensor& tgt_padding) {
  auto ids = [](const Tensor& t, const char* what) {
    HEED_CHECK(t.dim() == 2 && (t.dtype() == DType::i32 || t.dtype() == DType::i64), "EncoderDecoder: ", what,
               " must be an int32 or int64 tensor (B, T), got ", dtype_name(t.dtype()), " ", to_string(t.shape()));
    return t.to(DType::i32).to_vector<int32_t>();
  };
  HEED_CHECK(src.dim() == 2 && tgt.dim() == 2 && src.size(0) == tgt.size(0), "EncoderDecoder: src ",
             to_string(src.shape()), " and tgt ", to_string(tgt.shape()), " must be (B, Ts) and (B, Tt)");
  const KeyPaddingMask sm = src_padding.defined() ? key_padding_mask(src_padding) : KeyPaddingMask{};
  const KeyPaddingMask tm = tgt_padding.defined() ? key_padding_mask(tgt_padding) : KeyPaddingMask{};
  return forward(ids(src, "src"), src.size(0), src.size(1), ids(tgt, "tgt"), tgt.size(1),
                 src_padding.defined() ? &sm : nullptr, tgt_padding.defined() ? &tm : nullptr);
}

}  // namespace heed::nn
