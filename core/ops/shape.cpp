// Shape ops: views that re-describe the same storage (view, and reshape wherever the strides
// allow; transpose, permute, slice, expand, squeeze, flatten) and the copies that cannot be views (concat,
// repeat).
#include <algorithm>
#include <array>
#include <cstring>
#include <numeric>
#include <optional>

#include "core/autograd.h"
#include "core/ops.h"
#include "core/ops/strided.h"

namespace heed {

using detail::normalize_axis;

static Shape infer_shape(Shape shape, int64_t numel, const char* op, const Shape& from) {
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      HEED_CHECK(infer < 0, op, ": more than one -1 in target shape ", to_string(shape));
      infer = static_cast<int64_t>(i);
    } else {
      HEED_CHECK(shape[i] >= 0, op, ": negative dimension in target shape ", to_string(shape));
      HEED_CHECK(!__builtin_mul_overflow(known, shape[i], &known), op, ": target shape ", to_string(shape),
                 ": its element count overflows int64");
    }
  }
  if (infer >= 0) {
    HEED_CHECK(known > 0 && numel % known == 0, op, ": cannot reshape ", to_string(from), " to ", to_string(shape));
    shape[infer] = numel / known;
  }
  HEED_CHECK(numel_of(shape) == numel, op, ": cannot reshape ", to_string(from), " (", numel,
             " elements) to ", to_string(shape));
  return shape;
}

// The strides with which `shape` reads a view's elements in the same order, without a copy, or
// nothing (torch's at::detail::computeStride). Walking from the last axis, the input's axes split
// into runs whose strides chain (stride[i] == stride[i + 1] * size[i + 1]; size-1 axes join any run):
// each run is evenly spaced, so the new shape can merge or split within it, but not across two.
// A view exists when the new shape, read from its last axis, divides into groups of the same
// element counts, each then strided from its run's innermost stride.
static std::optional<Shape> view_strides(const Shape& from, const Shape& strides, const Shape& to) {
  const int64_t n = static_cast<int64_t>(to.size());
  if (from.empty()) return Shape(to.size(), 1);  // a scalar: every new axis has size 1
  if (numel_of(from) == 0) {  // no element to read: torch keeps the strides, or takes contiguous ones
    if (from == to) return strides;
    Shape out(to.size());
    for (int64_t d = n - 1, step = 1; d >= 0; step *= std::max<int64_t>(to[d], 1), --d) out[d] = step;
    return out;
  }
  Shape out(to.size());
  int64_t v = n - 1;                   // the next new axis to place
  int64_t base = strides.back();       // the innermost stride of the current run
  int64_t run = 1, placed = 1;         // elements in the run so far, and in the new axes given to it
  for (int64_t d = static_cast<int64_t>(from.size()) - 1; d >= 0; --d) {
    run *= from[d];
    const bool run_ends = d == 0 || (from[d - 1] != 1 && strides[d - 1] != run * base);
    if (!run_ends) continue;
    while (v >= 0 && (placed < run || to[v] == 1)) {
      out[v] = placed * base;
      placed *= to[v--];
    }
    if (placed != run) return std::nullopt;
    if (d > 0) base = strides[d - 1], run = 1, placed = 1;
  }
  if (v != -1) return std::nullopt;
  return out;
}

// The view op itself: `shape` (already checked) read through `strides` from a's storage.
static Tensor recorded_view(const Tensor& a, Shape shape, Shape strides) {
  Tensor out = make_view(a, std::move(shape), std::move(strides), a.offset());
  return record("view", out, {a}, [from = a.shape()](const Tensor& g) {
    return std::vector<Tensor>{view(g, from)};  // the engine hands every backward a contiguous g
  });
}

Tensor view(const Tensor& a, Shape shape) {
  shape = infer_shape(std::move(shape), a.numel(), "view", a.shape());
  std::optional<Shape> strides = view_strides(a.shape(), a.strides(), shape);
  HEED_CHECK(strides.has_value(), "view: input of shape ", to_string(a.shape()), " with strides ",
             to_string(a.strides()), " cannot be viewed as ", to_string(shape),
             ": it merges or splits axes that are not contiguous with each other; use reshape (which copies)");
  return recorded_view(a, std::move(shape), std::move(*strides));
}

