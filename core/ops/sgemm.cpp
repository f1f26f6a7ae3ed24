// fp32 products on oneDNN's dnnl_sgemm (see core/ops/sgemm.h for why).
#include "core/ops/sgemm.h"

#include <dlfcn.h>
#include <dnnl.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string_view>

#include "core/check.h"
#include "core/cpu.h"
#include "core/ops/sgemm_at_b.h"

// OpenBLAS's own extension (not cblas), declared here so that <cblas.h> stays in the two files
// that need it (docs/platform.md).
extern "C" char* openblas_get_corename(void);

namespace heed::detail {
namespace {

// Debian's libdnnl runs a call on OpenMP (libgomp, which it loads) with the calling thread's
// OpenMP team size, by default one thread per core. heed's pool already splits every product over
// the cores, so each call asks for a team of one and then puts back what the thread had: otherwise
// each piece would start a team of its own and oversubscribe the cores, and a user's own OpenMP
// code on that thread would find its team size changed. The two functions are looked up with dlsym
// so that heed compiles without -fopenmp and links no OpenMP runtime itself (the clang build of
// the fuzzers has none); a oneDNN built on another runtime has no such symbols, and then nothing
// is set.
class OneOpenMPThread {
 public:
  OneOpenMPThread() {
    if (!api().set || !api().get) return;
    saved_ = api().get();
    if (saved_ != 1) api().set(1);
  }
  ~OneOpenMPThread() {
    if (saved_ > 1) api().set(saved_);
  }
  OneOpenMPThread(const OneOpenMPThread&) = delete;
  OneOpenMPThread& operator=(const OneOpenMPThread&) = delete;

 private:
  struct Api {
    void (*set)(int) = nullptr;
    int (*get)() = nullptr;
  };
  static const Api& api() {
    static const Api a{reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "omp_set_num_threads")),
                       reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"))};
    return a;
  }
  int saved_ = 1;
};

// oneDNN 2.6's f32 gemm kernels (jit_avx512_common_gemm_f32 and jit_avx_gemm_f32, "nocopy" path,
// taken when a block of the summed axis is longer than the kernel's stack buffer: k > 84 with
// AVX-512) point rsp at a workspace they malloc. Linux writes the frame of a signal handled on the
// thread meanwhile (several KB with the AVX-512 state) from 128 bytes below rsp down: over the
// heap in front of that workspace. glibc then aborts in a later free ("corrupted size vs. prev_size
// while consolidating"): `heed seq2seq` stopped by SIGINT did in ~3 % of runs, in the free of that
// workspace at the end of a dnnl_sgemm call. oneDNN issue #4845, fixed upstream by PR #4855
// (backported to 3.11); Debian 12 ships 2.6.3. So no signal is handled on the thread during a
// call: its signals are blocked and stay pending until the call returns (two syscalls, ~0.1 us
// each). glibc keeps its two internal signals (thread cancellation, setxid) unblockable; heed
// uses neither.
class NoSignalsDuringCall {
 public:
  NoSignalsDuringCall() {
    sigset_t all;
    sigfillset(&all);
    blocked_ = pthread_sigmask(SIG_BLOCK, &all, &saved_) == 0;
  }
  ~NoSignalsDuringCall() {
    if (blocked_) pthread_sigmask(SIG_SETMASK, &saved_, nullptr);
  }
  NoSignalsDuringCall(const NoSignalsDuringCall&) = delete;
  NoSignalsDuringCall& operator=(const NoSignalsDuringCall&) = delete;

