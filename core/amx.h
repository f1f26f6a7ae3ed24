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
/// TILELOADD of tile `t` (an integer literal) from rows `stride` bytes apart at `base`. Use this,
/// not GCC 12's _tile_loadd directly: that one is an asm given only the address in a register, no
/// memory operand and no "memory" clobber, so GCC may drop stores to the rows before it as dead or
/// move them past it (a row just filled on the stack, say). The empty asm before it is a compiler
/// barrier: every store before it is done before the load. (_tile_stored has the clobber.)
#define HEED_TILE_LOADD(t, base, stride)     \
  do {                                       \
    __asm__ volatile("" : : : "memory");     \
    _tile_loadd(t, base, stride);            \
  } while (0)

/// Configures this thread's tiles as full_tiles() for its lifetime and releases them after (so
/// that the kernel need not save 8 KB of tile data at every later context switch).
/// tile_config_now() reads back what is configured (STTILECFG), for tests.
class AmxTiles {
 public:
  __attribute__((target("amx-tile"))) AmxTiles() {
    const AmxTileConfig config = full_tiles();
    // Not GCC 12's _tile_loadconfig: its asm names only the first 8 bytes of the block as read
    // ("m" (*(const void **)config)), so GCC may drop the stores to the other 56 as dead. A build
    // for -march=x86-64-v3 did: LDTILECFG read rows and widths of 0 and faulted (SIGSEGV) in every
    // AMX product. This operand is the whole 64-byte block.
    __asm__ volatile("ldtilecfg %0" : : "m"(config));
  }
  __attribute__((target("amx-tile"))) ~AmxTiles() { _tile_release(); }
  AmxTiles(const AmxTiles&) = delete;
  AmxTiles& operator=(const AmxTiles&) = delete;
  __attribute__((target("amx-tile"))) static AmxTileConfig tile_config_now() {
    AmxTileConfig config;
    __asm__ volatile("sttilecfg %0" : "=m"(config));
    return config;
  }
};
#endif

}  // namespace heed::detail
