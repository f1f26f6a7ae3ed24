// heed::nn: a lookup table of learned vectors (PyTorch's nn.Embedding).
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "nn/module.h"

namespace heed {
class Generator;
}

namespace heed::nn {

class Embedding : public Module {
 public:
  /// weight [num_embeddings, dim] drawn normal(0, 1) as PyTorch, from `gen` (null: the default
  /// generator).
  Embedding(int64_t num_embeddings, int64_t dim, Generator* gen = nullptr);

  /// ids (ids_shape, e.g. (B, T)) -> (ids_shape..., dim); throws naming an out-of-range id.
  Tensor forward(const std::vector<int32_t>& ids, const Shape& ids_shape);
  /// ids, an int32 or int64 tensor of any shape (e.g. (B, T)) -> (ids.shape()..., dim), as
  /// torch's `self.wte(idx)`; throws naming an out-of-range id, or ids of another dtype.
  Tensor forward(const Tensor& ids);

  /// normal(0, 1) for "weight".
  void reset_parameter(const std::string& name, Tensor& t, Generator& gen) override;

  int64_t num_embeddings() const { return num_embeddings_; }
  int64_t embedding_dim() const { return dim_; }

  Tensor weight;  ///< [num_embeddings, dim], registered as "weight"

 private:
  int64_t num_embeddings_;
  int64_t dim_;
};

}  // namespace heed::nn
