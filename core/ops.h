// heed: the differentiable ops. Every function here records itself for autograd (see
// core/autograd.h) and accepts float32 or float64 tensors of any strides. Shapes follow NumPy /
// PyTorch conventions; negative axes count from the end. Bad shapes or axes throw heed::Error
// naming the op and the shapes.
#pragma once

#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace heed {

class Generator;

// ---------------------------------------------------------------- elementwise (core/ops/elementwise.cpp)
// Binary ops broadcast NumPy-style; their backward sums the gradient back over broadcast axes.
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double s);
Tensor mul(const Tensor& a, double s);
Tensor div(const Tensor& a, double s);  ///< a / s, correctly rounded (not a * (1 / s))
Tensor rsub(double s, const Tensor& a);  ///< s - a
Tensor rdiv(double s, const Tensor& a);  ///< s / a
Tensor neg(const Tensor& a);
/// |a| (|-0| = +0), with gradient sign(a) (0 at 0, as torch).
Tensor abs(const Tensor& a);
Tensor pow(const Tensor& a, double exponent);  ///< a^p (p any real; a > 0 unless p is an integer)
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor tanh(const Tensor& a);
Tensor relu(const Tensor& a);
Tensor gelu(const Tensor& a);  ///< exact: 0.5 x (1 + erf(x / sqrt 2)), as torch's default
/// torch's `approximate=` argument of F.gelu and nn.GELU: "none" (the exact form above) or "tanh".
enum class GeluApproximation { none, tanh };
/// gelu(a, GeluApproximation::tanh) is F.gelu(x, approximate="tanh"), GPT-2's gelu_new:
/// 0.5 x (1 + tanh(u)), u = sqrt(2 / pi) (x + 0.044715 x^3), computed as x sigmoid(2u), which does
/// not cancel for x < 0 (torch's float32 form returns 0 from x = -5.5 on, where heed keeps the
/// tail; values differ by under 4e-7 and gradients by under 1e-6 absolute, torch's rounding).
/// GeluApproximation::none is gelu(a).
Tensor gelu(const Tensor& a, GeluApproximation approximate);
Tensor sigmoid(const Tensor& a);  ///< 1 / (1 + e^-x)
Tensor silu(const Tensor& a);     ///< x sigmoid(x), computed as torch's x / (1 + e^-x) (F.silu, SwiGLU's gate)
Tensor sin(const Tensor& a);
Tensor cos(const Tensor& a);
/// torch's F.softplus: log(1 + e^(beta x)) / beta, and x itself where beta x > threshold.
Tensor softplus(const Tensor& a, double beta = 1.0, double threshold = 20.0);
/// x for x > 0, else negative_slope x (F.leaky_relu; the gradient at 0 is the slope, as torch's).
Tensor leaky_relu(const Tensor& a, double negative_slope = 0.01);
/// x for x > 0, else alpha (e^x - 1) (F.elu; the gradient at 0 is alpha, as torch's).
Tensor elu(const Tensor& a, double alpha = 1.0);
Tensor log1p(const Tensor& a);       ///< log(1 + x), accurate near 0
Tensor expm1(const Tensor& a);       ///< e^x - 1, accurate near 0
Tensor rsqrt(const Tensor& a);       ///< 1 / sqrt(x)
Tensor reciprocal(const Tensor& a);  ///< 1 / x
Tensor square(const Tensor& a);      ///< x * x
/// Rounding, float tensors only (torch also takes integers, unchanged); the gradient is 0, as
/// torch's. round rounds half to even (0.5 -> 0, 2.5 -> 2), as torch.round.
Tensor floor(const Tensor& a);
Tensor ceil(const Tensor& a);
Tensor round(const Tensor& a);
/// min(max(a, lo), hi), as torch.clamp: either bound may be absent (not both; a NaN bound is
/// refused), lo > hi gives hi everywhere, NaN stays NaN; the gradient passes where lo <= a <= hi.
Tensor clamp(const Tensor& a, std::optional<double> lo, std::optional<double> hi = std::nullopt);
/// Elementwise max / min with broadcasting, as torch.maximum / torch.minimum: a NaN on either side
/// gives NaN; at a tie each side gets half the gradient.
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);

