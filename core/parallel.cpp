// Thread count: forwarded to OpenBLAS and remembered for heed's own kernels. Like matmul.cpp,
// this file includes <cblas.h>, which must stay out of every other translation unit (it clashes
// with xtensor-blas; see docs on dependencies).
#include "core/parallel.h"

#include <cblas.h>

#include <atomic>

#include "core/check.h"

namespace heed {

// 0: never set, so defer to OpenBLAS, which read OPENBLAS_NUM_THREADS when it loaded.
static std::atomic<int> g_num_threads{0};

void set_num_threads(int n) {
  HEED_CHECK(n >= 1, "set_num_threads: need at least 1 thread, got ", n);
  openblas_set_num_threads(n);
  g_num_threads.store(n, std::memory_order_relaxed);
}

int num_threads() {
  const int n = g_num_threads.load(std::memory_order_relaxed);
  return n > 0 ? n : openblas_get_num_threads();
}

}  // namespace heed
