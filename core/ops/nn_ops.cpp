// Neural-network ops: embedding, masked_fill, cross_entropy, dropout and layer_norm.
//
// cross_entropy and layer_norm are fused llm.c-style kernel pairs (forward/backward over
// contiguous rows, with shape comments); their autograd wrappers, further down, keep the small
// per-row caches (max and 1/sum; mean and rstd) the backward needs. Row reductions go through the
// SIMD primitives of simd_rows.h (their precision is stated there).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "core/autograd.h"
#include "core/ops.h"
#include "core/ops/simd_rows.h"
#include "core/ops/strided.h"
#include "core/parallel.h"
#include "core/random.h"
#include "core/tuning.h"

namespace heed {

namespace {

using detail::Batch;
using detail::contiguous_data;
using detail::row_max;
using detail::row_sq_dev;
using detail::row_sum;

// Strides of a mask of shape `ms` (row-major, contiguous) seen with shape `out`: right-aligned,
// 0 on broadcast axes. Throws, naming the shapes, unless `ms` broadcasts to `out`.
Shape mask_strides(const Shape& ms, const Shape& out, const char* op) {
  HEED_CHECK(ms.size() <= out.size(), op, ": mask of shape ", to_string(ms),
             " cannot be broadcast to the input's shape ", to_string(out));
  const Shape cs = contiguous_strides(ms);
  Shape st(out.size(), 0);
  const size_t lead = out.size() - ms.size();
  for (size_t i = 0; i < ms.size(); ++i) {
    HEED_CHECK(ms[i] == out[lead + i] || ms[i] == 1, op, ": mask of shape ", to_string(ms),
               " cannot be broadcast to the input's shape ", to_string(out));
    st[lead + i] = ms[i] == 1 ? 0 : cs[i];
  }
  return st;
}

// ------------------------------------------------------------------------------------------
// cross_entropy. x: (N, C) logits; targets: (N); rmax, rinv: (N), the max of each non-ignored
// row and 1 / sum(exp(x - max)) (ignored rows are left untouched). Returns the summed loss of the
// non-ignored rows. The pair (max, 1/sum) is the lse split in two: the backward's exp(x - max) then
// stays exact for logits around 1e4, where a float32 lse would carry an absolute error of 5e-4.

template <class T>
double cross_entropy_forward(T* rmax, T* rinv, const T* x, const int32_t* targets, int32_t ignore_index,
                             int64_t N, int64_t C) {
  double loss = 0;
  for (int64_t r = 0; r < N; ++r) {
    if (targets[r] == ignore_index) continue;
    const T* xr = x + r * C;
    // The max keeps exp from overflowing: logits of 1e4 would give inf / inf.
    const T m = row_max(xr, C);
    const double s = detail::row_exp_sum<T>(nullptr, xr, T(1), m, C);
    rmax[r] = m;
    rinv[r] = static_cast<T>(1.0 / s);
    loss += static_cast<double>(m) + std::log(s) - static_cast<double>(xr[targets[r]]);
  }
  return loss;
}

// dx = (softmax(x) - onehot(target)) * scale per row, zero rows for ignored targets. The softmax
// is recomputed, one exp per element, instead of keeping (N, C) probabilities alive between the
// passes (1.6 GB for a GPT-2 batch of 8 x 1024 tokens).
template <class T>
void cross_entropy_backward(T* dx, const T* x, const T* rmax, const T* rinv, const int32_t* targets,
                            int32_t ignore_index, T scale, int64_t N, int64_t C) {
  constexpr int64_t W = Batch<T>::size;
  for (int64_t r = 0; r < N; ++r) {
    T* d = dx + r * C;
    if (targets[r] == ignore_index) {
      std::fill(d, d + C, T(0));
      continue;
    }
    const T* xr = x + r * C;
    const T m = rmax[r], f = rinv[r] * scale;
    const Batch<T> mb(m), fb(f);
    int64_t i = 0;
    for (; i + W <= C; i += W) (detail::exp_lanes(Batch<T>::load_unaligned(xr + i) - mb) * fb).store_unaligned(d + i);
    for (; i < C; ++i) d[i] = std::exp(xr[i] - m) * f;
    d[targets[r]] -= scale;
  }
}

// ------------------------------------------------------------------------------------------
// layer_norm. x, out, dy, dx: (N, C); w, b, dw, db: (C) or null; mean, rstd: (N).
// out = (x - mean) * rstd * w + b with the biased variance, as torch.

// Elements per parallel chunk of a row-wise kernel: tuning().row_grain_elems, about 10 us of
// memory-bound work at this core's streaming rate, which outweighs a hand-off to the pool's
// spinning workers (core/tuning.h). (Baby's layer norms, 98 K elements, went from 1.16 to 0.70
// ms/iter with a 2^15 grain against 2^18, which kept them on one thread; tiny's, 16 K elements,
// split only from 2^13.)

template <class T>
void layer_norm_forward(T* out, T* mean, T* rstd, const T* x, const T* w, const T* b, int64_t N, int64_t C,
                        T eps) {
  parallel_for(N, std::max<int64_t>(1, tuning().row_grain_elems / std::max<int64_t>(C, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * C;
      T* o = out + r * C;
      const T m = row_sum(xr, C) / static_cast<T>(C);
      const T s = T(1) / std::sqrt(row_sq_dev(xr, m, C) / static_cast<T>(C) + eps);
      mean[r] = m;
      rstd[r] = s;
      if (w && b) {
        for (int64_t i = 0; i < C; ++i) o[i] = (xr[i] - m) * s * w[i] + b[i];
      } else if (w) {
        for (int64_t i = 0; i < C; ++i) o[i] = (xr[i] - m) * s * w[i];
      } else if (b) {
        for (int64_t i = 0; i < C; ++i) o[i] = (xr[i] - m) * s + b[i];
      } else {
        for (int64_t i = 0; i < C; ++i) o[i] = (xr[i] - m) * s;
      }
    }
  });
}

// With norm = (x - mean) * rstd and dnorm = dy * w:
//   dx = (dnorm - mean(dnorm) - norm * mean(dnorm * norm)) * rstd,
//   dw = sum over rows of dy * norm, db = sum over rows of dy.
// Two passes: the two means of every row of a block, then dx, dw and db together; norm is
// recomputed, not stored. dw and db (either may be null) gather N rows each, so they accumulate in
// double, per block of kBlockRows rows (blocks run in parallel) and then over blocks in order: the
// same bits on any thread count.
template <class T>
void layer_norm_backward(T* dx, T* dw, T* db, const T* dy, const T* x, const T* w, const T* mean,
                         const T* rstd, int64_t N, int64_t C) {
  constexpr int64_t W = Batch<T>::size;
  constexpr int64_t kBlockRows = 64;  // fixes the order of dw's and db's sums: not tuning (core/tuning.h)
  // A null w is a weight of ones: one code path, and C extra reads per row are noise next to x, dy.
  std::vector<T> ones(w ? 0 : C, T(1));
  if (!w) w = ones.data();
  const int64_t blocks = (N + kBlockRows - 1) / kBlockRows;
  // db's sums only with a bias: without one (nanoGPT's --no-bias) they would be allocated, zeroed
  // and added up for nothing on every call.
  // At least one block's sums: with no rows (an empty batch) dw and db are zeros, as torch's.
  std::vector<double> dw_acc(std::max<int64_t>(blocks, 1) * C, 0.0), db_acc(db ? std::max<int64_t>(blocks, 1) * C : 0, 0.0);
  parallel_for_blocks(N, kBlockRows, tuning().row_grain_elems / std::max<int64_t>(C, 1), [&](int64_t r0, int64_t r1) {
    double* pw = dw_acc.data() + r0 / kBlockRows * C;
    double* pb = db ? db_acc.data() + r0 / kBlockRows * C : nullptr;
    T mean_dn[kBlockRows], mean_dn_norm[kBlockRows];
    for (int64_t r = r0; r < r1; ++r) {
      const T* g = dy + r * C;
      const T* xr = x + r * C;
      const T m = mean[r], s = rstd[r];
      const Batch<T> mb(m), sb(s);
      Batch<T> a0(T(0)), a1(T(0));
      int64_t i = 0;
      for (; i + W <= C; i += W) {
        const Batch<T> dv = Batch<T>::load_unaligned(g + i) * Batch<T>::load_unaligned(w + i);
        const Batch<T> nv = (Batch<T>::load_unaligned(xr + i) - mb) * sb;
        a0 += dv;
        a1 = xsimd::fma(dv, nv, a1);
      }
      T sum_dn = xsimd::hadd(a0), sum_dn_norm = xsimd::hadd(a1);
      for (; i < C; ++i) {
        sum_dn += g[i] * w[i];
        sum_dn_norm += g[i] * w[i] * ((xr[i] - m) * s);
      }
      mean_dn[r - r0] = sum_dn / static_cast<T>(C);
      mean_dn_norm[r - r0] = sum_dn_norm / static_cast<T>(C);
    }
    // dx, dw and db down the block's rows, one batch of W columns at a time: the columns' double
    // sums stay in registers through the block instead of being loaded and stored for every row
    // (at C = 128 those loads and stores were most of the op's time: the backward took 87-93 us
    // at baby's shape with a bias on one core, 59-67 us so: docs/performance.md). Each column
    // still adds its rows in order, so the bits are a row-by-row loop's. Without a bias (kDb
    // false) db's sums are skipped.
    using D = xsimd::batch<double>;
    constexpr int64_t WD = D::size, ND = W / WD;  // double batches per batch of T (T float: 2)
    // The captured pointers as locals: through the lambda's references GCC reloads each of them
    // after every store to dx (the store might have changed them).
    const T *const dy_ = dy, *const x_ = x, *const w_ = w, *const mean_ = mean, *const rstd_ = rstd;
    T* const dx_ = dx;
    int64_t k0 = 0;
    auto whole_batches = [&]<bool kDb>() {
      for (; k0 + W <= C; k0 += W) {
        D acc_w[ND], acc_b[ND];
        for (int64_t h = 0; h < ND; ++h) {
          acc_w[h] = D::load_unaligned(pw + k0 + h * WD);
          if constexpr (kDb) acc_b[h] = D::load_unaligned(pb + k0 + h * WD);
        }
        const Batch<T> wk = Batch<T>::load_unaligned(w_ + k0);
        for (int64_t r = r0; r < r1; ++r) {
          const Batch<T> gk = Batch<T>::load_unaligned(dy_ + r * C + k0);
          const Batch<T> nk = (Batch<T>::load_unaligned(x_ + r * C + k0) - Batch<T>(mean_[r])) * Batch<T>(rstd_[r]);
          ((gk * wk - Batch<T>(mean_dn[r - r0]) - nk * Batch<T>(mean_dn_norm[r - r0])) * Batch<T>(rstd_[r]))
              .store_unaligned(dx_ + r * C + k0);
          // To double lane by lane, as the scalar loop below casts (GCC keeps this in registers).
          alignas(64) T prod[W], grad[W];
          (gk * nk).store_aligned(prod);
          if constexpr (kDb) gk.store_aligned(grad);
          for (int64_t h = 0; h < ND; ++h) {
            acc_w[h] += D::load_unaligned(prod + h * WD);
            if constexpr (kDb) acc_b[h] += D::load_unaligned(grad + h * WD);
          }
        }
        for (int64_t h = 0; h < ND; ++h) {
          acc_w[h].store_unaligned(pw + k0 + h * WD);
          if constexpr (kDb) acc_b[h].store_unaligned(pb + k0 + h * WD);
        }
      }
    };
    if (db)
      whole_batches.template operator()<true>();
    else
      whole_batches.template operator()<false>();
    for (int64_t r = r0; r < r1; ++r) {  // the columns past the last whole batch
      const T* g = dy + r * C;
      const T* xr = x + r * C;
      T* d = dx + r * C;
      const T m = mean[r], s = rstd[r];
      for (int64_t k = k0; k < C; ++k) {
        const T nk = (xr[k] - m) * s;
        d[k] = (g[k] * w[k] - mean_dn[r - r0] - nk * mean_dn_norm[r - r0]) * s;
        pw[k] += static_cast<double>(g[k] * nk);
        if (pb) pb[k] += static_cast<double>(g[k]);
      }
    }
  });
  for (int64_t blk = 1; blk < blocks; ++blk)
    for (int64_t k = 0; k < C; ++k) {
      dw_acc[k] += dw_acc[blk * C + k];
      if (db) db_acc[k] += db_acc[blk * C + k];
    }
  if (dw)
    for (int64_t k = 0; k < C; ++k) dw[k] = static_cast<T>(dw_acc[k]);
  if (db)
    for (int64_t k = 0; k < C; ++k) db[k] = static_cast<T>(db_acc[k]);
}

}  // namespace

// ------------------------------------------------------------------------------------------
// embedding

Tensor embedding(const Tensor& weight, const std::vector<int32_t>& ids, const Shape& ids_shape) {
  HEED_CHECK(weight.dim() == 2, "embedding: weight must be (V, C), got ", to_string(weight.shape()));
  HEED_CHECK(static_cast<int64_t>(ids.size()) == numel_of(ids_shape), "embedding: ", ids.size(),
             " ids do not fill ids_shape ", to_string(ids_shape));
  const int64_t V = weight.size(0), C = weight.size(1);
  for (size_t i = 0; i < ids.size(); ++i)
    HEED_CHECK(ids[i] >= 0 && ids[i] < V, "embedding: id ", ids[i], " at position ", i,
               " is out of range for ", V, " embeddings (weight ", to_string(weight.shape()), ")");
  Shape out_shape = ids_shape;
  out_shape.push_back(C);
  const Tensor w = contiguous_data(weight);
  Tensor out = Tensor::empty(out_shape, weight.dtype());
  visit_dtype(weight.dtype(), [&]<class T>() {
    const T* pw = w.data<T>();
    T* po = out.data<T>();
    for (size_t i = 0; i < ids.size(); ++i) std::memcpy(po + i * C, pw + ids[i] * C, C * sizeof(T));
  });
  auto saved = std::make_shared<const std::vector<int32_t>>(ids);
  return record("embedding", out, {weight}, [saved, V, C, dtype = weight.dtype()](const Tensor& g) {
    // Scatter-add: a repeated id gathers the gradient of every position that used it.
    Tensor dw = Tensor::zeros({V, C}, dtype);
    visit_dtype(dtype, [&]<class T>() {
      const T* pg = g.data<T>();
      T* pd = dw.data<T>();
      for (size_t i = 0; i < saved->size(); ++i) {
        const T* gr = pg + i * C;
        T* dr = pd + (*saved)[i] * C;
        for (int64_t k = 0; k < C; ++k) dr[k] += gr[k];
      }
    });
    return std::vector<Tensor>{dw};
  });
}

// ------------------------------------------------------------------------------------------
// masked_fill

Tensor masked_fill(const Tensor& a, const std::vector<uint8_t>& mask, const Shape& mask_shape, double value) {
  HEED_CHECK(static_cast<int64_t>(mask.size()) == numel_of(mask_shape), "masked_fill: ", mask.size(),
             " mask bytes do not fill mask shape ", to_string(mask_shape));
  const Shape& shape = a.shape();
  const Shape ms = mask_strides(mask_shape, shape, "masked_fill");
  const Shape os = contiguous_strides(shape);
  Tensor out = Tensor::empty(shape, a.dtype());
  auto saved = std::make_shared<const std::vector<uint8_t>>(mask);
  visit_dtype(a.dtype(), [&]<class T>() {
    const T v = static_cast<T>(value);
    const T* pa = static_cast<const T*>(a.storage()->data());
    const uint8_t* pm = saved->data();
    T* po = out.data<T>();
    if (mask_shape == shape && a.is_contiguous()) {
      const T* x = pa + a.offset();
      for (int64_t i = 0, n = a.numel(); i < n; ++i) po[i] = pm[i] ? v : x[i];
      return;
    }
    const int64_t sa = shape.empty() ? 0 : a.strides().back(), sm = ms.empty() ? 0 : ms.back();
    detail::for_each_row<3>(shape, {&a.strides(), &ms, &os}, {a.offset(), 0, 0},
                            [&](int64_t len, const std::array<int64_t, 3>& off) {
                              const T* ra = pa + off[0];
                              const uint8_t* rm = pm + off[1];
                              T* ro = po + off[2];
                              for (int64_t i = 0; i < len; ++i) ro[i] = rm[i * sm] ? v : ra[i * sa];
                            });
  });
  return record("masked_fill", out, {a}, [saved, ms, shape, dtype = a.dtype()](const Tensor& g) {
    Tensor dx = Tensor::empty(shape, dtype);
    const Shape os = contiguous_strides(shape);
    visit_dtype(dtype, [&]<class T>() {
      const T* pg = g.data<T>();
      const uint8_t* pm = saved->data();
      T* pd = dx.data<T>();
      const int64_t sm = ms.empty() ? 0 : ms.back();
      detail::for_each_row<2>(shape, {&ms, &os}, {0, 0}, [&](int64_t len, const std::array<int64_t, 2>& off) {
        const uint8_t* rm = pm + off[0];
        for (int64_t i = 0; i < len; ++i) pd[off[1] + i] = rm[i * sm] ? T(0) : pg[off[1] + i];
      });
    });
    return std::vector<Tensor>{dx};
  });
}

// ------------------------------------------------------------------------------------------
// cross_entropy

// The targets of logits (N, C) checked, one per row, each a class or ignore_index; returns how
// many are not ignored (the mean's divisor).
static int64_t count_valid_targets(const Tensor& logits, const std::vector<int32_t>& targets, int32_t ignore_index) {
  const int64_t N = logits.size(0), C = logits.size(1);
  HEED_CHECK(static_cast<int64_t>(targets.size()) == N, "cross_entropy: ", targets.size(),
             " targets for logits ", to_string(logits.shape()));
  int64_t n_valid = 0;
  for (int64_t r = 0; r < N; ++r) {
    const int32_t t = targets[r];
    if (t == ignore_index) continue;
    HEED_CHECK(t >= 0 && t < C, "cross_entropy: target ", t, " in row ", r, " is out of range for ", C,
               " classes (logits ", to_string(logits.shape()), ", ignore_index ", ignore_index, ")");
    ++n_valid;
  }
  return n_valid;
}

Tensor cross_entropy(const Tensor& logits, const std::vector<int32_t>& targets, int32_t ignore_index) {
  HEED_CHECK(logits.dim() == 2, "cross_entropy: logits must be (N, C), got ", to_string(logits.shape()));
  const int64_t N = logits.size(0), C = logits.size(1);
  const int64_t n_valid = count_valid_targets(logits, targets, ignore_index);
  const Tensor x = contiguous_data(logits);
  const DType dtype = logits.dtype();
  Tensor rmax = Tensor::empty({N}, dtype), rinv = Tensor::empty({N}, dtype);
  const double total = visit_dtype(dtype, [&]<class T>() {
    return cross_entropy_forward<T>(rmax.data<T>(), rinv.data<T>(), x.data<T>(), targets.data(), ignore_index, N, C);
  });
  // Every target ignored: 0 / 0, NaN, as torch's mean reduction gives.
  Tensor out = Tensor::scalar(total / static_cast<double>(n_valid), dtype);
  auto saved = std::make_shared<const std::vector<int32_t>>(targets);
  return record("cross_entropy", out, {logits},
                [x = x.detach(), rmax, rinv, saved, ignore_index, n_valid, N, C](const Tensor& g) {
                  Tensor dx = Tensor::empty({N, C}, x.dtype());
                  // With no valid row nothing depends on the logits: a zero gradient, not NaN.
                  const double scale = n_valid ? g.item() / static_cast<double>(n_valid) : 0.0;
                  visit_dtype(x.dtype(), [&]<class T>() {
                    cross_entropy_backward<T>(dx.data<T>(), x.data<T>(), rmax.data<T>(), rinv.data<T>(), saved->data(),
                                              ignore_index, static_cast<T>(scale), N, C);
                  });
                  return std::vector<Tensor>{dx};
                }, {x});
}

// ------------------------------------------------------------------------------------------
// mse_loss: composed (a difference, its square, a mean), so its gradient is theirs.

Tensor mse_loss(const Tensor& input, const Tensor& target) {
  HEED_CHECK(input.shape() == target.shape(), "mse_loss: input ", to_string(input.shape()), " and target ",
             to_string(target.shape()), " differ in shape");
  const Tensor d = input - target;
  return mean(d * d);
}

// ------------------------------------------------------------------------------------------
// dropout

Tensor dropout(const Tensor& a, double p, Generator& gen) {
  HEED_CHECK(p >= 0.0 && p < 1.0, "dropout: p must be in [0, 1), got ", p);
  if (p == 0.0) return a;
  const Tensor x = contiguous_data(a);
  const int64_t n = x.numel();
  // One draw per element in row-major order, so a reseeded generator reproduces the mask.
  auto keep = std::make_shared<std::vector<uint8_t>>(n);
  uint8_t* k = keep->data();
  for (int64_t i = 0; i < n; ++i) k[i] = gen.uniform() >= p;
  const double scale = 1.0 / (1.0 - p);
  Tensor out = Tensor::empty(a.shape(), a.dtype());
  visit_dtype(a.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    T* po = out.data<T>();
    const T s = static_cast<T>(scale);
    // Kept elements are exactly x * s (k is 0 or 1, and 1 * s == s).
    for (int64_t i = 0; i < n; ++i) po[i] = px[i] * (static_cast<T>(k[i]) * s);
  });
  return record("dropout", out, {a}, [keep = std::shared_ptr<const std::vector<uint8_t>>(keep), scale,
                                      shape = a.shape(), dtype = a.dtype()](const Tensor& g) {
    Tensor dx = Tensor::empty(shape, dtype);
    visit_dtype(dtype, [&]<class T>() {
      const T* pg = g.data<T>();
      const uint8_t* pk = keep->data();
      T* pd = dx.data<T>();
      const T s = static_cast<T>(scale);
      for (int64_t i = 0, m = static_cast<int64_t>(keep->size()); i < m; ++i) pd[i] = pg[i] * (static_cast<T>(pk[i]) * s);
    });
    return std::vector<Tensor>{dx};
  });
}

