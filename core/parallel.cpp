// Thread count and the worker pool. Like matmul.cpp, this file includes <cblas.h>, which must stay
// out of every other translation unit (it clashes with xtensor-blas: docs/platform.md).
#include "core/parallel.h"

#include <cblas.h>

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "core/check.h"

namespace heed {

// heed's thread count; 0 until first needed. OpenBLAS itself always runs single-threaded: heed
// splits products over its own pool (matmul.cpp), so the two never wait on or spin against each
// other, and a whole GEMM can run on one core beside another.
static std::atomic<int> g_num_threads{0};

static int initial_threads() {
  // What OpenBLAS would have used: OPENBLAS_NUM_THREADS (read when it loaded) or every core.
  static const int n = [] {
    const int blas = openblas_get_num_threads();
    openblas_set_num_threads(1);
    return std::max(1, blas);
  }();
  return n;
}

void set_num_threads(int n) {
  HEED_CHECK(n >= 1, "set_num_threads: need at least 1 thread, got ", n);
  initial_threads();  // takes OpenBLAS's count (and pins it to 1) before it is overridden
  g_num_threads.store(n, std::memory_order_relaxed);
}

int num_threads() {
  const int n = g_num_threads.load(std::memory_order_relaxed);
  return n > 0 ? n : initial_threads();
}

namespace {

thread_local bool t_inside_chunk = false;

// Workers wait for a new generation of work; each takes chunk (its index + 1) of the current
// job. A training step launches many short jobs back to back, and waking a sleeping thread costs
// tens of microseconds (more on a VM whose other vCPU is idle), so workers and the caller first
// spin briefly on the atomics, then sleep on condition variables. Started on first use, joined
// at exit.
class Pool {
 public:
  static Pool& instance() {
    static Pool pool;
    return pool;
  }

  void run(int chunks, const std::function<void(int)>& chunk) {
    std::lock_guard<std::mutex> serial(run_mutex_);  // one job at a time
    ensure_workers(chunks - 1);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = &chunk;
      job_chunks_ = chunks;
      pending_.store(chunks - 1, std::memory_order_relaxed);
      error_ = nullptr;
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    std::exception_ptr mine;
    try {
      t_inside_chunk = true;
      chunk(0);
    } catch (...) {
      mine = std::current_exception();
    }
    t_inside_chunk = false;
    spin_while([&] { return pending_.load(std::memory_order_acquire) != 0; });
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
    job_ = nullptr;
    if (mine) std::rethrow_exception(mine);
    if (error_) std::rethrow_exception(error_);
  }

  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_.store(true, std::memory_order_release);
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
  }

 private:
  // Spins while busy() holds, for at most 500 microseconds (a clock read every 64 pauses: a
  // pause lasts from ~10 to ~140 cycles depending on the CPU). Long enough that workers stay
  // awake across the serial stretches of a training step (tiny: 1.69 -> 1.56 ms/iter against
  // 50 us; docs/performance.md), short enough that an idle pool soon stops using the CPU.
  template <class Busy>
  static void spin_while(Busy busy) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(500);
    for (int i = 1; busy(); ++i) {
      _mm_pause();
      if (i % 64 == 0 && std::chrono::steady_clock::now() > deadline) return;
    }
  }

  void ensure_workers(int n) {
    while (static_cast<int>(workers_.size()) < n) {
      const int index = static_cast<int>(workers_.size());
      workers_.emplace_back([this, index] { work(index); });
    }
  }

  void work(int index) {
    uint64_t seen = 0;
    for (;;) {
      const std::function<void(int)>* job;
      auto idle = [&] {
        return !stop_.load(std::memory_order_acquire) && generation_.load(std::memory_order_acquire) == seen;
      };
      spin_while(idle);
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return !idle(); });
        if (stop_.load(std::memory_order_relaxed)) return;
        seen = generation_.load(std::memory_order_relaxed);
        if (index + 1 >= job_chunks_) continue;  // this job needs fewer workers
        job = job_;
      }
      std::exception_ptr err;
      try {
        t_inside_chunk = true;
        (*job)(index + 1);
      } catch (...) {
        err = std::current_exception();
      }
      t_inside_chunk = false;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (err && !error_) error_ = err;
        if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) done_.notify_one();
      }
    }
  }

  std::mutex run_mutex_, mutex_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> workers_;
  const std::function<void(int)>* job_ = nullptr;
  int job_chunks_ = 0;
  std::atomic<int> pending_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stop_{false};
  std::exception_ptr error_;
};

}  // namespace

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int64_t by_grain = std::max<int64_t>(1, n / std::max<int64_t>(grain, 1));
  const int chunks = static_cast<int>(std::min<int64_t>({num_threads(), by_grain, n}));
  if (chunks <= 1 || t_inside_chunk) {
    fn(0, n);
    return;
  }
  const std::function<void(int)> chunk = [&](int c) {
    const int64_t begin = n * c / chunks, end = n * (c + 1) / chunks;
    if (begin < end) fn(begin, end);
  };
  Pool::instance().run(chunks, chunk);
}

// Both forms of parallel_for_blocks: the arrays laid end to end, split into `shares` equal runs
// of elements (each at least min_parallel); share s takes the fixed blocks that begin in its run.
// Which share runs a block never changes the block, so neither does any per-block result.
static void for_blocks(const int64_t* lengths, size_t arrays, int64_t block, int64_t min_parallel,
                       const std::function<void(size_t, int64_t, int64_t)>& fn) {
  block = std::max<int64_t>(block, 1);
  int64_t total = 0;
  for (size_t a = 0; a < arrays; ++a) total += std::max<int64_t>(lengths[a], 0);
  if (total == 0) return;
  const int64_t shares = std::clamp<int64_t>(total / std::max<int64_t>(min_parallel, 1), 1, num_threads());
  parallel_for(shares, 1, [&](int64_t s0, int64_t s1) {
    const int64_t lo = total * s0 / shares, hi = total * s1 / shares;
    int64_t start = 0;  // where array a begins, end to end
    for (size_t a = 0; a < arrays && start < hi; start += std::max<int64_t>(lengths[a], 0), ++a) {
      // The blocks of array a that begin in [lo, hi).
      const int64_t first = std::max<int64_t>(0, (lo - start + block - 1) / block) * block;
      for (int64_t b = first; b < lengths[a] && start + b < hi; b += block) fn(a, b, std::min(lengths[a], b + block));
    }
  });
}

void parallel_for_blocks(int64_t n, int64_t block, int64_t min_parallel,
                         const std::function<void(int64_t, int64_t)>& fn) {
  for_blocks(&n, 1, block, min_parallel, [&](size_t, int64_t b, int64_t e) { fn(b, e); });
}

void parallel_for_blocks(const std::vector<int64_t>& lengths, int64_t block, int64_t min_parallel,
                         const std::function<void(size_t, int64_t, int64_t)>& fn) {
  for_blocks(lengths.data(), lengths.size(), block, min_parallel, fn);
}

}  // namespace heed
