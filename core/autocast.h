// heed: mixed precision, as PyTorch's CPU autocast (torch.autocast("cpu", dtype=torch.bfloat16)).
//
//   {
//     heed::AutocastBF16 guard;               // this thread, until the guard goes out of scope
//     Tensor loss = model.forward(x, y);      // matrix products in bf16, the rest in fp32
//     loss.backward();                        // each product's backward in its forward's precision
//   }
//
// Under the guard, the float32 matrix products heed's ops record on this thread -- matmul, linear
// and add_linear (forward, dx and dW), and attention_heads' q k^T and p v with their backward
// forms -- round their inputs to bf16 (nearest, ties to even) and accumulate in fp32
// (core/ops/gemm_bf16.h). Everything else stays fp32: the tensors themselves (master weights,
// activations, gradients), optimizer state, layer norm, softmax, GELU, cross-entropy, the
// gradient sums. float64 products are never affected (gradcheck stays exact), and checkpoints
// hold the fp32 weights as always.
//
// The precision is read when an op is called, on the calling thread, and travels with the op into
// its backward (heed's pool threads never read it, so nothing needs propagating to them; another
// thread of your own that runs a model needs its own guard). On a CPU without AVX512_BF16 the
// products run the emulated kernel: the same bits, on fp32 vector arithmetic, several times slower
// than fp32 -- usable for tests, not for speed (`heed ... --precision bf16` refuses such a CPU).
#pragma once

#include <optional>

#include "core/ops/gemm_bf16.h"

namespace heed {

/// Turns bf16 mixed precision on (or, with enabled = false, off) for this thread until it is
/// destroyed, then restores what was set before; guards nest. `kernel` picks the code the products
/// run: automatic (AVX512_BF16 where the CPU has it, else emulated), or one of the two explicitly
/// (tests compare them; avx512_bf16 on a CPU without it throws heed::Error at the first product).
class AutocastBF16 {
 public:
  explicit AutocastBF16(bool enabled = true, Bf16Kernel kernel = Bf16Kernel::automatic);
  ~AutocastBF16();
  AutocastBF16(const AutocastBF16&) = delete;
  AutocastBF16& operator=(const AutocastBF16&) = delete;

 private:
  std::optional<Bf16Kernel> previous_;
};

/// The bf16 kernel this thread's float32 products use now, or nullopt for fp32 (no guard active).
std::optional<Bf16Kernel> autocast_bf16();

}  // namespace heed
