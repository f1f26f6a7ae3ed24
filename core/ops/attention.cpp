// Attention's ops: the key padding mask, attention masks as additive biases, attention_softmax
// (scale + bias + causal/padding mask + softmax of a (B, H, Tq, Tk) score tensor) and
// attention_heads (the whole of softmax(q k^T) v over every head between the projections). Kernels come in llm.c-style forward/backward pairs over one
// head's rows; the autograd wrappers below them hold the saved state and split heads over the
// threads. Masked keys are skipped, not filled with -inf and exponentiated: a causal row i stops at
// its last visible key, so the upper triangle of every product is never computed.
//
// Shapes: B batch, H = nh heads, Tq queries, Tk keys, hd = head width, C = nh * hd. Query row i
// sees keys j < visible(i): all Tk, or, when causal, j <= i + Tk - Tq (aligned bottom-right).
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <memory>

#include "core/autocast.h"
#include "core/autograd.h"
#include "core/ops.h"
#include "core/ops/attention_kernels.h"
#include "core/ops/gemm_bf16.h"
#include "core/ops/simd_rows.h"
#include "core/ops/strided.h"
#include "core/parallel.h"
#include "core/random.h"
#include "core/tuning.h"

namespace heed {

using detail::contiguous_data;

KeyPaddingMask padding_mask_from_lengths(const std::vector<int64_t>& lengths, int64_t T) {
  HEED_CHECK(T >= 0, "padding_mask_from_lengths: negative length T = ", T);
  numel_of({static_cast<int64_t>(lengths.size()), T});  // refuses a (B, T) past int64
  KeyPaddingMask m{std::vector<uint8_t>(lengths.size() * T, 0), static_cast<int64_t>(lengths.size()), T};
  for (size_t b = 0; b < lengths.size(); ++b) {
    HEED_CHECK(lengths[b] >= 0 && lengths[b] <= T, "padding_mask_from_lengths: length ", lengths[b],
               " of row ", b, " outside [0, ", T, "]");
    for (int64_t t = lengths[b]; t < T; ++t) m.pad[b * T + t] = 1;
  }
  return m;
}

namespace {

int64_t visible_keys(int64_t i, int64_t Tq, int64_t Tk, bool causal) {
  return causal ? std::clamp<int64_t>(i + Tk - Tq + 1, 0, Tk) : Tk;
}

void check_mask(const KeyPaddingMask* mask, int64_t B, int64_t Tk, const char* op, const Shape& shape) {
  if (!mask) return;
  HEED_CHECK(mask->B == B && mask->T == Tk && static_cast<int64_t>(mask->pad.size()) == B * Tk, op,
             ": key padding mask (B=", mask->B, ", T=", mask->T, ", ", mask->pad.size(),
             " flags) does not match keys of shape ", to_string(shape), " (B=", B, ", Tk=", Tk, ")");
}

// ------------------------------------------------------------------------------------------
// The masked softmax. scores, y, dy, ds: (R, Tk) rows of (Tq, Tk) matrices, contiguous (y may be
// scores itself); pad: (Tk) flags of the rows' batch entry, or null. Masked weights come out
// exactly 0, and a row whose keys are all masked all 0 (a -inf softmax would give NaN), so the
// backward needs no mask: it multiplies by the weights.

// An additive bias on the scaled scores (an attention mask: -inf masks a key), or none. Row r of
// the rows (R, Tk) reads bias + (r / Tq) * head_stride + (r % Tq) * row_stride, unit stride along
// the keys (row_stride or head_stride 0 when the mask broadcasts).
template <class T>
struct RowBias {
  const T* data = nullptr;
  int64_t row_stride = 0, head_stride = 0;
  const T* row(int64_t r, int64_t Tq) const { return data + (r / Tq) * head_stride + (r % Tq) * row_stride; }
};

// One row with a bias: z = scale * s + bias (padded keys -inf) in yr, then softmax of z. A row
// whose keys are all -inf gets all-zero weights, as the unbiased path.
template <class T>
void biased_softmax_row(T* yr, const T* s, const T* bias, const uint8_t* pad, T scale, int64_t n, int64_t Tk) {
  const T ninf = -std::numeric_limits<T>::infinity();
  for (int64_t j = 0; j < n; ++j) yr[j] = pad && pad[j] ? ninf : scale * s[j] + bias[j];
  const T mx = n > 0 ? detail::row_max(yr, n) : ninf;
  if (mx == ninf) {
    std::fill(yr, yr + Tk, T(0));
    return;
  }
  const T inv = T(1) / static_cast<T>(detail::row_exp_sum(yr, yr, T(1), mx, n));
  for (int64_t j = 0; j < n; ++j) yr[j] *= inv;
  std::fill(yr + n, yr + Tk, T(0));
}

// Rows short enough to sit in registers (kShortRowBatches batches of T lanes, 64 floats with
// AVX-512): one load, then max, exp, sum and scale in registers, and one store. At baby's T = 64 a
// causal row is 33 keys on average, and the general passes below (row_max, row_exp_sum, the
// scaling and the zero fill, each reading the row again) spent more on each row's set-up than on
// its keys. The arithmetic is the general path's, in the same order (the same lanes add up in
// the same sequence), so the bits are the same; the row must be readable and writable up to
// NB * W <= Tk.
constexpr int kShortRowBatches = 4;

template <class T, int NB>
void softmax_short_row(T* yr, const T* s, T scale, int64_t n, int64_t Tk) {
  using B = detail::Batch<T>;
  constexpr int64_t W = B::size;
  const B ninf(-std::numeric_limits<T>::infinity()), zero(T(0));
  const auto last = detail::lanes_below<T>(n - (NB - 1) * W);  // the last batch's visible lanes
  B x[NB];
  for (int k = 0; k < NB; ++k) x[k] = B::load_unaligned(s + k * W);
  B mb = xsimd::select(last, x[NB - 1], ninf);
  for (int k = 0; k < NB - 1; ++k) mb = xsimd::max(mb, x[k]);
  const T mx = detail::hmax(mb);
  const B sb(scale), shb(scale * mx);
  B acc = zero;
  for (int k = 0; k < NB; ++k) {
    x[k] = detail::exp_lanes(xsimd::fms(x[k], sb, shb));
    acc += k < NB - 1 ? x[k] : xsimd::select(last, x[k], zero);
  }
  const T inv = T(1) / xsimd::hadd(acc);
  for (int k = 0; k < NB - 1; ++k) (x[k] * B(inv)).store_unaligned(yr + k * W);
  xsimd::select(last, x[NB - 1] * B(inv), zero).store_unaligned(yr + (NB - 1) * W);
  std::fill(yr + NB * W, yr + Tk, T(0));
}

// How many batches a row of n keys takes in registers: 0 when it is empty, longer than
// kShortRowBatches batches, or its buffer (Tk) ends inside its last batch.
template <class T>
int64_t short_row_batches(int64_t n, int64_t Tk) {
  constexpr int64_t W = detail::Batch<T>::size;
  const int64_t nb = (n + W - 1) / W;
  return n > 0 && nb <= kShortRowBatches && nb * W <= Tk ? nb : 0;
}

// f.template operator()<NB>() for NB = nb, one of 1 .. kShortRowBatches.
template <class F>
void with_short_row_batches(int64_t nb, F&& f) {
  static_assert(kShortRowBatches == 4, "one case per batch count");
  switch (nb) {
    case 1: f.template operator()<1>(); break;
    case 2: f.template operator()<2>(); break;
    case 3: f.template operator()<3>(); break;
    default: f.template operator()<4>(); break;
  }
}

template <class T>
void masked_softmax_forward(T* y, const T* scores, const uint8_t* pad, T scale, int64_t R, int64_t Tq, int64_t Tk,
                            bool causal, const RowBias<T>& bias = {}) {
  for (int64_t r = 0; r < R; ++r) {
    const T* s = scores + r * Tk;
    T* yr = y + r * Tk;
    const int64_t n = visible_keys(r % Tq, Tq, Tk, causal);
    if (const int64_t nb = !pad && !bias.data ? short_row_batches<T>(n, Tk) : 0) {
      with_short_row_batches(nb, [&]<int NB>() { softmax_short_row<T, NB>(yr, s, scale, n, Tk); });
      continue;
    }
    if (bias.data) {
      biased_softmax_row(yr, s, bias.row(r, Tq), pad, scale, n, Tk);
      continue;
    }
    T mx = -std::numeric_limits<T>::infinity();
    bool any = n > 0;
    if (pad) {
      any = false;
      for (int64_t j = 0; j < n; ++j)
        if (!pad[j]) mx = std::max(mx, s[j]), any = true;
    } else if (any) {
      mx = detail::row_max(s, n, Tk);
    }
    if (!any) {
      std::fill(yr, yr + Tk, T(0));
      continue;
    }
    T sum = static_cast<T>(detail::row_exp_sum(yr, s, scale, scale * mx, n, Tk));
    if (pad) {  // padded keys may have exponentiated to anything (even inf): overwrite them
      sum = 0;
      for (int64_t j = 0; j < n; ++j) sum += (yr[j] = pad[j] ? T(0) : yr[j]);
    }
    const T inv = T(1) / sum;
    for (int64_t j = 0; j < n; ++j) yr[j] *= inv;
    std::fill(yr + n, yr + Tk, T(0));
  }
}

// The backward of a row short enough for registers (see softmax_short_row): ds = scale y (dy -
// dy.y), in row_dot's order: a whole last batch fused into the sum, a part one rounded, masked and
// added. The part batch multiplies a masked g, not g itself: with both forms in one function,
// GCC 12 otherwise computes one product g y for both and splits the fused multiply-add into a
// multiply and an add, which moves the bits (1 ulp in dq and dk for rows of a whole number of
// batches). The mask after that product keeps GCC from fusing it into the add, as row_dot's
// mask does. d may be g.
template <class T, int NB>
void softmax_backward_short_row(T* d, const T* g, const T* y, T scale, int64_t n, int64_t Tk) {
  using B = detail::Batch<T>;
  constexpr int64_t W = B::size;
  const B zero(T(0));
  const auto last = detail::lanes_below<T>(n - (NB - 1) * W);
  B gb[NB], yb[NB];
  for (int k = 0; k < NB; ++k) gb[k] = B::load_unaligned(g + k * W), yb[k] = B::load_unaligned(y + k * W);
  B acc = zero;
  for (int k = 0; k < NB - 1; ++k) acc = xsimd::fma(gb[k], yb[k], acc);
  if (n == NB * W)
    acc = xsimd::fma(gb[NB - 1], yb[NB - 1], acc);
  else
    acc += xsimd::select(last, xsimd::select(last, gb[NB - 1], zero) * yb[NB - 1], zero);
  const B dot(xsimd::hadd(acc)), sb(scale);
  for (int k = 0; k < NB - 1; ++k) (sb * yb[k] * (gb[k] - dot)).store_unaligned(d + k * W);
  xsimd::select(last, sb * yb[NB - 1] * (gb[NB - 1] - dot), zero).store_unaligned(d + (NB - 1) * W);
  std::fill(d + NB * W, d + Tk, T(0));
}

// ds = scale * y * (dy - sum_j dy_j y_j), per row; zero wherever y is (the masked keys).
template <class T>
void masked_softmax_backward(T* ds, const T* dy, const T* y, T scale, int64_t R, int64_t Tq, int64_t Tk, bool causal) {
  for (int64_t r = 0; r < R; ++r) {
    const int64_t n = visible_keys(r % Tq, Tq, Tk, causal);
    const T* g = dy + r * Tk;
    const T* yr = y + r * Tk;
    T* d = ds + r * Tk;
    if (const int64_t nb = short_row_batches<T>(n, Tk)) {
      with_short_row_batches(nb, [&]<int NB>() { softmax_backward_short_row<T, NB>(d, g, yr, scale, n, Tk); });
      continue;
    }
    const T dot = detail::row_dot(g, yr, n, Tk);
    for (int64_t j = 0; j < n; ++j) d[j] = scale * yr[j] * (g[j] - dot);
    std::fill(d + n, d + Tk, T(0));
  }
}

// ------------------------------------------------------------------------------------------
// Dropout of the attention weights. a, dropped: (R, Tk) rows of (Tq, Tk) matrices.

// Inverted dropout in place: a = a * keep / (1 - p). Only the visible keys of each row draw (the
// causal upper triangle is zero anyway), two draws per 64 random bits, rows in order.
template <class T>
void weights_dropout_forward(T* a, double p, Generator& gen, int64_t R, int64_t Tq, int64_t Tk, bool causal) {
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
void weights_dropout_backward(T* g, const T* dropped, double p, int64_t n) {
  const T scale = static_cast<T>(1.0 / (1.0 - p));
  for (int64_t i = 0; i < n; ++i) g[i] = dropped[i] != T(0) ? g[i] * scale : T(0);
}

}  // namespace

// ------------------------------------------------------------------------------------------
// Attention masks as additive biases

Tensor additive_mask(const Tensor& masked, DType dtype) {
  HEED_CHECK(is_floating(dtype), "additive_mask: dtype must be float32 or float64, got ", dtype_name(dtype));
  return masked_fill(Tensor::zeros(masked.shape(), dtype), masked, -std::numeric_limits<double>::infinity());
}

namespace {

// `bias` as a detached view of `shape` (B, H, Tq, Tk) and `dtype` with a unit key stride: a copy
// only when the mask broadcasts along (or is strided over) the keys.
Tensor bias_view(const Tensor& bias, const Shape& shape, DType dtype, const char* op) {
  HEED_CHECK(is_floating(bias.dtype()), op, ": an attention bias must be float32 or float64 (a bool mask becomes ",
             "one with additive_mask), got ", dtype_name(bias.dtype()));
  HEED_CHECK(bias.dim() <= 4 && broadcast_shapes(bias.shape(), shape, op) == shape, op, ": attention mask ",
             to_string(bias.shape()), " does not broadcast to the scores ", to_string(shape));
  Tensor b = expand(bias.detach().to(dtype), shape);
  if (b.strides()[3] != 1 && shape[3] > 1) b = b.contiguous();
  return b;
}

// Head h of batch row b of a bias_view (none if `b` is undefined).
template <class T>
RowBias<T> head_bias(const Tensor& bias, int64_t b, int64_t h) {
  if (!bias.defined()) return {};
  const auto& st = bias.strides();
  return {bias.data<T>() + b * st[0] + h * st[1], st[2], st[1]};
}

}  // namespace

// ------------------------------------------------------------------------------------------
// attention_softmax

Tensor attention_softmax(const Tensor& scores, double scale, bool causal, const KeyPaddingMask* mask,
                         const Tensor& bias) {
  HEED_CHECK(scores.dim() == 4, "attention_softmax: scores must be (B, H, Tq, Tk), got ", to_string(scores.shape()));
  const int64_t B = scores.size(0), H = scores.size(1), Tq = scores.size(2), Tk = scores.size(3);
  check_mask(mask, B, Tk, "attention_softmax", scores.shape());
  const Tensor s = contiguous_data(scores);
  const Tensor bv = bias.defined() ? bias_view(bias, scores.shape(), scores.dtype(), "attention_softmax") : Tensor();
  Tensor out = Tensor::empty(scores.shape(), scores.dtype());
  visit_dtype(s.dtype(), [&]<class T>() {
    for (int64_t b = 0; b < B; ++b)
      masked_softmax_forward<T>(out.data<T>() + b * H * Tq * Tk, s.data<T>() + b * H * Tq * Tk,
                                mask ? mask->pad.data() + b * Tk : nullptr, static_cast<T>(scale), H * Tq, Tq, Tk,
                                causal, head_bias<T>(bv, b, 0));
  });
  // With a bias that requires grad, the backward also gives dz, the gradient of the biased
  // scores z = scale s + bias (then ds = scale dz): the bias's gradient is dz summed to its shape.
  const bool bias_grad = bias.defined() && bias.requires_grad();
  const Shape bias_shape = bias_grad ? bias.shape() : Shape{};
  const DType bias_dtype = bias_grad ? bias.dtype() : scores.dtype();
  return record("attention_softmax", out, {scores, bias},
                [y = out.detach(), scale, causal, bias_grad, bias_shape, bias_dtype](const Tensor& g) {
                  const int64_t Tq = y.size(2), Tk = y.size(3), R = Tk ? y.numel() / Tk : 0;  // no keys: no rows
                  Tensor ds = Tensor::empty(y.shape(), y.dtype());
                  Tensor dz = bias_grad ? Tensor::empty(y.shape(), y.dtype()) : Tensor();
                  visit_dtype(y.dtype(), [&]<class T>() {
                    if (!bias_grad) {
                      masked_softmax_backward<T>(ds.data<T>(), g.data<T>(), y.data<T>(), static_cast<T>(scale), R, Tq,
                                                 Tk, causal);
                      return;
                    }
                    masked_softmax_backward<T>(dz.data<T>(), g.data<T>(), y.data<T>(), T(1), R, Tq, Tk, causal);
                    for (int64_t i = 0; i < y.numel(); ++i) ds.data<T>()[i] = static_cast<T>(scale) * dz.data<T>()[i];
                  });
                  if (!bias_grad) return std::vector<Tensor>{ds, Tensor()};
                  return std::vector<Tensor>{ds, sum_to(dz, bias_shape).to(bias_dtype)};
                }, {out});
}

// ------------------------------------------------------------------------------------------
// attention_heads. q, k and v are read in place as (B, nh, T, hd) views of their projections
// (for fused qkv, three channel ranges of one (B, T, 3C) tensor); the output is written straight
// in the merged (B, Tq, C) layout, and the backward writes dq, dk, dv straight into one gradient
// per source tensor. Composing the same from slice/view/matmul ops costs a zero-filled (B, T, 3C)
// gradient per slice, their sums, and strided copies: several passes over memory per step.

namespace {

// Everything one call's kernels and its backward share.
struct HeadsCall {
  std::vector<Tensor> inputs;  // the op's distinct source tensors (q, k, v may share one); moved to the Node
  std::vector<Tensor> data;    // the same, detached, with a unit last stride
  std::array<size_t, 3> src{};     // role (0 q, 1 k, 2 v) -> index into data
  std::array<int64_t, 3> off{};    // role -> first channel in its source
  int64_t B = 0, Tq = 0, Tk = 0, nh = 0, hd = 0, C = 0;
  double scale = 1, p = 0;
  bool causal = false;
  std::optional<Bf16Kernel> bf16;  // float products in bf16 (autocast_bf16() at the call), else fp32
  Tensor att, dropped;  // (B, nh, Tq, Tk): the softmax weights, and the same after dropout
  Tensor bias;          // the attention mask as a bias_view (B, nh, Tq, Tk), or undefined

