// CPU identity from cpuid, and the peak microbenchmarks. The instruction-set-specific loops carry
// GCC target attributes, so they build (and the library runs) without -march=native; each one is
// called only when cpu_info() says the instructions exist.
#include "core/cpu.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <strings.h>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define HEED_X86 1
#endif
#if defined(__linux__)
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "core/amx.h"
#include "core/check.h"

namespace heed {

int64_t CpuInfo::l3_per_core() const {
  return l3_bytes / std::max(1, std::min(l3_shared_by, cores));
}

namespace {

#ifdef HEED_X86
struct Regs {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
};

Regs cpuid(unsigned leaf, unsigned sub = 0) {
  Regs r;
  __cpuid_count(leaf, sub, r.eax, r.ebx, r.ecx, r.edx);
  return r;
}

bool bit(unsigned v, int b) { return (v >> b) & 1u; }

// XCR0: which register files the OS saves on a context switch (a CPU may have AVX-512 that the
// OS has not enabled, and then using it faults).
uint64_t xcr0() {
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

std::string trimmed(std::string s) {
  s.erase(std::find(s.begin(), s.end(), '\0'), s.end());
  const auto first = s.find_first_not_of(' '), last = s.find_last_not_of(' ');
  return first == std::string::npos ? std::string() : s.substr(first, last - first + 1);
}

// The deterministic cache parameters: leaf 4 on Intel, 0x8000001D on AMD (same layout).
void detect_caches(CpuInfo& info, unsigned leaf) {
  for (unsigned sub = 0; sub < 16; ++sub) {
    const Regs r = cpuid(leaf, sub);
    const unsigned type = r.eax & 0x1f, level = (r.eax >> 5) & 0x7;
    if (type == 0) break;  // no more caches
    if (type == 2) continue;  // instruction cache
    const int64_t line = (r.ebx & 0xfff) + 1, partitions = ((r.ebx >> 12) & 0x3ff) + 1;
    const int64_t ways = ((r.ebx >> 22) & 0x3ff) + 1, sets = static_cast<int64_t>(r.ecx) + 1;
    const int64_t bytes = ways * partitions * line * sets;
    const int shared = static_cast<int>((r.eax >> 14) & 0xfff) + 1;
    if (level == 1) {
      info.l1d_bytes = bytes;
      info.cache_line_bytes = line;
      info.caches_detected = true;
    } else if (level == 2) {
      info.l2_bytes = bytes;
    } else if (level == 3) {
      info.l3_bytes = bytes;
      info.l3_shared_by = shared;
    }
  }
}

void detect_x86(CpuInfo& info) {
  const Regs v = cpuid(0);
  char vendor[13] = {};
  std::memcpy(vendor, &v.ebx, 4);
  std::memcpy(vendor + 4, &v.edx, 4);
  std::memcpy(vendor + 8, &v.ecx, 4);
  info.vendor = vendor;
  const unsigned max_leaf = v.eax, max_ext = cpuid(0x80000000).eax;

  const Regs l1 = cpuid(1);
  const unsigned base_family = (l1.eax >> 8) & 0xf, base_model = (l1.eax >> 4) & 0xf;
  info.stepping = static_cast<int>(l1.eax & 0xf);
  info.family = static_cast<int>(base_family == 0xf ? base_family + ((l1.eax >> 20) & 0xff) : base_family);
  info.model = static_cast<int>(base_family == 0x6 || base_family == 0xf ? (((l1.eax >> 16) & 0xf) << 4) | base_model
                                                                        : base_model);

  if (max_ext >= 0x80000004) {
    char brand[49] = {};
    for (unsigned i = 0; i < 3; ++i) {
      const Regs b = cpuid(0x80000002 + i);
      std::memcpy(brand + 16 * i, &b, 16);
    }
    info.model_name = trimmed(brand);
  }

  const uint64_t xcr = bit(l1.ecx, 27) ? xcr0() : 0;  // OSXSAVE: xgetbv is allowed
  const bool os_avx = (xcr & 0x6) == 0x6;              // XMM and YMM state
  const bool os_avx512 = os_avx && (xcr & 0xe0) == 0xe0;  // opmask, ZMM0-15 upper halves, ZMM16-31
  const bool os_amx = (xcr & 0x60000) == 0x60000;      // XTILECFG, XTILEDATA
  const bool avx = bit(l1.ecx, 28) && os_avx;
  info.fma = avx && bit(l1.ecx, 12);
  if (max_leaf >= 7) {
    const Regs l7 = cpuid(7, 0);
    const Regs l7s1 = l7.eax >= 1 ? cpuid(7, 1) : Regs{};
    info.avx2 = avx && bit(l7.ebx, 5);
    info.avx512f = os_avx512 && bit(l7.ebx, 16);
    info.avx512bw = info.avx512f && bit(l7.ebx, 30);
    info.avx512vl = info.avx512f && bit(l7.ebx, 31);
    info.avx512_bf16 = info.avx512f && bit(l7s1.eax, 5);
    info.amx_bf16 = os_amx && bit(l7.edx, 22) && bit(l7.edx, 24);  // AMX-BF16 and AMX-TILE
  }
  info.vector_bytes = info.avx512f ? 64 : info.avx2 ? 32 : 16;

  const bool amd = info.vendor == "AuthenticAMD" || info.vendor == "HygonGenuine";
  if (amd && max_ext >= 0x8000001D && bit(cpuid(0x80000001).ecx, 22)) {  // TOPOEXT
    detect_caches(info, 0x8000001D);
  } else if (!amd && max_leaf >= 4) {
    detect_caches(info, 4);
  }
}
#endif

int available_cores() {
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
#endif
  return std::max(1u, std::thread::hardware_concurrency());
}

// ---- the peak microbenchmarks ----
// Each loop runs `iters` rounds of kChains independent multiply-adds (independent so that the
// instruction's latency is hidden: a 4-6 cycle latency at up to 2 instructions per cycle needs at
// least 12) and returns the flops it did. The operands come from volatile loads, so the compiler
// can neither fold the arithmetic nor hoist it out of the loop.
constexpr int kChains = 16;
volatile float g_mul = 0.999f, g_add = 1e-3f;
volatile float g_sink = 0;

#ifdef HEED_X86
// (Through memory: GCC 12 warns inside _mm512_reduce_add_ps and the casts, PR 105593.)
__attribute__((target("avx512f"))) float first_lane(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  return lanes[0];
}

__attribute__((target("avx512f"))) double fma_avx512(int64_t iters) {
  const __m512 m = _mm512_set1_ps(g_mul), a = _mm512_set1_ps(g_add);
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
  for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 16
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], m, a);
  __m512 s = acc[0];
  for (int c = 1; c < kChains; ++c) s = _mm512_add_ps(s, acc[c]);
  g_sink = first_lane(s);
  return static_cast<double>(iters) * kChains * 16 * 2;
}

__attribute__((target("avx2,fma"))) double fma_avx2(int64_t iters) {
  const __m256 m = _mm256_set1_ps(g_mul), a = _mm256_set1_ps(g_add);
  constexpr int kYmmChains = 12;  // 16 ymm registers in all
  __m256 acc[kYmmChains];
  for (int c = 0; c < kYmmChains; ++c) acc[c] = _mm256_set1_ps(static_cast<float>(c));
  for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 12
    for (int c = 0; c < kYmmChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], m, a);
  alignas(32) float lanes[8];
  __m256 s = acc[0];
  for (int c = 1; c < kYmmChains; ++c) s = _mm256_add_ps(s, acc[c]);
  _mm256_store_ps(lanes, s);
  g_sink = lanes[0];
  return static_cast<double>(iters) * kYmmChains * 8 * 2;
}

