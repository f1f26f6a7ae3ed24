// heed <-> xtensor, opt-in: the only heed header that includes xtensor, so programs that do not
// include it need neither xtensor nor its compile time. A program that does links xtensor itself
// (CMake: find_package(xtensor 0.24 REQUIRED), target `xtensor`).
//
//   xt::xarray<float> a = {{1, 2}, {3, 4}};
//   heed::Tensor t = heed::from_xtensor(a * 2.0f);      // a copy, float32 (2, 2)
//   auto view = heed::as_xtensor<float>(t);              // no copy: writes go to t's storage
//   view(0, 1) = 7;                                      // t.at({0, 1}) == 7
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>

#include "core/tensor.h"

namespace heed {

/// A contiguous tensor's storage seen as an xtensor expression (an xarray adaptor of its shape,
/// row-major), without a copy: reads and writes go to the tensor's storage, which must outlive
/// the adaptor. T must be the tensor's element type (float, double, int32_t, int64_t, bool).
/// Throws heed::Error on a non-contiguous tensor (call .contiguous() first) or another T.
template <class T>
auto as_xtensor(const Tensor& t) {
  HEED_CHECK(t.is_contiguous(), "as_xtensor: the tensor (shape ", to_string(t.shape()),
             ") is not contiguous; call .contiguous() first");
  std::vector<std::size_t> shape(t.shape().begin(), t.shape().end());
  return xt::adapt(t.data<T>(), static_cast<std::size_t>(t.numel()), xt::no_ownership(), shape);
}

/// A new tensor holding the values of any xtensor expression (evaluated once into a row-major
/// xarray, whatever the expression's layout, then copied), of the expression's element type.
template <class E>
Tensor from_xtensor(const xt::xexpression<E>& expression) {
  using T = typename E::value_type;
  // Into a row-major xarray, not through xt::eval: xtensor 0.24.3's eval of an expression over
  // xarrays makes a rank-4 xtensor (it takes the shape's small-vector capacity for the rank).
  const xt::xarray<T, xt::layout_type::row_major> values = expression.derived_cast();
  Shape shape(values.shape().begin(), values.shape().end());
  Tensor t = Tensor::empty(shape, dtype_of<T>());
  std::copy(values.cbegin(), values.cend(), t.data<T>());
  return t;
}

}  // namespace heed