  int64_t visible(int64_t i) const { return visible_keys(i, Tq, Tk, causal); }
  // Key j is seen by the queries i >= first_query(j) (all of them without a causal mask).
  int64_t first_query(int64_t j) const { return causal ? std::max<int64_t>(0, j - (Tk - Tq)) : 0; }
  // Row stride of role r's source, and where head h of batch row b starts in it.
  int64_t ld(size_t r) const { return data[src[r]].strides()[1]; }
  template <class T>
  const T* head(size_t r, int64_t b, int64_t h) const {
    const Tensor& t = data[src[r]];
    return t.data<T>() + b * t.strides()[0] + off[r] + h * hd;
  }
  // Heads per parallel chunk: enough that a chunk's work (about Tq Tk hd multiply-adds) is worth
  // a hand-off to another thread (core/tuning.h).
  int64_t grain() const { return std::max<int64_t>(1, tuning().attention_grain_macs / std::max<int64_t>(1, Tq * Tk * hd)); }
};

// Row stride of a transposed (hd, Tk) head for a_bt: Tk rounded up to whole batches and lines,
// padded to an odd number of cache lines (core/tuning.h, alias_free_stride). Unpadded, T = 256
// gives rows exactly 1 KB apart, whose cache lines fall into a quarter of L1's sets and evict
// each other: 97 GFLOP/s instead of 137 on one core (heed_bench_kernels
// --benchmark_filter=attention_scores, the small config's head shape).
template <class T>
int64_t transposed_ld(int64_t Tk) { return alias_free_stride(Tk, detail::Batch<T>::size, sizeof(T)); }

// One head's weights: att (Tq, Tk) = masked softmax(scale q k^T). q, k rows stride ldq, ldk;
// kt: scratch of hd * transposed_ld(Tk) elements (not read when Tq == 1).
template <class T>
void head_weights_forward(T* att, const T* q, int64_t ldq, const T* k, int64_t ldk, const uint8_t* pad,
                          const RowBias<T>& bias, const HeadsCall& c, T* kt) {
  if (c.Tq == 1) {
    // One query (a KV-cached generation step): Tk dot products, each over a key row read in
    // place. Transposing the keys first, for the tiled kernel, cost more than the products.
    for (int64_t j = 0; j < c.visible(0); ++j) att[j] = detail::row_dot(q, k + j * ldk, c.hd);
  } else {
    const int64_t ldt = transposed_ld<T>(c.Tk);
    detail::kernels::transpose(kt, ldt, k, ldk, c.Tk, c.hd);
    detail::kernels::a_bt(att, c.Tk, q, ldq, kt, ldt, c.Tq, c.hd, [&](int64_t i) { return c.visible(i); });
  }
  masked_softmax_forward<T>(att, att, pad, static_cast<T>(c.scale), c.Tq, c.Tq, c.Tk, c.causal, bias);
}

// One head's output: out (Tq, hd), row stride C, = weights (Tq, Tk) @ v (rows stride ldv).
template <class T>
void head_values_forward(T* out, const T* weights, const T* v, int64_t ldv, const HeadsCall& c) {
  detail::kernels::p_v(out, c.C, weights, c.Tk, 1, v, ldv, c.Tq, c.hd,
                       [&](int64_t i) { return std::pair<int64_t, int64_t>{0, c.visible(i)}; });
}

// One head's backward, from dy (Tq, hd), row stride C. dq, dk, dv: that head's channels of the
// gradients of q's, k's and v's sources, row strides ldq_out, ldk_out, ldv_out (overwritten).
// vt: scratch of hd * transposed_ld(Tk) elements, ds: of Tq * Tk.
template <class T>
void head_backward(T* dq, int64_t ldq_out, T* dk, int64_t ldk_out, T* dv, int64_t ldv_out, const T* dy, const T* q,
                   const T* k, const T* v, const T* att, const T* dropped, const HeadsCall& c, T* vt, T* ds) {
  const int64_t ldt = transposed_ld<T>(c.Tk);
  auto visible_range = [&](int64_t i) { return std::pair<int64_t, int64_t>{0, c.visible(i)}; };
  auto seen_by = [&](int64_t j) { return std::pair<int64_t, int64_t>{c.first_query(j), c.Tq}; };
  // d(weights) = dy v^T, then through dropout and the softmax: d(scores), the scale folded in.
  detail::kernels::transpose(vt, ldt, v, c.ld(2), c.Tk, c.hd);
  detail::kernels::a_bt(ds, c.Tk, dy, c.C, vt, ldt, c.Tq, c.hd, [&](int64_t i) { return c.visible(i); });
  if (c.p > 0.0) weights_dropout_backward<T>(ds, dropped, c.p, c.Tq * c.Tk);
  masked_softmax_backward<T>(ds, ds, att, static_cast<T>(c.scale), c.Tq, c.Tq, c.Tk, c.causal);
  // dq = ds k; dk = ds^T q and dv = dropped^T dy, reading ds and the weights transposed in place.
  detail::kernels::p_v(dq, ldq_out, ds, c.Tk, 1, k, c.ld(1), c.Tq, c.hd, visible_range);
  detail::kernels::p_v(dk, ldk_out, ds, 1, c.Tk, q, c.ld(0), c.Tk, c.hd, seen_by);
  detail::kernels::p_v(dv, ldv_out, dropped, 1, c.Tk, dy, c.C, c.Tk, c.hd, seen_by);
}

// The call's shared state from the op's arguments, checked.
std::shared_ptr<HeadsCall> heads_call(const HeadInput& q, const HeadInput& k, const HeadInput& v, int64_t d_model,
                                      const AttentionHeadsOptions& o) {
  auto c = std::make_shared<HeadsCall>();
  const HeadInput* roles[3] = {&q, &k, &v};
  for (size_t r = 0; r < 3; ++r) {
    const Tensor& t = roles[r]->src;
    const int64_t off = roles[r]->offset;
    HEED_CHECK(t.dim() == 3 && off >= 0 && off + d_model <= t.size(2), "attention_heads: ", "qkv"[r],
               " needs channels [", off, ", ", off + d_model, ") of a (B, T, width) tensor, got ",
               to_string(t.shape()));
    // Roles share an input when they read disjoint channels of one tensor (a fused qkv); the
    // backward then writes each role's channels of one gradient. Overlapping roles (q = k = x)
    // get an input each, whose gradients the engine adds up as for any tensor used twice.
    auto shares = [&](size_t i) {
      if (!c->inputs[i].same(t)) return false;
      for (size_t e = 0; e < r; ++e)
        if (c->src[e] == i && off < c->off[e] + d_model && c->off[e] < off + d_model) return false;
      return true;
    };
    size_t i = 0;
    while (i < c->inputs.size() && !shares(i)) ++i;
    if (i == c->inputs.size()) {
      c->inputs.push_back(t);
      c->data.push_back(t.strides()[2] == 1 ? t.detach() : t.detach().contiguous());
    }
    c->src[r] = i;
    c->off[r] = off;
  }
  HEED_CHECK(o.n_head > 0 && d_model % o.n_head == 0, "attention_heads: d_model ", d_model,
             " is not divisible into n_head ", o.n_head, " heads");
  HEED_CHECK(o.dropout == 0.0 || (o.dropout > 0.0 && o.dropout < 1.0 && o.gen), "attention_heads: dropout ",
             o.dropout, " must be in [0, 1), with a generator when > 0");
  const Tensor& qd = c->data[c->src[0]];
  const Tensor& kd = c->data[c->src[1]];
  const Tensor& vd = c->data[c->src[2]];
  HEED_CHECK(qd.dtype() == kd.dtype() && qd.dtype() == vd.dtype() && qd.size(0) == kd.size(0) &&
                 kd.size(0) == vd.size(0) && kd.size(1) == vd.size(1),
             "attention_heads: q ", to_string(qd.shape()), ", k ", to_string(kd.shape()), " and v ",
             to_string(vd.shape()), " disagree on dtype, batch or key count");
  c->B = qd.size(0), c->Tq = qd.size(1), c->Tk = kd.size(1);
  c->nh = o.n_head, c->hd = d_model / o.n_head, c->C = d_model;
  c->scale = o.scale, c->causal = o.causal, c->p = o.dropout;
  if (qd.dtype() == DType::f32) c->bf16 = autocast_bf16();
  check_mask(o.key_padding, c->B, c->Tk, "attention_heads", kd.shape());
  if (o.bias.defined()) {
    // The fused backward has no gradient for the mask; attention_softmax's has.
    HEED_CHECK(!(o.bias.requires_grad() && grad_mode_enabled()),
               "attention_heads: the attention bias requires grad, which this op does not compute; compose with "
               "attention_softmax instead");
    c->bias = bias_view(o.bias, {c->B, c->nh, c->Tq, c->Tk}, qd.dtype(), "attention_heads");
  }
  return c;
}

// ------------------------------------------------------------------------------------------
// The same under bf16 autocast (float only): every head's products are gemm_bf16_batched calls
// over the whole (B, nh) grid, the masked softmax and dropout stay fp32 between them. The causal
// mask becomes the products' skips (diagonal Tk - Tq): scores above it are not computed (the
// softmax never reads them) and the weights' zeros above it are not read.

// Head (b, h) of role r's source as a batched operand.
Bf16Operand bf16_head(const HeadsCall& c, size_t r, bool trans) {
  const Tensor& t = c.data[c.src[r]];
  return {t.data<float>() + c.off[r], t.strides()[1], trans, t.strides()[0], c.hd};
}
// A (B, nh, Tq, Tk) tensor of per-head matrices (weights or their gradient).
Bf16Operand bf16_weights(const Tensor& w, const HeadsCall& c, bool trans) {
  return {w.data<float>(), c.Tk, trans, c.nh * c.Tq * c.Tk, c.Tq * c.Tk};
}
GemmBf16Options bf16_options(const HeadsCall& c, Bf16Skip skip, int64_t diagonal) {
  return {*c.bf16, c.causal ? skip : Bf16Skip::none, diagonal};
}
// Heads per parallel chunk of the fp32 work between the products (about Tq Tk elements a head).
int64_t row_grain(const HeadsCall& c) { return std::max<int64_t>(1, tuning().row_grain_elems / std::max<int64_t>(1, c.Tq * c.Tk)); }

Tensor attention_heads_forward_bf16(HeadsCall& c, const KeyPaddingMask* mask, Generator* gen) {
  c.att = Tensor::empty({c.B, c.nh, c.Tq, c.Tk});
  Tensor out = Tensor::empty({c.B, c.Tq, c.C});
  const int64_t diagonal = c.Tk - c.Tq;
  gemm_bf16_batched(c.B, c.nh, c.Tq, c.Tk, c.hd, bf16_head(c, 0, false), bf16_head(c, 1, true), 0.0f,
                    {c.att.data<float>(), c.Tk, c.nh * c.Tq * c.Tk, c.Tq * c.Tk},
                    bf16_options(c, Bf16Skip::c_above, diagonal));
  parallel_for(c.B * c.nh, row_grain(c), [&](int64_t begin, int64_t end) {
    for (int64_t bh = begin; bh < end; ++bh) {
      float* att = c.att.data<float>() + bh * c.Tq * c.Tk;
      masked_softmax_forward<float>(att, att, mask ? mask->pad.data() + bh / c.nh * c.Tk : nullptr,
                                    static_cast<float>(c.scale), c.Tq, c.Tq, c.Tk, c.causal,
                                    head_bias<float>(c.bias, bh / c.nh, bh % c.nh));
    }
  });
  c.dropped = c.att;
  if (c.p > 0.0) {  // one generator, drawn row after row: serial
    c.dropped = c.att.clone();
    weights_dropout_forward<float>(c.dropped.data<float>(), c.p, *gen, c.B * c.nh * c.Tq, c.Tq, c.Tk, c.causal);
  }
  gemm_bf16_batched(c.B, c.nh, c.Tq, c.hd, c.Tk, bf16_weights(c.dropped, c, false), bf16_head(c, 2, false), 0.0f,
                    {out.data<float>(), c.C, c.Tq * c.C, c.hd}, bf16_options(c, Bf16Skip::a_above, diagonal));
  return out;
}

// Head by head, as the fp32 path: one head's score gradient (Tq x Tk) is written, put through
// dropout and the softmax, and read by dq and dk while it is in cache (whole-tensor batched
// products would stream all B nh of them through memory between the steps).
void attention_heads_backward_bf16(const HeadsCall& c, const Tensor& g, std::vector<Tensor>& grads) {
  const int64_t diagonal = c.Tk - c.Tq;
  const GemmBf16Options above = bf16_options(c, Bf16Skip::a_above, diagonal);
  const GemmBf16Options below = bf16_options(c, Bf16Skip::a_below, -diagonal);
  const GemmBf16Options scores = bf16_options(c, Bf16Skip::c_above, diagonal);
  auto head = [&](size_t r, int64_t b, int64_t h) { return c.head<float>(r, b, h); };
  auto grad_head = [&](size_t r, int64_t b, int64_t h) {
    const Tensor& t = grads[c.src[r]];
    return t.data<float>() + b * t.size(1) * t.size(2) + c.off[r] + h * c.hd;
  };
  auto grad_ld = [&](size_t r) { return grads[c.src[r]].size(2); };
  parallel_for(c.B * c.nh, c.grain(), [&](int64_t begin, int64_t end) {
    std::vector<float> ds(static_cast<size_t>(c.Tq * c.Tk));
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / c.nh, h = bh % c.nh, at = bh * c.Tq * c.Tk;
      const float* dy = g.data<float>() + b * c.Tq * c.C + h * c.hd;
      const float* dropped = c.dropped.data<float>() + at;
      // d(weights) = dy v^T, then through dropout and the softmax: d(scores), the scale folded in.
      gemm_bf16(false, true, c.Tq, c.Tk, c.hd, dy, c.C, head(2, b, h), c.ld(2), 0.0f, ds.data(), c.Tk, scores);
      if (c.p > 0.0) weights_dropout_backward<float>(ds.data(), dropped, c.p, c.Tq * c.Tk);
      masked_softmax_backward<float>(ds.data(), ds.data(), c.att.data<float>() + at, static_cast<float>(c.scale), c.Tq,
                                     c.Tq, c.Tk, c.causal);
      // dq = ds k; dk = ds^T q and dv = dropped^T dy.
      gemm_bf16(false, false, c.Tq, c.hd, c.Tk, ds.data(), c.Tk, head(1, b, h), c.ld(1), 0.0f, grad_head(0, b, h),
                grad_ld(0), above);
      gemm_bf16(true, false, c.Tk, c.hd, c.Tq, ds.data(), c.Tk, head(0, b, h), c.ld(0), 0.0f, grad_head(1, b, h),
                grad_ld(1), below);
      gemm_bf16(true, false, c.Tk, c.hd, c.Tq, dropped, c.Tk, dy, c.C, 0.0f, grad_head(2, b, h), grad_ld(2), below);
    }
  });
}

// Every head's forward: fills c.att and c.dropped, returns the output (B, Tq, C).
Tensor attention_heads_forward(HeadsCall& c, const KeyPaddingMask* mask, Generator* gen) {
  if (c.bf16) return attention_heads_forward_bf16(c, mask, gen);
  const DType dtype = c.data[0].dtype();
  c.att = Tensor::empty({c.B, c.nh, c.Tq, c.Tk}, dtype);
  Tensor out = Tensor::empty({c.B, c.Tq, c.C}, dtype);
  visit_dtype(dtype, [&]<class T>() {
    // The transposed keys' scratch; a single query reads the keys in place and needs none.
    auto scratch = [&] { return std::vector<T>(c.Tq == 1 ? 0 : static_cast<size_t>(c.hd * transposed_ld<T>(c.Tk))); };
    auto weights = [&](int64_t bh, T* kt) {
      const int64_t b = bh / c.nh, h = bh % c.nh;
      head_weights_forward<T>(c.att.data<T>() + bh * c.Tq * c.Tk, c.head<T>(0, b, h), c.ld(0), c.head<T>(1, b, h),
                              c.ld(1), mask ? mask->pad.data() + b * c.Tk : nullptr, head_bias<T>(c.bias, b, h), c, kt);
    };
    auto values = [&](int64_t bh) {
      const int64_t b = bh / c.nh, h = bh % c.nh;
      head_values_forward<T>(out.data<T>() + b * c.Tq * c.C + h * c.hd, c.dropped.data<T>() + bh * c.Tq * c.Tk,
                             c.head<T>(2, b, h), c.ld(2), c);
    };
    c.dropped = c.att;
    if (c.p == 0.0) {
      // Without dropout a head's weights go straight into its weighted sum, read back from L1
      // (16 KB at T = 64), in one pass over the heads.
      parallel_for(c.B * c.nh, c.grain(), [&](int64_t begin, int64_t end) {
        std::vector<T> kt = scratch();
        for (int64_t bh = begin; bh < end; ++bh) {
          weights(bh, kt.data());
          values(bh);
        }
      });
      return;
    }
    parallel_for(c.B * c.nh, c.grain(), [&](int64_t begin, int64_t end) {
      std::vector<T> kt = scratch();
      for (int64_t bh = begin; bh < end; ++bh) weights(bh, kt.data());
    });
    // One generator, drawn row after row: serial, between the two passes.
    c.dropped = c.att.clone();
    weights_dropout_forward<T>(c.dropped.data<T>(), c.p, *gen, c.B * c.nh * c.Tq, c.Tq, c.Tk, c.causal);
    parallel_for(c.B * c.nh, c.grain(), [&](int64_t begin, int64_t end) {
      for (int64_t bh = begin; bh < end; ++bh) values(bh);
    });
  });
  return out;
}

// The gradients of every source tensor from the output's gradient g (B, Tq, C).
std::vector<Tensor> attention_heads_backward(const HeadsCall& c, const Tensor& g) {
  std::vector<Tensor> grads(c.data.size());
  for (size_t i = 0; i < c.data.size(); ++i) {
    int64_t covered = 0;  // channels of this source that some role reads
    for (size_t r = 0; r < 3; ++r) covered += c.src[r] == i ? c.C : 0;
    const Shape& shape = c.data[i].shape();
    // Fully covered (fused qkv, or a plain projection): every element is written below.
    grads[i] = covered == shape[2] ? Tensor::empty(shape, g.dtype()) : Tensor::zeros(shape, g.dtype());
  }
  if (c.bf16) {
    attention_heads_backward_bf16(c, g, grads);
    return grads;
  }
  visit_dtype(g.dtype(), [&]<class T>() {
    // Role r's channels of head h, batch row b, in its source's gradient (B, T, width), and its row stride.
    auto grad_head = [&](size_t r, int64_t b, int64_t h) {
      const Tensor& t = grads[c.src[r]];
      return t.data<T>() + b * t.size(1) * t.size(2) + c.off[r] + h * c.hd;
    };
    auto grad_ld = [&](size_t r) { return grads[c.src[r]].size(2); };
    // Heads are independent, and each writes its own channels of dq, dk, dv: split them.
    parallel_for(c.B * c.nh, c.grain(), [&](int64_t begin, int64_t end) {
      std::vector<T> vt(static_cast<size_t>(c.hd * transposed_ld<T>(c.Tk)));
      std::vector<T> ds(static_cast<size_t>(c.Tq * c.Tk));
      for (int64_t bh = begin; bh < end; ++bh) {
        const int64_t b = bh / c.nh, h = bh % c.nh, head = bh * c.Tq * c.Tk;
        head_backward<T>(grad_head(0, b, h), grad_ld(0), grad_head(1, b, h), grad_ld(1), grad_head(2, b, h),
                         grad_ld(2), g.data<T>() + b * c.Tq * c.C + h * c.hd, c.head<T>(0, b, h), c.head<T>(1, b, h),
                         c.head<T>(2, b, h), c.att.data<T>() + head, c.dropped.data<T>() + head, c, vt.data(),
                         ds.data());
      }
    });
  });
  return grads;
}

}  // namespace

Tensor attention_heads(const HeadInput& q, const HeadInput& k, const HeadInput& v, int64_t d_model,
                       const AttentionHeadsOptions& o) {
  std::shared_ptr<HeadsCall> c = heads_call(q, k, v, d_model, o);
  Tensor out = attention_heads_forward(*c, o.key_padding, o.gen);
  if (o.weights) *o.weights = c->att;
  std::vector<Tensor> inputs = std::move(c->inputs);  // the Node keeps them; the backward needs only data
  // The backward reads the sources, and the weights (which o.weights hands to the caller); none
  // are noted without grad mode (the KV cache's generation, a token at a time).
  std::vector<Tensor> saved;
  if (grad_mode_enabled()) {
    saved = c->data;
    saved.push_back(c->att);
    saved.push_back(c->dropped);
  }
  return record("attention_heads", out, std::move(inputs), [c = std::shared_ptr<const HeadsCall>(std::move(c))](
                                                               const Tensor& g) { return attention_heads_backward(*c, g); },
                saved);
}

}  // namespace heed
