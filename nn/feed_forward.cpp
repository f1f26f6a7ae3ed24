#include "nn/feed_forward.h"

#include "core/ops.h"

namespace heed::nn {

FeedForward::FeedForward(int64_t d_model, int64_t d_hidden, double p, bool bias, Activation act,
                         Generator* gen, std::optional<uint64_t> dropout_seed)
    : act_(act) {
  c_fc = register_module("c_fc", std::make_shared<Linear>(d_model, d_hidden, bias, gen));
  c_proj = register_module("c_proj", std::make_shared<Linear>(d_hidden, d_model, bias, gen));
  dropout = register_module("dropout", std::make_shared<Dropout>(p, dropout_seed));
}

Tensor FeedForward::forward(const Tensor& x) {
  return dropout->forward(c_proj->forward(apply_activation(act_, c_fc->forward(x))));
}

}  // namespace heed::nn
