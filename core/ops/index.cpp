// Indexing: select (x[i]), gather, index_select, the scatters, index_put (and Tensor::index_put_),
// argmax, tril / triu. select is a view; gather, index_select, the scatters, index_put and tril /
// triu are differentiable w.r.t. their float inputs; argmax, argmin and every integer or bool
// result carry no gradient.
#include <algorithm>
#include <array>
#include <string>
#include <type_traits>

#include "core/autograd.h"
#include "core/ops.h"
#include "core/ops/strided.h"

namespace heed {

namespace {

// The elements of an integer index tensor (any strides), as int64, each checked to be in [0, n)
// for axis `axis` (torch refuses a negative index too).
std::vector<int64_t> index_values(const Tensor& index, const char* op, int64_t axis, int64_t n) {
  HEED_CHECK(index.dtype() == DType::i64 || index.dtype() == DType::i32, op, ": index must be int32 or int64, got ",
             dtype_name(index.dtype()));
  std::vector<int64_t> out = index.to_vector<int64_t>();  // exact: not through a double
  for (int64_t v : out)
    HEED_CHECK(v >= 0 && v < n, op, ": index ", v, " out of range for axis ", axis, " of size ", n);
  return out;
}

// out = x with the elements outside the band zeroed: tril keeps j - i <= k, triu keeps j - i >= k,
// over the last two axes.
Tensor band(const Tensor& x, int64_t k, bool lower, const char* op) {
  HEED_CHECK(x.dim() >= 2, op, ": needs at least 2 dims, got ", to_string(x.shape()));
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  out.copy_(x);
  const int64_t R = x.size(-2), C = x.size(-1), mats = R * C != 0 ? x.numel() / (R * C) : 0;
  visit_any_dtype(x.dtype(), [&]<class T>() {
    T* p = out.data<T>();
    for (int64_t m = 0; m < mats; ++m)
      for (int64_t i = 0; i < R; ++i)
        for (int64_t j = 0; j < C; ++j)
          if (lower ? j - i > k : j - i < k) p[(m * R + i) * C + j] = T(0);
  });
  if (!is_floating(x.dtype())) return out;
  return record(op, out, {x}, [k, lower, op](const Tensor& g) { return std::vector<Tensor>{band(g, k, lower, op)}; });
}

}  // namespace

Tensor tril(const Tensor& x, int64_t k) { return band(x, k, true, "tril"); }
Tensor triu(const Tensor& x, int64_t k) { return band(x, k, false, "triu"); }

Tensor select(const Tensor& x, int64_t axis, int64_t i) {
  axis = detail::normalize_axis(axis, x.dim(), "select", x.shape());
  const int64_t n = x.size(axis);
  HEED_CHECK(i >= -n && i < n, "select: index ", i, " out of range for axis ", axis, " of size ", n);
  if (i < 0) i += n;
  return squeeze(slice(x, axis, i, i + 1), axis);
}

// argmax and argmin: the index of the first largest (smallest) element of each slice; a NaN wins
// either way, as torch's (NaN propagates through max and min).
static Tensor arg_extreme(const Tensor& x, int64_t axis, bool keepdim, bool is_max) {
  const char* op = is_max ? "argmax" : "argmin";
  HEED_CHECK(x.dim() > 0, op, ": a 0-d tensor has no axis; use ", op, "(x)");
  axis = detail::normalize_axis(axis, x.dim(), op, x.shape());
  const int64_t n = x.size(axis);
  HEED_CHECK(n > 0, op, ": axis ", axis, " of ", to_string(x.shape()), " is empty");
  const Tensor rows = permute(x.detach(), detail::axis_to_end(x.dim(), axis)).contiguous();
  Shape out_shape = x.shape();
  out_shape.erase(out_shape.begin() + axis);
  Tensor out = Tensor::empty(out_shape, DType::i64);
  int64_t* po = out.data<int64_t>();
  visit_any_dtype(x.dtype(), [&]<class T>() {
    const T* p = rows.data<T>();
    for (int64_t r = 0, R = out.numel(); r < R; ++r) {
      int64_t best = 0;  // the first extreme, as torch's
      for (int64_t j = 1; j < n; ++j) {
        const T v = p[r * n + j], b = p[r * n + best];
        if ((is_max ? v > b : v < b) || (v != v && b == b)) best = j;
      }
      po[r] = best;
    }
  });
  return keepdim ? unsqueeze(out, axis) : out;
}

Tensor argmax(const Tensor& x) { return arg_extreme(reshape(x.detach(), {-1}), 0, false, true); }
Tensor argmax(const Tensor& x, int64_t axis, bool keepdim) { return arg_extreme(x, axis, keepdim, true); }
Tensor argmin(const Tensor& x) { return arg_extreme(reshape(x.detach(), {-1}), 0, false, false); }
Tensor argmin(const Tensor& x, int64_t axis, bool keepdim) { return arg_extreme(x, axis, keepdim, false); }

namespace {

// The values of `index` for gather or a scatter into x along `axis` (already normalised), checked
// as torch checks them: as many dims as x, no larger than x off `axis` (nor than src, a scatter's),
// every value an index into x's `axis`.
std::vector<int64_t> checked_index(const Tensor& x, int64_t axis, const Tensor& index, const Tensor* src,
                                   const char* op) {
  HEED_CHECK(index.dim() == x.dim(), op, ": index ", to_string(index.shape()), " must have as many dims as input ",
             to_string(x.shape()));
  for (int64_t d = 0; d < x.dim(); ++d) {
    HEED_CHECK(d == axis || index.size(d) <= x.size(d), op, ": index ", to_string(index.shape()),
               " is larger than input ", to_string(x.shape()), " on axis ", d);
    HEED_CHECK(!src || index.size(d) <= src->size(d), op, ": index ", to_string(index.shape()),
               " is larger than src ", to_string(src->shape()), " on axis ", d);
  }
  return index_values(index, op, axis, x.size(axis));
}

// The offsets under `strides` of the elements of a tensor of shape `is`, row-major, each with its
// coordinate on `axis` replaced by idx[e] when idx is given: where gather reads (x's strides) and
// a scatter writes (contiguous ones); without idx, where a scatter reads its src.
std::vector<int64_t> element_offsets(const Shape& is, const Shape& strides, const std::vector<int64_t>* idx,
                                     int64_t axis) {
  std::vector<int64_t> out(numel_of(is));
  std::vector<int64_t> pos(is.size(), 0);
  for (size_t e = 0; e < out.size(); ++e) {
    for (size_t d = 0; d < is.size(); ++d)
      out[e] += (idx && static_cast<int64_t>(d) == axis ? (*idx)[e] : pos[d]) * strides[d];
    for (size_t d = is.size(); d-- > 0;) {
      if (++pos[d] < is[d]) break;
      pos[d] = 0;
    }
  }
  return out;
}

}  // namespace

Tensor gather(const Tensor& x, int64_t axis, const Tensor& index) {
  axis = detail::normalize_axis(axis, x.dim(), "gather", x.shape());
  const std::vector<int64_t> idx = checked_index(x, axis, index, nullptr, "gather");
  const Shape& is = index.shape();
  const std::vector<int64_t> src = element_offsets(is, x.strides(), &idx, axis);
  Tensor out = Tensor::empty(is, x.dtype());
  visit_any_dtype(x.dtype(), [&]<class T>() {
    const T* p = static_cast<const T*>(x.storage()->data()) + x.offset();
    T* po = out.data<T>();
    for (size_t e = 0; e < src.size(); ++e) po[e] = p[src[e]];
  });
  if (!is_floating(x.dtype())) return out;
  const Shape xs = x.shape();
  std::vector<int64_t> dst = element_offsets(is, contiguous_strides(xs), &idx, axis);
  return record("gather", out, {x}, [xs, dst = std::move(dst)](const Tensor& g) {
    const Tensor gc = g.contiguous();
    Tensor dx = Tensor::zeros(xs, g.dtype());
    visit_dtype(g.dtype(), [&]<class T>() {
      const T* pg = gc.data<T>();
      T* pd = dx.data<T>();
      for (size_t e = 0; e < dst.size(); ++e) pd[dst[e]] += pg[e];
    });
    return std::vector<Tensor>{dx};
  });
}

Tensor index_select(const Tensor& x, int64_t axis, const Tensor& index) {
  axis = detail::normalize_axis(axis, x.dim(), "index_select", x.shape());
  HEED_CHECK(index.dim() <= 1, "index_select: index must be 1-D, got shape ", to_string(index.shape()));
  const int64_t n = x.size(axis);
  const std::vector<int64_t> idx = index_values(index, "index_select", axis, n);
  // x as (outer, n, inner): output row (o, j) is x's row (o, idx[j]), `inner` elements long.
  const int64_t m = static_cast<int64_t>(idx.size());
  const int64_t outer = numel_of(Shape(x.shape().begin(), x.shape().begin() + axis));
  const int64_t inner = numel_of(Shape(x.shape().begin() + axis + 1, x.shape().end()));
  Shape out_shape = x.shape();
  out_shape[axis] = m;
  const Tensor xc = detail::contiguous_data(x);
  Tensor out = Tensor::empty(out_shape, x.dtype());
  visit_any_dtype(x.dtype(), [&]<class T>() {
    const T* p = xc.data<T>();
    T* po = out.data<T>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < m; ++j) std::copy_n(p + (o * n + idx[j]) * inner, inner, po + (o * m + j) * inner);
  });
  if (!is_floating(x.dtype())) return out;
  // The backward is index_add's scatter-add: a repeated index gathers the gradient of every row
  // that read it.
  return record("index_select", out, {x}, [xs = x.shape(), axis, index = Tensor::from_vector(idx, {m})](const Tensor& g) {
    return std::vector<Tensor>{index_add(Tensor::zeros(xs, g.dtype()), axis, index, g)};
  });
}

