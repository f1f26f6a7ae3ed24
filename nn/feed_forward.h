// heed::nn: the transformer's position-wise MLP, nanoGPT's MLP with its parameter names:
// dropout(c_proj(act(c_fc(x)))), or c_proj(dropout(act(c_fc(x)))) with the dropout on the hidden
// layer, as PyTorch's nn.Transformer*Layer (whose layer then drops the output itself).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "core/tensor.h"
#include "nn/activation.h"
#include "nn/dropout.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace heed {
class Generator;
}

namespace heed::nn {

class FeedForward : public Module {
 public:
  /// Where the dropout sits: on the output (nanoGPT's MLP) or on the hidden activations
  /// (PyTorch's linear2(dropout(activation(linear1(x))))).
  enum class DropoutOn { output, hidden };
  /// Children "c_fc" (Linear d_model -> d_hidden), "c_proj" (Linear d_hidden -> d_model) and
  /// "dropout". The Linears draw their weights from `gen` in that order, and the dropout's mask
  /// generator starts at `dropout_seed`; either left out comes from the default generator.
  FeedForward(int64_t d_model, int64_t d_hidden, double dropout = 0.0, bool bias = true,
              Activation act = Activation::gelu, Generator* gen = nullptr,
              std::optional<uint64_t> dropout_seed = std::nullopt, DropoutOn dropout_on = DropoutOn::output);

  /// x (..., d_model) -> (..., d_model).
  Tensor forward(const Tensor& x);

  Activation activation() const { return act_; }
  DropoutOn dropout_on() const { return dropout_on_; }

  std::shared_ptr<Linear> c_fc;
  std::shared_ptr<Linear> c_proj;
  std::shared_ptr<Dropout> dropout;

 private:
  Activation act_;
  DropoutOn dropout_on_;
};

}  // namespace heed::nn
