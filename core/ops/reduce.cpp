// Reductions and softmax: sum, mean, max over an axis, several axes or everything; cumsum;
// softmax and log_softmax.
//
// Every axis op views its (contiguous) input as (outer, n, inner): n the reduced axis, outer the
// product of the dims before it, inner the product after. inner == 1 (the last axis: attention
// rows, logits) is the hot path, a tight pointer loop per row; inner > 1 walks the n rows of each
// outer block once, vectorised across inner, so no transposed copy is needed. Kernels come in
// llm.c-style forward/backward pairs; the autograd wrappers below each pair capture what the
// backward needs. Rows go through the SIMD primitives of simd_rows.h (their precision is stated
// there); the inner > 1 paths use xsimd too, since std::exp does not vectorise.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "core/autograd.h"
#include "core/ops.h"
#include "core/ops/simd_rows.h"
#include "core/ops/strided.h"

namespace heed {

namespace {

using detail::Batch;
using detail::check_floating;
using detail::contiguous_data;
using detail::row_dot;
using detail::row_max;
using detail::row_max_nan;
using detail::row_sum;

// ------------------------------------------------------------------------------------------
// Vector helpers of the inner > 1 paths (the row primitives are in simd_rows.h).

// y[i] = exp(x[i] - shift[i]) elementwise (the inner > 1 softmax: one shift per column).
template <class T>
void exp_sub(T* y, const T* x, const T* shift, int64_t n) {
  constexpr int64_t W = Batch<T>::size;
  int64_t i = 0;
  for (; i + W <= n; i += W)
    detail::exp_lanes(Batch<T>::load_unaligned(x + i) - Batch<T>::load_unaligned(shift + i)).store_unaligned(y + i);
  for (; i < n; ++i) y[i] = std::exp(x[i] - shift[i]);
}

// A row's max m and the sum of exp(x - m) (each exp written to y unless y is null): the inner == 1
// softmax, whose max keeps exp from overflowing.
template <class T>
std::pair<T, T> shifted_exp_sum(T* y, const T* x, int64_t n) {
  const T m = row_max(x, n);
  return {m, static_cast<T>(detail::row_exp_sum(y, x, T(1), m, n))};
}

// The inner > 1 softmax of one (n, inner) block, column by column: m[i] = max over k of x[k, i],
// y[k, i] = exp(x[k, i] - m[i]) and s[i] = the sum over k of y[k, i].
template <class T>
void column_exp_sums(T* y, T* m, T* s, const T* x, int64_t n, int64_t inner) {
  std::fill(m, m + inner, -std::numeric_limits<T>::infinity());
  for (int64_t k = 0; k < n; ++k)
    for (int64_t i = 0; i < inner; ++i) m[i] = std::max(m[i], x[k * inner + i]);
  std::fill(s, s + inner, T(0));
  for (int64_t k = 0; k < n; ++k) {
    exp_sub(y + k * inner, x + k * inner, m, inner);
    for (int64_t i = 0; i < inner; ++i) s[i] += y[k * inner + i];
  }
}

// dx[i] = g[i] - exp(y[i]) * s[i] (s[i] = s0 when s is null): the log_softmax backward.
template <class T>
void sub_exp_scaled(T* dx, const T* g, const T* y, const T* s, T s0, int64_t n) {
  constexpr int64_t W = Batch<T>::size;
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    const Batch<T> sv = s ? Batch<T>::load_unaligned(s + i) : Batch<T>(s0);
    const Batch<T> e = detail::exp_lanes(Batch<T>::load_unaligned(y + i));
    xsimd::fnma(e, sv, Batch<T>::load_unaligned(g + i)).store_unaligned(dx + i);
  }
  for (; i < n; ++i) dx[i] = g[i] - std::exp(y[i]) * (s ? s[i] : s0);
}

// ------------------------------------------------------------------------------------------
// sum / mean over an axis. x, dx: (outer, n, inner); out, dout: (outer, inner). mean is sum with
// scale 1/n.

template <class T>
void sum_forward(T* out, const T* x, double scale, int64_t outer, int64_t n, int64_t inner) {
  if (inner == 1) {
    for (int64_t o = 0; o < outer; ++o) out[o] = static_cast<T>(row_sum(x + o * n, n) * scale);
    return;
  }
  // Column sums: blocks of kRows rows accumulate in T at full vector width, and the block totals
  // in double, so the rounding error grows with kRows, not with n.
  constexpr int64_t kRows = 64;
  std::vector<T> part(inner);
  std::vector<double> acc(inner);
  for (int64_t o = 0; o < outer; ++o) {
    std::fill(acc.begin(), acc.end(), 0.0);
    const T* xo = x + o * n * inner;
    for (int64_t k0 = 0; k0 < n; k0 += kRows) {
      const int64_t k1 = std::min(n, k0 + kRows);
      std::copy(xo + k0 * inner, xo + (k0 + 1) * inner, part.begin());
      for (int64_t k = k0 + 1; k < k1; ++k) {
        const T* row = xo + k * inner;
        for (int64_t i = 0; i < inner; ++i) part[i] += row[i];
      }
      for (int64_t i = 0; i < inner; ++i) acc[i] += part[i];
    }
    T* oo = out + o * inner;
    for (int64_t i = 0; i < inner; ++i) oo[i] = static_cast<T>(acc[i] * scale);
  }
}

// dx[o, k, i] = dout[o, i] * scale: the gradient of a sum is a broadcast.
template <class T>
void sum_backward(T* dx, const T* dout, double scale, int64_t outer, int64_t n, int64_t inner) {
  const T s = static_cast<T>(scale);
  for (int64_t o = 0; o < outer; ++o) {
    if (inner == 1) {
      std::fill(dx + o * n, dx + (o + 1) * n, dout[o] * s);
      continue;
    }
    const T* go = dout + o * inner;
    for (int64_t k = 0; k < n; ++k) {
      T* row = dx + (o * n + k) * inner;
      for (int64_t i = 0; i < inner; ++i) row[i] = go[i] * s;
    }
  }
}

// ------------------------------------------------------------------------------------------
// cumsum along an axis. x, out: (outer, n, inner). out[o, k, i] = the sum of x[o, j, i] over
// j <= k, or over j >= k with `reverse` (cumsum's backward). Acc is double for float32 too, as
// torch's CPU kernel accumulates (so [1e8, 1, -1e8] ends in 1, not 0); uint64_t for integers,
// where wrapping is defined.

template <class Acc, class T, class Out>
void cumulative_sum(Out* out, const T* x, int64_t outer, int64_t n, int64_t inner, bool reverse) {
  std::vector<Acc> acc(inner);
  for (int64_t o = 0; o < outer; ++o) {
    std::fill(acc.begin(), acc.end(), Acc(0));
    for (int64_t s = 0; s < n; ++s) {
      const int64_t row = (o * n + (reverse ? n - 1 - s : s)) * inner;
      for (int64_t i = 0; i < inner; ++i) {
        acc[i] += static_cast<Acc>(x[row + i]);
        out[row + i] = static_cast<Out>(acc[i]);
      }
    }
  }
}

// ------------------------------------------------------------------------------------------
// max over an axis. x, dx: (outer, n >= 1, inner); out, dout, arg: (outer, inner); arg holds the
// index along n of the first maximal element (a NaN counts as maximal, as in torch.max).

template <class T>
void max_forward(T* out, int64_t* arg, const T* x, int64_t outer, int64_t n, int64_t inner) {
  for (int64_t o = 0; o < outer; ++o) {
    const T* xo = x + o * n * inner;
    T* oo = out + o * inner;
    int64_t* ao = arg + o * inner;
    if (inner == 1) {
      // A vector max, then a scan for the first element equal to it (or the first NaN): two
      // passes, but both run at vector speed where a running (value, index) pair would not.
      bool nan = false;
      const T m = row_max_nan(xo, n, nan);
      int64_t bi = 0;
      if (nan) {
        while (xo[bi] == xo[bi]) ++bi;
      } else {
        while (xo[bi] != m) ++bi;
      }
      *oo = xo[bi];
      *ao = bi;
      continue;
    }
    std::copy(xo, xo + inner, oo);
    std::fill(ao, ao + inner, int64_t{0});
    for (int64_t k = 1; k < n; ++k) {
      const T* row = xo + k * inner;
      for (int64_t i = 0; i < inner; ++i) {
        const bool take = !(row[i] <= oo[i]) && oo[i] == oo[i];
        oo[i] = take ? row[i] : oo[i];
        ao[i] = take ? k : ao[i];
      }
    }
  }
}

// dx = 0 except dx[o, arg[o, i], i] = dout[o, i].
template <class T>
void max_backward(T* dx, const T* dout, const int64_t* arg, int64_t outer, int64_t n, int64_t inner) {
  std::fill(dx, dx + outer * n * inner, T(0));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) dx[(o * n + arg[o * inner + i]) * inner + i] = dout[o * inner + i];
}