/// The shape two operands broadcast to; throws naming `op` if they are incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
/// Sums `t` down to `shape` over broadcast axes (the backward of broadcasting). Differentiable.
Tensor sum_to(const Tensor& t, const Shape& shape);

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& a) { return neg(a); }
inline Tensor operator+(const Tensor& a, double s) { return add(a, s); }
inline Tensor operator+(double s, const Tensor& a) { return add(a, s); }
inline Tensor operator-(const Tensor& a, double s) { return add(a, -s); }
inline Tensor operator-(double s, const Tensor& a) { return rsub(s, a); }
inline Tensor operator*(const Tensor& a, double s) { return mul(a, s); }
inline Tensor operator*(double s, const Tensor& a) { return mul(a, s); }
inline Tensor operator/(const Tensor& a, double s) { return div(a, s); }
inline Tensor operator/(double s, const Tensor& a) { return rdiv(s, a); }

// ---------------------------------------------------------------- reductions (core/ops/reduce.cpp)
/// The sum of all elements -> shape []. Of an int32, int64 or bool tensor: exact, in int64 (as
/// torch: `(pred == target).sum()` counts), wrapping on overflow, with no gradient.
Tensor sum(const Tensor& a);
Tensor sum(const Tensor& a, int64_t axis, bool keepdim = false);  ///< along one axis; dtypes as above
Tensor mean(const Tensor& a);
Tensor mean(const Tensor& a, int64_t axis, bool keepdim = false);
/// Over several axes at once, as torch's x.sum(dim=(0, 2)): a repeated axis is refused; an empty
/// list reduces every axis, as torch 1.13's x.sum(dim=[]). Integer sums as above; mean needs floats.
Tensor sum(const Tensor& a, const std::vector<int64_t>& axes, bool keepdim = false);
Tensor mean(const Tensor& a, const std::vector<int64_t>& axes, bool keepdim = false);
/// The braced forms, sum(x, {0, 2}): without them sum(x, {}) would take the single-axis overload
/// (axis 0); a list prefers an initializer_list, so {} and {1} mean the axes listed.
inline Tensor sum(const Tensor& a, std::initializer_list<int64_t> axes, bool keepdim = false) {
  return sum(a, std::vector<int64_t>(axes), keepdim);
}
inline Tensor mean(const Tensor& a, std::initializer_list<int64_t> axes, bool keepdim = false) {
  return mean(a, std::vector<int64_t>(axes), keepdim);
}
/// Running sums along an axis (torch.cumsum), accumulated in double as torch's; the gradient is
/// the reversed running sum of the incoming one. An integer or bool tensor gives int64 (as torch),
/// with no gradient.
Tensor cumsum(const Tensor& a, int64_t axis);
/// Max over an axis; the gradient goes to the first maximal element of each slice.
Tensor max(const Tensor& a, int64_t axis, bool keepdim = false);
/// Variance over an axis, as torch.var: divided by n - 1 (`unbiased`, the default) or n; one
/// element with unbiased gives NaN (0 / 0), as torch's. var(a) is over all elements, unbiased
/// (biased: var(reshape(a, {-1}), 0, false); a bool overload would make var(a, 1) ambiguous).
Tensor var(const Tensor& a);
Tensor var(const Tensor& a, int64_t axis, bool unbiased = true, bool keepdim = false);
/// sqrt(var): torch.std; its gradient where every element is equal is 0, as torch's. Under
/// `using namespace heed`, call it heed::std(x) or x.std(): a plain std(x) is ambiguous with namespace std.
Tensor std(const Tensor& a);
Tensor std(const Tensor& a, int64_t axis, bool unbiased = true, bool keepdim = false);
/// var(a, false) and std(a, true) would take the bool for an axis (torch reads it as `unbiased`):
/// refused when compiled.
template <class B> requires std::same_as<B, bool> Tensor var(const Tensor&, B) = delete;
template <class B> requires std::same_as<B, bool> Tensor std(const Tensor&, B) = delete;
/// torch.linalg.vector_norm: (sum |x|^ord)^(1 / ord) over `axes` (all when empty), ord any real
/// or +-inf (max / min |x|); ord 0 counts the non-zero elements (no gradient). The gradient is
/// torch's: 0 where the norm is 0 (ord 2 at x = 0 gives 0, not NaN); the inf norm's ties share it.
Tensor vector_norm(const Tensor& x, double ord = 2.0, const std::vector<int64_t>& axes = {}, bool keepdim = false);
/// F.normalize(x, p, dim, eps): x / max(vector_norm(x, p, {axis}, keepdim), eps), composed from
/// vector_norm and clamp, so its gradient is torch's: a row whose norm is under eps (a zero row)
/// is x / eps, with gradient 1 / eps (nothing flows through the clamped norm).
Tensor normalize(const Tensor& x, double p = 2.0, int64_t axis = 1, double eps = 1e-12);
/// log(sum(exp(x))) along `axis`, stable (the max subtracted; an all -inf slice gives -inf, as
/// torch.logsumexp); the gradient is the softmax.
Tensor logsumexp(const Tensor& x, int64_t axis, bool keepdim = false);
/// The max (min) over `axes` (all when empty), as torch.amax / torch.amin: float tensors; unlike
/// max(x, axis), the gradient is shared evenly among the tied extremes, as torch's.
Tensor amax(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdim = false);
inline Tensor amax(const Tensor& x, std::initializer_list<int64_t> axes, bool keepdim = false) {
  return amax(x, std::vector<int64_t>(axes), keepdim);
}
inline Tensor amin(const Tensor& x, std::initializer_list<int64_t> axes, bool keepdim = false) {
  return amin(x, std::vector<int64_t>(axes), keepdim);
}
/// The product of all elements, or along `axis` (torch.prod), float tensors; the gradient is
/// torch's, exact where the input has zeros (the product of the other elements, no division).
Tensor prod(const Tensor& a);
Tensor prod(const Tensor& a, int64_t axis, bool keepdim = false);
Tensor softmax(const Tensor& a, int64_t axis = -1);      ///< stable (max subtracted)
Tensor log_softmax(const Tensor& a, int64_t axis = -1);  ///< stable (log-sum-exp)

