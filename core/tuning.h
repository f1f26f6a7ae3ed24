// heed (internal): how work is split over threads and cut into cache-sized blocks, derived from
// what this CPU is (core/cpu.h) rather than tuned on one machine. One rule per size, stated here:
//
// - A grain (the least work worth handing to another thread) is a time at the core's measured
//   rate for that kind of work: kMinChunkSeconds at the measured element-wise streaming rate for
//   element-wise and row-wise passes, kMinProductChunkSeconds at the fp32 FMA peak for matrix
//   products. A hand-off to the pool's spinning workers costs about a microsecond
//   (core/parallel.cpp), so a 2.5 us chunk gains more than it costs; a product's chunk costs
//   more to start (it packs its own copy of the shared operand, and attention's chunks transpose
//   theirs), so it must run longer. A faster core gets a larger grain, a slower one a smaller
//   grain, and each chunk still takes about the same time. On the AMD EPYC (Zen 4) these rules
//   were written on, they give the values that were tuned by hand there before (2^19, 2^18,
//   16 384 and 8 192: docs/performance.md).
// - Grains are rounded down to a power of two, so noise in the start-up measurement
//   (cpu_quick_rates: best of 6 runs of 0.25 ms) rarely moves one, and a run's splits are
//   usually the same from one process to the next on one machine (a rate must change by up to
//   2x to move it). No bit depends on a grain anyway (below).
// - A block (data reused while it stays in cache) is a fraction of L1.
//
// None of these sizes decides an order of summation, so no result depends on them (the chunk
// and block boundaries of parallel_for_blocks and attention's pieces leave every sum in its
// order). The sizes that do fix sum orders stay constants and are not tuning: simd_rows.h's
// kSumBlock, layer_norm_backward's kBlockRows (dw, db partial sums), reduce.cpp's kRows
// (column-sum blocks), gemm_bf16's 12 x 32 register tile, and the pieces a BLAS product is cut
// into (kProductMinPiece, kProductPieceMacs, kRowProductPieceMacs, kProductPairMacs,
// kPackedProductPieceMacs and kPackedPiecesPerCore below: a BLAS sums in another order for another
// piece of C).
#pragma once

#include <cstdint>
#include <string>

