// heed: what processor this is. Kernels read their tile sizes, thread splits and paths from here
// instead of from constants tuned on one machine: cache sizes size the blocks, the vector width
// and instruction sets pick the code, and the measured peaks say how far a kernel is from what the
// core can do (benchmarks report MFU against them).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace heed {

/// The newest instruction set heed's run-time choices may use, from the environment variable
/// HEED_MAX_CPU_ISA, named as oneDNN's DNNL_MAX_CPU_ISA (case-insensitive): sse41, avx2,
/// avx512_core (AVX-512 F/BW/VL), avx512_core_bf16 (+ AVX512_BF16), avx512_core_amx (+ AMX-BF16), or
/// all (also: unset or empty). It lowers what cpu_info() reports, never raises it: the bf16 and fp32
/// product kernels, the peak probes and the blocking then follow the capped CPU, and heed hands the
/// cap to oneDNN (dnnl_set_max_cpu_isa) before its first product. So an AVX-512 machine can run,
/// test and time the paths an AVX2 or a Zen 4-like (no AMX) machine takes. Two things it cannot
/// reach, because they are fixed before main: the element-wise kernels' vector width, chosen at
/// compile time (-march; build with -DHEED_NATIVE=OFF -DCMAKE_CXX_FLAGS=-march=x86-64-v3 for
/// AVX2's), and OpenBLAS's kernels (set OPENBLAS_CORETYPE=Haswell too). docs/platform.md.
enum class CpuIsaCap { sse41, avx2, avx512_core, avx512_core_bf16, avx512_core_amx, all };

/// The processor, detected once (cpuid, the OS's enabled register state and the process's CPU
/// affinity). Instruction sets are true only when the CPU has them *and* the OS saves their
/// registers, so a kernel may use any that is set.
struct CpuInfo {
  std::string vendor;      ///< cpuid's vendor string: "GenuineIntel", "AuthenticAMD", ...
  std::string model_name;  ///< the brand string, e.g. "AMD EPYC 9R14" (a VM may shorten it)
  int family = 0, model = 0, stepping = 0;  ///< cpuid's display family, model and stepping

  bool fma = false;          ///< FMA3
  bool avx2 = false;
  bool avx512f = false;      ///< AVX-512 foundation (512-bit registers, 32 of them)
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512_bf16 = false;  ///< VCVTNE2PS2BF16 and VDPBF16PS: the bf16 GEMM's hardware path
  bool amx_bf16 = false;     ///< AMX-TILE and AMX-BF16, enabled by the OS (usable once amx_ready())

  /// Width in bytes of the widest vector registers heed's kernels use here: 64 with AVX-512, 32
  /// with AVX2, else 16. fp32 lanes = vector_bytes / 4.
  int vector_bytes = 16;

  /// Data cache sizes in bytes: L1d and L2 of one core, L3 whole (shared by l3_shared_by
  /// logical CPUs). From cpuid's cache descriptors; when those are missing (caches_detected is
  /// false) the values are 32 KiB, 1 MiB and 8 MiB, a common shape, so blocking still works.
  int64_t l1d_bytes = 32 << 10, l2_bytes = 1 << 20, l3_bytes = 8 << 20;
  int l3_shared_by = 1;
  int64_t cache_line_bytes = 64;
  bool caches_detected = false;

  /// Logical CPUs this process may run on (its affinity mask), at least 1.
  int cores = 1;

  /// The HEED_MAX_CPU_ISA the instruction sets above were capped at (all: none).
  CpuIsaCap max_isa = CpuIsaCap::all;

  /// The share of L3 one core can count on: l3_bytes over the CPUs sharing it (at most cores).
  int64_t l3_per_core() const;
};

/// The machine's physical memory in bytes (sysconf: pages times page size), or 0 where the system
/// does not say.
uint64_t physical_memory_bytes();

/// The processor heed runs on; detected on the first call (microseconds), then cached, and capped
/// by HEED_MAX_CPU_ISA (below). Throws heed::Error when that variable's value is not one it knows.
const CpuInfo& cpu_info();


/// The cap a HEED_MAX_CPU_ISA value names (see above); throws heed::Error naming the variable and
/// the values it takes for any other.
CpuIsaCap parse_cpu_isa_cap(std::string_view value);

/// A cap's name: oneDNN's, in lower case ("avx2", "avx512_core_bf16", "all").
const char* cpu_isa_cap_name(CpuIsaCap cap);

