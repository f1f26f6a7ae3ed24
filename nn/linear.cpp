#include "nn/linear.h"

#include <cmath>

#include "core/ops.h"
#include "core/random.h"
#include "nn/init.h"

namespace heed::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool has_bias, Generator* gen)
    : in_features_(in_features), out_features_(out_features) {
  HEED_CHECK(in_features > 0 && out_features > 0, "Linear: features must be positive, got in ",
             in_features, ", out ", out_features);
  Generator& g = gen ? *gen : default_generator();
  register_parameter("weight", weight, Tensor::empty({out_features, in_features}));
  reset_parameter("weight", weight, g);
  if (has_bias) {
    register_parameter("bias", bias, Tensor::empty({out_features}));
    reset_parameter("bias", bias, g);
  }
}

void Linear::reset_parameter(const std::string&, Tensor& t, Generator& gen) {
  // PyTorch's reset_parameters: kaiming_uniform(a=sqrt 5) reduces to bound 1/sqrt(fan_in), and
  // the bias uses the same bound.
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features_));
  init::uniform_(t, -bound, bound, gen);
}

Tensor Linear::forward(const Tensor& x) {
  HEED_CHECK(x.dim() >= 1 && x.size(-1) == in_features_, "Linear: input ", to_string(x.shape()),
             " does not end in in_features ", in_features_, " (weight ", to_string(weight.shape()), ")");
  return linear(x, weight, bias);
}

}  // namespace heed::nn