// ------------------------------------------------------------------------------------------
// softmax. x, y, dy, dx: (outer, n, inner). y = exp(x - max) / sum(exp(x - max)) along n; the
// max keeps exp from overflowing (inputs of 1000 would give inf / inf otherwise).

template <class T>
void softmax_forward(T* y, const T* x, int64_t outer, int64_t n, int64_t inner) {
  if (inner == 1) {
    for (int64_t o = 0; o < outer; ++o) {
      T* yr = y + o * n;
      const T inv = T(1) / shifted_exp_sum(yr, x + o * n, n).second;
      for (int64_t k = 0; k < n; ++k) yr[k] *= inv;
    }
    return;
  }
  std::vector<T> m(inner), s(inner);
  for (int64_t o = 0; o < outer; ++o) {
    const T* xo = x + o * n * inner;
    T* yo = y + o * n * inner;
    column_exp_sums(yo, m.data(), s.data(), xo, n, inner);
    for (int64_t i = 0; i < inner; ++i) s[i] = T(1) / s[i];
    for (int64_t k = 0; k < n; ++k)
      for (int64_t i = 0; i < inner; ++i) yo[k * inner + i] *= s[i];
  }
}

// dx = y * (dy - sum_n(dy * y)).
template <class T>
void softmax_backward(T* dx, const T* dy, const T* y, int64_t outer, int64_t n, int64_t inner) {
  if (inner == 1) {
    for (int64_t o = 0; o < outer; ++o) {
      const T* g = dy + o * n;
      const T* yr = y + o * n;
      T* d = dx + o * n;
      const T dot = row_dot(g, yr, n);
      for (int64_t k = 0; k < n; ++k) d[k] = yr[k] * (g[k] - dot);
    }
    return;
  }
  std::vector<T> dot(inner);
  for (int64_t o = 0; o < outer; ++o) {
    const int64_t base = o * n * inner;
    std::fill(dot.begin(), dot.end(), T(0));
    for (int64_t k = 0; k < n; ++k)
      for (int64_t i = 0; i < inner; ++i) dot[i] += dy[base + k * inner + i] * y[base + k * inner + i];
    for (int64_t k = 0; k < n; ++k)
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t j = base + k * inner + i;
        dx[j] = y[j] * (dy[j] - dot[i]);
      }
  }
}

