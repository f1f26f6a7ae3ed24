// Comparisons, logical ops and where: element-wise ops whose result is a bool tensor (no
// gradient), and `where`, which picks between two float tensors and is differentiable in both.
// Every operand broadcasts NumPy-style; values are compared as double, which is exact for
// float32, float64, int32, bool and int64 ids below 2^53. A scalar is first rounded to a float
// tensor's dtype, as PyTorch does (float32 x > 0.1 compares x with 0.1f, not with the double 0.1).
#include <algorithm>
#include <array>
#include <cmath>

#include "core/autograd.h"
#include "core/ops.h"
#include "core/ops/strided.h"

namespace heed {

namespace {

// out[i] = f(a[i], b[i]) over the broadcast of a and b, into a fresh contiguous tensor of `out_dtype`.
template <class F>
Tensor map2(const Tensor& a, const Tensor& b, DType out_dtype, const char* op, F&& f) {
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), op);
  Tensor out = Tensor::empty(shape, out_dtype);
  const Shape sa = detail::broadcast_strides(a, shape), sb = detail::broadcast_strides(b, shape);
  const Shape so = out.strides();
  visit_any_dtype(a.dtype(), [&]<class A>() {
    visit_any_dtype(b.dtype(), [&]<class B>() {
      visit_any_dtype(out_dtype, [&]<class O>() {
        const A* pa = static_cast<const A*>(a.storage()->data());
        const B* pb = static_cast<const B*>(b.storage()->data());
        O* po = out.data<O>();
        const int64_t ia = sa.empty() ? 0 : sa.back(), ib = sb.empty() ? 0 : sb.back();
        detail::for_each_row<3>(shape, {&sa, &sb, &so}, {a.offset(), b.offset(), 0},
                                [&](int64_t n, const std::array<int64_t, 3>& off) {
                                  for (int64_t i = 0; i < n; ++i)
                                    po[off[2] + i] = static_cast<O>(f(static_cast<double>(pa[off[0] + i * ia]),
                                                                      static_cast<double>(pb[off[1] + i * ib])));
                                });
      });
    });
  });
  return out;
}

template <class F>
Tensor compare(const Tensor& a, const Tensor& b, const char* op, F&& f) {
  return map2(a, b, DType::boolean, op, f);
}

// The scalar operand of a comparison with `a`: in a's dtype when a is a float tensor (PyTorch's
// type promotion, where a Python number does not widen a tensor's float dtype), exact otherwise.
Tensor scalar_like(const Tensor& a, double s) { return Tensor::scalar(s, is_floating(a.dtype()) ? a.dtype() : DType::f64); }

}  // namespace

Tensor eq(const Tensor& a, const Tensor& b) { return compare(a, b, "eq", [](double x, double y) { return x == y; }); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare(a, b, "ne", [](double x, double y) { return x != y; }); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare(a, b, "lt", [](double x, double y) { return x < y; }); }
Tensor le(const Tensor& a, const Tensor& b) { return compare(a, b, "le", [](double x, double y) { return x <= y; }); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare(a, b, "gt", [](double x, double y) { return x > y; }); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare(a, b, "ge", [](double x, double y) { return x >= y; }); }
Tensor eq(const Tensor& a, double s) { return eq(a, scalar_like(a, s)); }
Tensor ne(const Tensor& a, double s) { return ne(a, scalar_like(a, s)); }
Tensor lt(const Tensor& a, double s) { return lt(a, scalar_like(a, s)); }
Tensor le(const Tensor& a, double s) { return le(a, scalar_like(a, s)); }
Tensor gt(const Tensor& a, double s) { return gt(a, scalar_like(a, s)); }
Tensor ge(const Tensor& a, double s) { return ge(a, scalar_like(a, s)); }

Tensor logical_and(const Tensor& a, const Tensor& b) {
  return compare(a, b, "logical_and", [](double x, double y) { return x != 0 && y != 0; });
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  return compare(a, b, "logical_or", [](double x, double y) { return x != 0 || y != 0; });
}
Tensor logical_xor(const Tensor& a, const Tensor& b) {
  return compare(a, b, "logical_xor", [](double x, double y) { return (x != 0) != (y != 0); });
}
Tensor logical_not(const Tensor& a) { return eq(a, 0.0); }

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  HEED_CHECK(is_floating(a.dtype()) && a.dtype() == b.dtype(), "where: a and b must be float tensors of one dtype, got ",
             dtype_name(a.dtype()), " and ", dtype_name(b.dtype()));
  const Shape shape = broadcast_shapes(cond.shape(), broadcast_shapes(a.shape(), b.shape(), "where"), "where");
  const Tensor c = cond.dtype() == DType::boolean ? cond : ne(cond, 0.0);
  Tensor out = Tensor::empty(shape, a.dtype());
  const Shape sc = detail::broadcast_strides(c, shape), sa = detail::broadcast_strides(a, shape),
              sb = detail::broadcast_strides(b, shape), so = out.strides();
  visit_dtype(a.dtype(), [&]<class T>() {
    const bool* pc = static_cast<const bool*>(c.storage()->data());
    const T* pa = static_cast<const T*>(a.storage()->data());
    const T* pb = static_cast<const T*>(b.storage()->data());
    T* po = out.data<T>();
    auto inner = [](const Shape& s) { return s.empty() ? int64_t{0} : s.back(); };
    const int64_t ic = inner(sc), ia = inner(sa), ib = inner(sb);
    detail::for_each_row<4>(shape, {&sc, &sa, &sb, &so}, {c.offset(), a.offset(), b.offset(), 0},
                            [&](int64_t n, const std::array<int64_t, 4>& off) {
                              for (int64_t i = 0; i < n; ++i)
                                po[off[3] + i] = pc[off[0] + i * ic] ? pa[off[1] + i * ia] : pb[off[2] + i * ib];
                            });
  });
  // The gradient flows to a where cond holds and to b elsewhere, summed back over broadcast axes.
  return record("where", out, {a, b}, [c = c.detach(), sa = a.shape(), sb = b.shape()](const Tensor& g) {
    const Tensor zero = Tensor::scalar(0.0, g.dtype());
    return std::vector<Tensor>{sum_to(where(c, g, zero), sa), sum_to(where(c, zero, g), sb)};
  }, {c});
}