namespace {

// a + b; an int32 or int64 sum wraps, as torch's scatter_add and index_add do (their C++ sum's
// overflow is undefined behaviour).
template <class T>
T add_wrapping(T a, T b) {
  if constexpr (std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return static_cast<T>(a + b);
  }
}

// out = x with src's elements written (add: added) at the positions index picks, as gather reads
// them: out[i][index[i][j]] = src[i][j] on axis 1. Elements are written in index's row-major
// order, so of two writes to one position the last wins, and its src element alone gets the
// gradient there (torch leaves the winner unspecified and gives every src element the gradient).
Tensor scatter_into(const Tensor& x, int64_t axis, const Tensor& index, const Tensor& src, bool add, const char* op) {
  axis = detail::normalize_axis(axis, x.dim(), op, x.shape());
  HEED_CHECK(src.dtype() == x.dtype(), op, ": src is ", dtype_name(src.dtype()), " but input is ",
             dtype_name(x.dtype()));
  HEED_CHECK(src.dim() == x.dim(), op, ": src ", to_string(src.shape()), " must have as many dims as input ",
             to_string(x.shape()));
  HEED_CHECK(!add || x.dtype() != DType::boolean, op, ": cannot add bool tensors");
  const std::vector<int64_t> idx = checked_index(x, axis, index, &src, op);
  const Shape& is = index.shape();
  const Shape xs = x.shape(), ss = src.shape();
  std::vector<int64_t> dst = element_offsets(is, contiguous_strides(xs), &idx, axis);
  const std::vector<int64_t> from = element_offsets(is, src.strides(), nullptr, axis);
  Tensor out = Tensor::empty(xs, x.dtype());
  out.copy_(x.detach());
  visit_any_dtype(x.dtype(), [&]<class T>() {
    const T* ps = static_cast<const T*>(src.storage()->data()) + src.offset();
    T* po = out.data<T>();
    for (size_t e = 0; e < dst.size(); ++e) po[dst[e]] = add ? add_wrapping(po[dst[e]], ps[from[e]]) : ps[from[e]];
  });
  if (!is_floating(x.dtype())) return out;
  std::vector<int64_t> src_dst = element_offsets(is, contiguous_strides(ss), nullptr, axis);
  return record(op, out, {x, src}, [add, ss, dst = std::move(dst), src_dst = std::move(src_dst)](const Tensor& g) {
    const Tensor gc = g.contiguous();
    Tensor dx = add ? gc : gc.clone(), dsrc = Tensor::zeros(ss, g.dtype());
    visit_dtype(g.dtype(), [&]<class T>() {
      const T* pg = gc.data<T>();
      T* px = dx.data<T>();
      T* ps = dsrc.data<T>();
      std::vector<bool> written(add ? 0 : dx.numel(), false);
      for (size_t e = dst.size(); e-- > 0;) {  // last first: a later write hides an earlier one
        if (add || !written[dst[e]]) ps[src_dst[e]] = pg[dst[e]];
        if (!add) written[dst[e]] = true;
      }
      if (!add)
        for (size_t e = 0; e < dst.size(); ++e) px[dst[e]] = T(0);  // overwritten: x's value is gone
    });
    return std::vector<Tensor>{dx, dsrc};
  });
}

}  // namespace