// ------------------------------------------------------------------------------------------
// log_softmax. x, y, dy, dx: (outer, n, inner). y = (x - max) - log sum exp(x - max) along n,
// in that order: x - max is exact for nearby values, while x - (max + log sum) would round at
// the magnitude of x (an error of 3e-5 in float32 for inputs near 1000).

template <class T>
void log_softmax_forward(T* y, const T* x, int64_t outer, int64_t n, int64_t inner) {
  if (inner == 1) {
    for (int64_t o = 0; o < outer; ++o) {
      const T* xr = x + o * n;
      T* yr = y + o * n;
      const auto [m, s] = shifted_exp_sum<T>(nullptr, xr, n);
      const T log_s = std::log(s);
      for (int64_t k = 0; k < n; ++k) yr[k] = (xr[k] - m) - log_s;
    }
    return;
  }
  std::vector<T> m(inner), s(inner);
  for (int64_t o = 0; o < outer; ++o) {
    const T* xo = x + o * n * inner;
    T* yo = y + o * n * inner;
    column_exp_sums(yo, m.data(), s.data(), xo, n, inner);  // y's rows as scratch for exp(x - m)
    for (int64_t i = 0; i < inner; ++i) s[i] = std::log(s[i]);
    for (int64_t k = 0; k < n; ++k)
      for (int64_t i = 0; i < inner; ++i) yo[k * inner + i] = (xo[k * inner + i] - m[i]) - s[i];
  }
}

// dx = dy - exp(y) * sum_n(dy)  (exp(y) is the softmax).
template <class T>
void log_softmax_backward(T* dx, const T* dy, const T* y, int64_t outer, int64_t n, int64_t inner) {
  if (inner == 1) {
    for (int64_t o = 0; o < outer; ++o) {
      const T* g = dy + o * n;
      sub_exp_scaled<T>(dx + o * n, g, y + o * n, nullptr, row_sum(g, n), n);
    }
    return;
  }
  std::vector<T> s(inner);
  for (int64_t o = 0; o < outer; ++o) {
    const int64_t base = o * n * inner;
    std::fill(s.begin(), s.end(), T(0));
    for (int64_t k = 0; k < n; ++k)
      for (int64_t i = 0; i < inner; ++i) s[i] += dy[base + k * inner + i];
    for (int64_t k = 0; k < n; ++k) {
      const int64_t j = base + k * inner;
      sub_exp_scaled<T>(dx + j, dy + j, y + j, s.data(), T(0), inner);
    }
  }
}