// ---------------------------------------------------------------- shape (core/ops/shape.cpp)
/// Same elements, new shape; one dim may be -1. A view whenever `view` can make one, else a copy
/// (torch's reshape).
Tensor reshape(const Tensor& a, Shape shape);
/// Same elements, new shape, as a view sharing `a`'s storage (torch's view): `a` need not be
/// contiguous, only each group of its axes that the new shape merges or splits must be evenly
/// strided within the group. The pieces of split(linear(x, w, b), C, 2) (nanoGPT's q, k, v) can be
/// viewed as (B, T, H, C / H); a transposed matrix cannot be flattened. Throws, naming the shape and
/// strides, when no view exists; reshape then copies.
Tensor view(const Tensor& a, Shape shape);
Tensor transpose(const Tensor& a, int64_t axis0, int64_t axis1);  ///< a view
Tensor permute(const Tensor& a, const std::vector<int64_t>& axes);  ///< a view
/// Elements [start, end) along `axis`, every `step`-th (x[start:end:step]; a view, its stride
/// times step; negative start/end count from the end; step > 0, as torch's).
Tensor slice(const Tensor& a, int64_t axis, int64_t start, int64_t end, int64_t step = 1);
Tensor concat(const std::vector<Tensor>& parts, int64_t axis);
/// Pieces of `size` along `axis` (the last may be shorter); each a view of `a` (torch.split).
std::vector<Tensor> split(const Tensor& a, int64_t size, int64_t axis = 0);
/// At most `chunks` pieces of ceil(len / chunks) along `axis`, each a view (torch.chunk: fewer
/// pieces when the length does not divide, e.g. 5 in 4 chunks gives 2, 2, 1).
std::vector<Tensor> chunk(const Tensor& a, int64_t chunks, int64_t axis = 0);
Tensor unsqueeze(const Tensor& a, int64_t axis);  ///< a view with a new dim of size 1
Tensor squeeze(const Tensor& a, int64_t axis);    ///< a view without a dim of size 1
/// A view without any dim of size 1, as torch's x.squeeze(): (1, 3, 1, 2) -> (3, 2), (1, 1) -> [].
Tensor squeeze(const Tensor& a);
/// Axes start_dim..end_dim (inclusive; negative count from the end) merged into one, as
/// torch.flatten: through reshape, so a view whenever the strides allow and a copy otherwise;
/// `a` itself when start_dim == end_dim; a scalar becomes shape (1). Throws when start_dim comes
/// after end_dim.
Tensor flatten(const Tensor& a, int64_t start_dim = 0, int64_t end_dim = -1);
/// `a` tiled repeats[i] times along axis i (torch's x.repeat): more counts than axes add leading
/// axes; always a copy. The gradient sums the tiles.
Tensor repeat(const Tensor& a, const Shape& repeats);
/// `length` elements of `axis` from `start` (negative counts from the end): a view, as torch.narrow.
Tensor narrow(const Tensor& a, int64_t axis, int64_t start, int64_t length);
/// The slices along `axis`, each a view without that axis (torch.unbind).
std::vector<Tensor> unbind(const Tensor& a, int64_t axis = 0);
/// The elements in reverse order along each of `axes` (torch.flip): a copy, as torch's; any dtype,
/// differentiable for floats; a repeated axis is refused.
Tensor flip(const Tensor& a, const std::vector<int64_t>& axes);
/// F.pad(x, pads, value=v), constant mode: pads are (left, right) pairs from the last axis
/// backwards, as torch's; a negative pad crops. Always a copy; the gradient is g's interior.
Tensor pad(const Tensor& a, const std::vector<int64_t>& pads, double value = 0.0);
/// Broadcasts `a` to `shape` (a view with stride 0 on broadcast axes); -1 keeps an axis's size.
Tensor expand(const Tensor& a, const Shape& shape);

