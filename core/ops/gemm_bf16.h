// heed: matrix products with bf16 inputs and fp32 accumulation, for mixed precision (the
// products of Linear and attention; see docs/performance.md, "bf16 kernels"). Not an autograd op:
// the kernels that ops call, on raw row-major fp32 buffers, in the calling convention of cblas:
//
//   C (m x n) = op(A) (m x k) @ op(B) (k x n) + beta C,   op(X) = X or X^T,   beta 0 or 1.
//
// Linear:     y = x W^T      gemm_bf16(false, true,  rows, out, in,   x, in,  W, in,  0, y, out)
//             dx = dy W      gemm_bf16(false, false, rows, in,  out,  dy, out, W, in, 0, dx, in)
//             dW += dy^T x   gemm_bf16(true,  false, out,  in,  rows, dy, out, x, in, 1, dW, in)
// Attention (per head, T x hd views with row stride ld; causal: diagonal = Tk - Tq):
//             s = q k^T      gemm_bf16(false, true, Tq, Tk, hd, ...)  skip c_above
//             y = p v        gemm_bf16(false, false, Tq, hd, Tk, ...) skip a_above
//             dp = dy v^T    gemm_bf16(false, true, Tq, Tk, hd, ...)  skip c_above
//             dq = ds k      gemm_bf16(false, false, Tq, hd, Tk, ...) skip a_above
//             dk = ds^T q    gemm_bf16(true, false, Tk, hd, Tq, ...)  skip a_below, diagonal -(Tk - Tq)
//             dv = p^T dy    gemm_bf16(true, false, Tk, hd, Tq, ...)  skip a_below, diagonal -(Tk - Tq)
//
// Every element of A and B is rounded to bf16 (to_bf16 in core/ops/bf16.h: nearest, ties to
// even) once, when it is packed into the kernel's panels; each product of two bf16 values is exact
// in fp32, and the sums are fp32. Three kernels do the sums:
//   - avx512_bf16 (VDPBF16PS) and emulated: for each output, the pairs of products (k = 2p, 2p + 1)
//     in increasing p, the odd one first, each added with one fp32 rounding. As in VDPBF16PS, bf16
//     denormals count as zero in the products and fp32 denormal results become zero. These two
//     give the same bits.
//   - amx_bf16 (AMX's TDPBF16PS on 16 x 16 tiles): 32 products at a time per output, summed and
//     rounded inside the tile unit in an order Intel does not specify (measured: not the
//     sequential order above, nor one rounding per 32), with the same denormal rules. Its error
//     stays within the bound any fp32 summation order meets (tests/core/test_bf16_gemm.cpp); its
//     bits are its own, the same for the same inputs on every call and thread count.
// C is fp32 in and out. The order of the sums depends on the blocking, which depends on the CPU's
// caches (as OpenBLAS's kernels do), never on the thread count: the same machine gives the same bits.
//
// Speed: C, A and B as heed's tensors are (64-byte aligned, rows a multiple of 16 floats apart)
// run fastest; a row of C that starts mid-line splits every vector store in two.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace heed {

/// The code that does the arithmetic (see the top of this file). avx512_bf16 and emulated give the
/// same bits for the same inputs (unless a product of two bf16 values is an fp32 denormal); the
/// emulated one runs on any CPU.
enum class Bf16Kernel {
  automatic,    ///< amx_bf16 where the CPU has it and the OS grants it, else avx512_bf16, else emulated
  avx512_bf16,  ///< VDPBF16PS on 512-bit registers; throws heed::Error on a CPU without it
  emulated,     ///< avx512_bf16's packing, products and sums on fp32 vector arithmetic
  amx_bf16,     ///< AMX tiles (TDPBF16PS); throws heed::Error where amx_ready() (core/cpu.h) is false
};

/// Parts of a product known to be unneeded or zero, relative to the diagonal col = row + diagonal
/// (attention's causal mask), skipped a tile of C (mr x 32) or a 32-deep chunk of k at a time. The
/// entries said to be zero must be (as the softmax's masked weights are): those within a chunk of
/// the diagonal are still read, the others are not.
enum class Bf16Skip {
  none,
  c_above,  ///< C(i, j) is not needed for j > i + diagonal: such entries may hold anything after
  a_above,  ///< op(A)(i, k) is zero for k > i + diagonal
  a_below,  ///< op(A)(i, k) is zero for k < i + diagonal
};

/// Upper bounds on a product's blocking (kc, mc, nc of gemm_bf16_blocking below; 0: none), for
/// tests: several k slices, blocks of rows and panels of columns at small sizes, whatever the
/// caches. Each is rounded down to its unit (kc to 32, mc and nc to the kernel's tile), and is at
/// least one unit. The order of the sums, and so the bits, follow the blocking.
struct Bf16BlockingCaps {
  int64_t kc = 0, mc = 0, nc = 0;
};

