// heed: the Tensor handle.
//
// A Tensor is a cheap, copyable handle (a shared_ptr) to a TensorImpl: a view (shape, strides,
// offset) onto a shared Storage, plus the autograd state (requires_grad, grad, grad_fn).
// Copies share everything; views (transpose, permute, slice, view, reshape where it can view) share
// the storage. Element types: float32 for training, float64 for gradient checks, int32 / int64 /
// bool for ids, indices and masks (no gradients).
#pragma once

#include <atomic>
#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/dtype.h"

namespace heed {

using Shape = std::vector<int64_t>;

std::string to_string(const Shape& s);  ///< "[2, 3, 4]"
/// Product of the dims (1 for a scalar); throws heed::Error past int64 (checked over the non-zero
/// dims even when one is 0: strides are their products), naming `op` when given.
int64_t numel_of(const Shape& s, const char* op = nullptr);
Shape contiguous_strides(const Shape& s);  ///< row-major strides, in elements

/// A flat, 64-byte aligned buffer of one dtype. Views share one Storage, and with it one version
/// count: every in-place write through heed's API (copy_, fill_, an optimizer step) increments it,
/// so autograd can tell that a tensor an op saved for its backward has changed since (torch's
/// version counter, also shared by a tensor and its views).
class Storage {
 public:
  Storage(int64_t numel, DType dtype);  ///< uninitialised
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() const { return data_; }
  int64_t numel() const { return numel_; }
  DType dtype() const { return dtype_; }
  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void increment_version() { version_.fetch_add(1, std::memory_order_relaxed); }

 private:
  void* data_;
  int64_t numel_;
  DType dtype_;
  std::atomic<uint64_t> version_{0};
};

class Node;
class Generator;
struct ValuesIndices;

/// One element, or a nested braced list of them: what a tensor literal is written with,
/// `Tensor({{1.0, 2.0}, {3.0, 4.0}})`. As torch.tensor: integers make int64, any floating-point
/// element makes float32, only bools make bool; every sub-list must have the same shape.
class TensorLiteral {
 public:
  TensorLiteral(int v) : values_{double(v)}, kind_(Kind::integer) {}
  /// Held as a double: a value past +-2^53 would round, so it is refused (use from_vector<int64_t>).
  TensorLiteral(long v);
  TensorLiteral(float v) : values_{v}, kind_(Kind::floating) {}
  TensorLiteral(double v) : values_{v}, kind_(Kind::floating) {}
  TensorLiteral(bool v) : values_{v ? 1.0 : 0.0}, kind_(Kind::boolean) {}
  TensorLiteral(std::initializer_list<TensorLiteral> items);
  const std::vector<double>& values() const { return values_; }
  const Shape& shape() const { return shape_; }
  DType dtype() const;

 private:
  enum class Kind { boolean, integer, floating };  // ordered: a list takes the widest of its items
  std::vector<double> values_;
  Shape shape_;
  Kind kind_;
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Shape strides;  // in elements
  int64_t offset = 0;
  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad;     // accumulated by backward(); same shape, contiguous
  std::shared_ptr<Node> grad_fn;        // the op that produced this tensor (null for leaves)
};

class Tensor {
 public:
  Tensor() = default;  ///< an undefined tensor (defined() == false)
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}
  /// A tensor literal: Tensor({{1.0, 2.0}, {3.0, 4.0}}) is float32 (2, 2), Tensor({1, 2}) int64,
  /// Tensor({true, false}) bool (see TensorLiteral).
  Tensor(std::initializer_list<TensorLiteral> items);
  Tensor(const Tensor&) = default;
  Tensor(Tensor&&) noexcept = default;
  ~Tensor() = default;
  /// Assigning to a named Tensor rebinds the name (it then shares other's tensor), as in Python.
  Tensor& operator=(const Tensor&) & = default;
  Tensor& operator=(Tensor&&) & noexcept = default;
  /// Assigning to a temporary writes into it, as in libtorch and as Python's `x[0] = v`:
  /// `x[0] = v`, `slice(x, 1, 0, 2) = v`, `x.select(1, 0) = 0.0` are copy_(v) (v broadcast to the
  /// view's shape) or fill_(0.0) on a view of x, so they change x. (Before 2026-11-30 they rebound
  /// a temporary handle and changed nothing.)
  Tensor& operator=(const Tensor& src) &&;
  Tensor& operator=(double value) &&;