namespace heed {

/// The least time a chunk of a memory-bound pass handed to another thread should take (see above).
constexpr double kMinChunkSeconds = 2.5e-6;
/// The same for a chunk of a matrix product, which also packs or transposes its own operands.
constexpr double kMinProductChunkSeconds = 10e-6;

/// How matmul (core/ops/matmul.cpp) cuts a product that runs on a BLAS (oneDNN's sgemm, OpenBLAS's
/// sgemm, dgemm and gemv) into pieces, one call each. A BLAS's bits for an element of C depend on
/// the piece of C its call covers (both libraries' kernels sum in another order for some piece
/// shapes: docs/platform.md), so the pieces follow from the product's shape and the cores the
/// process may use, never from the thread count or a measured rate: at most one per core, each of
/// at least kProductMinPiece rows (or columns) and kProductPieceMacs multiply-adds. With fewer
/// threads than pieces a thread runs several, one after the other (each piece packs its own copy
/// of the shared operand: run as many threads as the process has cores). 2^19 multiply-adds are
/// 4-21 us on a core of 50-240 GFLOP/s, far longer than handing a piece to a thread (~1 us).
constexpr int64_t kProductMinPiece = 16;
constexpr int64_t kProductPieceMacs = int64_t{1} << 19;
/// A product whose op(B) is packed once and shared by its pieces (oneDNN's packed sgemm,
/// core/ops/sgemm.h: A not transposed) is cut finer than one piece a core, so that the threads
/// share its pieces out as they come free and a core the host slows takes fewer: q pieces a core,
/// q = its multiply-adds / (kPackedProductPieceMacs x cores), at most kPackedPiecesPerCore, and
/// only where q >= 2 (else BlasProduct's cut). 2^24 multiply-adds are 0.1-0.7 ms on a core of
/// 50-240 GFLOP/s; smaller pieces lose rate (a 16-row piece of small's c_fc forward ran at 89
/// GFLOP/s against 115 for a 256-row one on an Emerald Rapids core: docs/performance.md). A whole
/// number of pieces a core, so that cores running alike finish together. Fixed, like the
/// constants above. heed's own A^T B kernel (core/ops/sgemm_at_b.h) is cut by the same rule and
/// taken from the same size on, though no bit of it depends on its pieces.
constexpr int64_t kPackedProductPieceMacs = int64_t{1} << 24;
constexpr int64_t kPackedPiecesPerCore = 8;
/// That q for a product of `macs` multiply-adds on `cores` cores (0 or more, at most
/// kPackedPiecesPerCore): the one rule both finely cut products apply.
inline int64_t packed_pieces_per_core(double macs, int64_t cores) {
  const double q = macs / static_cast<double>(cores) / static_cast<double>(kPackedProductPieceMacs);
  return q >= static_cast<double>(kPackedPiecesPerCore) ? kPackedPiecesPerCore : static_cast<int64_t>(q);
}
/// The pieces of a one-row product (gemv), which reads each element of op(B) once from memory:
/// 2^16 multiply-adds, 256 KB of a float32 op(B), about 8 us at 30 GB/s.
constexpr int64_t kRowProductPieceMacs = int64_t{1} << 16;
/// A Linear's dx and dW run as a pair (core/ops/matmul.cpp, linear's backward: on a BLAS each cut
/// for half the cores, side by side) when each is at least this many multiply-adds. Below it each
/// is a single piece whether or not it pairs, so the line decides no bit there; above it the pair's
/// pieces differ from the lone product's, so the line is fixed, not measured.
constexpr int64_t kProductPairMacs = 2 * kProductPieceMacs;

struct Tuning {
  /// fp32 multiply-adds per chunk of a product: kMinProductChunkSeconds at the fp32 FMA peak (half
  /// of its flops, one per multiply-add). BLAS products are cut into fixed pieces instead
  /// (kProductPieceMacs): this grain sizes attention's chunks below.
  int64_t gemm_grain_macs = 0;
  /// Multiply-adds per chunk of attention's per-head product kernels (attention.cpp): those run
  /// at about half the FMA peak (short causal rows, a softmax between products), so half the
  /// GEMM grain is the same time.
  int64_t attention_grain_macs = 0;
  /// Elements per thread of a one-pass element-wise kernel (add, GELU, a copy): kMinChunkSeconds
  /// at the measured streaming rate.
  int64_t elementwise_grain = 0;
  /// Elements per hand-out block of element-wise kernels: a quarter of a thread's least share
  /// (so shares round to blocks closely), a multiple of every vector width.
  int64_t elementwise_block = 0;
  /// Elements per chunk of row-wise kernels that pass over each row about twice (layer norm,
  /// softmax): half the element-wise grain.
  int64_t row_grain_elems = 0;
  /// Bytes of a block reused from L1 while other data streams past it: half of L1d, the other
  /// half left to what streams (attention's p v pieces of v rows).
  int64_t l1_block_bytes = 0;
  /// Cache line size in bytes (row-stride padding against L1 set aliasing).
  int64_t line_bytes = 0;
};

/// The sizes for this CPU, derived on first use from cpu_info() and cpu_quick_rates() (which
/// measures, about 3 ms once per process), then cached.
const Tuning& tuning();

/// tuning() as one JSON object on one line, for `heed bench`: each host's run shows its sizes.
std::string tuning_json();

/// Rows of `row_bytes` each that fill tuning().l1_block_bytes (at least 8).
int64_t l1_block_rows(int64_t row_bytes);

/// A row stride (in elements of `elem_bytes`) for rows of at least `cols` elements, a multiple of
/// `vector_elems`, padded so that it spans an odd number of cache lines: L1's set count is a power
/// of two, so rows an even number of lines apart map into a fraction of the sets and evict one
/// another when many rows are read together (at 1 KB apart, a quarter of the sets); an odd count
/// walks through every set.
int64_t alias_free_stride(int64_t cols, int64_t vector_elems, int64_t elem_bytes);

}  // namespace heed
