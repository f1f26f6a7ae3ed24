// heed: element types. Training runs in float32; float64 exists so gradients can be checked
// with finite differences as torch.autograd.gradcheck does. int32, int64 and bool tensors hold
// ids, indices and masks (comparisons, argmax, masks for masked_fill / where / attention); they
// never carry gradients. Kernels are templates over the element type, dispatched once per op:
// visit_dtype for the floating-point kernels, visit_any_dtype for those that work on every type.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "core/check.h"

namespace heed {

enum class DType { f32, f64, i32, i64, boolean };

inline const char* dtype_name(DType d) {
  switch (d) {
    case DType::f32: return "float32";
    case DType::f64: return "float64";
    case DType::i32: return "int32";
    case DType::i64: return "int64";
    case DType::boolean: return "bool";
  }
  return "?";
}
inline size_t dtype_size(DType d) {
  switch (d) {
    case DType::f32: case DType::i32: return 4;
    case DType::f64: case DType::i64: return 8;
    case DType::boolean: return 1;
  }
  return 0;
}
/// float32 or float64: the types that can require gradients.
inline bool is_floating(DType d) { return d == DType::f32 || d == DType::f64; }

template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() { return DType::f32; }
template <>
constexpr DType dtype_of<double>() { return DType::f64; }
template <>
constexpr DType dtype_of<int32_t>() { return DType::i32; }
template <>
constexpr DType dtype_of<int64_t>() { return DType::i64; }
template <>
constexpr DType dtype_of<bool>() { return DType::boolean; }

/// Refuses, naming `op`, a scalar that a float dtype cannot hold: a finite value past its largest
/// (1e39 in float32), which would round to inf. torch refuses such a fill value or bound ("value
/// cannot be converted to type float without overflow"); inf and NaN are taken as given. Integer
/// dtypes are checked where the value is converted (an out-of-range value is refused there too).
inline void check_scalar_fits(const char* op, double value, DType d) {
  if (!is_floating(d) || !std::isfinite(value)) return;
  const double most = d == DType::f32 ? double(std::numeric_limits<float>::max()) : std::numeric_limits<double>::max();
  HEED_CHECK(std::fabs(value) <= most, op, ": the value ", value, " cannot be converted to ", dtype_name(d),
             " without overflow");
}

/// Calls f.template operator()<T>() with T = float or double, matching `d`; throws heed::Error
/// for an integer or bool tensor (the floating-point kernels: arithmetic, reductions, matmul...):
///   visit_dtype(x.dtype(), [&]<class T>() { kernel<T>(x.data<T>(), ...); });
template <class F>
decltype(auto) visit_dtype(DType d, F&& f) {
  HEED_CHECK(is_floating(d), "expected a float32 or float64 tensor, got ", dtype_name(d),
             " (convert with .to(DType::f32))");
  if (d == DType::f32) return f.template operator()<float>();
  return f.template operator()<double>();
}

/// visit_dtype over every element type (float, double, int32_t, int64_t, bool): copies,
/// comparisons, indexing.
template <class F>
decltype(auto) visit_any_dtype(DType d, F&& f) {
  switch (d) {
    case DType::f32: return f.template operator()<float>();
    case DType::i32: return f.template operator()<int32_t>();
    case DType::i64: return f.template operator()<int64_t>();
    case DType::boolean: return f.template operator()<bool>();
    case DType::f64: break;
  }
  return f.template operator()<double>();
}

}  // namespace heed
