// scaled_dot_product_attention: PyTorch 2's F.scaled_dot_product_attention as one public op,
//   softmax(q k^T * scale + mask) (dropped out) @ v,
// composed from differentiable ops. The softmax is heed's fused attention_softmax kernel (one pass
// forward and backward, masked keys skipped), an attention mask its additive bias.
#include <cmath>

#include "core/ops.h"
#include "core/random.h"

namespace heed {

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask,
                                    bool is_causal, double dropout_p, std::optional<double> scale, Generator* gen) {
  HEED_CHECK(q.dim() >= 2 && k.dim() == q.dim() && v.dim() == q.dim(),
             "scaled_dot_product_attention: q, k, v need the same number (>= 2) of dims, got ", to_string(q.shape()),
             ", ", to_string(k.shape()), ", ", to_string(v.shape()));
  HEED_CHECK(q.size(-1) == k.size(-1) && k.size(-2) == v.size(-2), "scaled_dot_product_attention: q ",
             to_string(q.shape()), ", k ", to_string(k.shape()), " and v ", to_string(v.shape()),
             " do not fit (q and k share the last dim, k and v the key count)");
  HEED_CHECK(!(is_causal && attn_mask.defined()),
             "scaled_dot_product_attention: give attn_mask or is_causal, not both (as PyTorch)");
  HEED_CHECK(dropout_p >= 0.0 && dropout_p < 1.0, "scaled_dot_product_attention: dropout_p ", dropout_p,
             " is outside [0, 1)");
  const int64_t L = q.size(-2), S = k.size(-2);
  const double s = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  const Tensor scores = matmul(q, transpose(k, -2, -1));  // (..., L, S)
  const Shape shape = scores.shape();
  // The mask as an additive bias; is_causal too when L != S, since the fused causal mask aligns
  // bottom-right and PyTorch's is_causal top-left (query i sees keys j <= i).
  Tensor bias;
  if (attn_mask.defined()) {
    if (attn_mask.dtype() == DType::boolean) {
      bias = additive_mask(logical_not(attn_mask), scores.dtype());  // true = takes part
    } else {
      HEED_CHECK(is_floating(attn_mask.dtype()), "scaled_dot_product_attention: attn_mask must be bool or float, got ",
                 dtype_name(attn_mask.dtype()));
      bias = attn_mask;
    }
    HEED_CHECK(bias.dim() <= scores.dim() &&
                   broadcast_shapes(bias.shape(), shape, "scaled_dot_product_attention") == shape,
               "scaled_dot_product_attention: attn_mask ", to_string(attn_mask.shape()),
               " does not broadcast to the scores ", to_string(shape));
  } else if (is_causal && L != S) {
    bias = additive_mask(logical_not(tril(Tensor::ones({L, S}, DType::boolean))), scores.dtype());
  }
  const bool fused_causal = is_causal && L == S;
  // The fused kernel works on (B, H, L, S): leading axes become (1, H) or (B, H) as they are,
  // more than two fold into H (the mask then broadcast to the scores first).
  Tensor weights;
  if (scores.dim() <= 4) {
    Shape s4 = shape, b4;
    while (s4.size() < 4) s4.insert(s4.begin(), 1);
    Tensor b = bias;
    if (b.defined()) {
      b4 = b.shape();
      while (b4.size() < 4) b4.insert(b4.begin(), 1);
      b = reshape(b, b4);
    }
    weights = reshape(attention_softmax(reshape(scores, s4), s, fused_causal, nullptr, b), shape);
  } else {
    const Shape flat{1, -1, L, S};
    const Tensor b = bias.defined() ? reshape(expand(bias, shape), flat) : Tensor();
    weights = reshape(attention_softmax(reshape(scores, flat), s, fused_causal, nullptr, b), shape);
  }
  if (dropout_p > 0.0) weights = dropout(weights, dropout_p, gen ? *gen : default_generator());
  return matmul(weights, v);
}

}  // namespace heed
