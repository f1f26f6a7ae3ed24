// Elementwise ops: broadcast arithmetic and the pointwise functions, each forward followed by its
// backward. Same-shaped contiguous arithmetic and the transcendental functions (exp, tanh, GELU)
// run on xsimd batches over the thread pool (simd_apply); the rest are pointer loops over
// contiguous rows (the compiler vectorises them at -O3 -march=native), and broadcasting and
// strided views go through for_each_row.
// GCC 12 warns inside its own AVX-512 headers once xsimd's double exp is inlined (GCC bug 105593,
// a false positive; see core/ops/simd_rows.h).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <xsimd/xsimd.hpp>
#pragma GCC diagnostic pop

#include <cmath>
#include <limits>
#include <numbers>
#include <type_traits>

#include "core/autograd.h"
#include "core/ops.h"
#include "core/parallel.h"
#include "core/tuning.h"
#include "core/ops/normal_cdf.h"
#include "core/ops/simd_exp.h"
#include "core/ops/strided.h"

namespace heed {

using detail::broadcast_strides;
using detail::check_floating;
using detail::contiguous_data;
using detail::for_each_row;

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    HEED_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", to_string(a), " and ", to_string(b),
               " cannot be broadcast together");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

static void check_same_dtype(const Tensor& a, const Tensor& b, const char* op) {
  HEED_CHECK(a.dtype() == b.dtype(), op, ": dtypes differ (", dtype_name(a.dtype()), " ",
             to_string(a.shape()), " and ", dtype_name(b.dtype()), " ", to_string(b.shape()), ")");
}

// out = f(a, b) elementwise with broadcasting; `out` is a new contiguous tensor.
template <class F>
static Tensor binary_map(const Tensor& a, const Tensor& b, const char* op, F f) {
  check_same_dtype(a, b, op);
  check_floating(a, op);
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), op);
  Tensor out = Tensor::empty(shape, a.dtype());
  visit_dtype(a.dtype(), [&]<class T>() {
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* po = out.data<T>();
    const int64_t n = out.numel();
    if (a.shape() == b.shape() && a.is_contiguous() && b.is_contiguous()) {
      for (int64_t i = 0; i < n; ++i) po[i] = f(pa[i], pb[i]);
      return;
    }
    const Shape sa = broadcast_strides(a, shape), sb = broadcast_strides(b, shape);
    const Shape so = contiguous_strides(shape);
    const int64_t ia = sa.empty() ? 0 : sa.back(), ib = sb.empty() ? 0 : sb.back();
    for_each_row<3>(shape, {&sa, &sb, &so}, {0, 0, 0}, [&](int64_t len, const std::array<int64_t, 3>& off) {
      const T* ra = pa + off[0];
      const T* rb = pb + off[1];
      T* ro = po + off[2];
      if (ia == 1 && ib == 1) {
        for (int64_t i = 0; i < len; ++i) ro[i] = f(ra[i], rb[i]);
      } else if (ia == 1 && ib == 0) {
        const T vb = *rb;
        for (int64_t i = 0; i < len; ++i) ro[i] = f(ra[i], vb);
      } else if (ia == 0 && ib == 1) {
        const T va = *ra;
        for (int64_t i = 0; i < len; ++i) ro[i] = f(va, rb[i]);
      } else {
        for (int64_t i = 0; i < len; ++i) ro[i] = f(ra[i * ia], rb[i * ib]);
      }
    });
  });
  return out;
}

// out = f(a) elementwise; `out` is a new contiguous tensor.
template <class F>
static Tensor unary_map(const char* op, const Tensor& a, F f) {
  check_floating(a, op);
  const Tensor x = contiguous_data(a);
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  visit_dtype(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    T* po = out.data<T>();
    for (int64_t i = 0, n = x.numel(); i < n; ++i) po[i] = f(px[i]);
  });
  return out;
}

// out = f(a) (or f(a, b) for same-shaped a, b) with xsimd batches over contiguous data, for
// functions the compiler cannot vectorise itself (exp, tanh, the normal CDF). `f` must accept both
// T and xsimd::batch<T>: exp and tanh call std::exp / std::tanh on T and detail::exp_lanes_full_range /
// tanh_lanes on a batch (core/ops/simd_exp.h: xsimd's without its undefined cast), by type.
// Blocks of tuning().elementwise_block elements (a multiple of any batch width, so only the very
// end takes the scalar tail) spread over the threads, each thread's share at least
// tuning().elementwise_grain elements: about 10 us of a plain add at this core's streaming rate,
// more than a hand-off to the pool's spinning workers costs (core/tuning.h). (A fixed 65 536
// kept tiny's GELU, 65 K elements, on one thread; 16 384 took tiny's step from 1.40 to 1.32 ms.)