  // ---- factories (contiguous) ----
  static Tensor empty(const Shape& shape, DType dtype = DType::f32);  ///< uninitialised
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32);
  static Tensor ones(const Shape& shape, DType dtype = DType::f32);
  /// Every element `value`; a finite value the dtype cannot hold (1e39 in float32) is refused, as
  /// torch.full refuses it.
  static Tensor full(const Shape& shape, double value, DType dtype = DType::f32);
  /// Shape []. A value past float32's range becomes inf, as torch.tensor(1e39) does.
  static Tensor scalar(double value, DType dtype = DType::f32);
  /// Copies `values` (row-major) into a new tensor; throws if the count does not match `shape`.
  static Tensor from_vector(const std::vector<float>& values, const Shape& shape);
  static Tensor from_vector(const std::vector<double>& values, const Shape& shape);
  static Tensor from_vector(const std::vector<int32_t>& values, const Shape& shape);
  static Tensor from_vector(const std::vector<int64_t>& values, const Shape& shape);
  /// A braced list: `from_vector({0.43, 0.15}, {1, 2})` is float32 unless `dtype` says otherwise.
  static Tensor from_vector(std::initializer_list<double> values, const Shape& shape, DType dtype = DType::f32);
  /// 0, 1, ..., n-1, int64 unless `dtype` says otherwise (torch.arange(n) with an integer n: one
  /// default for both overloads, so `arange(n)` and `arange(0, n)` are the same tensor).
  static Tensor arange(int64_t n, DType dtype = DType::i64);
  /// start, start + step, ... below end (above it for a negative step), int64 unless `dtype`
  /// says otherwise (torch.arange(start, end, step) with integer arguments).
  static Tensor arange(int64_t start, int64_t end, int64_t step = 1, DType dtype = DType::i64);
  /// `steps` values from start to end, both included (torch.linspace): float32 or float64, with
  /// the rounding of torch's x86 CPU kernel, bit for bit (step = (end - start) / (steps - 1) in the
  /// dtype, counted from the nearer end, in its vector blocks: core/tensor.cpp says how); steps ==
  /// 1 gives start, 0 an empty tensor.
  /// The (n, m) identity (m = n by default): ones on the diagonal, as torch.eye; any dtype.
  static Tensor eye(int64_t n, DType dtype = DType::f32);
  static Tensor eye(int64_t n, int64_t m, DType dtype = DType::f32);
  static Tensor linspace(double start, double end, int64_t steps, DType dtype = DType::f32);
  /// Normal(mean, std) samples from `gen`.
  static Tensor randn(const Shape& shape, Generator& gen, double std = 1.0, double mean = 0.0,
                      DType dtype = DType::f32);
  /// Normal(mean, std) samples from the default generator (heed::manual_seed).
  static Tensor randn(const Shape& shape, double std = 1.0, double mean = 0.0, DType dtype = DType::f32);
  /// Uniform [lo, hi) samples from `gen`.
  static Tensor rand(const Shape& shape, Generator& gen, double lo = 0.0, double hi = 1.0,
                     DType dtype = DType::f32);
  /// Uniform [lo, hi) samples from the default generator (heed::manual_seed).
  static Tensor rand(const Shape& shape, double lo = 0.0, double hi = 1.0, DType dtype = DType::f32);

  // ---- metadata ----
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  const Shape& strides() const { return impl().strides; }
  int64_t offset() const { return impl().offset; }
  int64_t dim() const { return static_cast<int64_t>(impl().shape.size()); }
  int64_t size(int64_t axis) const;  ///< negative axes count from the end
  int64_t numel() const { return numel_of(impl().shape); }
  DType dtype() const { return impl().storage->dtype(); }
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const { return impl().storage; }

  /// Pointer to element 0 of this view (storage base + offset). T must match dtype().
  template <class T>
  T* data() const {
    HEED_CHECK(dtype_of<T>() == dtype(), "data<", dtype_name(dtype_of<T>()), ">() on a ",
               dtype_name(dtype()), " tensor");
    return static_cast<T*>(impl().storage->data()) + impl().offset;
  }
  /// The value of a one-element tensor, as double.
  double item() const;
  /// All elements in row-major order (works for any strides), converted to T.
  template <class T>
  std::vector<T> to_vector() const;
  /// Element at a multi-index (slow; for tests and cold paths).
  double at(const std::vector<int64_t>& index) const;

  // ---- autograd ----
  bool requires_grad() const { return impl().requires_grad; }
  /// Marks a leaf as trainable; returns *this so `Tensor::randn(...).requires_grad_()` chains.
  Tensor& requires_grad_(bool on = true);
  /// The accumulated gradient (undefined until a backward reaches this tensor).
  Tensor grad() const;
  void zero_grad();  ///< drops the gradient (next backward starts from zero)
  /// Back-propagates from a one-element tensor (seed 1).
  void backward(bool retain_graph = false) const;
  /// Back-propagates with an explicit upstream gradient of this tensor's shape.
  void backward(const Tensor& grad_output, bool retain_graph = false) const;
  const std::shared_ptr<Node>& grad_fn() const { return impl().grad_fn; }
  /// Same data, cut from the graph (shares storage; requires_grad false).
  Tensor detach() const;
  /// How many in-place writes this tensor's storage has had (torch's `t._version`; shared by
  /// views). A backward whose op saved this tensor refuses to run once it has changed.
  uint64_t version() const { return impl().storage->version(); }
  /// Counts an in-place write made around heed's API, through data<T>() (what
  /// torch.autograd.graph.increment_version does): call it after changing values a graph may
  /// have saved, so that backward() refuses instead of using them. copy_, fill_ and the
  /// optimizers count their own writes.
  void increment_version() const { impl().storage->increment_version(); }

  // ---- method syntax: each is the free op of the same name in core/ops.h ----
  Tensor operator[](int64_t i) const;  ///< select(*this, 0, i): a view without the first axis
  Tensor select(int64_t axis, int64_t i) const;
  Tensor reshape(Shape shape) const;
  Tensor view(Shape shape) const;
  Tensor transpose(int64_t axis0, int64_t axis1) const;
  Tensor permute(const std::vector<int64_t>& axes) const;
  Tensor unsqueeze(int64_t axis) const;
  Tensor squeeze(int64_t axis) const;
  Tensor squeeze() const;  ///< every size-1 axis dropped
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor expand(const Shape& shape) const;
  Tensor matmul(const Tensor& other) const;
  Tensor sum() const;
  Tensor sum(int64_t axis, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(int64_t axis, bool keepdim = false) const;
  /// Over several axes: x.sum({0, 2}) (the braced form also keeps x.sum({}) from meaning axis 0).
  Tensor sum(const std::vector<int64_t>& axes, bool keepdim = false) const;
  Tensor sum(std::initializer_list<int64_t> axes, bool keepdim = false) const;
  Tensor mean(const std::vector<int64_t>& axes, bool keepdim = false) const;
  Tensor mean(std::initializer_list<int64_t> axes, bool keepdim = false) const;
  Tensor cumsum(int64_t axis) const;
  /// vector_norm(*this, p, ...): torch's x.norm(p) over every element, or x.norm(p, dim, keepdim).
  Tensor norm(double p = 2.0) const;
  Tensor norm(double p, int64_t axis, bool keepdim = false) const;
  Tensor norm(double p, std::initializer_list<int64_t> axes, bool keepdim = false) const;
  Tensor max() const;
  Tensor max(int64_t axis, bool keepdim = false) const;
  Tensor min() const;
  Tensor min(int64_t axis, bool keepdim = false) const;
  Tensor argmax() const;
  Tensor argmax(int64_t axis, bool keepdim = false) const;
  Tensor argmin() const;
  Tensor argmin(int64_t axis, bool keepdim = false) const;
  Tensor logsumexp(int64_t axis, bool keepdim = false) const;
  Tensor prod() const;
  Tensor prod(int64_t axis, bool keepdim = false) const;
  Tensor narrow(int64_t axis, int64_t start, int64_t length) const;
  std::vector<Tensor> unbind(int64_t axis = 0) const;
  Tensor flip(const std::vector<int64_t>& axes) const;
  Tensor log1p() const;
  Tensor expm1() const;
  Tensor rsqrt() const;
  Tensor reciprocal() const;
  Tensor square() const;
  Tensor floor() const;
  Tensor ceil() const;
  Tensor round() const;
  Tensor isnan() const;
  Tensor isinf() const;
  Tensor isfinite() const;
  Tensor any() const;
  Tensor any(int64_t axis, bool keepdim = false) const;
  Tensor all() const;
  Tensor all(int64_t axis, bool keepdim = false) const;
  bool allclose(const Tensor& other, double rtol = 1e-5, double atol = 1e-8, bool equal_nan = false) const;
  /// amax / amin over one axis or several (x.amax({0, 2}); x.amax() over every axis).
  Tensor amax(int64_t axis, bool keepdim = false) const;
  Tensor amax(std::initializer_list<int64_t> axes = {}, bool keepdim = false) const;
  Tensor amin(int64_t axis, bool keepdim = false) const;
  Tensor amin(std::initializer_list<int64_t> axes = {}, bool keepdim = false) const;
  Tensor softmax(int64_t axis = -1) const;
  Tensor log_softmax(int64_t axis = -1) const;
  Tensor abs() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor tanh() const;
  Tensor relu() const;
  Tensor sigmoid() const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor clamp(std::optional<double> lo, std::optional<double> hi = std::nullopt) const;
  Tensor var() const;
  Tensor var(int64_t axis, bool unbiased = true, bool keepdim = false) const;
  Tensor std() const;
  Tensor std(int64_t axis, bool unbiased = true, bool keepdim = false) const;
  /// x.var(false) would take the bool for an axis (torch's is `unbiased`): refused when compiled.
  template <class B> requires std::same_as<B, bool> Tensor var(B) const = delete;
  template <class B> requires std::same_as<B, bool> Tensor std(B) const = delete;
  Tensor pow(double exponent) const;
  Tensor masked_fill(const Tensor& mask, double value) const;
  /// x.eq(y), x.ne(0.0), ...: eq(*this, other) and the rest (core/ops.h's comparisons: element-wise,
  /// broadcasting, a bool tensor with no gradient).
  Tensor eq(const Tensor& other) const;
  Tensor ne(const Tensor& other) const;
  Tensor lt(const Tensor& other) const;
  Tensor le(const Tensor& other) const;
  Tensor gt(const Tensor& other) const;
  Tensor ge(const Tensor& other) const;
  Tensor eq(double other) const;
  Tensor ne(double other) const;
  Tensor lt(double other) const;
  Tensor le(double other) const;
  Tensor gt(double other) const;
  Tensor ge(double other) const;
  Tensor tril(int64_t k = 0) const;
  Tensor triu(int64_t k = 0) const;
  Tensor gather(int64_t axis, const Tensor& index) const;
  Tensor index_select(int64_t axis, const Tensor& index) const;
  Tensor repeat(const Shape& repeats) const;
  Tensor scatter(int64_t axis, const Tensor& index, const Tensor& src) const;
  Tensor scatter_add(int64_t axis, const Tensor& index, const Tensor& src) const;
  Tensor index_add(int64_t axis, const Tensor& index, const Tensor& src, double alpha = 1.0) const;
  Tensor index_put(const std::vector<Tensor>& indices, const Tensor& values, bool accumulate = false) const;
  /// sort, topk: values and indices (a ValuesIndices, core/ops.h), `auto [v, i] = x.sort();`.
  ValuesIndices sort(int64_t axis = -1, bool descending = false) const;
  ValuesIndices topk(int64_t k, int64_t axis = -1, bool largest = true, bool sorted = true) const;
  Tensor argsort(int64_t axis = -1, bool descending = false) const;
  Tensor multinomial(int64_t num_samples, bool replacement = false, Generator* gen = nullptr) const;

  // ---- copies and conversion ----
  Tensor contiguous() const;  ///< *this if already contiguous, else a differentiable copy
  Tensor clone() const;       ///< a differentiable contiguous copy
  Tensor to(DType dtype) const;  ///< differentiable dtype conversion (identity if equal)
  // In-place writes are outside autograd: no op is recorded for them. Each counts in version(),
  // so a graph that saved this tensor's values refuses its backward. And each refuses, in one
  // line, a write whose gradient would silently be wrong or whose result is undefined:
  //   - to an op's output while grad mode is on (an activation of the graph being recorded, or a
  //     view of one, such as `x[0]` of a parameter x): torch records such a write; heed does not,
  //     and the ops after it would see the new values while the gradient flowed back as if there
  //     had been none. Use the out-of-place op (`y = y * 3.0`) or write under a NoGradGuard. A
  //     leaf (a parameter) may be written: that is as if it had held the new values from the
  //     start (torch refuses a leaf that requires grad outside no_grad; heed is laxer there);
  //   - copy_ and the arithmetic, to an expanded view (a stride 0 over more than one element),
  //     where elements share one memory location, as torch refuses them; fill_ and zero_ may.
  /// Copies values from `src` (any dtype and strides, broadcast to this tensor's shape, as torch's
  /// copy_) into this tensor.
  void copy_(const Tensor& src);
  void fill_(double value);  ///< sets every element
  /// In-place arithmetic: torch's `with torch.no_grad(): p.sub_(g, alpha=lr)`.
  /// `other` broadcasts to this tensor's shape (never the other way round) and has its dtype.
  /// Each returns *this. The values are those of the out-of-place ops (add, mul, ...).
  Tensor& add_(const Tensor& other, double alpha = 1.0);  ///< this + alpha * other
  Tensor& add_(double s);
  Tensor& sub_(const Tensor& other, double alpha = 1.0);  ///< this - alpha * other
  Tensor& sub_(double s);
  Tensor& mul_(const Tensor& other);
  Tensor& mul_(double s);
  Tensor& div_(const Tensor& other);
  Tensor& div_(double s);
  Tensor& zero_();  ///< fill_(0)
  /// x[i0, i1, ...] = values (accumulate: +=) in place, torch's x.index_put_ and `x[idx] = v`,
  /// `x[mask] = v`: the positions, broadcasting, repeats and checks of heed::index_put (core/ops.h),
  /// written into this tensor (any strides). values may overlap this tensor (read before writing).
  Tensor& index_put_(const std::vector<Tensor>& indices, const Tensor& values, bool accumulate = false);
  /// Makes this tensor, every handle and alias of it (they share one TensorImpl), a view of src's
  /// storage with src's shape, strides and offset, without copying (torch.Tensor.set_(source));
  /// drops its gradient. For loading and converting parameters; outside autograd.
  void set_(const Tensor& src);

  /// Throws heed::Error naming `op` where an in-place write to this tensor is refused (above);
  /// `shared_elements_ok`: fill_'s and zero_'s case, which may write an expanded view. For a
  /// user's own in-place method.
  void check_in_place_write(const char* op, bool shared_elements_ok = false) const;

  TensorImpl& impl() const {
    HEED_CHECK(impl_ != nullptr, "use of an undefined Tensor");
    return *impl_;
  }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same(const Tensor& other) const { return impl_ == other.impl_; }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// ---- factories shaped like another tensor (torch.zeros_like and kin): x's shape and dtype, or
// `dtype` when given (torch's dtype= argument); contiguous whatever x's strides; a new leaf that
// never requires grad, even when x does (torch's requires_grad=False default). Only x's shape and
// dtype are read, so x may be an op's output.
Tensor empty_like(const Tensor& x, std::optional<DType> dtype = std::nullopt);  ///< uninitialised
Tensor zeros_like(const Tensor& x, std::optional<DType> dtype = std::nullopt);
Tensor ones_like(const Tensor& x, std::optional<DType> dtype = std::nullopt);
/// `value` rounded to the dtype as Tensor::full does (an integer dtype truncates: 2.7 -> 2, as torch).
Tensor full_like(const Tensor& x, double value, std::optional<DType> dtype = std::nullopt);
/// Normal(0, 1) samples from the default generator (heed::manual_seed), as Tensor::randn({...});
/// float32 or float64 only (torch refuses an integer dtype too).
Tensor randn_like(const Tensor& x, std::optional<DType> dtype = std::nullopt);

/// A view of `base`'s storage with the given geometry (no autograd; used by view ops).
Tensor make_view(const Tensor& base, Shape shape, Shape strides, int64_t offset);

/// Prints as PyTorch 1.13's print(x): nested, `tensor([[1.0000, 2.0000],\n        [3.0000, 4.0000]])`.
/// Floats take 4 decimals, `2.` when every one is whole, and scientific notation (`1.0000e-05`) when
/// the nonzero finite magnitudes span over 1000x, exceed 1e8, or (not all whole) go under 1e-4; all
/// are padded to one width. Rows wrap at 80 columns; past 1000 elements each axis shows its first
/// and last 3 entries. An empty tensor prints `tensor([], size=(0, 3))`. The dtype is named unless
/// float32, int64 or bool (unless empty), as `dtype=float64` where torch writes `dtype=torch.float64`.
std::ostream& operator<<(std::ostream& os, const Tensor& t);

}  // namespace heed
