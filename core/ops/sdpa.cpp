// scaled_dot_product_attention: PyTorch 2's F.scaled_dot_product_attention as one public op,
//   softmax(q k^T * scale + mask) (dropped out) @ v,
// composed from differentiable ops. Without an attention mask (or with is_causal and Tq == Tk)
// the softmax is heed's fused attention_softmax kernel (one pass forward and backward, masked
// keys skipped); an arbitrary mask takes the composed path (masked scores, softmax).
#include <cmath>
#include <limits>

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
  Tensor scores = matmul(q, transpose(k, -2, -1));  // (..., L, S)
  Tensor weights;
  if (!attn_mask.defined() && (!is_causal || L == S)) {
    // The fused kernel works on (B, H, L, S): fold every batch axis into H.
    const Shape shape = scores.shape();
    weights = reshape(attention_softmax(reshape(scores, {1, -1, L, S}), s, is_causal), shape);
  } else {
    scores = scores * s;
    const double neg_inf = -std::numeric_limits<double>::infinity();
    if (is_causal) {
      // PyTorch's is_causal aligns top-left: query i sees keys j <= i.
      scores = masked_fill(scores, logical_not(tril(Tensor::ones({L, S}, DType::boolean))), neg_inf);
    } else if (attn_mask.dtype() == DType::boolean) {
      scores = masked_fill(scores, logical_not(attn_mask), neg_inf);  // true = takes part
    } else {
      HEED_CHECK(is_floating(attn_mask.dtype()), "scaled_dot_product_attention: attn_mask must be bool or float, got ",
                 dtype_name(attn_mask.dtype()));
      scores = scores + attn_mask.to(scores.dtype());
    }
    weights = softmax(scores, -1);
  }
  if (dropout_p > 0.0) weights = dropout(weights, dropout_p, gen ? *gen : default_generator());
  return matmul(weights, v);
}

}  // namespace heed
