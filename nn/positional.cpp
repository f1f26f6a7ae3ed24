#include "nn/positional.h"

#include <cmath>
#include <vector>

#include "core/ops.h"
#include "core/random.h"
#include "nn/init.h"

namespace heed::nn {

SinusoidalPositionalEncoding::SinusoidalPositionalEncoding(int64_t d_model, int64_t max_len)
    : d_model_(d_model), max_len_(max_len) {
  HEED_CHECK(d_model > 0 && max_len > 0, "SinusoidalPositionalEncoding: sizes must be positive, got d_model ",
             d_model, ", max_len ", max_len);
  std::vector<double> pe(static_cast<size_t>(max_len * d_model));
  for (int64_t c = 0; c < d_model; c += 2) {
    // Columns 2i and 2i+1 share the frequency 10000^(-2i/d).
    const double inv_freq = std::pow(10000.0, -static_cast<double>(c) / static_cast<double>(d_model));
    for (int64_t pos = 0; pos < max_len; ++pos) {
      const double angle = static_cast<double>(pos) * inv_freq;
      pe[pos * d_model + c] = std::sin(angle);
      if (c + 1 < d_model) pe[pos * d_model + c + 1] = std::cos(angle);
    }
  }
  pe64_ = Tensor::from_vector(pe, {max_len, d_model});
  pe32_ = pe64_.to(DType::f32);
}

Tensor SinusoidalPositionalEncoding::forward(const Tensor& x) {
  HEED_CHECK(x.dim() >= 2 && x.size(-1) == d_model_, "SinusoidalPositionalEncoding: input ",
             to_string(x.shape()), " must be (..., T, ", d_model_, ")");
  const int64_t T = x.size(-2);
  HEED_CHECK(T <= max_len_, "SinusoidalPositionalEncoding: sequence length ", T, " exceeds max_len ",
             max_len_, " (input ", to_string(x.shape()), ")");
  return add(x, slice(table(x.dtype()), 0, 0, T));
}

LearnedPositionalEmbedding::LearnedPositionalEmbedding(int64_t max_len, int64_t dim, Generator* gen)
    : max_len_(max_len) {
  HEED_CHECK(max_len > 0 && dim > 0, "LearnedPositionalEmbedding: sizes must be positive, got ", max_len,
             " x ", dim);
  register_parameter("weight", weight, Tensor::empty({max_len, dim}));
  reset_parameter("weight", weight, gen ? *gen : default_generator());
}

void LearnedPositionalEmbedding::reset_parameter(const std::string&, Tensor& t, Generator& gen) {
  init::normal_(t, 0.0, 1.0, gen);
}

Tensor LearnedPositionalEmbedding::forward(int64_t T) {
  HEED_CHECK(T >= 1 && T <= max_len_, "LearnedPositionalEmbedding: length ", T, " not in [1, ", max_len_,
             "] (weight ", to_string(weight.shape()), ")");
  return slice(weight, 0, 0, T);
}

}  // namespace heed::nn
