// heed (internal): the 64-byte aligned scratch that a product packs an operand into, one per
// thread (or per cached weight), grown as needed and kept for the next call: a training step packs
// the same sizes every time. Used by the bf16 GEMM's panels (core/ops/gemm_bf16.cpp) and by the
// packed op(B) of fp32 products on oneDNN (core/ops/matmul.cpp).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>

#include "core/check.h"

namespace heed::detail {

template <class T>
class PackBuffer {
 public:
  /// At least `count` elements, 64-byte aligned; what it held is gone once it grows (no copy).
  T* get(int64_t count) {
    if (count > capacity_) {
      const size_t bytes = (static_cast<size_t>(count) * sizeof(T) + 63) / 64 * 64;
      data_.reset(static_cast<T*>(std::aligned_alloc(64, bytes)));
      HEED_CHECK(data_ != nullptr, "cannot allocate ", bytes, " bytes for a packed operand");
      capacity_ = count;
    }
    return data_.get();
  }

 private:
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T, Free> data_;
  int64_t capacity_ = 0;
};

}  // namespace heed::detail
