#include "core/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <ostream>
#include <type_traits>
#include <unordered_map>

#include "core/autograd.h"
#include "core/ops.h"
#include "core/random.h"

namespace heed {

// ------------------------------------------------------------------------------------------
// Storage, with a small caching allocator.
//
// A training step allocates the same buffer sizes every iteration. Fresh memory costs a page
// fault per 4 KiB on first touch (microseconds each: docs/platform.md, "Memory"), and glibc returns
// large blocks to the OS on free, so without reuse every step pays for its activations again.
// Freed blocks are kept in per-size free lists and handed back out.

namespace {
struct BlockCache {
  std::mutex mu;
  std::unordered_map<size_t, std::vector<void*>> free_lists;
  size_t cached_bytes = 0;
  static constexpr size_t kMaxCachedBytes = size_t(2) << 30;

  void* get(size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mu);
      auto it = free_lists.find(bytes);
      if (it != free_lists.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        cached_bytes -= bytes;
        return p;
      }
    }
    void* p = std::aligned_alloc(64, bytes);
    if (!p) throw std::bad_alloc();
    return p;
  }
  void put(void* p, size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (cached_bytes + bytes <= kMaxCachedBytes) {
        free_lists[bytes].push_back(p);
        cached_bytes += bytes;
        return;
      }
    }
    std::free(p);
  }
  ~BlockCache() {
    for (auto& [bytes, list] : free_lists)
      for (void* p : list) std::free(p);
  }
};
BlockCache& block_cache() {
  static BlockCache* cache = new BlockCache();  // never destroyed: tensors may outlive statics
  return *cache;
}
size_t padded_bytes(int64_t numel, DType dtype) {
  size_t bytes = static_cast<size_t>(std::max<int64_t>(numel, 1)) * dtype_size(dtype);
  return (bytes + 63) / 64 * 64;
}
}  // namespace

Storage::Storage(int64_t numel, DType dtype) : numel_(numel), dtype_(dtype) {
  HEED_CHECK(numel >= 0, "Storage: negative size ", numel);
  HEED_CHECK(numel <= (std::numeric_limits<int64_t>::max() - 63) / static_cast<int64_t>(dtype_size(dtype)),
             "Storage: ", numel, " ", dtype_name(dtype), " elements is more bytes than a 64-bit size holds");
  try {
    data_ = block_cache().get(padded_bytes(numel, dtype));
  } catch (const std::bad_alloc&) {
    detail::fail("cannot allocate ", padded_bytes(numel, dtype), " bytes for ", numel, " ", dtype_name(dtype),
                 " elements: the machine does not have that memory");
  }
}

Storage::~Storage() { block_cache().put(data_, padded_bytes(numel_, dtype_)); }

// ------------------------------------------------------------------------------------------
// shapes