/// `info` with the instruction sets newer than `cap` turned off (and vector_bytes to match), and
/// max_isa = cap.
CpuInfo capped_cpu_info(CpuInfo info, CpuIsaCap cap);

/// The widest vector instructions this build's element-wise and row kernels (xsimd) were compiled
/// for, fixed by -march: "avx512" (F, BW, VL, DQ: xsimd's avx512bw), "avx512f", "avx2", "avx",
/// "sse4.2", "sse2" or "other". HEED_MAX_CPU_ISA does not change them.
const char* compiled_vector_isa();

/// Each instruction set this build was compiled to use (-march), as __builtin_cpu_supports names
/// it ("avx2", "avx512f", ...), with whether this CPU has it. A CPU that lacks one cannot run this
/// build: before any of heed's code runs, the process then ends with one line naming them (exit
/// code 1) instead of dying of SIGILL somewhere (core/compiled_isa.cpp).
std::vector<std::pair<std::string, bool>> compiled_isas_here();

/// Per-core arithmetic peaks in GFLOP/s, measured on the calling thread by a short
/// microbenchmark: chains of independent multiply-adds at the widest vector width, enough
/// chains to cover the instruction's latency, best of a few timed runs.
struct CpuPeaks {
  /// fp32 fused multiply-add (2 flops per lane); mul + add where there is no FMA.
  double fp32_fma_gflops = 0;
  /// VDPBF16PS on 512-bit registers (a pair of bf16 products added into each fp32 lane: 4 flops
  /// per lane); 0 when the CPU has no AVX512_BF16.
  double bf16_dot_gflops = 0;
  /// AMX's TDPBF16PS on full 16 x 16 x 32 tiles (2 x 16 x 16 x 32 flops an instruction); 0 without
  /// AMX-BF16 or when amx_ready() is false.
  double bf16_amx_gflops = 0;
  /// The peak of the instructions the bf16 products run on here (core/ops/gemm_bf16.h): AMX's
  /// where it is ready, else VDPBF16PS's (0 when neither exists).
  double bf16_gflops() const { return bf16_amx_gflops > 0 ? bf16_amx_gflops : bf16_dot_gflops; }
  /// Element-wise streaming: GB/s of out[i] = a[i] + b[i] (12 bytes per float element) over
  /// arrays that fill twice L2 (activations' sizes: past L2, within L3), the rate of heed's
  /// element-wise and row-wise kernels.
  double stream_gbytes = 0;
  double seconds = 0;  ///< how long the measurement took
};

/// The peaks, measured on the first call (about 0.1 s, under 0.5 s), then cached. Measure on a
/// quiet machine: another process on the same core lowers these figures.
const CpuPeaks& cpu_peaks();

/// The fp32 and streaming rates measured quickly (bf16_dot_gflops 0; about 3 ms, best of 6 short
/// runs), then cached: what core/tuning.h sizes work splits from. Every process that runs an op
/// measures these, so they must be cheap; a grain is rounded to a power of two, which this
/// precision is enough for. cpu_peaks() is the careful measurement that benchmarks report.
const CpuPeaks& cpu_quick_rates();

/// Whether this process may use AMX tiles: cpu_info().amx_bf16, and Linux granted the process
/// the tile data state (arch_prctl ARCH_REQ_XCOMP_PERM, asked once, on the first call; Linux 5.16
/// and later). Call it before any AMX instruction: without the permission one kills the process.
/// Once granted, the process's signal frames carry the 8 KB of tile state: an alternate signal
/// stack (sigaltstack) must then be at least the kernel's AT_MINSIGSTKSZ (about 12 KB), and one
/// installed smaller beforehand makes the request fail (then false: the bf16 products run on
/// VDPBF16PS). Only bf16 products and cpu_peaks() ask.
bool amx_ready();

/// TDPBF16PS's rate measured quickly (as cpu_quick_rates(): best of 6 runs of 0.25 ms) on the first
/// call, for sizing the AMX products' work splits; 0 when !amx_ready().
double amx_quick_gflops();

/// cpu_info() and cpu_peaks() as one JSON object on one line, for `heed bench` and benchmarks:
/// {"vendor", "model_name", "family", "model", "stepping", "isa": {...}, "max_isa", "compiled_for", "vector_bits",
///  "cache_bytes": {"l1d", "l2", "l3", "l3_shared_by", "detected"}, "cores", "peak_gflops_per_core":
///  {"fp32_fma", "bf16_dot", "bf16_amx", "seconds"}, "stream_gbytes_per_core"}. Measures the peaks if that has not happened yet.
std::string cpu_json();

}  // namespace heed
