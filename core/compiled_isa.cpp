// The instruction sets this build was compiled for (-march) against the CPU it runs on. A build
// for -march=native uses its build machine's newest instructions anywhere the compiler likes, so
// on an older CPU (a binary copied to a laptop, a container image, an MPI node of another
// generation) it dies of SIGILL somewhere, with no word of why. heed checks first, in a
// constructor that runs before any of heed's own (priority 101) and is itself compiled for plain
// x86-64, and ends the process with one line naming the missing instructions (docs/platform.md).
#include "core/cpu.h"

#if defined(__x86_64__)
#include <unistd.h>
#endif

namespace heed {

const char* compiled_vector_isa() {
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__)
  return "avx512";
#elif defined(__AVX512F__)
  return "avx512f";
#elif defined(__AVX2__)
  return "avx2";
#elif defined(__AVX__)
  return "avx";
#elif defined(__SSE4_2__)
  return "sse4.2";
#elif defined(__SSE2__)
  return "sse2";
#else
  return "other";
#endif
}

#if defined(__x86_64__)
namespace {

// Every instruction set the compiler was told it may use (its -march macros) that
// __builtin_cpu_supports can ask about, with whether this CPU (and its OS, for the AVX register
// state) has it. (__builtin_cpu_supports takes a literal: hence the macro. clang 14 knows fewer
// names than GCC 12: the ones it lacks are GCC's only.)
struct IsaPresence {
  const char* name;
  bool present;
};
constexpr int kMaxIsas = 32;

__attribute__((target("arch=x86-64"))) int compiled_isas(IsaPresence* out) {
  __builtin_cpu_init();
  (void)out;  // (a build for plain x86-64 has nothing to check)
  int n = 0;
#define HEED_COMPILED_ISA(name) out[n++] = {name, __builtin_cpu_supports(name) != 0};
#ifdef __SSE4_2__
  HEED_COMPILED_ISA("sse4.2")
#endif
#ifdef __POPCNT__
  HEED_COMPILED_ISA("popcnt")
#endif
#ifdef __AVX__
  HEED_COMPILED_ISA("avx")
#endif
#ifdef __AVX2__
  HEED_COMPILED_ISA("avx2")
#endif
#ifdef __FMA__
  HEED_COMPILED_ISA("fma")
#endif
#ifdef __BMI__
  HEED_COMPILED_ISA("bmi")
#endif
#ifdef __BMI2__
  HEED_COMPILED_ISA("bmi2")
#endif
#ifdef __AVX512F__
  HEED_COMPILED_ISA("avx512f")
#endif
#ifdef __AVX512BW__
  HEED_COMPILED_ISA("avx512bw")
#endif
#ifdef __AVX512VL__
  HEED_COMPILED_ISA("avx512vl")
#endif
#ifdef __AVX512DQ__
  HEED_COMPILED_ISA("avx512dq")
#endif
#ifdef __AVX512CD__
  HEED_COMPILED_ISA("avx512cd")
#endif
#ifdef __AVX512VNNI__
  HEED_COMPILED_ISA("avx512vnni")
#endif
#ifdef __AVX512BF16__
  HEED_COMPILED_ISA("avx512bf16")
#endif
#ifdef __AVX512VBMI__
  HEED_COMPILED_ISA("avx512vbmi")
#endif
#ifdef __AVX512VBMI2__
  HEED_COMPILED_ISA("avx512vbmi2")
#endif
#ifdef __AVX512IFMA__
  HEED_COMPILED_ISA("avx512ifma")
#endif
#ifdef __AVX512BITALG__
  HEED_COMPILED_ISA("avx512bitalg")
#endif
#ifdef __AVX512VPOPCNTDQ__
  HEED_COMPILED_ISA("avx512vpopcntdq")
#endif
#ifdef __GFNI__
  HEED_COMPILED_ISA("gfni")
#endif
#ifdef __VPCLMULQDQ__
  HEED_COMPILED_ISA("vpclmulqdq")
#endif
#if !defined(__clang__)
#ifdef __F16C__
  HEED_COMPILED_ISA("f16c")
#endif
#ifdef __MOVBE__
  HEED_COMPILED_ISA("movbe")
#endif
#ifdef __AVXVNNI__
  HEED_COMPILED_ISA("avxvnni")
#endif
#ifdef __AVX512FP16__
  HEED_COMPILED_ISA("avx512fp16")
#endif
#endif
#undef HEED_COMPILED_ISA
  return n;
}

// Runs before heed's other static initialisers (and any code of heed's): libc and the
// libraries heed links are initialised by then, and compiled for any x86-64. Writes with write(2)
// and ends with _exit(1), as heed's other refusals end (one line, exit code 1).
__attribute__((constructor(101), target("arch=x86-64"))) void refuse_a_cpu_without_the_build_isa() {
  IsaPresence isas[kMaxIsas];
  const int n = compiled_isas(isas);
  char line[512];
  int len = 0;
  auto put = [&](const char* s) {
    while (*s && len < static_cast<int>(sizeof line) - 2) line[len++] = *s++;
  };
  bool missing = false;
  for (int i = 0; i < n; ++i) {
    if (isas[i].present) continue;
    put(missing ? ", " : "heed: error: this build of heed uses instructions this CPU lacks (");
    put(isas[i].name);
    missing = true;
  }
  if (!missing) return;
  put("): it was compiled for another machine's CPU (-march=native there); rebuild it on this machine, "
      "or configure it with -DHEED_NATIVE=OFF to run on any x86-64\n");
  if (write(STDERR_FILENO, line, static_cast<size_t>(len)) < 0) {
    // nothing more to say: the exit code still tells
  }
  _exit(1);
}

}  // namespace

std::vector<std::pair<std::string, bool>> compiled_isas_here() {
  IsaPresence isas[kMaxIsas];
  const int n = compiled_isas(isas);
  std::vector<std::pair<std::string, bool>> out;
  for (int i = 0; i < n; ++i) out.emplace_back(isas[i].name, isas[i].present);
  return out;
}
#else
std::vector<std::pair<std::string, bool>> compiled_isas_here() { return {}; }
#endif

}  // namespace heed
