// Multi-head attention. The projections are Linear layers; everything between them (head views,
// q k^T, scale, masks, softmax, attention dropout, @ v, merging heads) is one autograd op,
// attention_heads, built on matmul over (B, nh, T, hd) views (BLAS reads them in place) and the
// attention_softmax kernels, which skip masked keys (the causal upper triangle) instead of
// filling them with -inf and exponentiating zeros.
#include "nn/attention.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

// GCC 12 warns inside its own AVX-512 headers (_mm512_undefined_* read "uninitialized") once
// xsimd's double exp is inlined here: a false positive, GCC bug 105593 (fixed in GCC 13).
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <xsimd/xsimd.hpp>

#include "nn/attention_kernels.h"

#include "core/autograd.h"
#include "core/ops.h"
#include "core/parallel.h"
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

// Causal rows end at any length n, so a scalar tail (std::exp does not vectorise) would cost as
// much as the rest of a short row. Instead the last partial batch is read whole when the row
// buffer extends that far (avail >= j + W: the masked scores are valid memory) and the lanes at
// or past n are masked out with a select.
template <class T>
static xsimd::batch_bool<T> lanes_below(int64_t k) {
  alignas(64) T idx[Batch<T>::size];
  for (size_t i = 0; i < Batch<T>::size; ++i) idx[i] = static_cast<T>(i);
  return Batch<T>::load_aligned(idx) < Batch<T>(static_cast<T>(k));
}

template <class T>
static T hmax(const Batch<T>& b) {
  alignas(64) T lanes[Batch<T>::size];
  b.store_aligned(lanes);
  return *std::max_element(lanes, lanes + Batch<T>::size);
}

// max of x[0, n); x readable up to avail >= n.
template <class T>
static T row_max(const T* x, int64_t n, int64_t avail) {
  constexpr int64_t W = Batch<T>::size;
  const Batch<T> ninf(-std::numeric_limits<T>::infinity());
  Batch<T> mb = ninf;
  int64_t j = 0;
  for (; j + W <= n; j += W) mb = xsimd::max(mb, Batch<T>::load_unaligned(x + j));
  if (j < n && j + W <= avail) {
    mb = xsimd::max(mb, xsimd::select(lanes_below<T>(n - j), Batch<T>::load_unaligned(x + j), ninf));
    j = n;
  }
  T m = hmax(mb);
  for (; j < n; ++j) m = std::max(m, x[j]);
  return m;
}

// y[0, n) = exp(scale * (s - mx)); returns their sum. May write y[n, avail) (garbage the caller
// overwrites).
template <class T>
static T row_scaled_exp(T* y, const T* s, T scale, T mx, int64_t n, int64_t avail) {
  constexpr int64_t W = Batch<T>::size;
  const Batch<T> sb(scale), shift(scale * mx);
  Batch<T> acc(T(0));
  int64_t j = 0;
  for (; j + W <= n; j += W) {
    const Batch<T> e = xsimd::exp(xsimd::fms(Batch<T>::load_unaligned(s + j), sb, shift));
    e.store_unaligned(y + j);
    acc += e;
  }
  if (j < n && j + W <= avail) {
    const Batch<T> e = xsimd::exp(xsimd::fms(Batch<T>::load_unaligned(s + j), sb, shift));
    e.store_unaligned(y + j);
    acc += xsimd::select(lanes_below<T>(n - j), e, Batch<T>(T(0)));
    j = n;
  }
  T sum = xsimd::hadd(acc);
  for (; j < n; ++j) sum += (y[j] = std::exp(s[j] * scale - scale * mx));
  return sum;
}