// ------------------------------------------------------------------------------------------
// layer_norm

Tensor layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, double eps) {
  HEED_CHECK(x.dim() >= 1, "layer_norm: input must have at least one dim, got ", to_string(x.shape()));
  const int64_t C = x.size(-1);
  const int64_t N = C ? x.numel() / C : 0;
  for (const Tensor* p : {&w, &b}) {
    if (!p->defined()) continue;
    HEED_CHECK(p->shape() == Shape{C}, "layer_norm: ", p == &w ? "weight" : "bias", " of shape ",
               to_string(p->shape()), " does not match the last dim of input ", to_string(x.shape()));
    HEED_CHECK(p->dtype() == x.dtype(), "layer_norm: ", p == &w ? "weight" : "bias", " is ",
               dtype_name(p->dtype()), " but the input is ", dtype_name(x.dtype()));
  }
  HEED_CHECK(eps >= 0.0, "layer_norm: eps must be non-negative, got ", eps);
  const DType dtype = x.dtype();
  const Tensor xc = contiguous_data(x);
  const Tensor wc = w.defined() ? contiguous_data(w) : Tensor();
  const Tensor bc = b.defined() ? contiguous_data(b) : Tensor();
  Tensor out = Tensor::empty(x.shape(), dtype);
  Tensor mean = Tensor::empty({N}, dtype), rstd = Tensor::empty({N}, dtype);
  visit_dtype(dtype, [&]<class T>() {
    layer_norm_forward<T>(out.data<T>(), mean.data<T>(), rstd.data<T>(), xc.data<T>(),
                          wc.defined() ? wc.data<T>() : nullptr, bc.defined() ? bc.data<T>() : nullptr, N, C,
                          static_cast<T>(eps));
  });
  const bool want_dw = w.defined() && w.requires_grad(), want_db = b.defined() && b.requires_grad();
  return record("layer_norm", out, {x, w, b},
                [xc = xc.detach(), wc = wc.defined() ? wc.detach() : Tensor(), mean, rstd, want_dw, want_db, N,
                 C](const Tensor& g) {
                  const DType dt = xc.dtype();
                  Tensor dx = Tensor::empty(xc.shape(), dt);
                  Tensor dw = want_dw ? Tensor::empty({C}, dt) : Tensor();
                  Tensor db = want_db ? Tensor::empty({C}, dt) : Tensor();
                  visit_dtype(dt, [&]<class T>() {
                    layer_norm_backward<T>(dx.data<T>(), want_dw ? dw.data<T>() : nullptr,
                                           want_db ? db.data<T>() : nullptr, g.data<T>(), xc.data<T>(),
                                           wc.defined() ? wc.data<T>() : nullptr, mean.data<T>(), rstd.data<T>(),
                                           N, C);
                  });
                  return std::vector<Tensor>{dx, dw, db};
                }, {xc, wc});
}

