// The attention chapter of "Build a Large Language Model (From Scratch)" (S. Raschka, ch. 3),
// ported from PyTorch line by line: simplified self-attention, causal attention with a mask
// buffer and dropout, multi-head attention, and a few training steps. Weights are set from a
// formula (wave) rather than drawn, so that scripts/attention_tutorial_torch.py computes the very
// same numbers in PyTorch; tests/nn/test_attention_tutorial.cpp checks them.
#pragma once

#include <cmath>
#include <memory>
#include <vector>

#include "nn/nn.h"
#include "optim/sgd.h"

namespace tutorial {

using heed::Tensor;
namespace nn = heed::nn;

/// "Your journey starts with one step": six tokens, 3-D embeddings.
inline Tensor inputs() {
  return Tensor({{0.43, 0.15, 0.89}, {0.55, 0.87, 0.66}, {0.57, 0.85, 0.64},
                 {0.22, 0.58, 0.33}, {0.77, 0.25, 0.10}, {0.05, 0.80, 0.55}});
}

/// The weights both sides use: 0.5 sin(0.37 (k + 1) + offset) for flat index k.
inline Tensor wave(const heed::Shape& shape, double offset) {
  std::vector<double> v(heed::numel_of(shape));
  for (size_t k = 0; k < v.size(); ++k) v[k] = 0.5 * std::sin(0.37 * static_cast<double>(k + 1) + offset);
  return Tensor::from_vector(v, shape).to(heed::DType::f32);
}

/// Parameter i (in named_parameters order) gets wave(its shape, offset + i).
inline void set_weights(nn::Module& m, double offset) {
  int i = 0;
  for (auto& [name, p] : m.named_parameters()) p.copy_(wave(p.shape(), offset + i++));
}

class CausalAttention : public nn::Module {
 public:
  CausalAttention(int64_t d_in, int64_t d_out, int64_t context_length, double dropout_p, bool qkv_bias = false) {
    W_query = register_module("W_query", std::make_shared<nn::Linear>(d_in, d_out, qkv_bias));
    W_key = register_module("W_key", std::make_shared<nn::Linear>(d_in, d_out, qkv_bias));
    W_value = register_module("W_value", std::make_shared<nn::Linear>(d_in, d_out, qkv_bias));
    dropout = register_module("dropout", std::make_shared<nn::Dropout>(dropout_p));
    register_buffer("mask", mask, heed::triu(Tensor::ones({context_length, context_length}), 1));
  }

  Tensor forward(const Tensor& x) {
    const int64_t num_tokens = x.size(1);
    Tensor queries = W_query->forward(x), keys = W_key->forward(x), values = W_value->forward(x);
    Tensor attn_scores = queries.matmul(keys.transpose(1, 2));
    Tensor mask_bool = heed::slice(heed::slice(mask, 0, 0, num_tokens), 1, 0, num_tokens) != 0.0;
    attn_scores = attn_scores.masked_fill(mask_bool, -INFINITY);
    Tensor attn_weights = (attn_scores / std::sqrt(static_cast<double>(keys.size(-1)))).softmax(-1);
    attn_weights = dropout->forward(attn_weights);
    return attn_weights.matmul(values);
  }

  std::shared_ptr<nn::Linear> W_query, W_key, W_value;
  std::shared_ptr<nn::Dropout> dropout;
  Tensor mask;
};

class MultiHeadAttention : public nn::Module {
 public:
  MultiHeadAttention(int64_t d_in, int64_t d_out, int64_t context_length, double dropout_p, int64_t num_heads,
                     bool qkv_bias = false)
      : d_out(d_out), num_heads(num_heads), head_dim(d_out / num_heads) {
    W_query = register_module("W_query", std::make_shared<nn::Linear>(d_in, d_out, qkv_bias));
    W_key = register_module("W_key", std::make_shared<nn::Linear>(d_in, d_out, qkv_bias));
    W_value = register_module("W_value", std::make_shared<nn::Linear>(d_in, d_out, qkv_bias));
    out_proj = register_module("out_proj", std::make_shared<nn::Linear>(d_out, d_out));
    dropout = register_module("dropout", std::make_shared<nn::Dropout>(dropout_p));
    register_buffer("mask", mask, heed::triu(Tensor::ones({context_length, context_length}), 1));
  }

  Tensor forward(const Tensor& x) {
    const int64_t b = x.size(0), num_tokens = x.size(1);
    Tensor keys = W_key->forward(x).view({b, num_tokens, num_heads, head_dim}).transpose(1, 2);
    Tensor queries = W_query->forward(x).view({b, num_tokens, num_heads, head_dim}).transpose(1, 2);
    Tensor values = W_value->forward(x).view({b, num_tokens, num_heads, head_dim}).transpose(1, 2);
    Tensor attn_scores = queries.matmul(keys.transpose(2, 3));
    Tensor mask_bool = heed::slice(heed::slice(mask, 0, 0, num_tokens), 1, 0, num_tokens) != 0.0;
    attn_scores = attn_scores.masked_fill(mask_bool, -INFINITY);
    Tensor attn_weights = (attn_scores / std::sqrt(static_cast<double>(keys.size(-1)))).softmax(-1);
    attn_weights = dropout->forward(attn_weights);
    Tensor context = attn_weights.matmul(values).transpose(1, 2).contiguous().view({b, num_tokens, d_out});
    return out_proj->forward(context);
  }

  int64_t d_out, num_heads, head_dim;
  std::shared_ptr<nn::Linear> W_query, W_key, W_value, out_proj;
  std::shared_ptr<nn::Dropout> dropout;
  Tensor mask;
};

/// 1. Simplified self-attention: softmax(x x^T) x.
inline Tensor simple_context() {
  Tensor x = inputs();
  Tensor attn_weights = x.matmul(x.transpose(0, 1)).softmax(-1);
  return attn_weights.matmul(x);
}

inline Tensor batch() { return heed::stack({inputs(), inputs()}, 0); }

/// 2. Causal attention (d_out 2, no dropout) on a batch of two copies.
inline Tensor causal_context() {
  CausalAttention ca(3, 2, 6, 0.0);
  set_weights(ca, 0.0);
  return ca.forward(batch());
}

/// 3. Multi-head attention (d_out 4, 2 heads).
inline Tensor mha_context() {
  MultiHeadAttention mha(3, 4, 6, 0.0, 2);
  set_weights(mha, 1.0);
  return mha.forward(batch());
}

/// 4. `steps` SGD steps (lr 0.5) pulling the multi-head output towards 0.25; the loss of each.
/// With dropout > 0 the masks come from the default generator (heed::manual_seed).
inline std::vector<double> train_losses(int steps, double dropout) {
  MultiHeadAttention mha(3, 4, 6, dropout, 2);
  set_weights(mha, 1.0);
  heed::optim::SGD opt({{mha.named_parameters(), 0.0}}, 0.5);
  const Tensor x = batch();
  std::vector<double> losses;
  for (int step = 0; step < steps; ++step) {
    mha.zero_grad();
    Tensor loss = (mha.forward(x) - 0.25).pow(2.0).mean();
    loss.backward();
    opt.step();
    losses.push_back(loss.item());
  }
  return losses;
}

}  // namespace tutorial