// ------------------------------------------------------------------------------------------
// The (outer, n, inner) view of an axis op's input.

struct AxisView {
  int64_t outer = 1, n = 1, inner = 1;
  Shape out_shape;  // the reduced shape, with or without the kept 1
};

AxisView axis_view(const Tensor& a, int64_t axis, bool keepdim, const char* op) {
  AxisView v;
  const Shape& s = a.shape();
  if (s.empty()) {  // a 0-d tensor has one axis to speak of, as in torch: 0 or -1
    detail::normalize_axis(axis, 1, op, s);
    return v;
  }
  const int64_t ax = detail::normalize_axis(axis, a.dim(), op, s);
  for (int64_t d = 0; d < ax; ++d) v.outer *= s[d];
  v.n = s[ax];
  for (int64_t d = ax + 1; d < a.dim(); ++d) v.inner *= s[d];
  v.out_shape = s;
  if (keepdim) {
    v.out_shape[ax] = 1;
  } else {
    v.out_shape.erase(v.out_shape.begin() + ax);
  }
  return v;
}

Tensor sum_or_mean(const Tensor& a, int64_t axis, bool keepdim, bool is_mean) {
  const char* op = is_mean ? "mean" : "sum";
  const AxisView v = axis_view(a, axis, keepdim, op);
  const double scale = is_mean ? 1.0 / static_cast<double>(v.n) : 1.0;
  const Tensor x = contiguous_data(a);
  Tensor out = Tensor::empty(v.out_shape, a.dtype());
  visit_dtype(a.dtype(), [&]<class T>() { sum_forward<T>(out.data<T>(), x.data<T>(), scale, v.outer, v.n, v.inner); });
  return record(op, out, {a}, [v, scale, shape = a.shape(), dtype = a.dtype()](const Tensor& g) {
    Tensor dx = Tensor::empty(shape, dtype);
    visit_dtype(dtype, [&]<class T>() { sum_backward<T>(dx.data<T>(), g.data<T>(), scale, v.outer, v.n, v.inner); });
    return std::vector<Tensor>{dx};
  });
}

// Sum of every element, through the strides (no contiguous copy); innermost rows with unit
// stride take the vector path.
double sum_all_values(const Tensor& a) {
  return visit_dtype(a.dtype(), [&]<class T>() -> double {
    if (a.is_contiguous()) return row_sum(a.data<T>(), a.numel());
    const T* base = static_cast<const T*>(a.storage()->data());
    const int64_t st = a.strides().back();
    double total = 0;
    detail::for_each_row<1>(a.shape(), {&a.strides()}, {a.offset()}, [&](int64_t len, const std::array<int64_t, 1>& off) {
      const T* r = base + off[0];
      if (st == 1) {
        total += row_sum(r, len);
      } else {
        T s = 0;
        for (int64_t i = 0; i < len; ++i) s += r[i * st];
        total += s;
      }
    });
    return total;
  });
}

Tensor sum_or_mean_all(const Tensor& a, bool is_mean) {
  const double scale = is_mean ? 1.0 / static_cast<double>(a.numel()) : 1.0;
  Tensor out = Tensor::scalar(sum_all_values(a) * scale, a.dtype());
  return record(is_mean ? "mean" : "sum", out, {a}, [scale, shape = a.shape(), dtype = a.dtype()](const Tensor& g) {
    return std::vector<Tensor>{Tensor::full(shape, g.item() * scale, dtype)};
  });
}

// torch sums an integer or bool tensor exactly, into int64 (the accuracy idiom
// `(pred == y).sum()`), wrapping on overflow as torch's does (in uint64_t here, where wrapping is
// defined). No gradient: an integer tensor never requires one. Over the whole tensor when
// `axis` is empty.
Tensor integer_sum(const Tensor& a, std::optional<int64_t> axis, bool keepdim) {
  const AxisView v = axis ? axis_view(a, *axis, keepdim, "sum") : AxisView{1, a.numel(), 1, {}};
  const Tensor x = contiguous_data(a);
  Tensor out = Tensor::empty(v.out_shape, DType::i64);
  int64_t* o = out.data<int64_t>();
  visit_any_dtype(a.dtype(), [&]<class T>() {
    const T* in = x.data<T>();
    for (int64_t b = 0; b < v.outer; ++b)
      for (int64_t i = 0; i < v.inner; ++i) {
        uint64_t total = 0;
        for (int64_t k = 0; k < v.n; ++k) total += static_cast<uint64_t>(in[(b * v.n + k) * v.inner + i]);
        o[b * v.inner + i] = static_cast<int64_t>(total);
      }
  });
  return out;
}