// The id tensors become the id vectors the kernels read: a copy of B * T integers, small next to
// the (B * T, C) rows the op moves.
static std::vector<int32_t> ids_of(const Tensor& ids, const char* op) {
  HEED_CHECK(ids.dtype() == DType::i32 || ids.dtype() == DType::i64, op, ": ids must be int32 or int64, got ",
             dtype_name(ids.dtype()));
  std::vector<int32_t> out;
  out.reserve(ids.numel());
  for (int64_t id : ids.to_vector<int64_t>()) {
    // An int64 id past int32 would wrap into a valid one: refused here, naming it as given.
    HEED_CHECK(id >= INT32_MIN && id <= INT32_MAX, op, ": id ", id, " is out of range (past int32)");
    out.push_back(static_cast<int32_t>(id));
  }
  return out;
}

Tensor embedding(const Tensor& weight, const Tensor& ids) { return embedding(weight, ids_of(ids, "embedding"), ids.shape()); }

Tensor detail::cross_entropy_of_tensor(const Tensor& logits, const Tensor& targets, int32_t ignore_index) {
  // (N, C) against ids runs the fused op; the other shapes and probability targets, composed.
  if (logits.dim() != 2 || is_floating(targets.dtype())) return cross_entropy(logits, targets, {.ignore_index = ignore_index});
  HEED_CHECK(targets.dim() == 1, "cross_entropy: targets for logits ", to_string(logits.shape()), " must be (N), got ",
             to_string(targets.shape()));
  return cross_entropy(logits, ids_of(targets, "cross_entropy"), ignore_index);
}

