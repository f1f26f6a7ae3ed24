// The work-split and block sizes of core/tuning.h, from the CPU's measured rates and caches.
#include "core/tuning.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include <nlohmann/json.hpp>

#include "core/cpu.h"
#include "core/ops/gemm_bf16.h"
#include "core/ops/sgemm.h"

namespace heed {
namespace {

// The largest power of two <= x (1 for x < 2).
int64_t floor_pow2(double x) {
  return x < 2 ? 1 : static_cast<int64_t>(std::bit_floor(static_cast<uint64_t>(x)));
}

Tuning derive(const CpuInfo& info, const CpuPeaks& rates) {
  Tuning t;
  // Multiply-adds per second: half the fp32 flops. Elements per second of a same-shaped add:
  // the streaming rate over its 12 bytes per element.
  const double macs_per_s = rates.fp32_fma_gflops * 0.5e9;
  const double elems_per_s = rates.stream_gbytes * 1e9 / 12.0;
  t.gemm_grain_macs = floor_pow2(macs_per_s * kMinProductChunkSeconds);
  t.attention_grain_macs = std::max<int64_t>(1, t.gemm_grain_macs / 2);
  // At least 4 blocks of 64 elements: every vector width divides the block.
  t.elementwise_grain = std::max<int64_t>(256, floor_pow2(elems_per_s * kMinChunkSeconds));
  t.elementwise_block = t.elementwise_grain / 4;
  t.row_grain_elems = t.elementwise_grain / 2;
  t.l1_block_bytes = info.l1d_bytes / 2;
  t.line_bytes = std::max<int64_t>(16, info.cache_line_bytes);
  return t;
}

}  // namespace

const Tuning& tuning() {
  static const Tuning t = derive(cpu_info(), cpu_quick_rates());
  return t;
}

std::string tuning_json() {
  const Tuning& t = tuning();
  nlohmann::ordered_json j;
  j["min_chunk_seconds"] = kMinChunkSeconds;
  j["min_product_chunk_seconds"] = kMinProductChunkSeconds;
  // The quick rates the sizes come from (cpu_peaks() in the "cpu" object is the careful measure).
  j["fp32_fma_gflops"] = std::round(cpu_quick_rates().fp32_fma_gflops * 10.0) / 10.0;
  j["stream_gbytes"] = std::round(cpu_quick_rates().stream_gbytes * 10.0) / 10.0;
  j["fp32_products"] = detail::fp32_product_kernel();
  j["openblas_kernels"] = detail::openblas_kernels();  // float64, and fp32 where fp32_products says OpenBLAS
  j["bf16_products"] = bf16_product_kernel();
  j["product_piece_macs"] = kProductPieceMacs;  // fixed, not derived: a BLAS's bits depend on its pieces
  j["product_min_piece"] = kProductMinPiece;
  j["row_product_piece_macs"] = kRowProductPieceMacs;
  j["product_pair_macs"] = kProductPairMacs;
  j["gemm_grain_macs"] = t.gemm_grain_macs;
  j["attention_grain_macs"] = t.attention_grain_macs;
  j["elementwise_grain"] = t.elementwise_grain;
  j["elementwise_block"] = t.elementwise_block;
  j["row_grain_elems"] = t.row_grain_elems;
  j["l1_block_bytes"] = t.l1_block_bytes;
  j["line_bytes"] = t.line_bytes;
  return j.dump();
}

int64_t l1_block_rows(int64_t row_bytes) {
  return std::max<int64_t>(8, tuning().l1_block_bytes / std::max<int64_t>(row_bytes, 1));
}

int64_t alias_free_stride(int64_t cols, int64_t vector_elems, int64_t elem_bytes) {
  const int64_t line = std::max<int64_t>(1, tuning().line_bytes / std::max<int64_t>(elem_bytes, 1));
  const int64_t unit = std::max(line, std::max<int64_t>(vector_elems, 1));  // both are powers of two
  int64_t ld = (std::max<int64_t>(cols, 1) + unit - 1) / unit * unit;
  // A vector longer than a line (not a case on x86: 64-byte lines, vectors up to 64 bytes) cannot
  // make the count odd; one extra vector still moves the rows off the power-of-two stride.
  if (unit > line || (ld / line) % 2 == 0) ld += unit;
  return ld;
}

}  // namespace heed