bool is_integer_or_bool(DType d) { return d == DType::i32 || d == DType::i64 || d == DType::boolean; }

// A reduction over several axes runs as one reduction over the last axis: the reduced axes
// permuted to the end and merged (a copy unless they already are the last ones), so each
// single-axis kernel serves, with its accuracy and its backward. The plan checks the axes once.
struct AxesPlan {
  std::vector<int64_t> perm;  // the kept axes in order, then the reduced ones
  Shape merged;               // the kept sizes, then the product of the reduced ones
  Shape kept;                 // the result with keepdim (1 on the reduced axes)
};

// torch 1.13 reduces every axis for an empty list (x.sum(dim=[]) is x.sum()); a repeated axis is
// refused, as torch's "appears multiple times".
AxesPlan plan_axes(const Tensor& a, const std::vector<int64_t>& axes, const char* op) {
  const int64_t nd = std::max<int64_t>(a.dim(), 1);  // a 0-d tensor has one axis to speak of, 0 or -1
  std::vector<bool> reduced(nd, axes.empty());
  for (int64_t axis : axes) {
    const int64_t d = detail::normalize_axis(axis, nd, op, a.shape());
    HEED_CHECK(!reduced[d], op, ": axis ", d, " appears more than once in ", to_string(axes));
    reduced[d] = true;
  }
  AxesPlan p;
  p.kept = a.shape();
  int64_t n = 1;
  for (int64_t d = 0; d < a.dim(); ++d) {
    if (reduced[d]) {
      n *= a.size(d);
      p.kept[d] = 1;
    } else {
      p.perm.push_back(d);
      p.merged.push_back(a.size(d));
    }
  }
  for (int64_t d = 0; d < a.dim(); ++d)
    if (reduced[d]) p.perm.push_back(d);
  p.merged.push_back(n);
  return p;
}

// `reduce` (a single-axis op over axis -1) applied over the plan's axes.
Tensor reduce_axes(const Tensor& a, const AxesPlan& p, bool keepdim, const std::function<Tensor(const Tensor&)>& reduce) {
  const Tensor out = reduce(reshape(permute(a, p.perm), p.merged));
  return keepdim ? reshape(out, p.kept) : out;
}

}  // namespace

// ------------------------------------------------------------------------------------------
// The ops

Tensor sum(const Tensor& a) { return is_integer_or_bool(a.dtype()) ? integer_sum(a, std::nullopt, false) : sum_or_mean_all(a, false); }
Tensor mean(const Tensor& a) {
  check_floating(a, "mean");  // torch refuses an integer mean too
  return sum_or_mean_all(a, true);
}
Tensor sum(const Tensor& a, int64_t axis, bool keepdim) {
  return is_integer_or_bool(a.dtype()) ? integer_sum(a, axis, keepdim) : sum_or_mean(a, axis, keepdim, false);
}
Tensor mean(const Tensor& a, int64_t axis, bool keepdim) {
  check_floating(a, "mean");
  return sum_or_mean(a, axis, keepdim, true);
}
Tensor sum(const Tensor& a, const std::vector<int64_t>& axes, bool keepdim) {
  return reduce_axes(a, plan_axes(a, axes, "sum"), keepdim, [](const Tensor& m) { return sum(m, -1); });
}
Tensor mean(const Tensor& a, const std::vector<int64_t>& axes, bool keepdim) {
  check_floating(a, "mean");
  return reduce_axes(a, plan_axes(a, axes, "mean"), keepdim, [](const Tensor& m) { return mean(m, -1); });
}