 private:
  sigset_t saved_;
  bool blocked_ = false;
};

// oneDNN's own cap for HEED_MAX_CPU_ISA (core/cpu.h), so that its kernels stay within the CPU heed
// reports. It must come before oneDNN generates its first kernel: call_onednn below, which every
// call into oneDNN goes through, sets it on the first.
void set_onednn_cap() {
  const CpuInfo& cpu = cpu_info();
  if (cpu.max_isa == CpuIsaCap::all) return;
  dnnl_cpu_isa_t isa = dnnl_cpu_isa_all;
  switch (cpu.max_isa) {
    case CpuIsaCap::sse41: isa = dnnl_cpu_isa_sse41; break;
    case CpuIsaCap::avx2: isa = dnnl_cpu_isa_avx2; break;
    case CpuIsaCap::avx512_core: isa = dnnl_cpu_isa_avx512_core; break;
    case CpuIsaCap::avx512_core_bf16: isa = dnnl_cpu_isa_avx512_core_bf16; break;
    case CpuIsaCap::avx512_core_amx: isa = dnnl_cpu_isa_avx512_core_amx; break;
    case CpuIsaCap::all: break;
  }
  const dnnl_status_t status = dnnl_set_max_cpu_isa(isa);
  HEED_CHECK(status == dnnl_success, "HEED_MAX_CPU_ISA=", cpu_isa_cap_name(cpu.max_isa), ": oneDNN refused the cap (dnnl_status_t ",
             static_cast<int>(status), ")");
}
void cap_onednn() {
  static const bool once = (set_onednn_cap(), true);  // (a throw leaves it to the next call)
  (void)once;
}

// Every call into oneDNN's sgemm runs on one OpenMP thread and with no signal handled meanwhile
// (the two classes above say why); f returns the call's status.
template <class F>
dnnl_status_t call_onednn(F&& f) {
  cap_onednn();
  const OneOpenMPThread one;
  const NoSignalsDuringCall no_signals;
  return f();
}

// oneDNN's packed sgemm (see sgemm_packed_b_available in the header). Column-major, Fortran
// style (every size by pointer), as MKL's sgemm_pack and sgemm_compute: heed's row-major
// C = A op(B) is the column-major C^T = op(B)^T A^T, so op(B)^T is the packed operand "A" there.
using dim_t = int64_t;
struct PackedSgemm {
  dnnl_status_t (*get_size)(const char* identifier, const char* transa, const char* transb, const dim_t* m,
                            const dim_t* n, const dim_t* k, const dim_t* lda, const dim_t* ldb, size_t* bytes,
                            bool* pack) = nullptr;
  dnnl_status_t (*pack)(const char* identifier, const char* transa, const char* transb, const dim_t* m, const dim_t* n,
                        const dim_t* k, const dim_t* lda, const dim_t* ldb, const float* src, float* dst) = nullptr;
  dnnl_status_t (*compute)(const char* transa, const char* transb, const dim_t* m, const dim_t* n, const dim_t* k,
                           const float* a, const dim_t* lda, const float* b, const dim_t* ldb, const float* beta, float* c,
                           const dim_t* ldc) = nullptr;
  bool found() const { return get_size && pack && compute; }
};

const PackedSgemm& packed_sgemm() {
  static const PackedSgemm f = [] {
    PackedSgemm p;
    // dnnl::impl::cpu::sgemm_pack_get_size, sgemm_pack and sgemm_compute of oneDNN 2.x.
    p.get_size = reinterpret_cast<decltype(p.get_size)>(
        dlsym(RTLD_DEFAULT, "_ZN4dnnl4impl3cpu19sgemm_pack_get_sizeEPKcS3_S3_PKlS5_S5_S5_S5_PmPb"));
    p.pack = reinterpret_cast<decltype(p.pack)>(
        dlsym(RTLD_DEFAULT, "_ZN4dnnl4impl3cpu10sgemm_packEPKcS3_S3_PKlS5_S5_S5_S5_PKfPf"));
    p.compute = reinterpret_cast<decltype(p.compute)>(
        dlsym(RTLD_DEFAULT, "_ZN4dnnl4impl3cpu13sgemm_computeEPKcS3_PKlS5_S5_PKfS5_S7_S5_S7_PfS5_"));
    return p;
  }();
  return f;
}

// The column-major problem of heed's row-major C (m x n) = A (m x k, not transposed) op(B): its
// M, N, K, the packed operand's transpose flag and leading dimensions.
struct ColumnMajor {
  dim_t m, n, k, lda, ldb;
  char trans_packed;
  static constexpr char kTransA = 'N';  // A^T, the unpacked operand, is A's storage read column-major
  ColumnMajor(bool trans_b, int64_t rows, int64_t n_, int64_t k_, int64_t lda_, int64_t ldb_)
      : m(n_), n(rows), k(k_), lda(ldb_), ldb(lda_), trans_packed(trans_b ? 'T' : 'N') {}
};

}  // namespace

bool sgemm_packed_b_available() {
  static const bool on = sgemm_on_onednn() && packed_sgemm().found();
  return on;
}

int64_t sgemm_packed_b_floats(bool trans_b, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb) {
  if (!sgemm_packed_b_available()) return 0;
  const ColumnMajor p(trans_b, m, n, k, lda, ldb);
  size_t bytes = 0;
  bool pack = false;
  // oneDNN lays the packed copy out for the calling thread's OpenMP team size, so it is sized with
  // the one thread it is packed and used with (a copy sized for two and packed for one overruns it).
  const dnnl_status_t status = call_onednn([&] {
    return packed_sgemm().get_size("A", &p.trans_packed, &ColumnMajor::kTransA, &p.m, &p.n, &p.k, &p.lda, &p.ldb,
                                   &bytes, &pack);
  });
  if (status != dnnl_success || !pack) return 0;
  return static_cast<int64_t>((bytes + sizeof(float) - 1) / sizeof(float));
}

void sgemm_pack_b(bool trans_b, int64_t m, int64_t n, int64_t k, int64_t lda, const float* b, int64_t ldb,
                  float* packed) {
  const ColumnMajor p(trans_b, m, n, k, lda, ldb);
  const dnnl_status_t status = call_onednn([&] {
    return packed_sgemm().pack("A", &p.trans_packed, &ColumnMajor::kTransA, &p.m, &p.n, &p.k, &p.lda, &p.ldb, b, packed);
  });
  HEED_CHECK(status == dnnl_success, "matmul: oneDNN refused to pack op(B) of a ", m, " x ", k, " x ", n,
             " product (status ", static_cast<int>(status), ")");
}