// torch's shapes other than (N, C), brought to it: (C) against a scalar target is one row, and
// (N, C, d1, ...) has its classes moved last and its rows flattened, against targets (N, d1, ...)
// of ids or (N, C, d1, ...) of probabilities. Reduction none's losses take the targets' shape
// without the classes.
static Tensor cross_entropy_any_shape(const Tensor& logits, const Tensor& targets, const CrossEntropyOptions& o) {
  const bool soft = is_floating(targets.dtype());
  HEED_CHECK(logits.dim() >= 1, "cross_entropy: logits must be (C), (N, C) or (N, C, d1, ...), got a scalar");
  Shape loss_shape = logits.shape();
  loss_shape.erase(loss_shape.begin() + (logits.dim() == 1 ? 0 : 1));
  Shape want = soft ? logits.shape() : loss_shape;
  HEED_CHECK(targets.shape() == want, "cross_entropy: targets of shape ", to_string(targets.shape()), " for logits ",
             to_string(logits.shape()), ": expected ", to_string(want), soft ? " (class probabilities)" : " (class ids)");
  const int64_t C = logits.size(logits.dim() == 1 ? 0 : 1);
  std::vector<int64_t> classes_last;
  for (int64_t d = 0; d < logits.dim(); ++d)
    if (d != 1) classes_last.push_back(d);
  classes_last.push_back(1);
  // The row count given, not -1: reshape cannot infer it when C is 0.
  const int64_t n_rows = numel_of(loss_shape);
  auto rows = [&](const Tensor& t) { return logits.dim() == 1 ? unsqueeze(t, 0) : reshape(permute(t, classes_last), {n_rows, C}); };
  const Tensor loss = cross_entropy(rows(logits), soft ? rows(targets) : reshape(targets, {-1}), o);
  return o.reduction == CrossEntropyOptions::Reduction::none ? reshape(loss, loss_shape) : loss;
}