Tensor reshape(const Tensor& a, Shape shape) {
  shape = infer_shape(std::move(shape), a.numel(), "reshape", a.shape());  // errors name reshape
  // A view whenever one exists, as torch's reshape; a copy only otherwise.
  if (std::optional<Shape> strides = view_strides(a.shape(), a.strides(), shape))
    return recorded_view(a, std::move(shape), std::move(*strides));
  Shape strides = contiguous_strides(shape);
  return recorded_view(a.contiguous(), std::move(shape), std::move(strides));
}

Tensor permute(const Tensor& a, const std::vector<int64_t>& axes) {
  const int64_t n = a.dim();
  HEED_CHECK(static_cast<int64_t>(axes.size()) == n, "permute: ", axes.size(), " axes ", to_string(axes),
             " for a tensor of shape ", to_string(a.shape()));
  std::vector<int64_t> perm(n);
  std::vector<bool> seen(n, false);
  Shape shape(n), strides(n);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t ax = normalize_axis(axes[i], n, "permute", a.shape());
    HEED_CHECK(!seen[ax], "permute: axis ", ax, " repeated in ", to_string(axes));
    seen[ax] = true;
    perm[i] = ax;
    shape[i] = a.shape()[ax];
    strides[i] = a.strides()[ax];
  }
  Tensor out = make_view(a, shape, strides, a.offset());
  return record("permute", out, {a}, [perm](const Tensor& g) {
    std::vector<int64_t> inverse(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = static_cast<int64_t>(i);
    return std::vector<Tensor>{permute(g, inverse)};
  });
}

Tensor transpose(const Tensor& a, int64_t axis0, int64_t axis1) {
  const int64_t n = a.dim();
  std::vector<int64_t> axes(n);
  std::iota(axes.begin(), axes.end(), 0);
  std::swap(axes[normalize_axis(axis0, n, "transpose", a.shape())],
            axes[normalize_axis(axis1, n, "transpose", a.shape())]);
  return permute(a, axes);
}

Tensor slice(const Tensor& a, int64_t axis, int64_t start, int64_t end, int64_t step) {
  const int64_t ax = normalize_axis(axis, a.dim(), "slice", a.shape());
  HEED_CHECK(step > 0, "slice: step must be positive, got ", step, " (as torch's x[::step])");
  const int64_t len = a.shape()[ax];
  if (start < 0) start += len;
  if (end < 0) end += len;
  HEED_CHECK(0 <= start && start <= end && end <= len, "slice: range [", start, ", ", end,
             ") out of bounds for axis ", ax, " of shape ", to_string(a.shape()));
  Shape shape = a.shape(), strides = a.strides();
  shape[ax] = end == start ? 0 : (end - start - 1) / step + 1;  // every step-th element of [start, end)
  if (shape[ax] > 1) strides[ax] *= step;  // within the axis then, so the product cannot overflow
  Tensor out = make_view(a, shape, strides, a.offset() + start * a.strides()[ax]);
  return record("slice", out, {a}, [from = a.shape(), dtype = a.dtype(), ax, start, end, step](const Tensor& g) {
    Tensor full = Tensor::zeros(from, dtype);
    slice(full, ax, start, end, step).copy_(g);
    return std::vector<Tensor>{full};
  });
}

std::vector<Tensor> split(const Tensor& a, int64_t size, int64_t axis) {
  const int64_t ax = normalize_axis(axis, a.dim(), "split", a.shape());
  HEED_CHECK(size > 0, "split: piece size must be positive, got ", size);
  if (a.shape()[ax] == 0) return {slice(a, ax, 0, 0)};  // torch gives the one empty piece
  std::vector<Tensor> parts;
  for (int64_t s = 0; s < a.shape()[ax]; s += size)
    parts.push_back(slice(a, ax, s, std::min(s + size, a.shape()[ax])));
  return parts;
}

std::vector<Tensor> chunk(const Tensor& a, int64_t chunks, int64_t axis) {
  const int64_t ax = normalize_axis(axis, a.dim(), "chunk", a.shape());
  HEED_CHECK(chunks > 0, "chunk: the number of chunks must be positive, got ", chunks);
  const int64_t len = a.shape()[ax];
  if (len == 0) return std::vector<Tensor>(static_cast<size_t>(chunks), slice(a, ax, 0, 0));  // torch: `chunks` empty pieces
  return split(a, len / chunks + (len % chunks != 0), ax);  // ceil(len / chunks), without overflow
}