template <class T, class F, class... In>
static void simd_apply(T* out, int64_t n, F f, const In*... in) {
  using B = xsimd::batch<T>;
  constexpr int64_t W = static_cast<int64_t>(B::size);
  const Tuning& tune = tuning();
  parallel_for_blocks(n, tune.elementwise_block, tune.elementwise_grain, [&](int64_t i0, int64_t i1) {
    int64_t i = i0;
    for (; i + W <= i1; i += W) f(B::load_unaligned(in + i)...).store_unaligned(out + i);
    for (; i < i1; ++i) out[i] = f(in[i]...);
  });
}

template <class F>
static Tensor simd_unary_map(const char* op, const Tensor& a, F f) {
  check_floating(a, op);
  const Tensor x = contiguous_data(a);
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  visit_dtype(x.dtype(), [&]<class T>() { simd_apply(out.data<T>(), x.numel(), f, x.data<T>()); });
  return out;
}

template <class F>
static Tensor simd_binary_map(const Tensor& a, const Tensor& b, const char* op, F f) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return binary_map(a, b, op, f);
  check_floating(a, op);
  const Tensor x = contiguous_data(a);
  const Tensor y = contiguous_data(b);
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  visit_dtype(x.dtype(), [&]<class T>() { simd_apply(out.data<T>(), x.numel(), f, x.data<T>(), y.data<T>()); });
  return out;
}

// Arithmetic (f written for both T and xsimd batches): same-shaped contiguous operands, the
// common case (residual adds, gradient sums), take simd_binary_map; strided views go through
// binary_map's row loops rather than being copied first, as they would be for exp or tanh.
template <class F>
static Tensor arithmetic_map(const Tensor& a, const Tensor& b, const char* op, F f) {
  if (!a.is_contiguous() || !b.is_contiguous()) return binary_map(a, b, op, f);
  return simd_binary_map(a, b, op, f);
}

// ------------------------------------------------------------------------------------------
// sum_to: the backward of broadcasting

Tensor sum_to(const Tensor& t, const Shape& shape) {
  if (t.shape() == shape) return t;
  HEED_CHECK(broadcast_shapes(shape, t.shape(), "sum_to") == t.shape(), "sum_to: cannot reduce ",
             to_string(t.shape()), " to ", to_string(shape));
  Tensor out = Tensor::zeros(shape, t.dtype());
  const Shape& big = t.shape();
  // out viewed with t's shape: stride 0 on the axes being summed over.
  Shape so = broadcast_strides(out, big);
  visit_dtype(t.dtype(), [&]<class T>() {
    const T* pt = static_cast<const T*>(t.storage()->data());
    T* po = out.data<T>();
    const int64_t it = big.empty() ? 0 : t.strides().back(), io = so.empty() ? 0 : so.back();
    for_each_row<2>(big, {&t.strides(), &so}, {t.offset(), 0}, [&](int64_t len, const std::array<int64_t, 2>& off) {
      const T* rt = pt + off[0];
      T* ro = po + off[1];
      if (io == 0) {
        T acc = 0;
        for (int64_t i = 0; i < len; ++i) acc += rt[i * it];
        *ro += acc;
      } else if (it == 1 && io == 1) {
        for (int64_t i = 0; i < len; ++i) ro[i] += rt[i];
      } else {
        for (int64_t i = 0; i < len; ++i) ro[i * io] += rt[i * it];
      }
    });
  });
  const Shape from = t.shape();
  return record("sum_to", out, {t}, [from](const Tensor& g) { return std::vector<Tensor>{expand(g, from)}; });
}

