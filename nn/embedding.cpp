#include "nn/embedding.h"

#include "core/ops.h"
#include "core/random.h"
#include "nn/init.h"

namespace heed::nn {

Embedding::Embedding(int64_t num_embeddings, int64_t dim, Generator* gen)
    : num_embeddings_(num_embeddings), dim_(dim) {
  HEED_CHECK(num_embeddings > 0 && dim > 0, "Embedding: sizes must be positive, got ", num_embeddings,
             " x ", dim);
  register_parameter("weight", weight, Tensor::empty({num_embeddings, dim}));
  reset_parameter("weight", weight, gen ? *gen : default_generator());
}

void Embedding::reset_parameter(const std::string&, Tensor& t, Generator& gen) { init::normal_(t, 0.0, 1.0, gen); }

Tensor Embedding::forward(const std::vector<int32_t>& ids, const Shape& ids_shape) {
  return embedding(weight, ids, ids_shape);
}

Tensor Embedding::forward(const Tensor& ids) { return embedding(weight, ids); }

}  // namespace heed::nn
