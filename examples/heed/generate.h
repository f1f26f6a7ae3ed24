// Text generation from a GPT, as nanoGPT's GPT.generate: the context is cropped to block_size,
// logits are divided by the temperature, optionally cut to the top k, and a token is drawn from the
// softmax. Temperature 0 means greedy argmax.
#pragma once

#include <functional>
#include <vector>

#include "core/random.h"
#include "nn/gpt.h"

namespace heed::cli {

/// Appends `n` tokens to `ids` (which must not be empty), calling on_token(id) after each.
void generate(nn::GPT& model, std::vector<int32_t>& ids, int64_t n, double temperature, int64_t top_k,
              Generator& gen, const std::function<void(int32_t)>& on_token);

}  // namespace heed::cli
