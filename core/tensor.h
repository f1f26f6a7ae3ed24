// heed: the Tensor handle.
//
// A Tensor is a cheap, copyable handle (a shared_ptr) to a TensorImpl: a view (shape, strides,
// offset) onto a shared Storage, plus the autograd state (requires_grad, grad, grad_fn).
// Copies share everything; views (transpose, permute, slice, reshape of contiguous data) share
// the storage. Element types: float32 for training, float64 for gradient checks.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/dtype.h"

namespace heed {

using Shape = std::vector<int64_t>;

std::string to_string(const Shape& s);  ///< "[2, 3, 4]"
int64_t numel_of(const Shape& s);        ///< product of the dims (1 for a scalar)
Shape contiguous_strides(const Shape& s);  ///< row-major strides, in elements

/// A flat, 64-byte aligned buffer of one dtype. Views share one Storage.
class Storage {
 public:
  Storage(int64_t numel, DType dtype);  ///< uninitialised
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() const { return data_; }
  int64_t numel() const { return numel_; }
  DType dtype() const { return dtype_; }

 private:
  void* data_;
  int64_t numel_;
  DType dtype_;
};

class Node;
class Generator;

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

  // ---- factories (contiguous) ----
  static Tensor empty(const Shape& shape, DType dtype = DType::f32);  ///< uninitialised
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32);
  static Tensor ones(const Shape& shape, DType dtype = DType::f32);
  static Tensor full(const Shape& shape, double value, DType dtype = DType::f32);
  static Tensor scalar(double value, DType dtype = DType::f32);  ///< shape []
  /// Copies `values` (row-major) into a new tensor; throws if the count does not match `shape`.
  static Tensor from_vector(const std::vector<float>& values, const Shape& shape);
  static Tensor from_vector(const std::vector<double>& values, const Shape& shape);
  static Tensor arange(int64_t n, DType dtype = DType::f32);  ///< 0, 1, ..., n-1
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

  // ---- copies and conversion ----
  Tensor contiguous() const;  ///< *this if already contiguous, else a differentiable copy
  Tensor clone() const;       ///< a differentiable contiguous copy
  Tensor to(DType dtype) const;  ///< differentiable dtype conversion (identity if equal)
  /// Copies values from `src` (same shape, any dtype/strides) into this tensor, outside autograd.
  void copy_(const Tensor& src);
  void fill_(double value);  ///< sets every element, outside autograd

  TensorImpl& impl() const {
    HEED_CHECK(impl_ != nullptr, "use of an undefined Tensor");
    return *impl_;
  }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same(const Tensor& other) const { return impl_ == other.impl_; }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

/// A view of `base`'s storage with the given geometry (no autograd; used by view ops).
Tensor make_view(const Tensor& base, Shape shape, Shape strides, int64_t offset);

std::ostream& operator<<(std::ostream& os, const Tensor& t);

}  // namespace heed