Tensor concat(const std::vector<Tensor>& parts, int64_t axis) {
  HEED_CHECK(!parts.empty(), "concat: no tensors given");
  const Tensor& first = parts[0];
  const int64_t ax = normalize_axis(axis, first.dim(), "concat", first.shape());
  Shape shape = first.shape();
  shape[ax] = 0;
  for (const auto& p : parts) {
    bool same = p.dim() == first.dim() && p.dtype() == first.dtype();
    for (int64_t d = 0; same && d < p.dim(); ++d) same = d == ax || p.shape()[d] == first.shape()[d];
    HEED_CHECK(same, "concat: shape ", to_string(p.shape()), " (", dtype_name(p.dtype()),
               ") does not match ", to_string(first.shape()), " (", dtype_name(first.dtype()),
               ") outside axis ", ax);
    shape[ax] += p.shape()[ax];
  }
  Tensor out = Tensor::empty(shape, first.dtype());
  std::vector<int64_t> sizes;
  int64_t at = 0;
  for (const auto& p : parts) {
    slice(out, ax, at, at + p.shape()[ax]).copy_(p);
    sizes.push_back(p.shape()[ax]);
    at += p.shape()[ax];
  }
  return record("concat", out, parts, [sizes, ax](const Tensor& g) {
    std::vector<Tensor> grads;
    int64_t s = 0;
    for (int64_t len : sizes) {
      grads.push_back(slice(g, ax, s, s + len));
      s += len;
    }
    return grads;
  });
}

Tensor unsqueeze(const Tensor& a, int64_t axis) {
  const int64_t ax = normalize_axis(axis, a.dim() + 1, "unsqueeze", a.shape());
  Shape shape = a.shape(), strides = a.strides();
  const int64_t stride = ax < a.dim() ? a.strides()[ax] * a.shape()[ax] : 1;
  shape.insert(shape.begin() + ax, 1);
  strides.insert(strides.begin() + ax, stride);
  Tensor out = make_view(a, shape, strides, a.offset());
  return record("unsqueeze", out, {a}, [ax](const Tensor& g) { return std::vector<Tensor>{squeeze(g, ax)}; });
}

Tensor squeeze(const Tensor& a, int64_t axis) {
  const int64_t ax = normalize_axis(axis, a.dim(), "squeeze", a.shape());
  HEED_CHECK(a.shape()[ax] == 1, "squeeze: axis ", ax, " of shape ", to_string(a.shape()), " is not 1");
  Shape shape = a.shape(), strides = a.strides();
  shape.erase(shape.begin() + ax);
  strides.erase(strides.begin() + ax);
  Tensor out = make_view(a, shape, strides, a.offset());
  return record("squeeze", out, {a}, [ax](const Tensor& g) { return std::vector<Tensor>{unsqueeze(g, ax)}; });
}

Tensor squeeze(const Tensor& a) {
  Shape shape;
  for (int64_t size : a.shape())
    if (size != 1) shape.push_back(size);
  return view(a, std::move(shape));  // dropping size-1 axes always has a view (and view's backward)
}

Tensor flatten(const Tensor& a, int64_t start_dim, int64_t end_dim) {
  // As torch: a scalar counts as one axis (start and end in [-1, 0]) and becomes (1).
  const int64_t n = std::max<int64_t>(a.dim(), 1);
  const int64_t start = normalize_axis(start_dim, n, "flatten", a.shape());
  const int64_t end = normalize_axis(end_dim, n, "flatten", a.shape());
  HEED_CHECK(start <= end, "flatten: start_dim ", start_dim, " comes after end_dim ", end_dim, " for shape ",
             to_string(a.shape()));
  if (a.dim() == 0) return reshape(a, {1});
  if (start == end) return a;
  Shape shape(a.shape().begin(), a.shape().begin() + start);
  shape.push_back(numel_of(Shape(a.shape().begin() + start, a.shape().begin() + end + 1)));
  shape.insert(shape.end(), a.shape().begin() + end + 1, a.shape().end());
  return reshape(a, std::move(shape));
}