// sum of a[j] b[j] over [0, n); both readable up to avail >= n.
template <class T>
static T row_dot(const T* a, const T* b, int64_t n, int64_t avail) {
  constexpr int64_t W = Batch<T>::size;
  Batch<T> acc(T(0));
  int64_t j = 0;
  for (; j + W <= n; j += W) acc = xsimd::fma(Batch<T>::load_unaligned(a + j), Batch<T>::load_unaligned(b + j), acc);
  if (j < n && j + W <= avail) {
    const Batch<T> prod = Batch<T>::load_unaligned(a + j) * Batch<T>::load_unaligned(b + j);
    acc += xsimd::select(lanes_below<T>(n - j), prod, Batch<T>(T(0)));
    j = n;
  }
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
          mx = row_max(s, n, Tk);
        }
        if (!any) {  // every key masked: zero weights (a -inf softmax would give NaN)
          std::fill(yr, yr + Tk, T(0));
          continue;
        }
        T sum = row_scaled_exp(yr, s, scale, mx, n, Tk);
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
    const T dot = row_dot(g, yr, n, Tk);
    for (int64_t j = 0; j < n; ++j) d[j] = scale * yr[j] * (g[j] - dot);
    std::fill(d + n, d + Tk, T(0));
  }
}

static void check_mask(const KeyPaddingMask* mask, int64_t B, int64_t Tk, const char* op, const Shape& shape) {
  if (!mask) return;
  HEED_CHECK(mask->B == B && mask->T == Tk && static_cast<int64_t>(mask->pad.size()) == B * Tk, op,
             ": key padding mask (B=", mask->B, ", T=", mask->T, ", ", mask->pad.size(),
             " flags) does not match keys of shape ", to_string(shape), " (B=", B, ", Tk=", Tk, ")");
}