// vector_norm's forward is composed from the ops above with autograd off; its backward is torch's
// norm_backward, which the composition's would not be: sqrt(sum(x^2)) differentiates to 0 * inf =
// NaN at x = 0, where torch's gradient is 0, and the inf norm's ties share the gradient equally.
Tensor vector_norm(const Tensor& x, double ord, const std::vector<int64_t>& axes, bool keepdim) {
  check_floating(x, "vector_norm");
  HEED_CHECK(!std::isnan(ord), "vector_norm: ord is NaN");
  const AxesPlan plan = plan_axes(x, axes, "vector_norm");
  const auto over = [&plan](const Tensor& t, Tensor (*reduce)(const Tensor&, int64_t, bool)) {
    return reduce_axes(t, plan, true, [reduce](const Tensor& m) { return reduce(m, -1, false); });
  };
  Tensor norm;  // with keepdim's shape, as the backward reads it
  {
    NoGradGuard no_grad;
    const Tensor a = abs(x);
    if (std::isinf(ord)) {
      // max and min have no identity: torch refuses an empty reduced axis too
      HEED_CHECK(plan.merged.back() > 0, "vector_norm: the ", ord, " norm over an empty axis of ", to_string(x.shape()),
                 " is undefined (max and min have no identity)");
      norm = ord > 0 ? over(a, max) : over(a, min);
    } else if (ord == 0) {
      norm = over(ne(x, 0.0).to(x.dtype()), sum);  // the count of non-zero elements
    } else if (ord == 1) {
      norm = over(a, sum);
    } else if (ord == 2) {
      norm = sqrt(over(x * x, sum));
    } else {
      norm = pow(over(pow(a, ord), sum), 1.0 / ord);
    }
  }
  const Tensor out = keepdim ? norm : reshape(norm, Shape(plan.merged.begin(), plan.merged.end() - 1));
  return record("vector_norm", out, {x}, [x = x.detach(), norm = norm.detach(), ord, plan](const Tensor& g_out) {
    if (ord == 0) return std::vector<Tensor>{Tensor()};  // a count: torch gives no gradient
    const Tensor g = reshape(g_out, plan.kept);
    const Tensor sign = gt(x, 0.0).to(x.dtype()) - lt(x, 0.0).to(x.dtype());
    const Tensor norm_is_0 = eq(norm, 0.0);
    Tensor dx;
    if (ord == 1) {
      dx = sign * g;
    } else if (ord == 2) {
      dx = g * where(norm_is_0, 0.0, x / norm);
    } else if (std::isinf(ord)) {  // shared equally by the elements at the max (or min), NaNs too
      const Tensor a = abs(x);
      const Tensor at = logical_or(eq(a, norm), ne(a, a)).to(x.dtype());
      dx = sign * (g / reduce_axes(at, plan, true, [](const Tensor& m) { return sum(m, -1); })) * at;
    } else if (ord < 1) {  // |x|^(p - 1) is inf at x = 0: masked to 0 there, as torch
      dx = sign * where(eq(x, 0.0), 0.0, pow(abs(x), ord - 1)) * g * pow(norm, 1 - ord);
    } else {
      const Tensor scale = where(norm_is_0, 0.0, g / pow(norm, ord - 1));
      dx = (ord < 2 ? sign * pow(abs(x), ord - 1) : x * pow(abs(x), ord - 2)) * scale;
    }
    return std::vector<Tensor>{dx};
  }, {x, norm});
}

// torch's F.normalize: input / input.norm(p, dim, keepdim=True).clamp_min(eps).expand_as(input).
Tensor normalize(const Tensor& x, double p, int64_t axis, double eps) {
  return x / clamp(vector_norm(x, p, {axis}, true), eps);
}

Tensor cumsum(const Tensor& a, int64_t axis) {
  const AxisView v = axis_view(a, axis, true, "cumsum");
  const Tensor x = contiguous_data(a);
  if (is_integer_or_bool(a.dtype())) {  // as torch: exact, in int64, no gradient
    Tensor out = Tensor::empty(a.shape(), DType::i64);
    visit_any_dtype(a.dtype(), [&]<class T>() {
      cumulative_sum<uint64_t>(out.data<int64_t>(), x.data<T>(), v.outer, v.n, v.inner, false);
    });
    return out;
  }
  Tensor out = Tensor::empty(a.shape(), a.dtype());
  visit_dtype(a.dtype(), [&]<class T>() { cumulative_sum<double>(out.data<T>(), x.data<T>(), v.outer, v.n, v.inner, false); });
  return record("cumsum", out, {a}, [v](const Tensor& g) {
    Tensor dx = Tensor::empty(g.shape(), g.dtype());
    visit_dtype(g.dtype(), [&]<class T>() { cumulative_sum<double>(dx.data<T>(), g.data<T>(), v.outer, v.n, v.inner, true); });
    return std::vector<Tensor>{dx};
  });
}

// var and std are composed of differentiable ops (two passes: the deviations from the mean, then
// their squares summed), so their gradients are those ops' and need no backward of their own.
// n - 1 (unbiased) or n, never below 0 (torch's max(0, n - correction)): no elements give 0 / 0,
// NaN, as torch's.
static double var_divisor(int64_t n, bool unbiased) {
  return std::max(0.0, static_cast<double>(n) - (unbiased ? 1.0 : 0.0));
}

