// heed::optim: gradient clipping by global norm (torch.nn.utils.clip_grad_norm_ with norm_type 2).
#pragma once

#include <vector>

#include "core/tensor.h"

namespace heed::optim {

/// Returns the global L2 norm of the parameters' gradients (as if concatenated; parameters without
/// a gradient are skipped, 0 when none has one) and, as PyTorch does, scales every gradient in
/// place by max_norm / (norm + 1e-6) when that factor is below 1. max_norm may be INFINITY (just
/// measure); throws heed::Error if it is negative or NaN.
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);

}  // namespace heed::optim
