// Ordering: sort, argsort, topk. Each orders the slices along an axis by one comparison: NaN as
// the largest value (torch's sort and topk) and equal elements by index, so every result is
// deterministic: sort is always stable (torch's stable=True) and topk keeps the lowest indices
// on ties. The values are gather(x, axis, indices), so their gradient is gather's scatter-add.
#include <algorithm>
#include <numeric>
#include <optional>

#include "core/ops.h"
#include "core/ops/strided.h"

namespace heed {

namespace {

// The indices (int64) of the first k elements of each slice of x along `axis` in the order
// above, ascending or descending: x's shape with k on `axis`. k == size: the whole order.
Tensor ordered_indices(const Tensor& x, int64_t axis, int64_t k, bool descending) {
  const int64_t nd = x.dim(), n = x.size(axis);
  const Tensor rows = permute(x.detach(), detail::axis_to_end(nd, axis)).contiguous();
  Shape out_shape = rows.shape();
  out_shape.back() = k;
  Tensor out = Tensor::empty(out_shape, DType::i64);
  const int64_t R = n > 0 ? rows.numel() / n : 0;  // k <= n: no output without a row
  int64_t* po = out.data<int64_t>();
  std::vector<int64_t> order(n);
  visit_any_dtype(x.dtype(), [&]<class T>() {
    for (int64_t r = 0; r < R; ++r) {
      const T* row = rows.data<T>() + r * n;
      auto before = [&](int64_t i, int64_t j) {
        const T a = row[i], b = row[j];
        const bool a_nan = a != a, b_nan = b != b;
        if (a_nan != b_nan) return descending ? a_nan : b_nan;
        if (!a_nan && a != b) return descending ? a > b : a < b;
        return i < j;
      };
      std::iota(order.begin(), order.end(), int64_t{0});
      if (k == n)
        std::sort(order.begin(), order.end(), before);
      else
        std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
      std::copy(order.begin(), order.begin() + k, po + r * k);
    }
  });
  return permute(out, detail::axis_from_end(nd, axis)).contiguous();
}

// x's first k elements along `axis` in the order above (all of them without k), and their
// indices. A 0-d tensor is one element along axis 0 or -1, as in torch.
ValuesIndices ordered(const Tensor& x, int64_t axis, std::optional<int64_t> k, bool descending, const char* op) {
  const Tensor x1 = x.dim() == 0 ? reshape(x, {1}) : x;
  axis = detail::normalize_axis(axis, x1.dim(), op, x.shape());
  const int64_t n = x1.size(axis);
  HEED_CHECK(!k || (*k >= 0 && *k <= n), op, ": k = ", *k, " out of range for axis ", axis, " of size ", n, " in ",
             to_string(x.shape()));
  // A 0-d input's results are 0-d too, one element each: k = 0 has no such result (torch 1.13
  // returns the element anyway).
  HEED_CHECK(x.dim() > 0 || !k || *k == 1, op, ": k = ", *k, " for a 0-d tensor, whose 0-d result holds one element");
  Tensor indices = ordered_indices(x1, axis, k.value_or(n), descending);
  Tensor values = gather(x1, axis, indices);
  if (x.dim() == 0) return {reshape(values, {}), reshape(indices, {})};
  return {values, indices};
}

}  // namespace

ValuesIndices sort(const Tensor& x, int64_t axis, bool descending) {
  return ordered(x, axis, std::nullopt, descending, "sort");
}

// detach: the values argsort does not return need no graph.
Tensor argsort(const Tensor& x, int64_t axis, bool descending) {
  return ordered(x.detach(), axis, std::nullopt, descending, "argsort").indices;
}

// sorted = false lets torch return the k in any order; sorted order is one of them.
ValuesIndices topk(const Tensor& x, int64_t k, int64_t axis, bool largest, bool /*sorted*/) {
  return ordered(x, axis, k, largest, "topk");
}

}  // namespace heed
