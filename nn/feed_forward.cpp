#include "nn/feed_forward.h"

#include "core/ops.h"

namespace heed::nn {

FeedForward::FeedForward(int64_t d_model, int64_t d_hidden, const FeedForwardOptions& o)
    : act_(o.activation), dropout_on_(o.dropout_on) {
  c_fc = register_module("c_fc", std::make_shared<Linear>(d_model, d_hidden, o.bias, o.gen));
  c_proj = register_module("c_proj", std::make_shared<Linear>(d_hidden, d_model, o.bias, o.gen));
  dropout = register_module("dropout", std::make_shared<Dropout>(o.dropout, o.dropout_seed));
}

Tensor FeedForward::forward(const Tensor& x) {
  const Tensor hidden = apply_activation(act_, c_fc->forward(x));
  if (dropout_on_ == DropoutOn::hidden) return c_proj->forward(dropout->forward(hidden));
  return dropout->forward(c_proj->forward(hidden));
}

}  // namespace heed::nn