void sgemm_packed_b(int64_t rows_m, int64_t n, int64_t k, const float* a, int64_t lda, const float* packed,
                    int64_t ldb, float beta, float* c, int64_t ldc) {
  // (trans_b is in the packed copy: oneDNN's 'P' stands for the packed operand either way.)
  const ColumnMajor p(false, rows_m, n, k, lda, ldb);
  const dim_t ldc_ = ldc;
  const char packed_flag = 'P';
  const dnnl_status_t status = call_onednn([&] {
    return packed_sgemm().compute(&packed_flag, &ColumnMajor::kTransA, &p.m, &p.n, &p.k, packed, &p.lda, a, &p.ldb,
                                  &beta, c, &ldc_);
  });
  HEED_CHECK(status == dnnl_success, "matmul: oneDNN's packed sgemm refused a ", rows_m, " x ", k, " x ", n,
             " product (leading dimensions ", lda, ", ", ldb, ", ", ldc, "; status ", static_cast<int>(status), ")");
}

std::string openblas_kernels() {
  const char* core = openblas_get_corename();
  return core ? core : "";
}

bool openblas_kernels_fit_cpu(std::string_view core, bool avx2, bool fma) {
  if (!avx2 || !fma) return true;  // nothing newer to miss: OpenBLAS's older kernels are its best here
  auto same = [](std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
             return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
           });
  };
  for (std::string_view fits : {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids"})
    if (same(core, fits)) return true;
  return false;
}

bool fp32_products_on_onednn(std::string_view choice, bool avx512f, bool openblas_fits) {
  HEED_CHECK(choice.empty() || choice == "onednn" || choice == "openblas",
             "HEED_FP32_PRODUCTS: expected onednn or openblas (or unset), got '", choice, "'");
  // oneDNN where the CPU has AVX-512, measured faster there (docs/performance.md: the step 5-11 %
  // on a Zen 4, 12-15 % on a Sapphire Rapids-class Xeon). It was opt-in for a while after a heap
  // corruption seen only with it (`heed seq2seq` stopped by SIGINT aborted in glibc's free in ~3 %
  // of runs): a signal handled while oneDNN's kernel had moved rsp into the heap, which
  // NoSignalsDuringCall above now prevents. And oneDNN where OpenBLAS took the CPU for an older one:
  // oneDNN's AVX2 kernels ran level with OpenBLAS's AVX2 ones on a Xeon, while OpenBLAS's SSE3
  // kernels ran at a fifth of the speed. `openblas` keeps OpenBLAS.
  return choice != "openblas" && (avx512f || !openblas_fits);
}

bool sgemm_on_onednn() {
  static const bool on = [] {
    const char* choice = std::getenv("HEED_FP32_PRODUCTS");
    const std::string_view v = choice ? choice : "";
    const CpuInfo& cpu = cpu_info();
    return fp32_products_on_onednn(v, cpu.avx512f, openblas_kernels_fit_cpu(openblas_kernels(), cpu.avx2, cpu.fma));
  }();
  return on;
}

std::string fp32_product_kernel() {
  if (!sgemm_on_onednn()) return "OpenBLAS cblas_sgemm";
  const dnnl_version_t* v = dnnl_version();
  cap_onednn();
  std::string isa;  // the newest instructions oneDNN may use here: the CPU's, or HEED_MAX_CPU_ISA's
  switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41: isa = "sse41"; break;
    case dnnl_cpu_isa_avx: isa = "avx"; break;
    case dnnl_cpu_isa_avx2: isa = "avx2"; break;
    case dnnl_cpu_isa_avx512_core: isa = "avx512_core"; break;
    case dnnl_cpu_isa_avx512_core_vnni: isa = "avx512_core_vnni"; break;
    case dnnl_cpu_isa_avx512_core_bf16: isa = "avx512_core_bf16"; break;
    case dnnl_cpu_isa_avx512_core_amx: isa = "avx512_core_amx"; break;
    default: isa = "isa " + std::to_string(static_cast<int>(dnnl_get_effective_cpu_isa())); break;
  }
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch) +
         " (" + isa + ")" +
         (sgemm_packed_b_available() ? " dnnl_sgemm and packed sgemm" : " dnnl_sgemm") +
         (sgemm_at_b_available() ? ", heed's A^T B at 1 KB strides" : "");
}

void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  // dnnl_sgemm is row-major, as heed's tensors are.
  const dnnl_status_t status = call_onednn(
      [&] { return dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc); });
  HEED_CHECK(status == dnnl_success, "matmul: oneDNN's sgemm refused a ", m, " x ", k, " x ", n,
             " product (leading dimensions ", lda, ", ", ldb, ", ", ldc, "; status ", static_cast<int>(status), ")");
}

}  // namespace heed::detail
