// core/tuning.h: the work splits derived from the CPU, and the JSON heed bench prints them in.
#include <catch2/catch.hpp>

#include <bit>
#include <nlohmann/json.hpp>

#include "core/cpu.h"
#include "core/ops/gemm_bf16.h"
#include "core/ops/sgemm.h"
#include "core/tuning.h"

using namespace heed;

TEST_CASE("tuning's grains follow the measured rates by their rules, as powers of two", "[tuning]") {
  const Tuning& t = tuning();
  const CpuPeaks& r = cpu_quick_rates();
  REQUIRE(r.fp32_fma_gflops > 0);
  REQUIRE(r.stream_gbytes > 0);
  CHECK(&tuning() == &t);  // derived once
  for (int64_t v : {t.gemm_grain_macs, t.attention_grain_macs, t.elementwise_grain, t.elementwise_block, t.row_grain_elems})
    CHECK(std::has_single_bit(static_cast<uint64_t>(v)));
  // kMinChunkSeconds of work at the rate, rounded down to a power of two: within 2x below.
  const double gemm = r.fp32_fma_gflops * 0.5e9 * kMinProductChunkSeconds;
  CHECK(double(t.gemm_grain_macs) <= gemm);
  CHECK(double(t.gemm_grain_macs) > gemm / 2);
  const double elems = r.stream_gbytes * 1e9 / 12.0 * kMinChunkSeconds;
  CHECK(double(t.elementwise_grain) <= std::max(elems, 256.0));
  CHECK(double(t.elementwise_grain) > elems / 2);
  CHECK(t.attention_grain_macs * 2 == t.gemm_grain_macs);
  CHECK(t.elementwise_block * 4 == t.elementwise_grain);
  CHECK(t.elementwise_block % 64 == 0);  // every vector width divides a block: only the end is scalar
  CHECK(t.row_grain_elems * 2 == t.elementwise_grain);
  CHECK(t.l1_block_bytes == cpu_info().l1d_bytes / 2);
  CHECK(l1_block_rows(256) == std::max<int64_t>(8, cpu_info().l1d_bytes / 2 / 256));
  CHECK(l1_block_rows(1 << 30) == 8);
}

TEST_CASE("alias_free_stride spans an odd number of cache lines, whole vectors, at least the row", "[tuning]") {
  const int64_t line = tuning().line_bytes;
  for (int64_t elem : {4, 8})
    for (int64_t vec : {4, 8, 16})
      for (int64_t cols : {1, 7, 16, 32, 48, 64, 255, 256, 257, 1024}) {
        INFO("elem " << elem << " vector " << vec << " cols " << cols);
        const int64_t ld = alias_free_stride(cols, vec, elem);
        CHECK(ld >= cols);
        CHECK(ld % vec == 0);
        if (vec * elem > line) continue;  // a vector past a line: not an x86 shape
        CHECK(ld * elem % line == 0);
        CHECK(ld * elem / line % 2 == 1);
        CHECK(ld < cols + 2 * std::max(vec, line / elem) + 1);  // padded by at most one line (or vector) past whole ones
      }
  // The small config's keys: 256 floats (1 KB, 16 lines) become 17 lines with 64-byte lines.
  if (line == 64) CHECK(alias_free_stride(256, 16, 4) == 272);
}

TEST_CASE("tuning_json holds every derived size", "[tuning]") {
  const auto j = nlohmann::json::parse(tuning_json());
  const Tuning& t = tuning();
  CHECK(j.at("min_chunk_seconds").get<double>() == kMinChunkSeconds);
  CHECK(j.at("min_product_chunk_seconds").get<double>() == kMinProductChunkSeconds);
  CHECK(j.at("gemm_grain_macs") == t.gemm_grain_macs);
  // Which kernel runs fp32 products, and the fixed pieces every BLAS product is cut into.
  const std::string kernel = j.at("fp32_products").get<std::string>();
  CHECK(kernel.rfind(detail::sgemm_on_onednn() ? "oneDNN " : "OpenBLAS", 0) == 0);
  CHECK(j.at("openblas_kernels") == detail::openblas_kernels());
  CHECK(!detail::openblas_kernels().empty());
  CHECK(j.at("product_piece_macs") == kProductPieceMacs);
  CHECK(j.at("product_min_piece") == kProductMinPiece);
  CHECK(j.at("row_product_piece_macs") == kRowProductPieceMacs);
  CHECK(j.at("product_pair_macs") == kProductPairMacs);
  CHECK(j.at("bf16_products") == bf16_product_kernel());  // and what bf16 products run on
  CHECK(j.at("attention_grain_macs") == t.attention_grain_macs);
  CHECK(j.at("elementwise_grain") == t.elementwise_grain);
  CHECK(j.at("elementwise_block") == t.elementwise_block);
  CHECK(j.at("row_grain_elems") == t.row_grain_elems);
  CHECK(j.at("l1_block_bytes") == t.l1_block_bytes);
  CHECK(j.at("line_bytes") == t.line_bytes);
  CHECK(j.at("fp32_fma_gflops").get<double>() == Approx(cpu_quick_rates().fp32_fma_gflops).margin(0.05));
  CHECK(j.at("stream_gbytes").get<double>() == Approx(cpu_quick_rates().stream_gbytes).margin(0.05));
  CHECK(nlohmann::json::parse(cpu_json()).at("stream_gbytes_per_core").get<double>() ==
        Approx(cpu_peaks().stream_gbytes).margin(0.05));
}
