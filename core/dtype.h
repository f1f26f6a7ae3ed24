// heed: element types. Training runs in float32; float64 exists so gradients can be checked
// with finite differences as torch.autograd.gradcheck does. Kernels are templates over the
// element type and are dispatched once per op with visit_dtype.
#pragma once

#include <cstddef>

namespace heed {

enum class DType { f32, f64 };

inline const char* dtype_name(DType d) { return d == DType::f32 ? "float32" : "float64"; }
inline size_t dtype_size(DType d) { return d == DType::f32 ? 4 : 8; }

template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() { return DType::f32; }
template <>
constexpr DType dtype_of<double>() { return DType::f64; }

/// Calls f.template operator()<T>() with T = float or double, matching `d`:
///   visit_dtype(x.dtype(), [&]<class T>() { kernel<T>(x.data<T>(), ...); });
template <class F>
decltype(auto) visit_dtype(DType d, F&& f) {
  if (d == DType::f32) return f.template operator()<float>();
  return f.template operator()<double>();
}

}  // namespace heed