Tensor var(const Tensor& a) {
  const Tensor d = a - mean(a);
  return sum(d * d) / var_divisor(a.numel(), true);
}

Tensor var(const Tensor& a, int64_t axis, bool unbiased, bool keepdim) {
  const int64_t n = axis_view(a, axis, keepdim, "var").n;  // checks the axis, naming var
  const Tensor d = a - mean(a, axis, /*keepdim=*/true);
  return sum(d * d, axis, keepdim) / var_divisor(n, unbiased);
}

// sqrt of a variance, whose gradient g / (2 sqrt v) is 0 where v = 0 (every element equal) rather
// than inf, which the deviations (all 0) would turn into NaN: torch's std_backward masks it so.
static Tensor sqrt_of_variance(const Tensor& v) {
  const Tensor y = v.detach().sqrt();
  return record("std", y, {v}, [y = y.detach()](const Tensor& g) {
    const Tensor zero = Tensor::scalar(0.0, g.dtype());
    return std::vector<Tensor>{where(eq(y, zero), zero, g / (y * 2.0))};
  }, {y});
}

Tensor std(const Tensor& a) { return sqrt_of_variance(var(a)); }
Tensor std(const Tensor& a, int64_t axis, bool unbiased, bool keepdim) {
  return sqrt_of_variance(var(a, axis, unbiased, keepdim));
}

Tensor max(const Tensor& a, int64_t axis, bool keepdim) {
  const AxisView v = axis_view(a, axis, keepdim, "max");
  HEED_CHECK(v.n > 0 || v.outer * v.inner == 0, "max: cannot reduce axis ", axis, " of size 0 in shape ",
             to_string(a.shape()));
  const Tensor x = contiguous_data(a);
  Tensor out = Tensor::empty(v.out_shape, a.dtype());
  auto arg = std::make_shared<std::vector<int64_t>>(v.outer * v.inner);
  visit_dtype(a.dtype(), [&]<class T>() { max_forward<T>(out.data<T>(), arg->data(), x.data<T>(), v.outer, v.n, v.inner); });
  return record("max", out, {a}, [v, arg, shape = a.shape(), dtype = a.dtype()](const Tensor& g) {
    Tensor dx = Tensor::empty(shape, dtype);
    visit_dtype(dtype, [&]<class T>() { max_backward<T>(dx.data<T>(), g.data<T>(), arg->data(), v.outer, v.n, v.inner); });
    return std::vector<Tensor>{dx};
  });
}

// logsumexp: log(sum(exp(x - m))) + m with m the max along the axis, masked to 0 where it is
// infinite (torch's form: an all -inf slice gives -inf rather than NaN, a +inf gives +inf). The
// forward is composed with autograd off; the backward is torch's, g exp(x - out) (the softmax).
Tensor logsumexp(const Tensor& x, int64_t axis, bool keepdim) {
  check_floating(x, "logsumexp");
  const AxisView v = axis_view(x, axis, keepdim, "logsumexp");  // checks the axis, naming logsumexp
  Tensor out_kept;  // with keepdim's shape, as the backward reads it
  {
    NoGradGuard no_grad;
    // an empty axis sums to 0, log 0 = -inf, as torch's
    Tensor m = v.n > 0 ? max(x, axis, true) : Tensor::zeros(axis_view(x, axis, true, "logsumexp").out_shape, x.dtype());
    m = where(eq(abs(m), std::numeric_limits<double>::infinity()), 0.0, m);
    out_kept = log(sum(exp(x - m), axis, true)) + m;
  }
  const Tensor out = keepdim ? out_kept : reshape(out_kept, v.out_shape);
  return record("logsumexp", out, {x}, [x = x.detach(), y = out_kept.detach(), kept = out_kept.shape()](const Tensor& g) {
    return std::vector<Tensor>{reshape(g, kept) * exp(x - y)};
  }, {x, out_kept});
}