// bf16 pairs whose products stay far from overflow and underflow for any number of rounds.
__attribute__((target("avx512f,avx512bf16"))) double dot_bf16(int64_t iters) {
  const __m512i pairs = _mm512_set1_epi32(0x3f803f80);  // (1.0, 1.0)
  const __m512bh x = (__m512bh)_mm512_and_si512(pairs, _mm512_set1_epi32(static_cast<int>(g_mul > 0 ? -1 : 0)));
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(g_add * static_cast<float>(c));
  for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 16
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_dpbf16_ps(acc[c], x, x);
  __m512 s = acc[0];
  for (int c = 1; c < kChains; ++c) s = _mm512_add_ps(s, acc[c]);
  g_sink = first_lane(s);
  return static_cast<double>(iters) * kChains * 16 * 4;
}

// TDPBF16PS into four accumulator tiles from two A and two B tiles (the 2 x 2 blocking of the
// bf16 GEMM's AMX kernel), so that each product waits on no other. Tiles are zero and ones
// rounded to bf16: far from overflow for any number of rounds.
#ifdef HEED_AMX
__attribute__((target("amx-tile,amx-bf16"))) double dot_amx(int64_t iters) {
  alignas(64) uint16_t ones[16 * 32];
  std::fill(std::begin(ones), std::end(ones), static_cast<uint16_t>(g_mul > 0 ? 0x3f80 : 0));
  const detail::AmxTiles tiles;
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  HEED_TILE_LOADD(4, ones, 64);
  HEED_TILE_LOADD(5, ones, 64);
  HEED_TILE_LOADD(6, ones, 64);
  HEED_TILE_LOADD(7, ones, 64);
  for (int64_t i = 0; i < iters; ++i) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  alignas(64) float out[16 * 16];
  _tile_stored(0, out, 64);
  g_sink = out[0];
  return static_cast<double>(iters) * 4 * 16 * 16 * 32 * 2;
}
#endif
#endif