Tensor scatter(const Tensor& x, int64_t axis, const Tensor& index, const Tensor& src) {
  return scatter_into(x, axis, index, src, false, "scatter");
}

Tensor scatter_add(const Tensor& x, int64_t axis, const Tensor& index, const Tensor& src) {
  return scatter_into(x, axis, index, src, true, "scatter_add");
}

Tensor index_add(const Tensor& x, int64_t axis, const Tensor& index, const Tensor& src, double alpha) {
  axis = detail::normalize_axis(axis, x.dim(), "index_add", x.shape());
  HEED_CHECK(index.dim() == 1, "index_add: index must be 1-D, got ", to_string(index.shape()));
  // src * alpha is heed's mul, which takes float tensors only.
  HEED_CHECK(alpha == 1.0 || is_floating(src.dtype()), "index_add: alpha = ", alpha, " needs a float src, got ",
             dtype_name(src.dtype()));
  HEED_CHECK(src.dim() == x.dim(), "index_add: src ", to_string(src.shape()), " must have as many dims as input ",
             to_string(x.shape()));
  for (int64_t d = 0; d < x.dim(); ++d)
    HEED_CHECK(src.size(d) == (d == axis ? index.size(0) : x.size(d)), "index_add: src ", to_string(src.shape()),
               " must be input ", to_string(x.shape()), " with axis ", axis, " of index's size ", index.size(0));
  // scatter_add with index[j] at every position j of src's `axis`: index seen as src's shape.
  Shape along(x.dim(), 1);
  along[axis] = index.size(0);
  const Tensor spread = expand(reshape(index, along), src.shape());
  return scatter_into(x, axis, spread, alpha == 1.0 ? src : mul(src, alpha), true, "index_add");
}