// ------------------------------------------------------------------------------------------
// binary arithmetic

Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = arithmetic_map(a, b, "add", [](auto x, auto y) { return x + y; });
  return record("add", out, {a, b}, [sa = a.shape(), sb = b.shape()](const Tensor& g) {
    return std::vector<Tensor>{sum_to(g, sa), sum_to(g, sb)};
  });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor out = arithmetic_map(a, b, "sub", [](auto x, auto y) { return x - y; });
  return record("sub", out, {a, b}, [sa = a.shape(), sb = b.shape()](const Tensor& g) {
    return std::vector<Tensor>{sum_to(g, sa), sum_to(neg(g), sb)};
  });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = arithmetic_map(a, b, "mul", [](auto x, auto y) { return x * y; });
  // d(ab) = b da + a db: a is kept only for db and b only for da, as torch's mul saves them.
  const Tensor keep_a = b.requires_grad() ? a.detach() : Tensor(), keep_b = a.requires_grad() ? b.detach() : Tensor();
  return record("mul", out, {a, b}, [keep_a, keep_b, sa = a.shape(), sb = b.shape()](const Tensor& g) {
    return std::vector<Tensor>{keep_b.defined() ? sum_to(mul(g, keep_b), sa) : Tensor(),
                               keep_a.defined() ? sum_to(mul(g, keep_a), sb) : Tensor()};
  }, {keep_a, keep_b});
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = arithmetic_map(a, b, "div", [](auto x, auto y) { return x / y; });
  // d(a/b) = da / b - a db / b^2 = (g / b) (1, -out): the output is kept only for db.
  const Tensor keep_y = b.requires_grad() ? out.detach() : Tensor();
  return record("div", out, {a, b}, [b = b.detach(), keep_y, sa = a.shape()](const Tensor& g) {
    Tensor ga = div(g, b);
    return std::vector<Tensor>{sum_to(ga, sa), keep_y.defined() ? sum_to(neg(mul(ga, keep_y)), b.shape()) : Tensor()};
  }, {b, keep_y});
}

// ------------------------------------------------------------------------------------------
// scalar arithmetic

Tensor add(const Tensor& a, double s) {
  Tensor out = unary_map("add", a, [s](auto x) { return x + static_cast<decltype(x)>(s); });
  return record("add_scalar", out, {a}, [](const Tensor& g) { return std::vector<Tensor>{g}; });
}

Tensor mul(const Tensor& a, double s) {
  Tensor out = unary_map("mul", a, [s](auto x) { return x * static_cast<decltype(x)>(s); });
  return record("mul_scalar", out, {a}, [s](const Tensor& g) { return std::vector<Tensor>{mul(g, s)}; });
}

Tensor div(const Tensor& a, double s) {
  // A division, not a product with 1 / s: correctly rounded as torch's a / s, and no overflow of
  // 1 / s for a tiny s.
  Tensor out = unary_map("div", a, [s](auto x) { return x / static_cast<decltype(x)>(s); });
  return record("div_scalar", out, {a}, [s](const Tensor& g) { return std::vector<Tensor>{div(g, s)}; });
}

Tensor rsub(double s, const Tensor& a) {
  Tensor out = unary_map("rsub", a, [s](auto x) { return static_cast<decltype(x)>(s) - x; });
  return record("rsub_scalar", out, {a}, [](const Tensor& g) { return std::vector<Tensor>{neg(g)}; });
}

Tensor rdiv(double s, const Tensor& a) {
  Tensor out = unary_map("rdiv", a, [s](auto x) { return static_cast<decltype(x)>(s) / x; });
  // d(s/a) = -s / a^2 = -out / a
  return record("rdiv_scalar", out, {a}, [a = a.detach(), y = out.detach()](const Tensor& g) {
    return std::vector<Tensor>{neg(div(mul(g, y), a))};
  }, {a, out});
}

Tensor neg(const Tensor& a) {
  Tensor out = unary_map("neg", a, [](auto x) { return -x; });
  return record("neg", out, {a}, [](const Tensor& g) { return std::vector<Tensor>{neg(g)}; });
}

// ------------------------------------------------------------------------------------------
// pointwise functions

Tensor pow(const Tensor& a, double p) {
  Tensor out = unary_map("pow", a, [p](auto x) { return std::pow(x, static_cast<decltype(x)>(p)); });
  // d a^p = p a^(p-1); a^0 is constant, so its gradient is 0 even at a = 0, where p a^(p-1)
  // would be 0 * inf (torch's pow backward makes the same exception).
  return record("pow", out, {a}, [a = a.detach(), p](const Tensor& g) {
    if (p == 0.0) return std::vector<Tensor>{Tensor::zeros(a.shape(), a.dtype())};
    Tensor d = unary_map("pow", a, [p](auto x) { return static_cast<decltype(x)>(p) * std::pow(x, static_cast<decltype(x)>(p - 1)); });
    return std::vector<Tensor>{mul(g, d)};
  }, {a});
}

