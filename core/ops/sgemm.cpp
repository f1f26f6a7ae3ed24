// fp32 products on oneDNN's dnnl_sgemm (see core/ops/sgemm.h for why).
#include "core/ops/sgemm.h"

#include <dlfcn.h>
#include <dnnl.h>

#include <cstdlib>
#include <string_view>

#include "core/check.h"
#include "core/cpu.h"

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

}  // namespace

bool sgemm_on_onednn() {
  static const bool on = [] {
    const char* choice = std::getenv("HEED_FP32_PRODUCTS");
    const std::string_view v = choice ? choice : "";
    HEED_CHECK(v.empty() || v == "onednn" || v == "openblas",
               "HEED_FP32_PRODUCTS: expected onednn or openblas (or unset), got '", v, "'");
    // Default: OpenBLAS. oneDNN, measured faster on AVX-512 (docs/performance.md), is opt-in until
    // a heap corruption seen only with it is understood: `heed seq2seq` stopped by SIGINT early in
    // training aborted in glibc's free ("corrupted size vs. prev_size") in 4 of about 100 loaded
    // runs of tests/cli/test_cli_signals.cpp's seq2seq case, and in none of 66 on OpenBLAS.
    return v == "onednn" && cpu_info().avx512f;
  }();
  return on;
}

std::string fp32_product_kernel() {
  if (!sgemm_on_onednn()) return "OpenBLAS cblas_sgemm";
  const dnnl_version_t* v = dnnl_version();
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch) +
         " dnnl_sgemm";
}

void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  dnnl_status_t status;
  {
    const OneOpenMPThread one;
    // dnnl_sgemm is row-major, as heed's tensors are.
    status = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
  }
  HEED_CHECK(status == dnnl_success, "matmul: oneDNN's sgemm refused a ", m, " x ", k, " x ", n,
             " product (leading dimensions ", lda, ", ", ldb, ", ", ldc, "; status ", static_cast<int>(status), ")");
}

}  // namespace heed::detail
