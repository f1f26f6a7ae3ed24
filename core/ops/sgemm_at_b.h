// heed (internal): heed's own fp32 kernel for C = A^T B, the weight gradient g^T x of Linear (and
// of matmul's second operand), on CPUs with AVX-512F. Not an autograd op and not public: raw
// row-major buffers,
//
//   C (m x n) = A^T B + beta C,   A (k x m, row stride lda),   B (k x n, row stride ldb),   beta 0 or 1,
//
// where k is the batch's rows (thousands) and m, n a layer's widths (hundreds).
//
// Why not oneDNN's sgemm, which runs every other fp32 product: for a transposed A with a side under
// ~1 000 it takes its kernels that read both operands in place without packing. On an Emerald
// Rapids Xeon those ran the small config's c_fc and mlp c_proj weight gradients, whose g or x has
// a row stride of a multiple of 256 floats (1 536: L1 set aliasing), at 66 and 73 % of their
// forward products' rate, c_attn's at 79 % and attn c_proj's at its forward's (docs/performance.md,
// "small fp32 and the weight gradient"). This kernel packs both operands a slice of k at a time, so no stride
// reaches the register tile: on one core it ran those two 1.26-1.30x as fast as oneDNN, the other
// two of small's weight gradients 0.97-1.09x, and it made tiny's and baby's steps slower
// (docs/performance.md, "heed's own kernel for the weight gradient"); sgemm_at_b_suits says where
// matmul uses it.
//
// Each element of C is one chain of fused multiply-adds over k in order, starting from beta C
// (0 or C): its bits do not depend on how C is cut into pieces, on the tile or slice sizes, or on
// the thread that runs a piece. So the product is cut finer than the cores and dealt out to
// whichever thread comes free (a core the host slows takes fewer pieces) without changing a bit.
#pragma once

#include <algorithm>
#include <cstdint>

namespace heed::detail {

/// Whether sgemm_at_b runs here: an x86 CPU with AVX-512F whose fp32 products run on oneDNN
/// (sgemm_on_onednn(): HEED_FP32_PRODUCTS=openblas keeps every fp32 product on OpenBLAS).
bool sgemm_at_b_available();

/// Whether matmul runs a product C = A^T B (m x n x k, row strides lda and ldb) here rather than on
/// oneDNN: sgemm_at_b_available(), a row stride of A or B that is a multiple of 256 floats (1 KB:
/// c_fc's g and mlp c_proj's x in a GPT, 4 n_embd wide, whenever n_embd is a multiple of 64;
/// oneDNN's in-place kernels read such rows into a fraction of L1's sets), and at least two pieces
/// a core's worth of work (2 kPackedProductPieceMacs a core, core/tuning.h), where packing both
/// operands costs little beside the product. Below that, and at the other strides, oneDNN was as
/// fast or faster (docs/performance.md). A rule of the shape and the cores only: a product's bits
/// do not depend on the thread count.
bool sgemm_at_b_suits(int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb);

/// C = A^T B + beta C as above (m, n, k >= 1), split over heed's threads (parallel.h): pieces of C
/// follow from the shape and the cores, though no bit depends on them. Throws heed::Error where
/// sgemm_at_b_available() is false.
void sgemm_at_b(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                float* c, int64_t ldc);

/// How sgemm_at_b cuts C (m x n x k) on `cores` cores: into `pieces` along its rows (by_rows) or
/// columns, each starting on a whole tile, and whether the operand every piece reads whole is
/// packed once for all of them first (shared: more pieces than cores, and that copy at most 64 MB;
/// a larger one keeps a piece a core).
struct AtBCut {
  bool by_rows = true;
  int64_t pieces = 1;
  bool shared = false;
  int64_t side = 1;  ///< the cut side's length: m by rows, n by columns
  int64_t tile = 1;  ///< the tile's length along it
  /// Where piece p (0 to pieces) starts along the cut side; piece p is [start(p), start(p + 1)), never empty.
  int64_t start(int64_t p) const {
    const int64_t tiles = (side + tile - 1) / tile;
    return std::min(side, tiles * p / pieces * tile);
  }
};
AtBCut sgemm_at_b_cut(int64_t m, int64_t n, int64_t k, int64_t cores);

/// One piece of it, rows [m0, m1) and columns [n0, n1) of C, on the calling thread, packing both
/// operands itself: what sgemm_at_b's pieces compute, exposed so tests can cut C by hand.
void sgemm_at_b_piece(int64_t m0, int64_t m1, int64_t n0, int64_t n1, int64_t k, const float* a, int64_t lda,
                      const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace heed::detail
