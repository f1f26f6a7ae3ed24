#include "nn/embedding.h"

#include "core/ops.h"
#include "core/random.h"

namespace heed::nn {

namespace {
constexpr uint64_t kDefaultEmbeddingSeed = 0x656d626564ULL;
}  // namespace

Embedding::Embedding(int64_t num_embeddings, int64_t dim, Generator* gen)
    : num_embeddings_(num_embeddings), dim_(dim) {
  HEED_CHECK(num_embeddings > 0 && dim > 0, "Embedding: sizes must be positive, got ", num_embeddings,
             " x ", dim);
  Generator fallback(kDefaultEmbeddingSeed);
  weight = register_parameter("weight", Tensor::randn({num_embeddings, dim}, gen ? *gen : fallback));
}

Tensor Embedding::forward(const std::vector<int32_t>& ids, const Shape& ids_shape) {
  return embedding(weight, ids, ids_shape);
}

}  // namespace heed::nn