namespace {

// Where index_put writes into a tensor x: for each element e of I, the shape the index tensors
// broadcast to, the offset `base[e]` (under `strides`) of x[i0[e], i1[e], ...], the first element
// of the block of x's trailing (unindexed) axes that values' slice e fills; `tail` holds the
// offsets of that block's elements, row-major.
struct PutPositions {
  Shape indexed;  // I + x's trailing axes: the shape values broadcast to
  std::vector<int64_t> base;
  std::vector<int64_t> tail;
};

PutPositions put_positions(const Tensor& x, const Shape& strides, const std::vector<Tensor>& indices,
                           const Tensor& values, bool accumulate, const char* op) {
  HEED_CHECK(values.defined(), op, ": values is an undefined tensor");
  HEED_CHECK(values.dtype() == x.dtype(), op, ": values are ", dtype_name(values.dtype()), " but the tensor is ",
             dtype_name(x.dtype()));
  HEED_CHECK(!accumulate || x.dtype() != DType::boolean, op, ": cannot accumulate into a bool tensor");
  // One int64 index per axis from the front: a bool mask becomes the coordinates of its true
  // elements, one index per axis it covers.
  std::vector<Tensor> per_axis;
  for (size_t j = 0; j < indices.size(); ++j) {
    const Tensor& ix = indices[j];
    HEED_CHECK(ix.defined(), op, ": index ", j, " is an undefined tensor (torch's None and ':' are not supported)");
    const int64_t axis = static_cast<int64_t>(per_axis.size());
    if (ix.dtype() == DType::boolean) {
      const int64_t k = ix.dim();
      HEED_CHECK(k > 0, op, ": index ", j, " is a 0-d bool tensor, which is not supported");
      HEED_CHECK(axis + k <= x.dim() && Shape(x.shape().begin() + axis, x.shape().begin() + axis + k) == ix.shape(),
                 op, ": the bool mask ", j, " of shape ", to_string(ix.shape()), " must match the shape ",
                 to_string(x.shape()), " on the axes from ", axis, " it indexes");
      const std::vector<int32_t> flags = ix.to_vector<int32_t>();
      std::vector<std::vector<int64_t>> coords(k);
      for (int64_t p = 0; p < static_cast<int64_t>(flags.size()); ++p) {
        if (!flags[p]) continue;
        for (int64_t d = k - 1, rest = p; d >= 0; --d) {  // unravel p over the mask's shape
          coords[d].push_back(rest % ix.shape()[d]);
          rest /= ix.shape()[d];
        }
      }
      for (auto& c : coords) per_axis.push_back(Tensor::from_vector(c, {static_cast<int64_t>(c.size())}));
    } else {
      HEED_CHECK(ix.dtype() == DType::i64 || ix.dtype() == DType::i32, op, ": index ", j,
                 " must be int64, int32 or bool, got ", dtype_name(ix.dtype()));
      HEED_CHECK(axis < x.dim(), op, ": too many indices (", indices.size(), ") for a tensor of shape ",
                 to_string(x.shape()));
      per_axis.push_back(ix);
    }
  }
  PutPositions pos;
  for (const Tensor& ix : per_axis) pos.indexed = broadcast_shapes(pos.indexed, ix.shape(), op);
  const int64_t lead = static_cast<int64_t>(per_axis.size());
  const Shape tail_shape(x.shape().begin() + lead, x.shape().end());
  // I + the tail: the shape values broadcast to, checked before anything is sized from it.
  Shape whole = pos.indexed;
  whole.insert(whole.end(), tail_shape.begin(), tail_shape.end());
  numel_of(whole, op);
  const int64_t positions = numel_of(pos.indexed);
  // Each position's offset, and each index expanded to read it: indices expanded (stride 0) to
  // (2^25, 1) and (1, 2^25) pick 2^50 positions, whose offsets no machine holds.
  detail::check_fits_memory(double(positions) * 2 * sizeof(int64_t), op,
                            "the offsets of the " + std::to_string(positions) + " positions indices broadcast to " +
                                to_string(pos.indexed) + " pick in " + to_string(x.shape()));
  pos.base.assign(static_cast<size_t>(positions), 0);
  for (int64_t axis = 0; axis < lead; ++axis) {
    const int64_t n = x.size(axis);
    const std::vector<int64_t> v = expand(per_axis[axis].detach(), pos.indexed).to_vector<int64_t>();
    for (int64_t e = 0; e < positions; ++e) {
      HEED_CHECK(v[e] >= -n && v[e] < n, op, ": index ", v[e], " is out of range for axis ", axis, " of size ", n,
                 " (shape ", to_string(x.shape()), ")");
      pos.base[e] += (v[e] < 0 ? v[e] + n : v[e]) * strides[axis];
    }
  }
  pos.tail = element_offsets(tail_shape, Shape(strides.begin() + lead, strides.end()), nullptr, 0);
  pos.indexed.insert(pos.indexed.end(), tail_shape.begin(), tail_shape.end());
  const Shape& vs = values.shape();
  bool fits = vs.size() <= pos.indexed.size();
  for (size_t d = 0; fits && d < vs.size(); ++d) {
    const int64_t want = pos.indexed[pos.indexed.size() - vs.size() + d];
    fits = vs[d] == want || vs[d] == 1;
  }
  HEED_CHECK(fits, op, ": values of shape ", to_string(vs), " do not broadcast to the indexed shape ",
             to_string(pos.indexed));
  return pos;
}

// dst[base[e] + tail[t]] = (or +=) v[e][t], in row-major order over e (so a repeat's last write
// wins); v is contiguous, of shape `indexed`.
void put_blocks(const Tensor& dst, const PutPositions& pos, const Tensor& v, bool accumulate) {
  visit_any_dtype(dst.dtype(), [&]<class T>() {
    T* pd = static_cast<T*>(dst.storage()->data()) + dst.offset();
    const T* pv = v.data<T>();
    const size_t inner = pos.tail.size();
    for (size_t e = 0; e < pos.base.size(); ++e)
      for (size_t t = 0; t < inner; ++t) {
        T& d = pd[pos.base[e] + pos.tail[t]];
        d = accumulate ? add_wrapping(d, pv[e * inner + t]) : pv[e * inner + t];
      }
  });
}

}  // namespace

