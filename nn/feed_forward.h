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

/// Where FeedForward's dropout sits: on the output (nanoGPT's MLP) or on the hidden activations
/// (PyTorch's linear2(dropout(activation(linear1(x))))).
enum class FeedForwardDropout { output, hidden };

/// FeedForward's settings past its two widths, by name:
/// `nn::FeedForward ff(64, 256, {.dropout = 0.1, .activation = nn::Activation::relu});`
/// (designated initializers in this order; the rest keep their defaults).
struct FeedForwardOptions {
  double dropout = 0.0;  ///< probability of the dropout (training mode only)
  bool bias = true;      ///< biases on c_fc and c_proj
  Activation activation = Activation::gelu;
  FeedForwardDropout dropout_on = FeedForwardDropout::output;
  /// The Linears draw their weights from it, c_fc then c_proj; none: the default generator.
  Generator* gen = nullptr;
  /// The dropout mask generator's seed; none: drawn from the default generator.
  std::optional<uint64_t> dropout_seed = std::nullopt;
};

class FeedForward : public Module {
 public:
  using DropoutOn = FeedForwardDropout;
  /// Children "c_fc" (Linear d_model -> d_hidden), "c_proj" (Linear d_hidden -> d_model) and
  /// "dropout". The settings are named (FeedForwardOptions), not positional: a positional
  /// (dropout, bias) pair took `(64, 256, true, 0.1)` as dropout 1.0 with a bias, silently.
  FeedForward(int64_t d_model, int64_t d_hidden, const FeedForwardOptions& options = {});

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