struct GemmBf16Options {
  Bf16Kernel kernel = Bf16Kernel::automatic;
  Bf16Skip skip = Bf16Skip::none;
  int64_t diagonal = 0;
  Bf16BlockingCaps caps = {};
};

/// C = op(A) op(B) + beta C (see the top of this file), split over heed's threads
/// (core/parallel.h) when large enough; inline when called from inside a parallel chunk. beta must
/// be 0 (C is only written: it may hold anything, NaN included) or 1 (C accumulates). Throws
/// heed::Error on a negative size, a leading dimension too small for its matrix, another beta, or
/// a kernel the CPU lacks. Results do not depend on the thread count.
void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
               const float* b, int64_t ldb, float beta, float* c, int64_t ldc, const GemmBf16Options& options = {});

/// One operand of a batch of products indexed (o, i), o < outer, i < inner: matrix (o, i) starts
/// at data + o * outer_stride + i * inner_stride (in floats). For attention's heads of a (B, T, C)
/// tensor: outer = B with stride T C, inner = n_head with stride head_dim, ld = C.
struct Bf16Operand {
  const float* data = nullptr;
  int64_t ld = 0;
  bool trans = false;
  int64_t outer_stride = 0, inner_stride = 0;
};
struct Bf16Output {
  float* data = nullptr;
  int64_t ld = 0;
  int64_t outer_stride = 0, inner_stride = 0;
};

/// outer x inner independent products C(o, i) = op(A(o, i)) op(B(o, i)) + beta C(o, i), each m x n
/// x k, spread over heed's threads a product at a time. The outputs must not overlap.
void gemm_bf16_batched(int64_t outer, int64_t inner, int64_t m, int64_t n, int64_t k, const Bf16Operand& a,
                       const Bf16Operand& b, float beta, const Bf16Output& c, const GemmBf16Options& options = {});

/// bf16 copies of constant weights for one-row products. A product with m == 1 (a Linear at a
/// KV-cached generation step, batch 1) has nothing to reuse: rounding and packing op(B) costs as
/// much as the product. While a Bf16WeightCache lives on a thread, gemm_bf16 calls made there with
/// m == 1 whose op(B) lies inside a range given to add() read op(B) rounded and packed once, at
/// the first such call: half the bytes of fp32 to stream, and no packing. The results are the same
/// bits as without it. It holds the packed copies until it ends (half the fp32 size of the weights
/// it packed). The floats of a range must not change while it lives (GPT::generate's weights do
/// not). Scopes nest; the innermost one is used.
class Bf16WeightCache {
 public:
  Bf16WeightCache();
  ~Bf16WeightCache();
  Bf16WeightCache(const Bf16WeightCache&) = delete;
  Bf16WeightCache& operator=(const Bf16WeightCache&) = delete;
  /// Registers numel constant floats from data.
  void add(const float* data, int64_t numel);
  /// The innermost live cache of this thread, or nullptr.
  static Bf16WeightCache* active();
  /// Internal (gemm_bf16): the packed op(B) of an n x k product whose B starts at b, or nullptr
  /// when b is not inside a registered range. pack(dst) fills `words` words at dst, the first time.
  const uint32_t* packed(const float* b, int64_t ldb, bool k_contiguous, int64_t n, int64_t k, int64_t words,
                         const std::function<void(uint32_t* dst)>& pack);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  Bf16WeightCache* previous_;
};

/// What Bf16Kernel::automatic runs on this CPU.
Bf16Kernel bf16_kernel();

/// What bf16_kernel() runs on, for `heed bench`'s report (core/tuning.h, tuning_json): "AMX
/// TDPBF16PS", "AVX512_BF16 VDPBF16PS" or "emulated on fp32 FMAs".
std::string bf16_product_kernel();

/// The kernels this CPU can run: emulated, then avx512_bf16 and amx_bf16 where it has them (for
/// tests and benchmarks that compare them).
std::vector<Bf16Kernel> bf16_kernels_here();

/// The blocking of an m x n x k product (trans_a: op(A) = A^T), derived from cpu_info()'s
/// caches: mr x nr register tiles; kc (a multiple of 32) the depth of a packed slice, as deep as
/// lets a kc x nr strip of B take a quarter of L2 (C is read and written once per slice), or, for
/// a transposed A, as lets a block of 512 of its rows take half of L2; mc rows of A per packed
/// block, in half of L2; nc columns of B per packed panel, in half of this core's share of L3.
/// Each is balanced below its maximum (k = 384 at a maximum of 256 is 2 x 192). For benchmarks
/// and tests. mr depends on the kernel (12 for avx512_bf16 and emulated, 32 for amx_bf16).
struct GemmBf16Blocking {
  int64_t mr, nr, kc, mc, nc;
};
GemmBf16Blocking gemm_bf16_blocking(int64_t m, int64_t n, int64_t k, bool trans_a,
                                    Bf16Kernel kernel = Bf16Kernel::automatic, const Bf16BlockingCaps& caps = {});

}  // namespace heed
