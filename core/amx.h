// heed (internal): Intel AMX tiles, for the bf16 products (core/ops/gemm_bf16.cpp) and the peak
// measurement (core/cpu.cpp). A tile is a 2-D register of up to 16 rows of 64 bytes; eight of
// them are configured at once by LDTILECFG from the 64-byte block below. Every user here
// configures all eight the same way: 16 rows x 64 bytes (16 fp32 accumulators, or 16 rows of 32
// bf16 values = 16 pair words a row). Use tiles only where amx_ready() (core/cpu.h) is true.
#pragma once

#include <cstdint>

#if defined(__x86_64__)  // GCC's AMX intrinsics exist for x86-64 only
#include <immintrin.h>
#define HEED_AMX 1
#endif

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

#ifdef HEED_AMX
/// Configures this thread's tiles as full_tiles() for its lifetime and releases them after (so
/// that the kernel need not save 8 KB of tile data at every later context switch).
class AmxTiles {
 public:
  __attribute__((target("amx-tile"))) AmxTiles() {
    const AmxTileConfig config = full_tiles();
    _tile_loadconfig(&config);
  }
  __attribute__((target("amx-tile"))) ~AmxTiles() { _tile_release(); }
  AmxTiles(const AmxTiles&) = delete;
  AmxTiles& operator=(const AmxTiles&) = delete;
};
#endif

}  // namespace heed::detail
