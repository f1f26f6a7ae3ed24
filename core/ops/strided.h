// heed (internal): strided and broadcast views as the op families' kernels read them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/cpu.h"
#include "core/tensor.h"

namespace heed::detail {

/// The tensor's data as a contiguous buffer, outside autograd: itself when already contiguous,
/// else a copy. Kernels read it; the op records itself on the original tensor.
inline Tensor contiguous_data(const Tensor& a) { return a.is_contiguous() ? a : a.detach().contiguous(); }

/// Refuses an integer or bool tensor for a float kernel, naming `op` (visit_dtype's own message
/// does not say which op of an expression it was).
inline void check_floating(const Tensor& t, const char* op) {
  HEED_CHECK(is_floating(t.dtype()), op, ": expected a float32 or float64 tensor, got ", dtype_name(t.dtype()), " ",
             to_string(t.shape()), " (convert with .to(DType::f32))");
}

/// Refuses, naming `op`, working memory of `bytes` (for `what`) past the machine's physical memory.
/// Asked of the system, never found out by trying: a sanitizer aborts on a huge request before any
/// std::bad_alloc, and Linux may grant one and kill the process when it is touched.
inline void check_fits_memory(double bytes, const char* op, const std::string& what) {
  const uint64_t machine = physical_memory_bytes();
  HEED_CHECK(machine == 0 || bytes <= double(machine), op, ": ", what, " need ", bytes, " bytes, more than the ",
             machine, " bytes of this machine's memory");
}

/// Axis `axis` normalised into [0, ndim); throws naming `op` and the shape when out of range.
inline int64_t normalize_axis(int64_t axis, int64_t ndim, const char* op, const Shape& shape) {
  HEED_CHECK(axis >= -ndim && axis < ndim, op, ": axis ", axis, " out of range for shape ", to_string(shape));
  return axis < 0 ? axis + ndim : axis;
}

/// The permutation that moves `axis` of an ndim-d tensor last: permuted by it and made contiguous,
/// each slice along `axis` is one row (argmax, sort). axis_from_end undoes it.
inline std::vector<int64_t> axis_to_end(int64_t ndim, int64_t axis) {
  std::vector<int64_t> axes;
  for (int64_t d = 0; d < ndim; ++d)
    if (d != axis) axes.push_back(d);
  axes.push_back(axis);
  return axes;
}
inline std::vector<int64_t> axis_from_end(int64_t ndim, int64_t axis) {
  std::vector<int64_t> axes;
  for (int64_t d = 0; d < ndim; ++d) axes.push_back(d < axis ? d : d == axis ? ndim - 1 : d - 1);
  return axes;
}

/// Strides of `t` seen as a tensor of shape `out` (right-aligned; 0 on broadcast axes).
inline Shape broadcast_strides(const Tensor& t, const Shape& out) {
  Shape st(out.size(), 0);
  const size_t lead = out.size() - t.shape().size();
  for (size_t i = 0; i < t.shape().size(); ++i)
    st[lead + i] = t.shape()[i] == 1 ? 0 : t.strides()[i];
  return st;
}

/// Calls f(n, offsets[0..K)) for every innermost row of `shape`, where offsets[k] is where the row
/// starts in operand k (element offsets by strides[k]) and n = shape.back(). The caller then walks
/// each row with its innermost stride strides[k].back(). A 0-d shape is one row of length 1.
template <size_t K, class F>
void for_each_row(const Shape& shape, const std::array<const Shape*, K>& strides,
                  const std::array<int64_t, K>& base, F&& f) {
  const size_t nd = shape.size();
  if (nd == 0) {
    f(int64_t{1}, base);
    return;
  }
  for (int64_t d : shape)
    if (d == 0) return;
  const int64_t n = shape[nd - 1];
  std::vector<int64_t> idx(nd, 0);
  std::array<int64_t, K> off = base;
  while (true) {
    f(n, off);
    size_t d = nd - 1;
    while (true) {
      if (d == 0) return;
      --d;
      if (++idx[d] < shape[d]) {
        for (size_t k = 0; k < K; ++k) off[k] += (*strides[k])[d];
        break;
      }
      for (size_t k = 0; k < K; ++k) off[k] -= (*strides[k])[d] * (shape[d] - 1);
      idx[d] = 0;
    }
  }
}

}  // namespace heed::detail