Tensor index_put(const Tensor& x, const std::vector<Tensor>& indices, const Tensor& values, bool accumulate) {
  const PutPositions pos = put_positions(x, contiguous_strides(x.shape()), indices, values, accumulate, "index_put");
  const Tensor spread = expand(values, pos.indexed);  // differentiable: sums the gradient back
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  out.copy_(x.detach());
  put_blocks(out, pos, detail::contiguous_data(spread), accumulate);
  if (!is_floating(x.dtype())) return out;
  return record("index_put", out, {x, spread}, [pos, accumulate](const Tensor& g) {
    const Tensor gc = g.contiguous();
    Tensor dx = accumulate ? gc : gc.clone();
    Tensor dv = Tensor::zeros(pos.indexed, g.dtype());
    visit_dtype(g.dtype(), [&]<class T>() {
      const T* pg = gc.data<T>();
      T* px = dx.data<T>();
      T* pv = dv.data<T>();
      const size_t inner = pos.tail.size();  // tail[t] == t: out is contiguous
      std::vector<bool> written(accumulate ? 0 : dx.numel(), false);
      for (size_t e = pos.base.size(); e-- > 0;)  // last first: a later write hides an earlier one
        for (size_t t = 0; t < inner; ++t) {
          const int64_t at = pos.base[e] + pos.tail[t];
          if (accumulate || !written[at]) pv[e * inner + t] = pg[at];
          if (!accumulate) written[at] = true;
        }
      if (!accumulate)
        for (size_t e = 0; e < pos.base.size(); ++e)
          for (size_t t = 0; t < inner; ++t) px[pos.base[e] + pos.tail[t]] = T(0);  // overwritten: x's value is gone
    });
    return std::vector<Tensor>{dx, dv};
  });
}