// e^x of any argument by type: std::exp on a scalar, detail::exp_lanes_full_range on a batch
// (core/ops/simd_exp.h: xsimd's, without its undefined cast, finite up to the true overflow).
template <class V>
static V exp_any(V x) {
  if constexpr (std::is_floating_point_v<V>) {
    return std::exp(x);
  } else {
    return detail::exp_lanes_full_range(x);
  }
}

Tensor exp(const Tensor& a) {
  Tensor out = simd_unary_map("exp", a, [](auto x) { return exp_any(x); });
  return record("exp", out, {a}, [y = out.detach()](const Tensor& g) { return std::vector<Tensor>{mul(g, y)}; }, {out});
}

Tensor log(const Tensor& a) {
  Tensor out = unary_map("log", a, [](auto x) { return std::log(x); });
  return record("log", out, {a}, [a = a.detach()](const Tensor& g) { return std::vector<Tensor>{div(g, a)}; }, {a});
}

Tensor sqrt(const Tensor& a) {
  Tensor out = unary_map("sqrt", a, [](auto x) { return std::sqrt(x); });
  // d sqrt(a) = 1 / (2 sqrt(a))
  return record("sqrt", out, {a}, [y = out.detach()](const Tensor& g) {
    return std::vector<Tensor>{div(mul(g, 0.5), y)};
  }, {out});
}

Tensor tanh(const Tensor& a) {
  Tensor out = simd_unary_map("tanh", a, [](auto x) {
    if constexpr (std::is_floating_point_v<decltype(x)>) {
      return std::tanh(x);
    } else {
      return detail::tanh_lanes(x);  // core/ops/simd_exp.h: xsimd's, without its exp's undefined cast
    }
  });
  // d tanh = 1 - tanh^2
  return record("tanh", out, {a}, [y = out.detach()](const Tensor& g) {
    return std::vector<Tensor>{binary_map(g, y, "tanh_backward", [](auto gv, auto yv) { return gv * (1 - yv * yv); })};
  }, {out});
}

Tensor abs(const Tensor& a) {
  // One pass each way (it was eight tensor ops): |-0| = +0 as torch's; the gradient is g sign(a),
  // 0 at 0 as torch's, a product as before (a NaN or infinite g times 0 stays NaN).
  Tensor out = unary_map("abs", a, [](auto x) { return std::abs(x); });
  return record("abs", out, {a}, [a = a.detach()](const Tensor& g) {
    return std::vector<Tensor>{binary_map(g, a, "abs_backward", [](auto gv, auto x) {
      using T = decltype(gv);
      return gv * (T(x > 0) - T(x < 0));
    })};
  }, {a});
}

Tensor relu(const Tensor& a) {
  // Written as "x <= 0 gives 0" rather than "x > 0 keeps x", so a NaN stays NaN and its gradient
  // passes, as torch.relu (clamp_min) and its threshold_backward do.
  Tensor out = unary_map("relu", a, [](auto x) { return x <= 0 ? decltype(x)(0) : x; });
  return record("relu", out, {a}, [y = out.detach()](const Tensor& g) {
    return std::vector<Tensor>{binary_map(g, y, "relu_backward", [](auto gv, auto yv) { return yv <= 0 ? decltype(gv)(0) : gv; })};
  }, {out});
}

Tensor gelu(const Tensor& a) {
  // gelu(x) = x Phi(x), Phi the standard normal CDF (core/ops/normal_cdf.h: why not via erf).
  Tensor out = simd_unary_map("gelu", a, [](auto x) { return x * detail::normal_cdf_pdf(x).cdf; });
  // d gelu = Phi(x) + x phi(x), phi the standard normal density.
  return record("gelu", out, {a}, [a = a.detach()](const Tensor& g) {
    return std::vector<Tensor>{simd_binary_map(g, a, "gelu_backward", [](auto gv, auto x) {
      const auto [cdf, pdf] = detail::normal_cdf_pdf(x);
      return gv * (cdf + x * pdf);
    })};
  }, {a});
}