// ---------------------------------------------------------------- comparisons (core/ops/compare.cpp)
// Element-wise, broadcasting, any dtypes (compared as double); the result is a bool tensor with
// no gradient. Logical ops treat non-zero as true.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double s);
Tensor ne(const Tensor& a, double s);
Tensor lt(const Tensor& a, double s);
Tensor le(const Tensor& a, double s);
Tensor gt(const Tensor& a, double s);
Tensor ge(const Tensor& a, double s);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_xor(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& a);
/// NaN / infinite / finite elements, as torch.isnan, torch.isinf, torch.isfinite (any dtype; an
/// integer or bool element is finite).
Tensor isnan(const Tensor& a);
Tensor isinf(const Tensor& a);
Tensor isfinite(const Tensor& a);
/// torch.allclose: every |a - b| <= atol + rtol |b| (a and b broadcast, any dtypes, compared in
/// double; equal infinities are close; NaNs are close to each other only with equal_nan).
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8, bool equal_nan = false);
/// Whether any (every) element is non-zero, over the whole tensor or along `axis` (torch.any /
/// torch.all): any dtype (NaN counts as non-zero), a bool result; empty gives false (true).
Tensor any(const Tensor& a);
Tensor all(const Tensor& a);
Tensor any(const Tensor& a, int64_t axis, bool keepdim = false);
Tensor all(const Tensor& a, int64_t axis, bool keepdim = false);
inline Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
inline Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
inline Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
inline Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
inline Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
inline Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
inline Tensor operator==(const Tensor& a, double s) { return eq(a, s); }
inline Tensor operator!=(const Tensor& a, double s) { return ne(a, s); }
inline Tensor operator<(const Tensor& a, double s) { return lt(a, s); }
inline Tensor operator<=(const Tensor& a, double s) { return le(a, s); }
inline Tensor operator>(const Tensor& a, double s) { return gt(a, s); }
inline Tensor operator>=(const Tensor& a, double s) { return ge(a, s); }
inline Tensor operator&(const Tensor& a, const Tensor& b) { return logical_and(a, b); }
inline Tensor operator|(const Tensor& a, const Tensor& b) { return logical_or(a, b); }
inline Tensor operator^(const Tensor& a, const Tensor& b) { return logical_xor(a, b); }
inline Tensor operator~(const Tensor& a) { return logical_not(a); }

/// cond ? a : b element-wise (torch.where); cond of any dtype (non-zero = true), a and b float
/// tensors of one dtype; all three broadcast. Differentiable w.r.t. a and b.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
/// torch.where(cond, a, 0.0) and torch.where(cond, 0.0, b): the scalar takes the tensor's dtype
/// (rounded to it, as torch's type promotion does), which must be float32 or float64 (torch
/// promotes an integer tensor to float32; heed refuses it). Differentiable w.r.t. the tensor.
Tensor where(const Tensor& cond, const Tensor& a, double b);
Tensor where(const Tensor& cond, double a, const Tensor& b);
/// `value` where mask is true, else a (torch's x.masked_fill(mask, v)): mask (any dtype,
/// non-zero = true) broadcasts to a's shape. No gradient reaches a through filled positions.
Tensor masked_fill(const Tensor& a, const Tensor& mask, double value);