// torch's other reductions, class weights, label smoothing and probability targets, composed
// from log_softmax (lp), gather and sums, differentiable through them (and w.r.t. the weights).
// Per row with target y and weight w (all ones without weights), s the smoothing, C the classes:
//   ids:           (1 - s) w[y] (-lp[y]) + (s / C) sum_c w[c] (-lp[c]), 0 where y is ignored;
//                  mean divides by the sum of w[y] over the rows not ignored;
//   probabilities: -sum_c w[c] ((1 - s) p[c] + s / C) lp[c]; mean divides by the rows.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, const CrossEntropyOptions& o) {
  using Reduction = CrossEntropyOptions::Reduction;
  HEED_CHECK(o.label_smoothing >= 0.0 && o.label_smoothing <= 1.0, "cross_entropy: label_smoothing must be in [0, 1], got ",
             o.label_smoothing);
  const bool soft = is_floating(targets.dtype());
  if (logits.dim() != 2) return cross_entropy_any_shape(logits, targets, o);
  if (!soft && o.reduction == Reduction::mean && o.label_smoothing == 0.0 && !o.weight.defined())
    return detail::cross_entropy_of_tensor(logits, targets, o.ignore_index);
  const int64_t N = logits.size(0), C = logits.size(1);
  if (o.weight.defined()) {
    HEED_CHECK(o.weight.shape() == Shape{C}, "cross_entropy: weight of shape ", to_string(o.weight.shape()),
               " for ", C, " classes (logits ", to_string(logits.shape()), ")");
    HEED_CHECK(o.weight.dtype() == logits.dtype(), "cross_entropy: weight is ", dtype_name(o.weight.dtype()),
               " but the logits are ", dtype_name(logits.dtype()));
  }
  const double s = o.label_smoothing;
  const Tensor lp = log_softmax(logits, 1);
  const Tensor weighted_lp = o.weight.defined() ? mul(lp, o.weight) : lp;  // w[c] lp[c]
  Tensor loss;   // (N)
  Tensor denom;  // mean's divisor, when it is not a plain count
  double count = static_cast<double>(N);
  if (soft) {
    HEED_CHECK(targets.shape() == logits.shape() && targets.dtype() == logits.dtype(), "cross_entropy: probability targets ",
               dtype_name(targets.dtype()), " ", to_string(targets.shape()), " must match the logits, ",
               dtype_name(logits.dtype()), " ", to_string(logits.shape()));
    const Tensor p = s > 0.0 ? add(mul(targets, 1.0 - s), s / static_cast<double>(C)) : targets;
    loss = neg(sum(mul(weighted_lp, p), 1));
  } else {
    const std::vector<int32_t> ids = ids_of(targets, "cross_entropy");
    HEED_CHECK(targets.dim() == 1, "cross_entropy: targets for logits ", to_string(logits.shape()), " must be (N), got ",
               to_string(targets.shape()));
    count = static_cast<double>(count_valid_targets(logits, ids, o.ignore_index));
    std::vector<int64_t> gather_ids(ids.size());
    std::vector<uint8_t> ignored(ids.size());
    for (int64_t r = 0; r < N; ++r) {
      ignored[r] = ids[r] == o.ignore_index;
      gather_ids[r] = ignored[r] ? 0 : ids[r];  // an ignored row gathers class 0, then is masked to 0
    }
    const Tensor at_target = Tensor::from_vector(gather_ids, {N, 1});
    loss = neg(squeeze(gather(weighted_lp, 1, at_target), 1));
    if (s > 0.0) loss = add(mul(loss, 1.0 - s), mul(neg(sum(weighted_lp, 1)), s / static_cast<double>(C)));
    loss = masked_fill(loss, ignored, {N}, 0.0);
    if (o.weight.defined())
      denom = sum(masked_fill(gather(o.weight, 0, reshape(at_target, {N})), ignored, {N}, 0.0));
  }
  if (o.reduction == Reduction::none) return loss;
  const Tensor total = sum(loss);
  if (o.reduction == Reduction::sum) return total;
  // Every target ignored: 0 / 0, NaN, as torch's.
  return denom.defined() ? div(total, denom) : div(total, count);
}

}  // namespace heed
