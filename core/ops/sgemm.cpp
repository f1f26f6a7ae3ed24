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

// Debian's libdnnl runs a call on OpenMP (libgomp, which it loads) with OpenMP's default team,
// one thread per core. heed's pool already splits every product over the cores, so each thread
// that calls oneDNN asks for a team of one, once: otherwise each piece would start a team of its
// own and oversubscribe the cores. Looked up with dlsym so that heed compiles without -fopenmp
// and links no OpenMP runtime itself (the clang build of the fuzzers has none); a oneDNN built on
// another runtime has no such symbol, and then nothing is set.
void one_openmp_thread_on_this_thread() {
  thread_local const bool done = [] {
    using SetNumThreads = void (*)(int);
    if (auto set = reinterpret_cast<SetNumThreads>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"))) set(1);
    return true;
  }();
  (void)done;
}

}  // namespace

bool sgemm_on_onednn() {
  static const bool on = [] {
    const char* choice = std::getenv("HEED_FP32_PRODUCTS");
    const std::string_view v = choice ? choice : "";
    HEED_CHECK(v.empty() || v == "onednn" || v == "openblas",
               "HEED_FP32_PRODUCTS: expected onednn or openblas (or unset), got '", v, "'");
    return v.empty() ? cpu_info().avx512f : v == "onednn";
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
  one_openmp_thread_on_this_thread();
  // dnnl_sgemm is row-major, as heed's tensors are.
  const dnnl_status_t status =
      dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
  HEED_CHECK(status == dnnl_success, "matmul: oneDNN's sgemm refused a ", m, " x ", k, " x ", n,
             " product (leading dimensions ", lda, ", ", ldb, ", ", ldc, "; status ", static_cast<int>(status), ")");
}

}  // namespace heed::detail