// ---------------------------------------------------------------- indexing (core/ops/index.cpp)
/// The lower triangle of the last two axes (j - i <= k), the rest zero; any dtype; differentiable
/// for float tensors. tril(ones({T, T}, DType::boolean)) is a causal mask.
Tensor tril(const Tensor& x, int64_t k = 0);
/// The upper triangle (j - i >= k), the rest zero.
Tensor triu(const Tensor& x, int64_t k = 0);
/// x[..., i, ...] on `axis` (a view without that axis; negative i counts from the end).
Tensor select(const Tensor& x, int64_t axis, int64_t i);
/// Index of the largest element of the flattened tensor, an int64 scalar (the first on ties).
Tensor argmax(const Tensor& x);
/// Indices (int64) of the largest elements along `axis`, the first on ties; no gradient.
Tensor argmax(const Tensor& x, int64_t axis, bool keepdim = false);
/// The same for the smallest elements (torch.argmin): the first on ties; a NaN counts as smallest.
Tensor argmin(const Tensor& x);
Tensor argmin(const Tensor& x, int64_t axis, bool keepdim = false);
/// out[i][j][k] = x[i][index[i][j][k]][k] for axis 1 (torch.gather): index (int32 or int64) has
/// x's number of dims and is no larger than x off `axis`. Differentiable w.r.t. x (scatter-add).
Tensor gather(const Tensor& x, int64_t axis, const Tensor& index);
/// The slices of x at `index` along `axis`, in its order, repeats allowed (torch.index_select):
/// index int32 or int64, 1-D (or 0-d: one); differentiable w.r.t. x (scatter-add).
Tensor index_select(const Tensor& x, int64_t axis, const Tensor& index);
/// torch.scatter(x, axis, index, src), out of place: x with out[i][index[i][j]] = src[i][j] for
/// axis 1; index as gather's, also no larger than src. Where index repeats a position the last
/// write (row-major over index) wins, and its src element alone gets the gradient there (torch's
/// winner is unspecified). Differentiable w.r.t. x (zero where written) and src.
Tensor scatter(const Tensor& x, int64_t axis, const Tensor& index, const Tensor& src);
/// torch.scatter_add: as scatter, with src's elements added (repeats accumulate); not bool.
Tensor scatter_add(const Tensor& x, int64_t axis, const Tensor& index, const Tensor& src);
/// torch.index_add: x with alpha * src's slice j along `axis` added to slice index[j]; index 1-D
/// (int32 or int64), src x's shape with index's length on `axis`; alpha != 1 needs float tensors.
Tensor index_add(const Tensor& x, int64_t axis, const Tensor& index, const Tensor& src, double alpha = 1.0);
/// torch.index_put(x, indices, values, accumulate), out of place: x with x[i0, i1, ...] = values
/// (accumulate: += values), PyTorch's advanced indexing. indices[d] indexes axis d (int64 or int32,
/// negative counting from the end); they broadcast together to a shape I, and values broadcast to
/// I + the shape of x's axes past the indexed ones. A bool index (a mask, as `x[mask] = v`) stands
/// for as many axes as it has dims, which it must match; it picks its true positions in row-major
/// order (torch's mask.nonzero()). Fewer indices than axes index the leading ones; a skipped axis
/// (torch's None or `:` before an index) is not supported: permute it behind the indexed ones.
/// Without accumulate, where positions repeat the last write (row-major over I) wins and its values
/// element alone gets the gradient there, as scatter's (torch leaves the winner unspecified); with
/// accumulate repeats add up and each gets the gradient. Differentiable w.r.t. x (zero where
/// overwritten, unless accumulate) and values (summed back over its broadcast axes). Any dtype;
/// values must have x's. x.index_put_(...) (core/tensor.h) writes x itself.
Tensor index_put(const Tensor& x, const std::vector<Tensor>& indices, const Tensor& values, bool accumulate = false);
/// The tensors (all of one shape) joined along a new axis (torch.stack).
Tensor stack(const std::vector<Tensor>& parts, int64_t axis = 0);
/// torch.cat: concat under PyTorch's name.
inline Tensor cat(const std::vector<Tensor>& parts, int64_t axis = 0) { return concat(parts, axis); }