Tensor& Tensor::index_put_(const std::vector<Tensor>& indices, const Tensor& values, bool accumulate) {
  check_in_place_write("index_put_");
  const PutPositions pos = put_positions(*this, strides(), indices, values, accumulate, "index_put_");
  // values read into a buffer first: they may be a view of this tensor.
  Tensor v = Tensor::empty(pos.indexed, dtype());
  v.copy_(heed::expand(values.detach(), pos.indexed));
  increment_version();
  put_blocks(*this, pos, v, accumulate);
  return *this;
}

Tensor stack(const std::vector<Tensor>& parts, int64_t axis) {
  HEED_CHECK(!parts.empty(), "stack: no tensors");
  const int64_t nd = parts[0].dim() + 1;
  HEED_CHECK(axis >= -nd && axis < nd, "stack: axis ", axis, " out of range for ", nd, " dims");
  if (axis < 0) axis += nd;
  std::vector<Tensor> expanded;
  for (const Tensor& p : parts) {
    HEED_CHECK(p.shape() == parts[0].shape(), "stack: shapes differ: ", to_string(parts[0].shape()), " and ",
               to_string(p.shape()));
    expanded.push_back(unsqueeze(p, axis));
  }
  return concat(expanded, axis);
}

Tensor max(const Tensor& a) { return max(reshape(a, {-1}), 0); }
Tensor min(const Tensor& a) { return neg(max(neg(a))); }
Tensor min(const Tensor& a, int64_t axis, bool keepdim) { return neg(max(neg(a), axis, keepdim)); }


}  // namespace heed
