// Multi-head attention. The projections and the two batched products are ordinary ops (matmul
// works on the (B, nh, T, hd) head views through BLAS strides, without copies); the scale, the
// masks and the softmax are one fused op, attention_softmax, whose kernels skip the masked keys
// (the upper triangle when causal) instead of filling them with -inf and exponentiating zeros.
#include "nn/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <xsimd/xsimd.hpp>

#include "core/autograd.h"
#include "core/ops.h"
#include "core/random.h"

namespace heed::nn {

KeyPaddingMask padding_mask_from_lengths(const std::vector<int64_t>& lengths, int64_t T) {
  KeyPaddingMask m{std::vector<uint8_t>(lengths.size() * T, 0), static_cast<int64_t>(lengths.size()), T};
  for (size_t b = 0; b < lengths.size(); ++b) {
    HEED_CHECK(lengths[b] >= 0 && lengths[b] <= T, "padding_mask_from_lengths: length ", lengths[b],
               " of row ", b, " outside [0, ", T, "]");
    for (int64_t t = lengths[b]; t < T; ++t) m.pad[b * T + t] = 1;
  }
  return m;
}

// ------------------------------------------------------------------------------------------
// attention_softmax: fused scale + causal/padding mask + softmax, forward and backward.
// scores, y, dy, ds: (B, H, Tq, Tk) contiguous; pad: (B, Tk) or null. Query row i sees keys
// j < n(i), n(i) = i + Tk - Tq + 1 when causal (clamped to [0, Tk]), else Tk; padded keys are
// skipped within that range. Masked weights are exactly 0, so the backward needs no mask.

static int64_t visible_keys(int64_t i, int64_t Tq, int64_t Tk, bool causal) {
  return causal ? std::clamp<int64_t>(i + Tk - Tq + 1, 0, Tk) : Tk;
}

template <class T>
using Batch = xsimd::batch<T>;

template <class T>
static T row_max(const T* x, int64_t n) {
  constexpr int64_t W = Batch<T>::size;
  T m = -std::numeric_limits<T>::infinity();
  int64_t j = 0;
  if (n >= W) {
    Batch<T> mb = Batch<T>::load_unaligned(x);
    for (j = W; j + W <= n; j += W) mb = xsimd::max(mb, Batch<T>::load_unaligned(x + j));
    alignas(64) T lanes[W];
    mb.store_aligned(lanes);
    for (int64_t k = 0; k < W; ++k) m = std::max(m, lanes[k]);
  }
  for (; j < n; ++j) m = std::max(m, x[j]);
  return m;
}

// y = exp(scale * (s - mx)); returns the sum. std::exp does not vectorise, xsimd::exp does.
template <class T>
static T row_scaled_exp(T* y, const T* s, T scale, T mx, int64_t n) {
  constexpr int64_t W = Batch<T>::size;
  const Batch<T> sb(scale), shift(scale * mx);
  Batch<T> acc(T(0));
  int64_t j = 0;
  for (; j + W <= n; j += W) {
    const Batch<T> e = xsimd::exp(xsimd::fms(Batch<T>::load_unaligned(s + j), sb, shift));
    e.store_unaligned(y + j);
    acc += e;
  }
  T sum = xsimd::hadd(acc);
  for (; j < n; ++j) sum += (y[j] = std::exp(s[j] * scale - scale * mx));
  return sum;
}

template <class T>
static T row_dot(const T* a, const T* b, int64_t n) {
  constexpr int64_t W = Batch<T>::size;
  Batch<T> acc(T(0));
  int64_t j = 0;
  for (; j + W <= n; j += W) acc = xsimd::fma(Batch<T>::load_unaligned(a + j), Batch<T>::load_unaligned(b + j), acc);
  T sum = xsimd::hadd(acc);
  for (; j < n; ++j) sum += a[j] * b[j];
  return sum;
}

template <class T>
static void attention_softmax_forward(T* y, const T* scores, const uint8_t* pad, T scale, int64_t B,
                                      int64_t H, int64_t Tq, int64_t Tk, bool causal) {
  for (int64_t b = 0; b < B; ++b) {
    const uint8_t* p = pad ? pad + b * Tk : nullptr;
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t i = 0; i < Tq; ++i) {
        const int64_t row = ((b * H + h) * Tq + i) * Tk;
        const T* s = scores + row;
        T* yr = y + row;
        const int64_t n = visible_keys(i, Tq, Tk, causal);
        T mx = -std::numeric_limits<T>::infinity();
        bool any = n > 0;
        if (p) {
          any = false;
          for (int64_t j = 0; j < n; ++j)
            if (!p[j]) mx = std::max(mx, s[j]), any = true;
        } else if (any) {
          mx = row_max(s, n);
        }
        if (!any) {  // every key masked: zero weights (a -inf softmax would give NaN)
          std::fill(yr, yr + Tk, T(0));
          continue;
        }
        T sum = row_scaled_exp(yr, s, scale, mx, n);
        if (p) {  // padded keys may have exponentiated to anything (even inf): overwrite them
          sum = 0;
          for (int64_t j = 0; j < n; ++j) sum += (yr[j] = p[j] ? T(0) : yr[j]);
        }
        const T inv = T(1) / sum;
        for (int64_t j = 0; j < n; ++j) yr[j] *= inv;
        std::fill(yr + n, yr + Tk, T(0));
      }
    }
  }
}