// ---------------------------------------------------------------- ordering (core/ops/sort.cpp)
// Along `axis`, NaN orders as the largest value (as torch) and equal elements by index: sort is
// stable (torch's stable=True; torch's default leaves ties in an unspecified order) and topk keeps
// the lowest indices on ties (torch 1.13's pick is unspecified). Any dtype; a 0-d x is one element.
/// Values and int64 indices, as torch's named tuple: `auto [values, indices] = sort(x);`.
struct ValuesIndices {
  Tensor values;
  Tensor indices;
};
/// x's slices along `axis` in ascending (descending) order, and where each element came from.
/// Differentiable w.r.t. x through the values (gather's backward).
ValuesIndices sort(const Tensor& x, int64_t axis = -1, bool descending = false);
/// sort's indices alone (torch.argsort); no gradient.
Tensor argsort(const Tensor& x, int64_t axis = -1, bool descending = false);
/// The k largest (smallest) elements along `axis`, 0 <= k <= size, and their indices, in order even
/// when `sorted` is false (torch's order is unspecified then). Differentiable through the values.
ValuesIndices topk(const Tensor& x, int64_t k, int64_t axis = -1, bool largest = true, bool sorted = true);

// ---------------------------------------------------------------- sampling (core/ops/multinomial.cpp)
/// torch.multinomial: num_samples int64 category indices per row of probs (1-D (n) or 2-D
/// (rows, n); float, non-negative, finite, any positive sum), with or without replacement
/// (without: at most as many as the non-zero probabilities; torch then draws zeros too), drawn from
/// `gen` (none: the default generator). With replacement, and any single draw: one uniform a
/// draw, a binary search of the row's running sums. Several without replacement: one uniform a
/// non-zero weight (the exponential race, as torch's), O(n log num_samples) a row.
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement = false, Generator* gen = nullptr);

// ---------------------------------------------------------------- whole-tensor reductions (core/ops/index.cpp)
/// The largest / smallest element, shape [] (the gradient goes to the first such element).
Tensor max(const Tensor& a);
Tensor min(const Tensor& a);
/// Min over an axis (the gradient goes to the first minimal element of each slice).
Tensor min(const Tensor& a, int64_t axis, bool keepdim = false);

// ---------------------------------------------------------------- matmul (core/ops/matmul.cpp)
/// Matrix product of the last two axes; leading (batch) axes broadcast. 1-D operands follow
/// torch.matmul: vector @ matrix and matrix @ vector drop the promoted axis, vector @ vector is the
/// dot product (shape []). Uses cblas_?gemm with transpose flags, so transposed views are not copied.
Tensor matmul(const Tensor& a, const Tensor& b);
/// torch.outer: 1-D a (n) and b (m) of one dtype -> (n, m), a[i] b[j].
Tensor outer(const Tensor& a, const Tensor& b);
/// y = x @ w^T (+ b): PyTorch's F.linear. x: (..., in), w: (out, in), b: (out) or undefined.
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b = Tensor());
/// r + linear(x, w, b), with the product accumulated straight onto a copy of r (as
/// torch.addmm(r, x, w^T)): a residual connection without a separate pass over the output.
/// r has linear's output shape, (..., out).
Tensor add_linear(const Tensor& r, const Tensor& x, const Tensor& w, const Tensor& b = Tensor());

// ---------------------------------------------------------------- einsum (core/ops/einsum.cpp)
/// torch.einsum: einsum("ij,jk->ik", {a, b}) is a @ b. The equation names each operand's axes with
/// letters (a-z and A-Z, distinct letters) and, after "->", the output's; without "->" the output
/// is every letter used once, upper case first, in alphabetical order ("ij,jk" is "ij,jk->ik"). A
/// letter not in the output is summed over; repeated in one operand it takes the diagonal ("ii->i",
/// and "ii", the trace); "i,j->ij" is an outer product. "..." stands for the axes an operand's
/// letters leave unnamed, lined up from the right and broadcast across operands (as are axes of
/// size 1 against a letter's size elsewhere); in the implicit output they come first. Spaces are
/// ignored. Operands are float32 or float64, one dtype; any number of them, contracted left to
/// right (as torch 1.13), each pair as one batched matmul, so "bij,bjk->bik" and "bhqd,bhkd->bhqk"
/// run on the GEMM kernels, with transposed views passed as flags (a pair with nothing to sum, or
/// only dot products, is a broadcast mul and sum). Differentiable through the ops it is made of
/// (permute, reshape, sum, mul, matmul, a diagonal view). A bad equation throws one heed::Error
/// line naming einsum and the problem.
Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands);