// GELU's tanh approximation and its derivative, lane by lane: with u = sqrt(2 / pi) (x + 0.044715 x^3),
// 0.5 (1 + tanh(u)) = sigmoid(2u), taken from t = exp(-2|u|) <= 1 (no overflow, and no 1 + tanh(u)
// cancelling for x < 0): sigmoid(2u) = 1 / (1 + t) for u >= 0, t / (1 + t) otherwise, and
// sigmoid' = t / (1 + t)^2. y = x s; dy/dx = s + 2 x s' u'. Where t underflows to 0 the second term
// is 0 (x u' alone may overflow to inf, or be infinite: 0 * inf would be NaN); a NaN x stays NaN.
template <class B>
struct GeluTanh {
  B value, slope;
};
template <class T, class A>
static GeluTanh<xsimd::batch<T, A>> gelu_tanh_lanes(xsimd::batch<T, A> x) {
  using B = xsimd::batch<T, A>;
  const B beta(static_cast<T>(std::numbers::sqrt2 * std::numbers::inv_sqrtpi)), kappa(static_cast<T>(0.044715));
  const B x2 = x * x;
  const B u = beta * (x + kappa * x2 * x);
  const B t = detail::exp_lanes(B(-2) * xsimd::abs(u));
  const B r = B(1) / (B(1) + t);
  const B s = xsimd::select(u < B(0), t * r, r);
  const B term = B(2) * x * (t * r * r) * (beta * (B(1) + B(3) * kappa * x2));
  return {x * s, s + xsimd::select(t == B(0), B(0), term)};
}
// One number through a batch, as normal_cdf_pdf: a loop's scalar tail gives its batches' bits.
template <class T>
  requires std::is_floating_point_v<T>
static GeluTanh<T> gelu_tanh_lanes(T x) {
  const auto r = gelu_tanh_lanes(xsimd::batch<T>(x));
  return {detail::first_lane(r.value), detail::first_lane(r.slope)};
}

Tensor gelu(const Tensor& a, GeluApproximation approximate) {
  if (approximate == GeluApproximation::none) return gelu(a);
  Tensor out = simd_unary_map("gelu", a, [](auto x) { return gelu_tanh_lanes(x).value; });
  return record("gelu_tanh", out, {a}, [a = a.detach()](const Tensor& g) {
    return std::vector<Tensor>{simd_binary_map(g, a, "gelu_tanh_backward", [](auto gv, auto x) {
      return gv * gelu_tanh_lanes(x).slope;
    })};
  }, {a});
}

Tensor sigmoid(const Tensor& a) {
  // e^-x overflows to inf below about -88 (float32), giving 1 / inf = 0: the right limit.
  Tensor out = simd_unary_map("sigmoid", a, [](auto x) { return decltype(x)(1) / (decltype(x)(1) + exp_any(-x)); });
  // d sigmoid = y (1 - y)
  return record("sigmoid", out, {a}, [y = out.detach()](const Tensor& g) {
    return std::vector<Tensor>{simd_binary_map(g, y, "sigmoid_backward", [](auto gv, auto yv) {
      return gv * (yv * (decltype(yv)(1) - yv));
    })};
  }, {out});
}

Tensor silu(const Tensor& a) {
  // torch's form x / (1 + e^-x), not x * sigmoid(x): far left, sigmoid(x) is a subnormal that has
  // lost its digits before the product.
  Tensor out = simd_unary_map("silu", a, [](auto x) { return x / (decltype(x)(1) + exp_any(-x)); });
  // d silu = s (1 + x (1 - s)), s = sigmoid(x), as torch's silu_backward.
  return record("silu", out, {a}, [a = a.detach()](const Tensor& g) {
    return std::vector<Tensor>{simd_binary_map(g, a, "silu_backward", [](auto gv, auto x) {
      using V = decltype(x);
      const V s = V(1) / (V(1) + exp_any(-x));
      return gv * (s * (V(1) + x * (V(1) - s)));
    })};
  }, {a});
}

Tensor sin(const Tensor& a) {
  Tensor out = unary_map("sin", a, [](auto x) { return std::sin(x); });
  return record("sin", out, {a}, [a = a.detach()](const Tensor& g) {
    return std::vector<Tensor>{binary_map(g, a, "sin_backward", [](auto gv, auto x) { return gv * std::cos(x); })};
  }, {a});
}

Tensor cos(const Tensor& a) {
  Tensor out = unary_map("cos", a, [](auto x) { return std::cos(x); });
  return record("cos", out, {a}, [a = a.detach()](const Tensor& g) {
    return std::vector<Tensor>{binary_map(g, a, "cos_backward", [](auto gv, auto x) { return -(gv * std::sin(x)); })};
  }, {a});
}