// amax / amin: the max (min) over `axes` with torch's gradient, shared evenly by the elements
// equal to it: (g / count) * (x == out), count their number in each slice.
static Tensor extreme_over(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim, bool is_max) {
  const char* op = is_max ? "amax" : "amin";
  check_floating(x, op);
  const AxesPlan plan = plan_axes(x, axes, op);
  HEED_CHECK(plan.merged.back() > 0, op, ": cannot reduce an empty axis of ", to_string(x.shape()),
             " (max and min have no identity)");
  Tensor kept;
  {
    NoGradGuard no_grad;
    kept = reduce_axes(x, plan, true, [is_max](const Tensor& m) { return is_max ? max(m, -1) : min(m, -1); });
  }
  const Tensor out = keepdim ? kept : reshape(kept, Shape(plan.merged.begin(), plan.merged.end() - 1));
  return record(op, out, {x}, [x = x.detach(), kept = kept.detach(), plan](const Tensor& g) {
    const Tensor at = eq(x, kept).to(x.dtype());
    const Tensor count = reduce_axes(at, plan, true, [](const Tensor& m) { return sum(m, -1); });
    return std::vector<Tensor>{(reshape(g, plan.kept) / count) * at};
  }, {x, kept});
}

Tensor amax(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim) { return extreme_over(x, axes, keepdim, true); }
Tensor amin(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim) { return extreme_over(x, axes, keepdim, false); }

// prod over an axis, x: (outer, n, inner). The gradient of element k is g times the product of the
// others, taken from the running products before and after it (no division: exact with zeros,
// as torch's prod_backward, where one zero's gradient is the product of the rest).
Tensor prod(const Tensor& a, int64_t axis, bool keepdim) {
  check_floating(a, "prod");
  const AxisView v = axis_view(a, axis, keepdim, "prod");
  const Tensor x = contiguous_data(a);
  Tensor out = Tensor::empty(v.out_shape, a.dtype());
  visit_dtype(a.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    T* po = out.data<T>();
    for (int64_t o = 0; o < v.outer; ++o)
      for (int64_t i = 0; i < v.inner; ++i) {
        T p = 1;
        for (int64_t k = 0; k < v.n; ++k) p *= px[(o * v.n + k) * v.inner + i];
        po[o * v.inner + i] = p;
      }
  });
  return record("prod", out, {a}, [v, x = x.detach()](const Tensor& g_out) {
    const Tensor g = contiguous_data(g_out);
    Tensor dx = Tensor::empty(x.shape(), x.dtype());
    visit_dtype(x.dtype(), [&]<class T>() {
      const T* px = x.data<T>();
      const T* pg = g.data<T>();
      T* pd = dx.data<T>();
      for (int64_t o = 0; o < v.outer; ++o)
        for (int64_t i = 0; i < v.inner; ++i) {
          const int64_t base = o * v.n * v.inner + i;
          T before = 1;  // the product of the elements before k, written first, then times the ones after
          for (int64_t k = 0; k < v.n; ++k) {
            pd[base + k * v.inner] = before;
            before *= px[base + k * v.inner];
          }
          T after = 1;
          const T gv = pg[o * v.inner + i];
          for (int64_t k = v.n - 1; k >= 0; --k) {
            pd[base + k * v.inner] *= after * gv;
            after *= px[base + k * v.inner];
          }
        }
    });
    return std::vector<Tensor>{dx};
  }, {x});
}

Tensor prod(const Tensor& a) {
  check_floating(a, "prod");
  return prod(reshape(a, {-1}), 0, false);
}

// softmax and log_softmax share their wrapper: the backward of each reads only the output y.
template <class Forward, class Backward>
static Tensor softmax_like(const Tensor& a, int64_t axis, const char* op, Forward forward, Backward backward) {
  const AxisView v = axis_view(a, axis, true, op);
  const Tensor x = contiguous_data(a);
  Tensor out = Tensor::empty(a.shape(), a.dtype());
  visit_dtype(a.dtype(), [&]<class T>() { forward(out.data<T>(), x.data<T>(), v.outer, v.n, v.inner); });
  return record(op, out, {a}, [v, y = out.detach(), backward](const Tensor& g) {
    Tensor dx = Tensor::empty(y.shape(), y.dtype());
    visit_dtype(y.dtype(), [&]<class T>() { backward(dx.data<T>(), g.data<T>(), y.data<T>(), v.outer, v.n, v.inner); });
    return std::vector<Tensor>{dx};
  }, {out});
}

Tensor softmax(const Tensor& a, int64_t axis) {
  return softmax_like(
      a, axis, "softmax", [](auto... args) { softmax_forward(args...); },
      [](auto... args) { softmax_backward(args...); });
}

Tensor log_softmax(const Tensor& a, int64_t axis) {
  return softmax_like(
      a, axis, "log_softmax", [](auto... args) { log_softmax_forward(args...); },
      [](auto... args) { log_softmax_backward(args...); });
}

}  // namespace heed