// Portable mul + add chains, for a CPU with neither AVX2 nor AVX-512 (SSE2 at best).
double mul_add_scalar(int64_t iters) {
  const float m = g_mul, a = g_add;
  float acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = static_cast<float>(c);
  for (int64_t i = 0; i < iters; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = acc[c] * m + a;
  float s = 0;
  for (float v : acc) s += v;
  g_sink = s;
  return static_cast<double>(iters) * kChains * 2;
}

// GFLOP/s of `loop`: the round count is first grown until one run lasts `run_seconds`, then
// scaled so that a run lasts about that; the best of `runs` such runs is the peak. Short runs,
// many of them: on a busy machine some run falls between two of the scheduler's time slices
// given to another process. The reported peaks take 24 runs of 1 ms; the quick rates that size
// work splits (core/tuning.h) 6 of 0.25 ms, enough for the power of two a grain is rounded to.
template <class Loop>
double gflops(Loop loop, int runs = 24, double run_seconds = 1e-3) {
  using clock = std::chrono::steady_clock;
  auto timed = [&](int64_t iters) {
    const auto t0 = clock::now();
    const double flops = loop(iters);
    return std::pair{flops, std::chrono::duration<double>(clock::now() - t0).count()};
  };
  int64_t iters = 1 << 10;
  auto [flops, secs] = timed(iters);
  while (secs < run_seconds && iters < (int64_t(1) << 40)) {
    iters *= 4;
    std::tie(flops, secs) = timed(iters);
  }
  iters = std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(iters) * run_seconds / std::max(secs, 1e-9)));
  double best = 0;
  for (int run = 0; run < runs; ++run) {
    std::tie(flops, secs) = timed(iters);
    best = std::max(best, flops / std::max(secs, 1e-12) * 1e-9);
  }
  return best;
}

CpuInfo detect() {
  CpuInfo info;
#ifdef HEED_X86
  detect_x86(info);
#endif
  info.cores = available_cores();
  if (const char* cap = std::getenv("HEED_MAX_CPU_ISA")) info = capped_cpu_info(std::move(info), parse_cpu_isa_cap(cap));
  return info;
}

// GB/s of out[i] = a[i] + b[i] over three arrays that together fill twice L2 (or half of this
// core's share of L3, if less): a model's activations outgrow L2 but mostly stay in L3, so this
// is the rate of an element-wise pass over them. Best of `runs` (after one to warm up), as in
// gflops().
double stream_gbytes(const CpuInfo& info, int runs) {
  const int64_t bytes = std::min<int64_t>(2 * info.l2_bytes, std::max<int64_t>(info.l2_bytes, info.l3_per_core() / 2));
  const size_t n = static_cast<size_t>(std::max<int64_t>(1024, bytes / (3 * sizeof(float))));
  std::vector<float> a(n, float(g_add)), b(n, float(g_mul)), out(n);
  using clock = std::chrono::steady_clock;
  double best = 0;
  for (int run = 0; run <= runs; ++run) {
    const auto t0 = clock::now();
    for (int rep = 0; rep < 4; ++rep) {
      const float* pa = a.data();
      const float* pb = b.data();
      float* po = out.data();
      for (size_t i = 0; i < n; ++i) po[i] = pa[i] + pb[i];
      g_sink = po[static_cast<size_t>(rep) % n];  // the loop's result is used
    }
    const double secs = std::chrono::duration<double>(clock::now() - t0).count();
    if (run > 0) best = std::max(best, 4.0 * 3.0 * sizeof(float) * static_cast<double>(n) / std::max(secs, 1e-12) * 1e-9);
  }
  return best;
}

// The fp32 and streaming rates (`quick`: 6 runs of 0.25 ms each, about 3 ms in all), plus the
// bf16 peak unless quick.
CpuPeaks measure(const CpuInfo& info, bool quick) {
  const auto t0 = std::chrono::steady_clock::now();
  const int runs = quick ? 6 : 24;
  const double run_seconds = quick ? 0.25e-3 : 1e-3;
  CpuPeaks p;
#ifdef HEED_X86
  if (info.avx512f) {
    p.fp32_fma_gflops = gflops(fma_avx512, runs, run_seconds);
  } else if (info.avx2 && info.fma) {
    p.fp32_fma_gflops = gflops(fma_avx2, runs, run_seconds);
  } else {
    p.fp32_fma_gflops = gflops(mul_add_scalar, runs, run_seconds);
  }
  if (info.avx512_bf16 && !quick) p.bf16_dot_gflops = gflops(dot_bf16);
#ifdef HEED_AMX
  if (info.amx_bf16 && !quick && amx_ready()) p.bf16_amx_gflops = gflops(dot_amx);
#endif
#else
  p.fp32_fma_gflops = gflops(mul_add_scalar, runs, run_seconds);
#endif
  p.stream_gbytes = stream_gbytes(info, runs);
  p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return p;
}

}  // namespace

