// A GPT training step under AutocastBF16 against the same step in fp32: the loss and every
// parameter's gradient agree (cosine similarity >= 0.999, the quality bar for bf16 mixed
// precision). The default case keeps the small config's widths (n_embd 384 in 6 heads, vocab 65)
// with 2 layers and a 64-character context so it runs in CI; "[bf16-small]" (hidden: run it with
// `build/tests/heed_tests "[bf16-small]"`) is the small config itself (6 layers, block 256, batch 16).
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "core/autocast.h"
#include "core/random.h"
#include "nn/nn.h"

using namespace heed;

namespace {

// The loss and every parameter's gradient (named_parameters order) after one forward and backward
// on B x T random tokens, under bf16 autocast or not.
std::pair<double, std::vector<std::vector<double>>> step(const nn::GPTConfig& c, int64_t B, bool bf16) {
  nn::GPT model(c, 1337);
  Generator gen(7);
  std::vector<int32_t> idx(static_cast<size_t>(B * c.block_size)), tgt(idx.size());
  for (auto& i : idx) i = static_cast<int32_t>(gen.next_u64() % static_cast<uint64_t>(c.vocab_size));
  for (auto& i : tgt) i = static_cast<int32_t>(gen.next_u64() % static_cast<uint64_t>(c.vocab_size));
  Tensor loss;
  {
    AutocastBF16 guard(bf16);  // automatic: the hardware kernel where the CPU has it
    loss = model.loss(idx, tgt, B, c.block_size);
    loss.backward();
  }
  std::vector<std::vector<double>> grads;
  for (auto& [name, p] : model.named_parameters()) grads.push_back(p.grad().to_vector<double>());
  return {loss.item(), grads};
}

double cosine(const std::vector<double>& a, const std::vector<double>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) ab += a[i] * b[i], aa += a[i] * a[i], bb += b[i] * b[i];
  return ab / std::sqrt(aa * bb);
}

void require_close_step(const nn::GPTConfig& c, int64_t B) {
  const auto [loss32, g32] = step(c, B, false);
  const auto [loss16, g16] = step(c, B, true);
  INFO("loss fp32 " << loss32 << ", bf16 " << loss16);
  CHECK(std::fabs(loss16 - loss32) < 1e-2);
  CHECK(loss16 != loss32);  // the products really ran in bf16
  std::vector<double> all32, all16;
  nn::GPT names(c, 1337);
  size_t i = 0;
  for (auto& [name, p] : names.named_parameters()) {
    const double cs = cosine(g32[i], g16[i]);
    INFO(name << ": cosine " << cs);
    CHECK(cs >= 0.999);
    all32.insert(all32.end(), g32[i].begin(), g32[i].end());
    all16.insert(all16.end(), g16[i].begin(), g16[i].end());
    ++i;
  }
  CHECK(cosine(all32, all16) >= 0.999);
}

}  // namespace

TEST_CASE("GPT gradients under AutocastBF16 have cosine similarity >= 0.999 with fp32's (small's widths)",
          "[bf16][gpt]") {
  nn::GPTConfig c;
  c.vocab_size = 65, c.block_size = 64, c.n_layer = 2, c.n_head = 6, c.n_embd = 384;
  require_close_step(c, 4);
}

TEST_CASE("GPT gradients under AutocastBF16 have cosine similarity >= 0.999 with fp32's (the small config)",
          "[.][bf16-small]") {
  nn::GPTConfig c;
  c.vocab_size = 65, c.block_size = 256, c.n_layer = 6, c.n_head = 6, c.n_embd = 384;
  require_close_step(c, 16);
}
