// heed (internal): Intel AMX tiles, for the bf16 products (core/ops/gemm_bf16.cpp) and the peak
// measurement (core/cpu.cpp). A tile is a 2-D register of up to 16 rows of 64 bytes; eight of
// them are configured at once by LDTILECFG from the 64-byte block below. Every user here
// configures all eight the same way: 16 rows x 64 bytes (16 fp32 accumulators, or 16 rows of 32
// bf16 values = 16 pair words a row).
#pragma once

#include <cstdint>

namespace heed::detail {

/// LDTILECFG's operand, palette 1: bytes 16-47 hold each tile's bytes per row, 48-55 its rows.
struct alignas(64) AmxTileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
};

/// All eight tiles at 16 rows x 64 bytes.
inline AmxTileConfig full_tiles() {
  AmxTileConfig c;
  for (int t = 0; t < 8; ++t) {
    c.bytes_per_row[t] = 64;
    c.rows[t] = 16;
  }
  return c;
}

}  // namespace heed::detail