// Tiling through a broadcast: a viewed as (1, s0, 1, s1, ...) is expanded to (r0, s0, r1, s1, ...)
// and copied, then merged into (r0 s0, r1 s1, ...); the gradient, expand's, sums the tiles.
Tensor repeat(const Tensor& a, const Shape& repeats) {
  HEED_CHECK(static_cast<int64_t>(repeats.size()) >= a.dim(), "repeat: ", repeats.size(), " counts ", to_string(repeats),
             " for a tensor of shape ", to_string(a.shape()), " (one per axis at least)");
  const size_t lead = repeats.size() - a.shape().size();  // new leading axes, of size 1 before tiling
  Shape pairs_in, pairs;
  for (size_t i = 0; i < repeats.size(); ++i) {
    HEED_CHECK(repeats[i] >= 0, "repeat: negative count in ", to_string(repeats));
    const int64_t size = i < lead ? 1 : a.shape()[i - lead];
    pairs_in.insert(pairs_in.end(), {1, size});
    // An empty axis tiles to 0 whatever its count (torch's zeros(0, 3).repeat(2**63 - 1, 1) is
    // (0, 3)): 1 keeps the count out of the expanded shape.
    pairs.insert(pairs.end(), {size == 0 ? 1 : repeats[i], size});
  }
  // Checked before any product of a count and a size: the expanded shape holds every one of them
  // other than an empty axis's.
  numel_of(pairs, "repeat");
  Shape out(repeats.size());
  for (size_t i = 0; i < repeats.size(); ++i) out[i] = pairs[2 * i] * pairs[2 * i + 1];
  return reshape(expand(reshape(a, pairs_in), pairs).clone(), out);  // clone: a copy even of 1s, as torch
}

Tensor expand(const Tensor& a, const Shape& requested) {
  // -1 keeps an existing axis's size (torch's expand); a new leading axis needs its size.
  Shape shape = requested;
  const int64_t lead = static_cast<int64_t>(shape.size()) - a.dim();
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i) {
    if (shape[i] != -1) continue;
    HEED_CHECK(i >= lead, "expand: -1 at new leading axis ", i, " of ", to_string(requested), " (expanding ",
               to_string(a.shape()), ")");
    shape[i] = a.shape()[i - lead];
  }
  for (int64_t size : shape)
    HEED_CHECK(size >= 0, "expand: size ", size, " in ", to_string(requested), " (only -1 may be negative)");
  HEED_CHECK(broadcast_shapes(a.shape(), shape, "expand") == shape, "expand: cannot expand ",
             to_string(a.shape()), " to ", to_string(requested));
  if (a.shape() == shape) return a;
  Tensor out = make_view(a, shape, detail::broadcast_strides(a, shape), a.offset());
  return record("expand", out, {a}, [from = a.shape()](const Tensor& g) {
    return std::vector<Tensor>{sum_to(g, from)};
  });
}

// ------------------------------------------------------------------------------------------
// narrow, unbind (views), flip (a copy, as torch's)

Tensor narrow(const Tensor& a, int64_t axis, int64_t start, int64_t length) {
  HEED_CHECK(a.dim() > 0, "narrow: a 0-d tensor has no axis");
  axis = detail::normalize_axis(axis, a.dim(), "narrow", a.shape());
  const int64_t n = a.size(axis);
  HEED_CHECK(start >= -n && start <= n, "narrow: start ", start, " out of range for axis ", axis, " of size ", n);
  if (start < 0) start += n;
  // length against n - start: start + length overflows int64 for a length near INT64_MAX
  HEED_CHECK(length >= 0 && length <= n - start, "narrow: start ", start, " + length ", length,
             " exceeds axis ", axis, " of size ", n, " in ", to_string(a.shape()));
  return slice(a, axis, start, start + length);
}