// ---------------------------------------------------------------- nn ops (core/ops/nn_ops.cpp)
/// Gathers rows: out[..., :] = weight[ids[...], :]. `ids` holds integer ids in any dtype; the
/// backward scatter-adds into weight's gradient. Throws naming the id if one is out of range.
Tensor embedding(const Tensor& weight, const std::vector<int32_t>& ids, const Shape& ids_shape);
/// Where mask is true, the result is `value` (mask broadcasts to a's shape; 1 = fill).
/// The gradient through filled positions is zero.
Tensor masked_fill(const Tensor& a, const std::vector<uint8_t>& mask, const Shape& mask_shape,
                   double value);
/// embedding over a tensor of ids (int32 or int64, any shape): out has ids' shape + (dim).
Tensor embedding(const Tensor& weight, const Tensor& ids);
namespace detail {
Tensor cross_entropy_of_tensor(const Tensor& logits, const Tensor& targets, int32_t ignore_index);
}
/// cross_entropy against a tensor of targets, in any of F.cross_entropy's forms (see
/// CrossEntropyOptions below): logits (N, C) and class ids (N) (the fused op), and the others.
/// A template only so that braced ids, cross_entropy(logits, {1, 2}), still mean the vector
/// overload below rather than being ambiguous with a tensor literal.
template <std::same_as<Tensor> Targets>
Tensor cross_entropy(const Tensor& logits, const Targets& targets, int32_t ignore_index = -100) {
  return detail::cross_entropy_of_tensor(logits, targets, ignore_index);
}
/// Mean cross-entropy of logits (N, C) against integer targets (N), stable (log-sum-exp), in
/// one fused op. Targets equal to `ignore_index` contribute nothing.
Tensor cross_entropy(const Tensor& logits, const std::vector<int32_t>& targets,
                     int32_t ignore_index = -100);
/// F.cross_entropy's keywords beyond ignore_index.
struct CrossEntropyOptions {
  enum class Reduction { mean, sum, none };
  int32_t ignore_index = -100;  ///< with class ids: rows with this target add nothing
  /// mean: over the targets not ignored, each counted with its class's weight (NaN if every one
  /// is ignored), or over the rows for probability targets; sum; none: the per-row losses in
  /// the targets' shape without classes, 0 at ignored targets.
  Reduction reduction = Reduction::mean;
  /// In [0, 1]: the target distribution is (1 - s) one-hot + s uniform over the C classes, as
  /// torch's label_smoothing.
  double label_smoothing = 0.0;
  /// A weight per class (C), of the logits' dtype, or undefined for none; differentiable.
  Tensor weight = Tensor();
};
/// F.cross_entropy with torch's shapes and keywords: logits (N, C), (C) unbatched, or
/// (N, C, d1, ...) with classes on axis 1; targets class ids (int32/int64) of that shape without
/// the classes, or class probabilities (float, the logits' shape and dtype). E.g.
/// `cross_entropy(logits, targets, {.reduction = CrossEntropyOptions::Reduction::none})`. Ids with
/// the defaults run the fused op above; the rest is composed from log_softmax, gather and sums,
/// differentiable through them.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, const CrossEntropyOptions& options);
/// Mean squared error, mean((input - target)^2), as F.mse_loss; the shapes must be equal (torch
/// broadcasts them with a warning). The gradient flows to both.
Tensor mse_loss(const Tensor& input, const Tensor& target);
/// Inverted dropout: zeroes each element with probability p and scales the rest by 1/(1-p).
/// Identity when p == 0. Draws the mask from `gen`.
Tensor dropout(const Tensor& a, double p, Generator& gen);
/// Layer norm over the last axis: (x - mean) / sqrt(var + eps) * w + b (w, b may be undefined).
/// Fused forward and backward.
Tensor layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, double eps = 1e-5);

// ---------------------------------------------------------------- attention (core/ops/attention.cpp)
// Shapes: B batch, H (nh) heads, Tq queries, Tk keys, hd = head width. Query i sees the keys
// j < Tk, or with `causal` j <= i + (Tk - Tq) (aligned bottom-right: with Tq == Tk, j <= i).
// Masked keys get exactly zero weight, as a -inf fill before the softmax would give; a query whose
// keys are all masked gets all-zero weights (not NaN), so its output is zero.