Tensor attention_softmax(const Tensor& scores, double scale, bool causal, const KeyPaddingMask* mask) {
  HEED_CHECK(scores.dim() == 4, "attention_softmax: scores must be (B, H, Tq, Tk), got ",
             to_string(scores.shape()));
  const int64_t B = scores.size(0), H = scores.size(1), Tq = scores.size(2), Tk = scores.size(3);
  check_mask(mask, B, Tk, "attention_softmax", scores.shape());
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
// attention_heads: the whole of softmax(q k^T * scale, masked) @ v over heads, as one autograd
// op. q, k and v are read in place as (B, nh, T, hd) views of the projections (for fused qkv,
// three channel ranges of one (B, T, 3C) tensor); the output is written straight in the merged
// (B, Tq, C) layout; the backward writes dq, dk, dv straight into one gradient per source tensor.
// Composing the same from slice/view/matmul ops costs a zero-filled (B, T, 3C) gradient per
// slice, their sums, and strided copies: several passes over memory per step.

// One of q, k, v: channels [off, off + C) of src (B, T, W), which has a unit last stride.
struct HeadRole {
  Tensor src;
  int64_t off;
};

// Inverted dropout of the attention weights, in place: a = a * keep / (1 - p). Only the visible
// keys of each row draw (the causal upper triangle is zero anyway), two draws per 64 random bits.
template <class T>
static void dropout_weights(T* a, double p, Generator& gen, int64_t R, int64_t Tq, int64_t Tk, bool causal) {
  const uint64_t threshold = static_cast<uint64_t>(p * 4294967296.0);  // keep iff u32 >= p * 2^32
  const T scale = static_cast<T>(1.0 / (1.0 - p));
  uint64_t bits = 0;
  int left = 0;
  for (int64_t r = 0; r < R; ++r) {
    T* row = a + r * Tk;
    for (int64_t j = 0, n = visible_keys(r % Tq, Tq, Tk, causal); j < n; ++j) {
      if (left == 0) bits = gen.next_u64(), left = 2;
      const bool keep = (bits & 0xffffffffULL) >= threshold;
      bits >>= 32, --left;
      row[j] = keep ? row[j] * scale : T(0);
    }
  }
}

// g = g * (kept ? 1 / (1 - p) : 0), with kept read off the dropped weights: a kept weight is
// a / (1 - p) > 0 and a dropped one 0. A zero softmax weight (masked key) needs no gradient, as
// the softmax backward multiplies by it.
template <class T>
static void dropout_weights_backward(T* g, const T* dropped, double p, int64_t n) {
  const T scale = static_cast<T>(1.0 / (1.0 - p));
  for (int64_t i = 0; i < n; ++i) g[i] = dropped[i] != T(0) ? g[i] * scale : T(0);
}

// q, k, v (their sources may be one tensor) -> (B, Tq, C). Roles on one source must use disjoint
// channel ranges. With p > 0 the weights are dropped out (after keep_weights is taken).
// Heads per parallel chunk: enough that a chunk's work (about Tq Tk hd multiply-adds) is worth a
// thread wake-up (some tens of microseconds).
static int64_t head_grain(int64_t Tq, int64_t Tk, int64_t hd) {
  return std::max<int64_t>(1, (int64_t(1) << 18) / std::max<int64_t>(1, Tq * Tk * hd));
}

// Row stride of a transposed (hd, Tk) head for a_bt: Tk rounded up to whole batches, plus one
// batch. Without the extra batch, T = 256 gives rows exactly 1 KB apart, whose cache lines fall
// into a quarter of L1's sets and evict each other: 97 GFLOP/s instead of 137 on one core
// (heed_bench_kernels --benchmark_filter=attention_scores, the small config's head shape).
static int64_t transposed_ld(int64_t Tk, int64_t W) { return (Tk + W - 1) / W * W + W; }

static Tensor attention_heads(const HeadRole& qr, const HeadRole& kr, const HeadRole& vr, int64_t C, int64_t nh,
                              double scale, bool causal, const KeyPaddingMask* mask, double p, Generator* gen,
                              Tensor* keep_weights) {
  const HeadRole* roles[3] = {&qr, &kr, &vr};
  std::vector<Tensor> inputs, data;  // the op's inputs, and the same with a unit last stride
  std::array<size_t, 3> src{};       // role -> index into inputs
  for (size_t r = 0; r < 3; ++r) {
    const Tensor& t = roles[r]->src;
    size_t i = 0;
    while (i < inputs.size() && !inputs[i].same(t)) ++i;
    if (i == inputs.size()) {
      inputs.push_back(t);
      data.push_back(t.strides()[2] == 1 ? t.detach() : t.detach().contiguous());
    }
    src[r] = i;
  }
  const std::array<int64_t, 3> offs = {qr.off, kr.off, vr.off};
  const int64_t hd = C / nh, B = data[src[0]].size(0), Tq = data[src[0]].size(1), Tk = data[src[1]].size(1);
  check_mask(mask, B, Tk, "MultiHeadAttention", data[src[1]].shape());
  const Tensor& qd = data[src[0]];
  const Tensor& kd = data[src[1]];
  const Tensor& vd = data[src[2]];
  auto visible = [Tq, Tk, causal](int64_t i) { return visible_keys(i, Tq, Tk, causal); };
  Tensor att = Tensor::empty({B, nh, Tq, Tk}, qd.dtype());  // scores, softmaxed in place
  Tensor dropped = att;
  Tensor out = Tensor::empty({B, Tq, C}, qd.dtype());
  visit_dtype(att.dtype(), [&]<class T>() {
    constexpr int64_t W = kernels::Batch<T>::size;
    const int64_t Tkp = transposed_ld(Tk, W);
    T* A = att.data<T>();
    parallel_for(B * nh, head_grain(Tq, Tk, hd), [&](int64_t begin, int64_t end) {
      std::vector<T> kt(static_cast<size_t>(hd * Tkp));
      for (int64_t bh = begin; bh < end; ++bh) {
        const int64_t b = bh / nh, h = bh % nh;
        const T* kh = kd.data<T>() + b * kd.strides()[0] + kr.off + h * hd;
        const T* qh = qd.data<T>() + b * qd.strides()[0] + qr.off + h * hd;
        kernels::transpose(kt.data(), Tkp, kh, kd.strides()[1], Tk, hd);
        kernels::a_bt(A + bh * Tq * Tk, Tk, qh, qd.strides()[1], kt.data(), Tkp, Tq, hd, visible);
        attention_softmax_forward<T>(A + bh * Tq * Tk, A + bh * Tq * Tk, mask ? mask->pad.data() + b * Tk : nullptr,
                                     static_cast<T>(scale), 1, 1, Tq, Tk, causal);
      }
    });
  });
  if (keep_weights) *keep_weights = att;
  if (p > 0.0) {
    dropped = att.clone();
    visit_dtype(att.dtype(), [&]<class T>() { dropout_weights<T>(dropped.data<T>(), p, *gen, B * nh * Tq, Tq, Tk, causal); });
  }
  visit_dtype(att.dtype(), [&]<class T>() {
    const T* P = dropped.data<T>();
    parallel_for(B * nh, head_grain(Tq, Tk, hd), [&](int64_t begin, int64_t end) {
      for (int64_t bh = begin; bh < end; ++bh) {
        const int64_t b = bh / nh, h = bh % nh;
        const T* vh = vd.data<T>() + b * vd.strides()[0] + vr.off + h * hd;
        kernels::p_v(out.data<T>() + b * Tq * C + h * hd, C, P + bh * Tq * Tk, Tk, 1, vh, vd.strides()[1], Tq, hd,
                     [&](int64_t i) { return std::pair<int64_t, int64_t>{0, visible(i)}; });
      }
    });
  });
  return record("attention_heads", out, inputs, [data, src, offs, att, dropped, C, nh, hd, B, Tq, Tk, scale, causal,
                                                 p](const Tensor& g) {
    // g is (B, Tq, C) contiguous: head h of row (b, t) at b Tq C + t C + h hd.
    const Tensor& qd = data[src[0]];
    const Tensor& kd = data[src[1]];
    const Tensor& vd = data[src[2]];
    auto visible = [Tq, Tk, causal](int64_t i) { return visible_keys(i, Tq, Tk, causal); };
    // Key j is seen by the queries i >= first_query(j) (all of them without a causal mask).
    auto first_query = [Tq, Tk, causal](int64_t j) { return causal ? std::max<int64_t>(0, j - (Tk - Tq)) : 0; };
    std::vector<Tensor> grads(data.size());
    for (size_t i = 0; i < data.size(); ++i) {
      int64_t covered = 0;
      for (size_t r = 0; r < 3; ++r) covered += src[r] == i ? C : 0;
      const Shape& shape = data[i].shape();
      // Fully covered (fused qkv, or a plain projection): every element is written below.
      grads[i] = covered == shape[2] ? Tensor::empty(shape, g.dtype()) : Tensor::zeros(shape, g.dtype());
    }
    visit_dtype(g.dtype(), [&]<class T>() {
      constexpr int64_t W = kernels::Batch<T>::size;
      const int64_t Tkp = transposed_ld(Tk, W);
      const T* G = g.data<T>();
      T* dq = grads[src[0]].data<T>();
      T* dk = grads[src[1]].data<T>();
      T* dv = grads[src[2]].data<T>();
      const int64_t Wq = qd.size(2), Wk = kd.size(2), Wv = vd.size(2);
      // Heads are independent, and each writes its own channels of dq, dk, dv: split them.
      parallel_for(B * nh, head_grain(Tq, Tk, hd), [&](int64_t begin, int64_t end) {
        std::vector<T> vt(static_cast<size_t>(hd * Tkp));
        std::vector<T> ds_head(static_cast<size_t>(Tq * Tk));  // one head's d(scores), reused
        for (int64_t bh = begin; bh < end; ++bh) {
          const int64_t b = bh / nh, h = bh % nh;
          T* ds = ds_head.data();
          const T* qh = qd.data<T>() + b * qd.strides()[0] + offs[0] + h * hd;
          const T* kh = kd.data<T>() + b * kd.strides()[0] + offs[1] + h * hd;
          const T* vh = vd.data<T>() + b * vd.strides()[0] + offs[2] + h * hd;
          const T* gy = G + b * Tq * C + h * hd;
          // d(weights) = gy v^T, then through dropout and the softmax: d(scores), the scale folded in.
          kernels::transpose(vt.data(), Tkp, vh, vd.strides()[1], Tk, hd);
          kernels::a_bt(ds, Tk, gy, C, vt.data(), Tkp, Tq, hd, visible);
          if (p > 0.0) dropout_weights_backward<T>(ds, dropped.data<T>() + bh * Tq * Tk, p, Tq * Tk);
          attention_softmax_backward<T>(ds, ds, att.data<T>() + bh * Tq * Tk, static_cast<T>(scale), Tq, Tq, Tk, causal);
          // dq = ds k
          kernels::p_v(dq + b * Tq * Wq + offs[0] + h * hd, Wq, ds, Tk, 1, kh, kd.strides()[1], Tq, hd,
                       [&](int64_t i) { return std::pair<int64_t, int64_t>{0, visible(i)}; });
          // dk = ds^T q and dv = weights^T gy, reading ds and the weights transposed in place
          kernels::p_v(dk + b * Tk * Wk + offs[1] + h * hd, Wk, ds, 1, Tk, qh, qd.strides()[1], Tk, hd,
                       [&](int64_t j) { return std::pair<int64_t, int64_t>{first_query(j), Tq}; });
          kernels::p_v(dv + b * Tk * Wv + offs[2] + h * hd, Wv, dropped.data<T>() + bh * Tq * Tk, 1, Tk, gy, C, Tk, hd,
                       [&](int64_t j) { return std::pair<int64_t, int64_t>{first_query(j), Tq}; });
        }
      });
    });
    return grads;
  });
}

// ------------------------------------------------------------------------------------------
// MultiHeadAttention

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
  return forward_residual(x, Tensor(), mask);
}