// ds = scale * y * (dy - sum_j dy_j y_j), per row; zero wherever y is (the masked keys).
template <class T>
static void attention_softmax_backward(T* ds, const T* dy, const T* y, T scale, int64_t R, int64_t Tq,
                                       int64_t Tk, bool causal) {
  for (int64_t r = 0; r < R; ++r) {
    const int64_t n = visible_keys(r % Tq, Tq, Tk, causal);
    const T* g = dy + r * Tk;
    const T* yr = y + r * Tk;
    T* d = ds + r * Tk;
    const T dot = row_dot(g, yr, n);
    for (int64_t j = 0; j < n; ++j) d[j] = scale * yr[j] * (g[j] - dot);
    std::fill(d + n, d + Tk, T(0));
  }
}

Tensor attention_softmax(const Tensor& scores, double scale, bool causal, const KeyPaddingMask* mask) {
  HEED_CHECK(scores.dim() == 4, "attention_softmax: scores must be (B, H, Tq, Tk), got ",
             to_string(scores.shape()));
  const int64_t B = scores.size(0), H = scores.size(1), Tq = scores.size(2), Tk = scores.size(3);
  if (mask) {
    HEED_CHECK(mask->B == B && mask->T == Tk && static_cast<int64_t>(mask->pad.size()) == B * Tk,
               "attention_softmax: key padding mask (B=", mask->B, ", T=", mask->T, ", ", mask->pad.size(),
               " flags) does not match scores ", to_string(scores.shape()), " (B=", B, ", Tk=", Tk, ")");
  }
  const Tensor s = scores.is_contiguous() ? scores : scores.detach().contiguous();
  Tensor out = Tensor::empty(scores.shape(), scores.dtype());
  visit_dtype(s.dtype(), [&]<class T>() {
    attention_softmax_forward<T>(out.data<T>(), s.data<T>(), mask ? mask->pad.data() : nullptr,
                                 static_cast<T>(scale), B, H, Tq, Tk, causal);
  });
  return record("attention_softmax", out, {scores}, [y = out.detach(), scale, causal](const Tensor& g) {
    const int64_t Tq = y.size(2), Tk = y.size(3);
    Tensor ds = Tensor::empty(y.shape(), y.dtype());
    visit_dtype(y.dtype(), [&]<class T>() {
      attention_softmax_backward<T>(ds.data<T>(), g.data<T>(), y.data<T>(), static_cast<T>(scale),
                                    y.numel() / Tk, Tq, Tk, causal);
    });
    return std::vector<Tensor>{ds};
  });
}

// ------------------------------------------------------------------------------------------
// Head views

// (B, T, C) with unit last stride (a slice of a fused qkv is fine) -> (B, nh, T, hd), a view.
// view() cannot do this for the strided slices of qkv, so it is a small op of its own.
static Tensor split_heads(const Tensor& x, int64_t nh) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), hd = C / nh;
  const Tensor v = x.strides()[2] == 1 ? x : x.contiguous();
  Tensor out = make_view(v, {B, nh, T, hd}, {v.strides()[0], hd, v.strides()[1], 1}, v.offset());
  return record("split_heads", out, {v}, [B, T, C, nh, hd](const Tensor& g) {
    Tensor dx = Tensor::empty({B, T, C}, g.dtype());
    make_view(dx, {B, nh, T, hd}, {T * C, hd, C, 1}, 0).copy_(g);
    return std::vector<Tensor>{dx};
  });
}

// (B, nh, T, hd) -> (B, T, nh * hd), one copy.
static Tensor merge_heads(const Tensor& y) {
  return reshape(transpose(y, 1, 2), {y.size(0), y.size(2), y.size(1) * y.size(3)});
}

// ------------------------------------------------------------------------------------------
// MultiHeadAttention