/// PyTorch 2's F.scaled_dot_product_attention: softmax(q k^T * scale + mask) (dropout) @ v.
/// q (..., L, E), k (..., S, E), v (..., S, Ev) -> (..., L, Ev); leading axes broadcast as in
/// matmul. scale defaults to 1 / sqrt(E). attn_mask (broadcasting to (..., L, S)) is either bool,
/// where **true means "takes part in attention"** (the opposite of nn::MultiHeadAttention's and
/// torch.nn.MultiheadAttention's masks, where true means "masked out"), or float, added to the
/// scores (-inf masks). is_causal masks key j > i (top-left aligned, as PyTorch) and excludes
/// attn_mask. A query row with every key masked gets zero weights, hence a zero output (PyTorch's
/// reference formula gives NaN there). dropout_p applies to the weights whenever > 0 (as PyTorch:
/// pass 0 in eval), drawing from `gen` or the default generator. Every path, masked or not, runs
/// the fused attention_softmax kernel (the mask as its additive bias). Differentiable w.r.t. q,
/// k, v and a float mask.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& attn_mask = Tensor(), bool is_causal = false,
                                    double dropout_p = 0.0, std::optional<double> scale = std::nullopt,
                                    Generator* gen = nullptr);

/// Which key positions are padding: pad[b * T + t] == 1 marks key t of batch row b.
struct KeyPaddingMask {
  std::vector<uint8_t> pad;  ///< B * T flags, row-major; 1 = padding (never attended to)
  int64_t B = 0;
  int64_t T = 0;
};

/// A KeyPaddingMask from per-row lengths: positions >= lengths[b] are padding. Throws on a
/// length outside [0, T].
KeyPaddingMask padding_mask_from_lengths(const std::vector<int64_t>& lengths, int64_t T);

/// An attention mask as an additive bias: -inf where `masked` is true (any dtype, non-zero =
/// true), 0 elsewhere, in `dtype` (float32 or float64). For SDPA's convention (true = takes part)
/// pass logical_not(mask).
Tensor additive_mask(const Tensor& masked, DType dtype = DType::f32);

/// Fused softmax(scale * scores + bias) over the last axis of scores (B, H, Tq, Tk), masked as
/// above (causal, and padding: mask->pad[b, j]); forward and backward each one pass per row.
/// `bias` (optional, float, broadcasting to (B, H, Tq, Tk)) is an arbitrary additive attention
/// mask: -inf masks a key (additive_mask makes one from a bool mask). Differentiable w.r.t.
/// scores and bias.
Tensor attention_softmax(const Tensor& scores, double scale, bool causal, const KeyPaddingMask* mask = nullptr,
                         const Tensor& bias = Tensor());

/// One of attention_heads' q, k, v: channels [offset, offset + d_model) of a (B, T, width)
/// projection, read in place (a fused qkv projection is one tensor with offsets 0, C, 2C).
struct HeadInput {
  Tensor src;
  int64_t offset = 0;
};

struct AttentionHeadsOptions {
  int64_t n_head = 1;
  double scale = 1.0;  ///< multiplies the scores (1 / sqrt(head_dim) in scaled dot-product attention)
  bool causal = false;
  const KeyPaddingMask* key_padding = nullptr;  ///< (B, Tk), or none
  /// An additive attention mask (float, broadcasting to (B, nh, Tq, Tk); -inf masks), added to the
  /// scaled scores, combinable with causal and key_padding; undefined: none. A constant here:
  /// attention_softmax differentiates a mask.
  Tensor bias;
  double dropout = 0.0;        ///< on the weights, in [0, 1); needs `gen` when > 0
  Generator* gen = nullptr;    ///< draws the dropout mask
  Tensor* weights = nullptr;   ///< if set, receives the weights (B, nh, Tq, Tk) before dropout
};

/// Multi-head attention between projections, as one op: per head h (channels [h hd, (h + 1) hd)
/// of each input), softmax(scale q_h k_h^T, masked) (dropped out) @ v_h, the heads merged into
/// the output (B, Tq, d_model). q (B, Tq, *), k and v (B, Tk, *). Throws on mismatched shapes or
/// a mask that does not match (B, Tk).
Tensor attention_heads(const HeadInput& q, const HeadInput& k, const HeadInput& v, int64_t d_model,
                       const AttentionHeadsOptions& options);

}  // namespace heed