// Each cap's name, in the enum's order (one table for parsing and naming).
constexpr const char* kCpuIsaCapNames[] = {"sse41", "avx2", "avx512_core", "avx512_core_bf16", "avx512_core_amx", "all"};

const char* cpu_isa_cap_name(CpuIsaCap cap) { return kCpuIsaCapNames[static_cast<int>(cap)]; }

CpuIsaCap parse_cpu_isa_cap(std::string_view value) {
  if (value.empty()) return CpuIsaCap::all;
  for (int i = 0; i <= static_cast<int>(CpuIsaCap::all); ++i)
    if (value.size() == std::strlen(kCpuIsaCapNames[i]) && ::strncasecmp(value.data(), kCpuIsaCapNames[i], value.size()) == 0)
      return static_cast<CpuIsaCap>(i);
  detail::fail("HEED_MAX_CPU_ISA: expected sse41, avx2, avx512_core, avx512_core_bf16, avx512_core_amx or all ",
               "(or unset), got '", value, "'");
}

CpuInfo capped_cpu_info(CpuInfo info, CpuIsaCap cap) {
  // Each level keeps the ones below it; what a level lacks is turned off, never turned on.
  if (cap < CpuIsaCap::avx512_core_amx) info.amx_bf16 = false;
  if (cap < CpuIsaCap::avx512_core_bf16) info.avx512_bf16 = false;
  if (cap < CpuIsaCap::avx512_core) info.avx512f = info.avx512bw = info.avx512vl = false;
  if (cap < CpuIsaCap::avx2) info.avx2 = info.fma = false;
  info.vector_bytes = info.avx512f ? 64 : info.avx2 ? 32 : 16;
  info.max_isa = cap;
  return info;
}

uint64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page_bytes = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page_bytes > 0 ? uint64_t(pages) * uint64_t(page_bytes) : 0;
}

const CpuInfo& cpu_info() {
  static const CpuInfo info = detect();
  return info;
}

bool amx_ready() {
  static const bool ready = [] {
    if (!cpu_info().amx_bf16) return false;
#if defined(__linux__) && defined(HEED_AMX)
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;  // <asm/prctl.h>, Linux 5.16
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
    return false;
#endif
  }();
  return ready;
}

double amx_quick_gflops() {
#ifdef HEED_AMX
  static const double rate = amx_ready() ? gflops(dot_amx, 6, 0.25e-3) : 0.0;
  return rate;
#else
  return 0.0;
#endif
}

const CpuPeaks& cpu_quick_rates() {
  static const CpuPeaks rates = measure(cpu_info(), true);
  return rates;
}

const CpuPeaks& cpu_peaks() {
  static const CpuPeaks peaks = measure(cpu_info(), false);
  return peaks;
}

std::string cpu_json() {
  const CpuInfo& c = cpu_info();
  const CpuPeaks& p = cpu_peaks();
  auto one_decimal = [](double v) { return std::round(v * 10.0) / 10.0; };
  nlohmann::ordered_json j;
  j["vendor"] = c.vendor;
  j["model_name"] = c.model_name;
  j["family"] = c.family;
  j["model"] = c.model;
  j["stepping"] = c.stepping;
  j["isa"] = {{"fma", c.fma},           {"avx2", c.avx2},           {"avx512f", c.avx512f},
              {"avx512bw", c.avx512bw}, {"avx512vl", c.avx512vl},   {"avx512_bf16", c.avx512_bf16},
              {"amx_bf16", c.amx_bf16}};
  j["max_isa"] = cpu_isa_cap_name(c.max_isa);
  j["compiled_for"] = compiled_vector_isa();
  j["vector_bits"] = c.vector_bytes * 8;
  j["cache_bytes"] = {{"l1d", c.l1d_bytes}, {"l2", c.l2_bytes}, {"l3", c.l3_bytes}, {"l3_shared_by", c.l3_shared_by},
                      {"detected", c.caches_detected}};
  j["cores"] = c.cores;
  j["peak_gflops_per_core"] = {{"fp32_fma", one_decimal(p.fp32_fma_gflops)}, {"bf16_dot", one_decimal(p.bf16_dot_gflops)},
                               {"bf16_amx", one_decimal(p.bf16_amx_gflops)},
                               {"seconds", std::round(p.seconds * 1000.0) / 1000.0}};
  j["stream_gbytes_per_core"] = one_decimal(p.stream_gbytes);
  return j.dump();
}

}  // namespace heed