std::string to_string(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

int64_t numel_of(const Shape& s, const char* op) {
  // Checked: a shape whose count overflows int64 would wrap to a small (or zero) allocation that
  // every later index runs past. A zero size makes the count 0 whatever the others are, but the
  // others must still multiply without overflow (the strides are their products).
  int64_t n = 1;
  bool empty = false;
  for (int64_t d : s) {
    if (d == 0) {
      empty = true;
      continue;
    }
    HEED_CHECK(!__builtin_mul_overflow(n, d, &n), op ? op : "", op ? ": " : "", "shape ", to_string(s),
               ": its element count overflows int64");
  }
  return empty ? 0 : n;
}

Shape contiguous_strides(const Shape& s) {
  Shape st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

// ------------------------------------------------------------------------------------------
// factories

Tensor Tensor::empty(const Shape& shape, DType dtype) {
  for (int64_t d : shape) HEED_CHECK(d >= 0, "Tensor: negative dimension in shape ", to_string(shape));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(numel_of(shape), dtype);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  return Tensor(std::move(impl));
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype) {
  check_scalar_fits("full", value, dtype);
  Tensor t = empty(shape, dtype);
  t.fill_(value);
  return t;
}
Tensor Tensor::zeros(const Shape& shape, DType dtype) { return full(shape, 0.0, dtype); }
Tensor Tensor::ones(const Shape& shape, DType dtype) { return full(shape, 1.0, dtype); }
// Rounded to float32 first, as torch.tensor(1e39) is inf: full and fill_ refuse a value float32
// cannot hold, but a comparison's scalar (x < 1e39), a sum's and a loss's result are made here.
Tensor Tensor::scalar(double value, DType dtype) {
  return full({}, dtype == DType::f32 ? static_cast<double>(static_cast<float>(value)) : value, dtype);
}

template <class T>
static Tensor from_values(const std::vector<T>& values, const Shape& shape) {
  HEED_CHECK(static_cast<int64_t>(values.size()) == numel_of(shape), "from_vector: ",
             values.size(), " values do not fill shape ", to_string(shape));
  Tensor t = Tensor::empty(shape, dtype_of<T>());
  if (!values.empty()) std::memcpy(t.data<T>(), values.data(), values.size() * sizeof(T));
  return t;
}
Tensor Tensor::from_vector(const std::vector<float>& v, const Shape& s) { return from_values(v, s); }
Tensor Tensor::from_vector(const std::vector<double>& v, const Shape& s) { return from_values(v, s); }
Tensor Tensor::from_vector(const std::vector<int32_t>& v, const Shape& s) { return from_values(v, s); }
Tensor Tensor::from_vector(const std::vector<int64_t>& v, const Shape& s) { return from_values(v, s); }
Tensor Tensor::from_vector(std::initializer_list<double> values, const Shape& shape, DType dtype) {
  return from_values(std::vector<double>(values), shape).to(dtype);
}

TensorLiteral::TensorLiteral(long v) : values_{double(v)}, kind_(Kind::integer) {
  constexpr long kExact = long{1} << 53;  // every integer up to here is a double
  HEED_CHECK(v >= -kExact && v <= kExact, "tensor literal: the integer ", v,
             " is past 2^53, which a literal would round; use Tensor::from_vector(std::vector<int64_t>{...}, shape)");
}

TensorLiteral::TensorLiteral(std::initializer_list<TensorLiteral> items) : kind_(Kind::boolean) {
  const TensorLiteral* first = items.size() ? items.begin() : nullptr;
  shape_ = {static_cast<int64_t>(items.size())};
  if (first) shape_.insert(shape_.end(), first->shape_.begin(), first->shape_.end());
  for (const TensorLiteral& item : items) {
    HEED_CHECK(item.shape_ == first->shape_, "Tensor literal: sub-lists of different shapes ", to_string(first->shape_),
               " and ", to_string(item.shape_));
    values_.insert(values_.end(), item.values_.begin(), item.values_.end());
    kind_ = std::max(kind_, item.kind_);
  }
  if (!first) kind_ = Kind::floating;  // torch.tensor([]) is float32
}

DType TensorLiteral::dtype() const {
  return kind_ == Kind::floating ? DType::f32 : kind_ == Kind::integer ? DType::i64 : DType::boolean;
}

Tensor::Tensor(std::initializer_list<TensorLiteral> items) {
  const TensorLiteral all(items);
  *this = from_values(all.values(), all.shape()).to(all.dtype());
}

Tensor Tensor::arange(int64_t n, DType dtype) { return arange(0, n, 1, dtype); }

Tensor Tensor::arange(int64_t start, int64_t end, int64_t step, DType dtype) {
  HEED_CHECK(step != 0, "arange: step must not be zero");
  HEED_CHECK(dtype != DType::boolean, "arange: a bool tensor cannot count (as torch's, which refuses it)");
  // The count and the last value in 128 bits: end - start overflows int64 for bounds far apart
  // (torch then returns an empty tensor), and a value past int32 would wrap (torch wraps it).
  const __int128 span = static_cast<__int128>(end) - start;
  const __int128 count = std::max<__int128>(0, (span + step + (step > 0 ? -1 : 1)) / step);
  HEED_CHECK(count <= std::numeric_limits<int64_t>::max(), "arange: [", start, ", ", end, ") in steps of ", step,
             " has more than 2^63 - 1 elements");
  const int64_t n = static_cast<int64_t>(count);
  if (n > 0 && dtype == DType::i32) {
    const __int128 last = static_cast<__int128>(start) + static_cast<__int128>(n - 1) * step;
    for (const __int128 v : {static_cast<__int128>(start), last})
      HEED_CHECK(v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max(),
                 "arange: the value ", static_cast<int64_t>(v), " does not fit in int32 (asked for [", start, ", ",
                 end, ") in steps of ", step, ")");
  }
  Tensor t = empty({n}, dtype);
  visit_any_dtype(dtype, [&]<class T>() {
    T* p = t.data<T>();
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(static_cast<__int128>(start) + static_cast<__int128>(i) * step);
  });
  return t;
}

Tensor Tensor::eye(int64_t n, DType dtype) { return eye(n, n, dtype); }

Tensor Tensor::eye(int64_t n, int64_t m, DType dtype) {
  HEED_CHECK(n >= 0 && m >= 0, "eye: sizes must be non-negative, got ", n, " and ", m);
  Tensor t = zeros({n, m}, dtype);
  visit_any_dtype(dtype, [&]<class T>() {
    T* p = t.data<T>();
    for (int64_t i = 0; i < std::min(n, m); ++i) p[i * m + i] = T(1);
  });
  return t;
}

Tensor Tensor::linspace(double start, double end, int64_t steps, DType dtype) {
  HEED_CHECK(steps >= 0, "linspace: the number of steps must be non-negative, got ", steps);
  HEED_CHECK(is_floating(dtype), "linspace: dtype must be float32 or float64, got ", dtype_name(dtype));
  // A finite end past the dtype's range would round to inf and fill the tensor with NaN and inf.
  for (const double v : {start, end}) check_scalar_fits("linspace", v, dtype);
  Tensor t = empty({steps}, dtype);
  visit_dtype(dtype, [&]<class T>() {
    // torch's CPU kernel (x86, AVX2 vectors), value for value. Element i counts from the nearer
    // end, which keeps each end exact, with its compiled code's fused multiply-add (std::fma here,
    // whatever the compiler does). Its loop takes 2 vectors of W (8 float32, 4 float64) at a time
    // while that many elements remain: a vector computes its first element so (its end chosen by
    // that element) and lane k as first + k * step, the product rounded, then the sum; the rest
    // run one by one. (fma(k, step, 0) is the rounded product, and no compiler fuses it further.)
    const T s = static_cast<T>(start), e = static_cast<T>(end);
    const T step = steps > 1 ? (e - s) / static_cast<T>(steps - 1) : T(0);
    auto from_end = [&](int64_t i) {
      return i < steps / 2 ? std::fma(step, static_cast<T>(i), s) : std::fma(-step, static_cast<T>(steps - 1 - i), e);
    };
    constexpr int64_t W = sizeof(T) == 4 ? 8 : 4;
    const int64_t vector_end = steps / (2 * W) * (2 * W);
    T* p = t.data<T>();
    for (int64_t i = 0; i < vector_end; i += W) {
      const T first = from_end(i);
      p[i] = first;
      for (int64_t k = 1; k < W; ++k) p[i + k] = first + std::fma(static_cast<T>(k), step, T(0));
    }
    for (int64_t i = vector_end; i < steps; ++i) p[i] = steps == 1 ? s : from_end(i);
  });
  return t;
}

Tensor Tensor::randn(const Shape& shape, Generator& gen, double std, double mean, DType dtype) {
  Tensor t = empty(shape, dtype);
  visit_dtype(dtype, [&]<class T>() {
    T* p = t.data<T>();
    for (int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = static_cast<T>(gen.normal(mean, std));
  });
  return t;
}

Tensor Tensor::rand(const Shape& shape, Generator& gen, double lo, double hi, DType dtype) {
  Tensor t = empty(shape, dtype);
  visit_dtype(dtype, [&]<class T>() {
    T* p = t.data<T>();
    for (int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = static_cast<T>(lo + (hi - lo) * gen.uniform());
  });
  return t;
}

Tensor Tensor::randn(const Shape& shape, double std, double mean, DType dtype) {
  return randn(shape, default_generator(), std, mean, dtype);
}

Tensor Tensor::rand(const Shape& shape, double lo, double hi, DType dtype) {
  return rand(shape, default_generator(), lo, hi, dtype);
}

Tensor empty_like(const Tensor& x, std::optional<DType> dtype) { return Tensor::empty(x.shape(), dtype.value_or(x.dtype())); }
Tensor zeros_like(const Tensor& x, std::optional<DType> dtype) { return Tensor::zeros(x.shape(), dtype.value_or(x.dtype())); }
Tensor ones_like(const Tensor& x, std::optional<DType> dtype) { return Tensor::ones(x.shape(), dtype.value_or(x.dtype())); }
Tensor full_like(const Tensor& x, double value, std::optional<DType> dtype) {
  return Tensor::full(x.shape(), value, dtype.value_or(x.dtype()));
}
Tensor randn_like(const Tensor& x, std::optional<DType> dtype) {
  HEED_CHECK(is_floating(dtype.value_or(x.dtype())), "randn_like: normal samples need float32 or float64, got ",
             dtype_name(dtype.value_or(x.dtype())));
  return Tensor::randn(x.shape(), 1.0, 0.0, dtype.value_or(x.dtype()));
}

Tensor make_view(const Tensor& base, Shape shape, Shape strides, int64_t offset) {
  numel_of(shape);  // refuses a shape whose element count overflows (an expand to 2^62 x 2^62)
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.storage();
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  return Tensor(std::move(impl));
}

// ------------------------------------------------------------------------------------------
// metadata and element access

int64_t Tensor::size(int64_t axis) const {
  const int64_t n = dim();
  HEED_CHECK(axis >= -n && axis < n, "size: axis ", axis, " out of range for shape ", to_string(shape()));
  return shape()[axis < 0 ? axis + n : axis];
}

bool Tensor::is_contiguous() const {
  const auto& sh = shape();
  const auto& st = strides();
  int64_t expect = 1;
  for (size_t i = sh.size(); i-- > 0;) {
    if (sh[i] != 1 && st[i] != expect) return false;
    expect *= sh[i];
  }
  return true;
}

// Visits every element's storage offset in row-major order of the view.
template <class F>
static void for_each_offset(const Tensor& t, F&& f) {
  const auto& sh = t.shape();
  const auto& st = t.strides();
  const int64_t n = t.numel();
  if (n == 0) return;
  std::vector<int64_t> idx(sh.size(), 0);
  int64_t off = t.offset();
  for (int64_t k = 0; k < n; ++k) {
    f(off);
    for (size_t d = sh.size(); d-- > 0;) {
      if (++idx[d] < sh[d]) {
        off += st[d];
        break;
      }
      off -= st[d] * (sh[d] - 1);
      idx[d] = 0;
    }
  }
}

// An element converted to T. Float to integer only when the value fits: a NaN, an infinity or a
// value past the type's range is undefined behaviour in C++ (on x86 it became INT64_MIN), and
// torch's fill_ refuses it too ("cannot be converted to type int64_t without overflow").
template <class T, class S>
T convert_element(S v) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool> && std::is_floating_point_v<S>) {
    constexpr double limit = std::is_same_v<T, int32_t> ? 2147483648.0 : 9223372036854775808.0;  // 2^31, 2^63
    HEED_CHECK(v >= -limit && v < limit, "the value ", static_cast<double>(v), " cannot be converted to ",
               std::is_same_v<T, int32_t> ? "int32" : "int64", " without overflow");  // NaN fails both
  }
  return static_cast<T>(v);
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  std::vector<T> out;
  out.reserve(numel());
  visit_any_dtype(dtype(), [&]<class S>() {
    const S* base = static_cast<const S*>(storage()->data());
    for_each_offset(*this, [&](int64_t off) { out.push_back(convert_element<T>(base[off])); });
  });
  return out;
}
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int32_t> Tensor::to_vector<int32_t>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;

double Tensor::item() const {
  HEED_CHECK(numel() == 1, "item: tensor of shape ", to_string(shape()), " has ", numel(), " elements, not 1");
  return to_vector<double>()[0];
}

double Tensor::at(const std::vector<int64_t>& index) const {
  HEED_CHECK(static_cast<int64_t>(index.size()) == dim(), "at: index of ", index.size(),
             " dims for shape ", to_string(shape()));
  int64_t off = offset();
  for (size_t d = 0; d < index.size(); ++d) {
    HEED_CHECK(index[d] >= 0 && index[d] < shape()[d], "at: index ", to_string(index),
               " out of range for shape ", to_string(shape()));
    off += index[d] * strides()[d];
  }
  return visit_any_dtype(dtype(), [&]<class T>() -> double { return static_cast<const T*>(storage()->data())[off]; });
}

void Tensor::set_(const Tensor& src) {
  TensorImpl& dst = impl();
  const TensorImpl& from = src.impl();
  dst.storage = from.storage;
  dst.shape = from.shape;
  dst.strides = from.strides;
  dst.offset = from.offset;
  dst.grad.reset();
}

void Tensor::check_in_place_write(const char* op, bool shared_elements_ok) const {
  // A leaf's write is as if it had held the new values from the start (a graph that saved the old
  // ones refuses its backward through version()); an op's output feeds the ops after it the new
  // values while its own backward still passes gradients back as if unwritten.
  HEED_CHECK(!(grad_fn() && grad_mode_enabled()), op, ": this tensor is the output of '", grad_fn()->name(),
             "' in a graph being recorded; heed's in-place writes are outside autograd, so the gradient would ",
             "miss this write: use the out-of-place op (y = y * 3.0 for y.mul_(3.0)), or write under a NoGradGuard");
  if (shared_elements_ok || numel() == 0) return;  // no element, so none shares memory
  for (int64_t d = 0; d < dim(); ++d)
    HEED_CHECK(strides()[d] != 0 || shape()[d] <= 1, op, ": more than one element of this tensor of shape ",
               to_string(shape()), " is one memory location (an expanded view, stride 0 on dim ", d,
               "): clone() it before writing, as torch asks");
}

Tensor& Tensor::operator=(const Tensor& src) && {
  copy_(src);
  return *this;
}

Tensor& Tensor::operator=(double value) && {
  fill_(value);
  return *this;
}

void Tensor::copy_(const Tensor& src) {
  check_in_place_write("copy_");
  if (src.shape() != shape()) {
    HEED_CHECK(broadcast_shapes(shape(), src.shape(), "copy_") == shape(), "copy_: source shape ",
               to_string(src.shape()), " does not broadcast to the destination's ", to_string(shape()));
    NoGradGuard no_grad;
    return copy_(heed::expand(src, shape()));
  }
  increment_version();
  visit_any_dtype(dtype(), [&]<class T>() {
    T* base = static_cast<T*>(storage()->data());
    if (is_contiguous() && src.is_contiguous() && src.dtype() == dtype()) {
      if (numel()) std::memcpy(base + offset(), src.data<T>(), numel() * sizeof(T));
      return;
    }
    // Through a buffer (src may overlap this view), each element converted once from its type to
    // ours, all of them before any is written (a float that no integer holds is refused with this
    // tensor unchanged): an int64 past 2^53 is not rounded through a double on the way.
    visit_any_dtype(src.dtype(), [&]<class S>() {
      const S* from = static_cast<const S*>(src.storage()->data());
      std::vector<T> vals;
      vals.reserve(static_cast<size_t>(src.numel()));
      for_each_offset(src, [&](int64_t off) { vals.push_back(convert_element<T>(from[off])); });
      size_t k = 0;
      for_each_offset(*this, [&](int64_t off) { base[off] = vals[k++]; });
    });
  });
}

void Tensor::fill_(double value) {
  check_scalar_fits("fill_", value, dtype());
  check_in_place_write("fill_", /*shared_elements_ok=*/true);
  increment_version();
  visit_any_dtype(dtype(), [&]<class T>() {
    T* base = static_cast<T*>(storage()->data());
    const T v = convert_element<T>(value);
    if (is_contiguous()) {
      std::fill(base + offset(), base + offset() + numel(), v);
    } else {
      for_each_offset(*this, [&](int64_t off) { base[off] = v; });
    }
  });
}

// ------------------------------------------------------------------------------------------
// autograd-facing members

Tensor& Tensor::requires_grad_(bool on) {
  // An op's output already requires grad: marking it is a no-op, and clearing its flag is an
  // error, as torch's (it would silently cut the gradient's path; detach() does that on purpose).
  if (impl().grad_fn) {
    HEED_CHECK(on, "requires_grad_(false): only leaf tensors can be unmarked (this one was produced by ",
               impl().grad_fn->name(), "); use detach()");
    return *this;
  }
  HEED_CHECK(!on || is_floating(dtype()), "requires_grad_: only float tensors can require gradients, this one is ",
             dtype_name(dtype()));
  impl().requires_grad = on;
  return *this;
}

Tensor Tensor::grad() const { return Tensor(impl().grad); }
void Tensor::zero_grad() { impl().grad.reset(); }

void Tensor::backward(bool retain_graph) const {
  HEED_CHECK(numel() == 1, "backward: called on a tensor of shape ", to_string(shape()),
             " without a gradient; pass grad_output for non-scalar outputs");
  run_backward(*this, Tensor::ones(shape(), dtype()), retain_graph);
}

void Tensor::backward(const Tensor& grad_output, bool retain_graph) const {
  HEED_CHECK(grad_output.shape() == shape(), "backward: grad_output shape ",
             to_string(grad_output.shape()), " differs from the tensor's ", to_string(shape()));
  run_backward(*this, grad_output.to(dtype()).detach(), retain_graph);
}

Tensor Tensor::detach() const { return make_view(*this, shape(), strides(), offset()); }

Tensor Tensor::clone() const {
  Tensor out = empty(shape(), dtype());
  out.copy_(*this);
  return record("clone", out, {*this}, [](const Tensor& g) { return std::vector<Tensor>{g}; });
}

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

Tensor Tensor::to(DType d) const {
  if (d == dtype()) return *this;
  Tensor out = empty(shape(), d);
  out.copy_(*this);
  const DType from = dtype();
  if (!is_floating(d) || !is_floating(from)) return out;  // integer and bool tensors carry no gradient
  return record("to", out, {*this}, [from](const Tensor& g) { return std::vector<Tensor>{g.to(from)}; });
}

// How torch 1.13 prints a tensor's floats (_Formatter in torch/_tensor_str.py), decided from its
// nonzero finite values: whole ("2.") when every one is an integer, else 4 decimals; scientific
// ("1.0000e-05") when the largest magnitude is over 1000 times the smallest or over 1e8, or (not
// whole) the smallest is under 1e-4. Zeros, nan and inf take the notation of the others.
namespace {
struct FloatFormat {
  bool whole = true, sci = false;
  explicit FloatFormat(const std::vector<double>& nonzero_finite) {
    if (nonzero_finite.empty()) return;
    double lo = std::abs(nonzero_finite[0]), hi = lo;
    for (double x : nonzero_finite) {
      lo = std::min(lo, std::abs(x)), hi = std::max(hi, std::abs(x));
      whole = whole && x == std::floor(x);
    }
    sci = hi / lo > 1000.0 || hi > 1.0e8 || (!whole && lo < 1.0e-4);
  }
  std::string text(double v) const {
    char buf[48];
    if (std::isnan(v)) return "nan";  // whatever its sign bit, as torch prints it
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (sci) std::snprintf(buf, sizeof buf, "%.4e", v);
    else if (whole) std::snprintf(buf, sizeof buf, "%.0f.", v);
    else std::snprintf(buf, sizeof buf, "%.4f", v);
    return buf;
  }
};
}  // namespace

// Calls f(i) for the row-major index of every element printed: past 1000 elements (`summarize`),
// only the first and last three entries of each axis longer than six.
template <class F>
static void for_each_printed(const Shape& shape, size_t d, int64_t start, bool summarize, F&& f) {
  if (d == shape.size()) return f(start);
  const int64_t n = shape[d], inner = numel_of(Shape(shape.begin() + d + 1, shape.end()));
  for (int64_t i = 0; i < n; ++i) {
    if (summarize && n > 6 && i == 3) i = n - 3;
    for_each_printed(shape, d + 1, start + i * inner, summarize, f);
  }
}

// The nested brackets of axis `d` from element `start`, each element right-aligned to `width`;
// "..." for the entries for_each_printed skips. As torch, the innermost rows wrap to stay within
// 80 columns (the ellipsis counting as an element), the next line indented under the first.
static void print_nested(std::ostream& os, const std::vector<std::string>& text, const Shape& shape, size_t d,
                         int64_t start, size_t width, bool summarize) {
  if (d == shape.size()) {
    os << std::string(width > text[start].size() ? width - text[start].size() : 0, ' ') << text[start];
    return;
  }
  const int64_t n = shape[d], inner = numel_of(Shape(shape.begin() + d + 1, shape.end()));
  const size_t indent = 7 + d;  // "tensor(" and one per enclosing bracket
  const bool last_axis = d + 1 == shape.size();
  const int64_t per_line = last_axis ? std::max<int64_t>(1, (80 - static_cast<int64_t>(indent)) /
                                                                   static_cast<int64_t>(width + 2))
                                     : n + 1;
  const std::string wrap = ",\n" + std::string(indent + 1, ' ');
  std::string sep = ",";
  if (last_axis) sep += ' ';
  else sep.append(shape.size() - d - 1, '\n').append(indent + 1, ' ');
  os << '[';
  int64_t item = 0;  // on the innermost axis, the ellipsis is an item as an element is
  for (int64_t i = 0; i < n; ++i, ++item) {
    if (item > 0) os << (item % per_line == 0 ? wrap : sep);
    if (summarize && n > 6 && i == 3) {
      os << (last_axis ? " ..." : "...");
      i = n - 3;
      ++item;
      os << (item % per_line == 0 ? wrap : sep);
    }
    print_nested(os, text, shape, d + 1, start + i * inner, width, summarize);
  }
  os << ']';
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "tensor(undefined)";
  os << "tensor(";
  if (t.numel() == 0) {
    // torch: the shape unless it is (0,), and the dtype unless float32 (no element shows it)
    os << "[]";
    if (t.dim() != 1) {
      os << ", size=(";
      for (int64_t i = 0; i < t.dim(); ++i) os << (i ? ", " : "") << t.shape()[i];
      os << ')';
    }
    if (t.dtype() != DType::f32) os << ", dtype=" << dtype_name(t.dtype());
  } else {
    // As torch, the notation and the width come from the printed elements only, and the width from
    // their nonzero finite values only (nan, inf and a wider "-0.0000" are not padded to).
    const bool summarize = t.numel() > 1000;
    std::vector<std::string> text(static_cast<size_t>(t.numel()));
    size_t width = 1;
    if (is_floating(t.dtype())) {
      const std::vector<double> v = t.to_vector<double>();
      std::vector<double> nonzero_finite;
      for_each_printed(t.shape(), 0, 0, summarize, [&](int64_t i) {
        if (std::isfinite(v[i]) && v[i] != 0) nonzero_finite.push_back(v[i]);
      });
      const FloatFormat format(nonzero_finite);
      for (double x : nonzero_finite) width = std::max(width, format.text(x).size());
      for_each_printed(t.shape(), 0, 0, summarize, [&](int64_t i) { text[i] = format.text(v[i]); });
    } else {  // integers read as int64, exact past 2^53
      const std::vector<int64_t> v = t.to_vector<int64_t>();
      for_each_printed(t.shape(), 0, 0, summarize, [&](int64_t i) {
        text[i] = t.dtype() == DType::boolean ? (v[i] != 0 ? "True" : "False") : std::to_string(v[i]);
        width = std::max(width, text[i].size());
      });
    }
    print_nested(os, text, t.shape(), 0, 0, width, summarize);
    if (t.dtype() != DType::f32 && t.dtype() != DType::i64 && t.dtype() != DType::boolean)
      os << ", dtype=" << dtype_name(t.dtype());
  }
  // As torch: an op's output names the op that made it (torch's MulBackward0 is heed's "mul"),
  // a leaf that requires grad says so.
  if (t.grad_fn()) {
    os << ", grad_fn=<" << t.grad_fn()->name() << '>';
  } else if (t.requires_grad()) {
    os << ", requires_grad=True";
  }
  return os << ')';
}

}  // namespace heed