std::vector<Tensor> unbind(const Tensor& a, int64_t axis) {
  HEED_CHECK(a.dim() > 0, "unbind: a 0-d tensor has no axis");
  axis = detail::normalize_axis(axis, a.dim(), "unbind", a.shape());
  std::vector<Tensor> out;
  // An empty tensor may have an axis of 2^40 (zeros({2^40, 0})), whose views the loop below would
  // make one by one until memory ran out: refused when their handles alone pass the machine's.
  detail::check_fits_memory(double(a.size(axis)) * double(sizeof(Tensor)), "unbind",
                            std::to_string(a.size(axis)) + " views of " + to_string(a.shape()) + " along axis " +
                                std::to_string(axis));
  out.reserve(static_cast<size_t>(a.size(axis)));
  for (int64_t i = 0; i < a.size(axis); ++i) out.push_back(select(a, axis, i));
  return out;
}

Tensor flip(const Tensor& a, const std::vector<int64_t>& axes) {
  const int64_t nd = a.dim();
  std::vector<bool> flipped(std::max<int64_t>(nd, 1), false);
  for (int64_t axis : axes) {
    const int64_t d = detail::normalize_axis(axis, std::max<int64_t>(nd, 1), "flip", a.shape());
    HEED_CHECK(!flipped[d], "flip: axis ", d, " appears more than once in ", to_string(axes));
    flipped[d] = true;
  }
  // The source read through strides negated on the flipped axes, from the far end of each.
  Shape src = a.strides();
  int64_t base = a.offset();
  for (int64_t d = 0; d < nd; ++d)
    if (flipped[d] && a.size(d) > 0) {
      base += (a.size(d) - 1) * src[d];
      src[d] = -src[d];
    }
  Tensor out = Tensor::empty(a.shape(), a.dtype());
  const Shape so = out.strides();
  visit_any_dtype(a.dtype(), [&]<class T>() {
    const T* p = static_cast<const T*>(a.storage()->data());
    T* po = out.data<T>();
    const int64_t is = src.empty() ? 0 : src.back();
    detail::for_each_row<2>(a.shape(), {&src, &so}, {base, 0}, [&](int64_t len, const std::array<int64_t, 2>& off) {
      for (int64_t i = 0; i < len; ++i) po[off[1] + i] = p[off[0] + i * is];
    });
  });
  if (!is_floating(a.dtype())) return out;
  return record("flip", out, {a}, [axes](const Tensor& g) { return std::vector<Tensor>{flip(g, axes)}; });
}

// F.pad's constant mode, composed of slice (negative pads crop) and concat with constant blocks,
// so its gradient is theirs: the interior of g, nothing to the padding.
Tensor pad(const Tensor& a, const std::vector<int64_t>& pads, double value) {
  HEED_CHECK(pads.size() % 2 == 0 && static_cast<int64_t>(pads.size()) <= 2 * a.dim(), "pad: ", pads.size(),
             " pads for ", to_string(a.shape()), ": expected (left, right) pairs, at most two per axis");
  check_scalar_fits("pad", value, a.dtype());
  Tensor x = a;
  for (size_t i = 0; i < pads.size() / 2; ++i) {
    const int64_t axis = a.dim() - 1 - static_cast<int64_t>(i);
    const int64_t left = pads[2 * i], right = pads[2 * i + 1], n = x.size(axis);
    // Checked before any arithmetic on the pads: n + left + right may overflow int64, and -left
    // does for INT64_MIN.
    int64_t size = 0;
    HEED_CHECK(!__builtin_add_overflow(n, left, &size) && !__builtin_add_overflow(size, right, &size), "pad: pads (",
               left, ", ", right, ") on axis ", axis, " of size ", n, " in ", to_string(a.shape()),
               ": the padded size overflows int64");
    HEED_CHECK(left >= -n && right >= -n && size >= 0, "pad: pads (", left, ", ", right, ") on axis ", axis,
               " of size ", n, " in ", to_string(a.shape()), " would leave a negative size");
    x = slice(x, axis, std::max<int64_t>(0, -left), n - std::max<int64_t>(0, -right));
    std::vector<Tensor> parts;
    auto block = [&](int64_t len) {
      Shape s = x.shape();
      s[axis] = len;
      return Tensor::full(s, value, x.dtype());
    };
    if (left > 0) parts.push_back(block(left));
    parts.push_back(x);
    if (right > 0) parts.push_back(block(right));
    if (parts.size() > 1) x = concat(parts, axis);
  }
  return x.storage() == a.storage() ? x.clone() : x;  // only crops or nothing: still a view of a
}

}  // namespace heed