// The scalar side of where: in the tensor's dtype, as torch.where(c, x, 0.0) keeps x's float dtype.
static Tensor where_scalar(const Tensor& t, double s) {
  HEED_CHECK(is_floating(t.dtype()), "where: a scalar takes the tensor's dtype, which must be float32 or float64, got ",
             dtype_name(t.dtype()));
  check_scalar_fits("where", s, t.dtype());
  return Tensor::scalar(s, t.dtype());
}

Tensor where(const Tensor& cond, const Tensor& a, double b) { return where(cond, a, where_scalar(a, b)); }
Tensor where(const Tensor& cond, double a, const Tensor& b) { return where(cond, where_scalar(b, a), b); }

Tensor masked_fill(const Tensor& a, const Tensor& mask, double value) {
  const Shape shape = broadcast_shapes(a.shape(), mask.shape(), "masked_fill");
  HEED_CHECK(shape == a.shape(), "masked_fill: mask ", to_string(mask.shape()), " does not broadcast to ",
             to_string(a.shape()));
  check_scalar_fits("masked_fill", value, a.dtype());
  const Tensor fill = Tensor::scalar(value, a.dtype());
  if (is_floating(a.dtype())) return where(mask, fill, a);
  // An integer or bool tensor (torch's labels.masked_fill(pad, -100), for ignore_index): nothing
  // to differentiate, so picked element by element in its own type (int64 stays exact).
  const Tensor c = mask.dtype() == DType::boolean ? mask : ne(mask, 0.0);
  Tensor out = Tensor::empty(shape, a.dtype());
  const Shape sc = detail::broadcast_strides(c, shape), sa = detail::broadcast_strides(a, shape), so = out.strides();
  visit_any_dtype(a.dtype(), [&]<class T>() {
    const bool* pc = static_cast<const bool*>(c.storage()->data());
    const T* pa = static_cast<const T*>(a.storage()->data());
    const T v = *fill.data<T>();
    T* po = out.data<T>();
    const int64_t ic = sc.empty() ? 0 : sc.back(), ia = sa.empty() ? 0 : sa.back();
    detail::for_each_row<3>(shape, {&sc, &sa, &so}, {c.offset(), a.offset(), 0},
                            [&](int64_t n, const std::array<int64_t, 3>& off) {
                              for (int64_t i = 0; i < n; ++i) po[off[2] + i] = pc[off[0] + i * ic] ? v : pa[off[1] + i * ia];
                            });
  });
  return out;
}

// ------------------------------------------------------------------------------------------
// isnan / isinf / isfinite, allclose, any / all: bool results, any dtype (an integer or bool
// element is never NaN or infinite).

namespace {
template <class F>
Tensor classify(const Tensor& a, const char* op, F&& f) {
  return map2(a, Tensor::scalar(0.0, DType::f64), DType::boolean, op, [&f](double x, double) { return f(x); });
}

// The axis of any / all checked (naming the op; a 0-d tensor has axis 0 or -1, as torch's).
void check_reduce_axis(const Tensor& a, int64_t axis, const char* op) {
  detail::normalize_axis(axis, std::max<int64_t>(a.dim(), 1), op, a.shape());
}
}  // namespace

Tensor isnan(const Tensor& a) { return classify(a, "isnan", [](double x) { return std::isnan(x); }); }
Tensor isinf(const Tensor& a) { return classify(a, "isinf", [](double x) { return std::isinf(x); }); }
Tensor isfinite(const Tensor& a) { return classify(a, "isfinite", [](double x) { return std::isfinite(x); }); }

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  HEED_CHECK(rtol >= 0 && atol >= 0, "allclose: rtol (", rtol, ") and atol (", atol, ") must be non-negative");
  // torch.isclose: equal (infinities included), or both finite and |a - b| <= atol + rtol |b|;
  // NaN equals NaN only with equal_nan. Computed in double, so float32 operands are exact.
  const Tensor close = map2(a, b, DType::boolean, "allclose", [rtol, atol, equal_nan](double x, double y) {
    if (x == y) return true;
    if (std::isnan(x) || std::isnan(y)) return equal_nan && std::isnan(x) && std::isnan(y);
    if (!std::isfinite(x) || !std::isfinite(y)) return false;
    return std::fabs(x - y) <= atol + rtol * std::fabs(y);
  });
  return all(close).item() != 0;
}

// any and all count through sum's exact int64 path: any is "some element is non-zero", all "no
// element is zero" (a NaN is non-zero, as torch's); an empty tensor gives false and true.
Tensor any(const Tensor& a) { return gt(sum(ne(a, 0.0)), 0.0); }
Tensor all(const Tensor& a) { return eq(sum(eq(a, 0.0)), 0.0); }
Tensor any(const Tensor& a, int64_t axis, bool keepdim) {
  check_reduce_axis(a, axis, "any");
  return gt(sum(ne(a, 0.0), axis, keepdim), 0.0);
}
Tensor all(const Tensor& a, int64_t axis, bool keepdim) {
  check_reduce_axis(a, axis, "all");
  return eq(sum(eq(a, 0.0), axis, keepdim), 0.0);
}

}  // namespace heed