Tensor clamp(const Tensor& a, std::optional<double> lo, std::optional<double> hi) {
  HEED_CHECK(lo || hi, "clamp: give at least one of the bounds lo and hi");
  HEED_CHECK(!(lo && std::isnan(*lo)) && !(hi && std::isnan(*hi)), "clamp: a bound is NaN");
  for (const std::optional<double>& bound : {lo, hi})
    if (bound) check_scalar_fits("clamp", *bound, a.dtype());
  const double l = lo.value_or(-INFINITY), h = hi.value_or(INFINITY);
  // The bounds rounded to a's dtype first, as torch's scalars are; written so that a NaN element
  // stays NaN (each comparison with NaN is false), and lo > hi gives hi.
  Tensor out = unary_map("clamp", a, [l, h](auto x) {
    using T = decltype(x);
    const T lt = static_cast<T>(l), ht = static_cast<T>(h);
    const T y = x < lt ? lt : x;
    return y > ht ? ht : y;
  });
  // torch's clamp_backward: the gradient where lo <= a <= hi (bounds included), 0 elsewhere and at NaN.
  return record("clamp", out, {a}, [a = a.detach(), l, h](const Tensor& g) {
    return std::vector<Tensor>{binary_map(g, a, "clamp_backward", [l, h](auto gv, auto x) {
      using T = decltype(x);
      return x >= static_cast<T>(l) && x <= static_cast<T>(h) ? gv : T(0);
    })};
  }, {a});
}

// maximum and minimum: `a_wins` is a > b for maximum and a < b for minimum. torch's backward
// (derivatives.yaml, maximum): g / 2 to each side at a tie, g to the side that wins, 0 to the
// other; with a NaN no comparison holds, so both sides get all of g.
static Tensor extremum(const Tensor& a, const Tensor& b, bool is_max) {
  const char* op = is_max ? "maximum" : "minimum";
  Tensor out = binary_map(a, b, op, [is_max](auto x, auto y) {
    if (x != x) return x;  // NaN on the left
    if (y != y) return y;  // NaN on the right
    return (is_max ? x > y : x < y) ? x : y;
  });
  return record(op, out, {a, b}, [a = a.detach(), b = b.detach(), is_max](const Tensor& g) {
    const Tensor zero = Tensor::scalar(0.0, g.dtype());
    const Tensor shared = where(eq(a, b), div(g, 2.0), g);
    const Tensor a_loses = is_max ? lt(a, b) : gt(a, b), b_loses = is_max ? gt(a, b) : lt(a, b);
    return std::vector<Tensor>{sum_to(where(a_loses, zero, shared), a.shape()),
                               sum_to(where(b_loses, zero, shared), b.shape())};
  }, {a, b});
}

Tensor maximum(const Tensor& a, const Tensor& b) { return extremum(a, b, true); }
Tensor minimum(const Tensor& a, const Tensor& b) { return extremum(a, b, false); }

// ------------------------------------------------------------------------------------------
// softplus, leaky_relu, elu: torch's formulas and backwards (at x = 0 leaky_relu's and elu's
// gradients take the x <= 0 side, as torch's).

Tensor softplus(const Tensor& a, double beta, double threshold) {
  HEED_CHECK(beta != 0 && !std::isnan(beta) && !std::isnan(threshold), "softplus: beta (", beta,
             ") must be non-zero and beta, threshold (", threshold, ") not NaN");
  // log(1 + e^(beta x)) / beta, linear (x itself) where beta x > threshold, as torch's.
  Tensor out = unary_map("softplus", a, [beta, threshold](auto x) {
    using T = decltype(x);
    const T bx = x * static_cast<T>(beta);
    return bx > static_cast<T>(threshold) ? x : std::log1p(std::exp(bx)) / static_cast<T>(beta);
  });
  // d = z / (z + 1), z = e^(beta x): sigmoid(beta x); 1 in the linear region.
  return record("softplus", out, {a}, [a = a.detach(), beta, threshold](const Tensor& g) {
    return std::vector<Tensor>{binary_map(g, a, "softplus_backward", [beta, threshold](auto gv, auto x) {
      using T = decltype(x);
      const T bx = x * static_cast<T>(beta);
      if (bx > static_cast<T>(threshold)) return gv;
      const T z = std::exp(bx);
      return gv * z / (z + T(1));
    })};
  }, {a});
}