// Distinct, reproducible seeds for the init generator and the two dropouts.
static uint64_t derive_seed(uint64_t seed, uint64_t k) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (k + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

MultiHeadAttention::MultiHeadAttention(const MultiHeadAttentionOptions& options) : options_(options) {
  const int64_t C = options.d_model, nh = options.n_head;
  HEED_CHECK(C > 0 && nh > 0, "MultiHeadAttention: d_model (", C, ") and n_head (", nh,
             ") must be positive");
  HEED_CHECK(C % nh == 0, "MultiHeadAttention: d_model (", C, ") is not divisible by n_head (", nh,
             "); head_dim = d_model / n_head must be an integer");
  head_dim_ = C / nh;
  Generator gen(derive_seed(options.seed, 0));
  if (options.fused_qkv) {
    c_attn = register_module("c_attn", std::make_shared<Linear>(C, 3 * C, options.bias, &gen));
  } else {
    q_proj = register_module("q_proj", std::make_shared<Linear>(C, C, options.bias, &gen));
    k_proj = register_module("k_proj", std::make_shared<Linear>(C, C, options.bias, &gen));
    v_proj = register_module("v_proj", std::make_shared<Linear>(C, C, options.bias, &gen));
  }
  c_proj = register_module("c_proj", std::make_shared<Linear>(C, C, options.bias, &gen));
  attn_dropout = register_module("attn_dropout",
                                 std::make_shared<Dropout>(options.dropout, derive_seed(options.seed, 1)));
  resid_dropout = register_module("resid_dropout",
                                  std::make_shared<Dropout>(options.dropout, derive_seed(options.seed, 2)));
}

static void check_input(const Tensor& t, int64_t C, const char* what) {
  HEED_CHECK(t.dim() == 3 && t.size(2) == C, "MultiHeadAttention: ", what, " must be (B, T, ", C,
             "), got ", to_string(t.shape()));
}

Tensor MultiHeadAttention::forward(const Tensor& x) { return forward(x, nullptr); }

Tensor MultiHeadAttention::forward(const Tensor& x, const KeyPaddingMask* mask) {
  const int64_t C = options_.d_model;
  check_input(x, C, "input");
  if (options_.fused_qkv) {
    Tensor qkv = c_attn->forward(x);  // (B, T, 3C)
    return attend(slice(qkv, 2, 0, C), slice(qkv, 2, C, 2 * C), slice(qkv, 2, 2 * C, 3 * C), mask);
  }
  return attend(q_proj->forward(x), k_proj->forward(x), v_proj->forward(x), mask);
}

Tensor MultiHeadAttention::forward(const Tensor& query, const Tensor& memory, const KeyPaddingMask* memory_mask) {
  const int64_t C = options_.d_model;
  check_input(query, C, "query");
  check_input(memory, C, "memory");
  HEED_CHECK(query.size(0) == memory.size(0), "MultiHeadAttention: query ", to_string(query.shape()),
             " and memory ", to_string(memory.shape()), " have different batch sizes");
  if (options_.fused_qkv) {
    // Rows [0, C) of c_attn project queries, rows [C, 3C) keys and values: the same weights a
    // self-attention call uses, applied to two different inputs.
    const Tensor& w = c_attn->weight;
    const Tensor& b = c_attn->bias;
    Tensor q = linear(query, slice(w, 0, 0, C), b.defined() ? slice(b, 0, 0, C) : Tensor());
    Tensor kv = linear(memory, slice(w, 0, C, 3 * C), b.defined() ? slice(b, 0, C, 3 * C) : Tensor());
    return attend(q, slice(kv, 2, 0, C), slice(kv, 2, C, 2 * C), memory_mask);
  }
  return attend(q_proj->forward(query), k_proj->forward(memory), v_proj->forward(memory), memory_mask);
}

Tensor MultiHeadAttention::attend(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                                  const KeyPaddingMask* mask) {
  const int64_t nh = options_.n_head;
  Tensor q = split_heads(q_in, nh);  // (B, nh, Tq, hd)
  Tensor k = split_heads(k_in, nh);  // (B, nh, Tk, hd)
  Tensor v = split_heads(v_in, nh);  // (B, nh, Tk, hd)
  Tensor scores = matmul(q, transpose(k, -2, -1));  // (B, nh, Tq, Tk), unscaled
  Tensor att = attention_softmax(scores, 1.0 / std::sqrt(static_cast<double>(head_dim_)), options_.causal, mask);
  if (keep_attention_) last_attention_ = att.detach();
  att = attn_dropout->forward(att);
  Tensor y = matmul(att, v);  // (B, nh, Tq, hd)
  return resid_dropout->forward(c_proj->forward(merge_heads(y)));
}

}  // namespace heed::nn