Tensor MultiHeadAttention::forward_residual(const Tensor& x, const Tensor& residual, const KeyPaddingMask* mask) {
  const int64_t C = options_.d_model;
  check_input(x, C, "input");
  // (An undefined residual is forward(x, mask) itself.)
  HEED_CHECK(!residual.defined() || residual.shape() == x.shape(), "MultiHeadAttention: the residual ",
             to_string(residual.shape()), " must have the input's shape ", to_string(x.shape()));
  if (options_.fused_qkv) {
    const Tensor qkv = c_attn->forward(x);  // (B, T, 3C): q, k, v side by side
    return attend(qkv, 0, qkv, C, qkv, 2 * C, mask, residual);
  }
  return attend(q_proj->forward(x), 0, k_proj->forward(x), 0, v_proj->forward(x), 0, mask, residual);
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
    const Tensor q = linear(query, slice(w, 0, 0, C), b.defined() ? slice(b, 0, 0, C) : Tensor());
    const Tensor kv = linear(memory, slice(w, 0, C, 3 * C), b.defined() ? slice(b, 0, C, 3 * C) : Tensor());
    return attend(q, 0, kv, 0, kv, C, memory_mask);
  }
  return attend(q_proj->forward(query), 0, k_proj->forward(memory), 0, v_proj->forward(memory), 0, memory_mask);
}

Tensor MultiHeadAttention::attend(const Tensor& q_src, int64_t q_off, const Tensor& k_src, int64_t k_off,
                                  const Tensor& v_src, int64_t v_off, const KeyPaddingMask* mask,
                                  const Tensor& residual) {
  const bool drop = attn_dropout->is_training() && attn_dropout->p() > 0.0;
  if (!keep_attention_) last_attention_ = Tensor();  // never a stale one, and its memory goes
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim_));  // applied once, in the softmax
  Tensor y = attention_heads({q_src, q_off}, {k_src, k_off}, {v_src, v_off}, options_.d_model, options_.n_head, scale,
                             options_.causal, mask, drop ? attn_dropout->p() : 0.0, &attn_dropout->generator(),
                             keep_attention_ ? &last_attention_ : nullptr);
  if (!residual.defined()) return resid_dropout->forward(c_proj->forward(y));
  if (resid_dropout->active()) return add(residual, resid_dropout->forward(c_proj->forward(y)));
  return c_proj->forward_residual(y, residual);
}

}  // namespace heed::nn