Tensor leaky_relu(const Tensor& a, double negative_slope) {
  Tensor out = unary_map("leaky_relu", a, [negative_slope](auto x) {
    using T = decltype(x);
    return x > 0 ? x : x * static_cast<T>(negative_slope);
  });
  return record("leaky_relu", out, {a}, [a = a.detach(), negative_slope](const Tensor& g) {
    return std::vector<Tensor>{binary_map(g, a, "leaky_relu_backward", [negative_slope](auto gv, auto x) {
      using T = decltype(x);
      return x > 0 ? gv : gv * static_cast<T>(negative_slope);
    })};
  }, {a});
}

Tensor elu(const Tensor& a, double alpha) {
  Tensor out = unary_map("elu", a, [alpha](auto x) {
    using T = decltype(x);
    return x <= 0 ? static_cast<T>(alpha) * std::expm1(x) : x;
  });
  return record("elu", out, {a}, [a = a.detach(), alpha](const Tensor& g) {
    return std::vector<Tensor>{binary_map(g, a, "elu_backward", [alpha](auto gv, auto x) {
      using T = decltype(x);
      return x <= 0 ? gv * static_cast<T>(alpha) * std::exp(x) : gv;
    })};
  }, {a});
}

// ------------------------------------------------------------------------------------------
// log1p, expm1, rsqrt, reciprocal, square; floor, ceil, round (their gradient is 0, as torch's).

Tensor log1p(const Tensor& a) {
  Tensor out = unary_map("log1p", a, [](auto x) { return std::log1p(x); });
  return record("log1p", out, {a}, [a = a.detach()](const Tensor& g) {
    return std::vector<Tensor>{binary_map(g, a, "log1p_backward", [](auto gv, auto x) { return gv / (x + 1); })};
  }, {a});
}

Tensor expm1(const Tensor& a) {
  Tensor out = unary_map("expm1", a, [](auto x) { return std::expm1(x); });
  return record("expm1", out, {a}, [y = out.detach()](const Tensor& g) {
    return std::vector<Tensor>{binary_map(g, y, "expm1_backward", [](auto gv, auto yv) { return gv * (yv + 1); })};
  }, {out});
}

Tensor rsqrt(const Tensor& a) {
  Tensor out = unary_map("rsqrt", a, [](auto x) { return decltype(x)(1) / std::sqrt(x); });
  // d x^(-1/2) = -y^3 / 2, as torch's
  return record("rsqrt", out, {a}, [y = out.detach()](const Tensor& g) {
    return std::vector<Tensor>{binary_map(g, y, "rsqrt_backward", [](auto gv, auto yv) {
      return gv * (yv * yv * yv) * decltype(yv)(-0.5);
    })};
  }, {out});
}

Tensor reciprocal(const Tensor& a) {
  Tensor out = unary_map("reciprocal", a, [](auto x) { return decltype(x)(1) / x; });
  return record("reciprocal", out, {a}, [y = out.detach()](const Tensor& g) {
    return std::vector<Tensor>{binary_map(g, y, "reciprocal_backward", [](auto gv, auto yv) { return -(gv * (yv * yv)); })};
  }, {out});
}

Tensor square(const Tensor& a) {
  Tensor out = unary_map("square", a, [](auto x) { return x * x; });
  return record("square", out, {a}, [a = a.detach()](const Tensor& g) {
    return std::vector<Tensor>{binary_map(g, a, "square_backward", [](auto gv, auto x) { return gv * (x + x); })};
  }, {a});
}

// A step function: its gradient is 0 everywhere, as torch's floor, ceil and round.
template <class F>
static Tensor rounding(const Tensor& a, const char* op, F f) {
  Tensor out = unary_map(op, a, f);
  return record(op, out, {a}, [](const Tensor& g) { return std::vector<Tensor>{Tensor::zeros(g.shape(), g.dtype())}; });
}

Tensor floor(const Tensor& a) { return rounding(a, "floor", [](auto x) { return std::floor(x); }); }
Tensor ceil(const Tensor& a) { return rounding(a, "ceil", [](auto x) { return std::ceil(x); }); }
// std::nearbyint in the default rounding mode: half to even (0.5 -> 0, 1.5 -> 2, 2.5 -> 2), as torch.round.
Tensor round(const Tensor& a) { return rounding(a, "round", [](auto x) { return std::nearbyint(x); }); }

}  // namespace heed
