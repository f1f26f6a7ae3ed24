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
#include <system_error>
#include <thread>
#include <utility>
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

// The pool's job hand-out. A job is `chunks` fixed chunks (their boundaries are the caller's,
// never the pool's, so results do not depend on which thread ran a chunk). The caller and the
// workers *claim* chunks from one atomic word instead of each owning a fixed one: when a
// worker is slow to start (asleep, or descheduled because the machine runs more threads than it
// has cores), the caller takes its chunk rather than waiting for it. The caller waits only for
// chunks a worker has already started. (With a fixed chunk per worker, a 2-thread tiny step took
// 119 ms against 2.2 ms on one thread at a load of 10-18 on 2 cores: docs/performance.md.)
//
// Waiting (a worker for the next job, the caller for started chunks) spins a short while with
// `pause`, then yields the core to anything else runnable, then sleeps on a condition variable:
// a training step launches many short jobs back to back, and waking a sleeping thread costs tens
// of microseconds (more on a VM), but spinning on an oversubscribed core takes time from the
// thread being waited for. Started on first use, joined at exit.
class Pool {
 public:
  static Pool& instance() {
    static Pool pool;
    return pool;
  }

  // Runs `chunks` chunks on the caller and at most `workers` workers (the thread budget less the
  // caller): a job may have more chunks than threads (parallel_for_each), and workers started for
  // a larger budget earlier stay in the pool.
  void run(int chunks, int workers, const std::function<void(int)>& chunk) {
    std::lock_guard<std::mutex> serial(run_mutex_);  // one job at a time
    ensure_workers(workers);
    job_.store(&chunk, std::memory_order_relaxed);
    remaining_.store(chunks, std::memory_order_relaxed);
    const uint32_t tag = ++tag_;
    places_.store(uint64_t(tag) << 32 | static_cast<uint32_t>(std::max(workers, 0)), std::memory_order_relaxed);
    state_.store(pack(tag, chunks, 0), std::memory_order_seq_cst);  // publishes job_ and remaining_
    if (sleeping_workers_.load(std::memory_order_seq_cst) > 0) {
      std::lock_guard<std::mutex> lock(mutex_);  // a worker between its check and its wait gets this too
      wake_.notify_all();
    }
    run_chunks(tag, &chunk, false);
    // Only chunks that workers have started are left.
    wait_until([&] { return remaining_.load(std::memory_order_seq_cst) == 0; }, caller_sleeping_, done_);
    job_.store(nullptr, std::memory_order_relaxed);
    std::exception_ptr error;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      error = std::exchange(error_, nullptr);
    }
    if (error) std::rethrow_exception(error);
  }

  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_.store(true, std::memory_order_seq_cst);
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
  }

 private:
  // state_: the job's tag (32 bits) and its unclaimed chunks [next, end) (16 bits each), in one
  // word, so a claim is one compare-and-swap that also checks which job it claims from.
  static constexpr uint64_t pack(uint32_t tag, int end, int next) {
    return uint64_t(tag) << 32 | uint64_t(end) << 16 | uint64_t(next);
  }
  static uint32_t tag_of(uint64_t s) { return static_cast<uint32_t>(s >> 32); }
  static int end_of(uint64_t s) { return static_cast<int>((s >> 16) & 0xffff); }
  static int next_of(uint64_t s) { return static_cast<int>(s & 0xffff); }

  // An unclaimed chunk of job `tag`, or -1 when every chunk is taken (or the job is over). The
  // caller claims from the first chunk up, the workers from the last one down: on two threads with
  // a chunk each, the caller runs chunk 0 and the worker chunk 1 of every job, so an op finds the
  // rows it wrote in the op before in its thread's cache (when every thread claimed from the first
  // chunk up, the worker ran chunk 0 of 3-20 % of a baby step's jobs). With more workers, which
  // one takes which of the top chunks is still a race; threads are not pinned to cores.
  int claim(uint32_t tag, bool from_top) {
    uint64_t s = state_.load(std::memory_order_acquire);
    while (tag_of(s) == tag && next_of(s) < end_of(s)) {
      const uint64_t claimed = from_top ? s - (uint64_t(1) << 16) : s + 1;
      if (state_.compare_exchange_weak(s, claimed, std::memory_order_acq_rel, std::memory_order_acquire))
        return from_top ? end_of(s) - 1 : next_of(s);
    }
    return -1;
  }

  // Runs the chunks of job `tag` this thread can claim and marks each done. A chunk's exception
  // is kept in error_ (the first one thrown) *before* the chunk counts as done, so the caller,
  // once every chunk is done, finds it; the other chunks still run.
  // `job` may be null: it is read after the first successful claim, which proves the job is still
  // running (its chunk is not done), so job_ still points at its function.
  void run_chunks(uint32_t tag, const std::function<void(int)>* job, bool from_top) {
    for (int c; (c = claim(tag, from_top)) >= 0;) {
      if (!job) job = job_.load(std::memory_order_relaxed);  // published before state_ (release)
      t_inside_chunk = true;
      try {
        (*job)(c);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!error_) error_ = std::current_exception();
      }
      t_inside_chunk = false;
      if (remaining_.fetch_sub(1, std::memory_order_seq_cst) == 1 && caller_sleeping_.load(std::memory_order_seq_cst)) {
        std::lock_guard<std::mutex> lock(mutex_);
        done_.notify_one();
      }
    }
  }

  // Waits until ready(): `pause` for up to kSpinPause, then yields the core between checks up to
  // kSpinYield, then sleeps on `cv` (flagging `sleeping` so that whoever makes ready() true
  // knows to notify). 500 us in all keeps workers awake across the serial stretches of a
  // training step (tiny: 1.69 -> 1.56 ms/iter against 50 us; docs/performance.md).
  template <class Ready, class Flag>
  void wait_until(Ready ready, Flag& sleeping, std::condition_variable& cv) {
    using clock = std::chrono::steady_clock;
    constexpr auto kSpinPause = std::chrono::microseconds(50), kSpinYield = std::chrono::microseconds(500);
    const auto start = clock::now();
    for (int i = 1; !ready(); ++i) {
      if (i % 64 != 0) {  // a clock read every 64 checks: a pause lasts ~10 to ~140 cycles by CPU
        _mm_pause();
        continue;
      }
      const auto waited = clock::now() - start;
      if (waited > kSpinYield) break;
      if (waited > kSpinPause) std::this_thread::yield();
    }
    if (ready()) return;
    std::unique_lock<std::mutex> lock(mutex_);
    // All seq_cst, here and at the notifiers (store the change, then read the flag): either the
    // notifier sees the flag and notifies under the mutex, or ready() below sees the change.
    ++sleeping;
    cv.wait(lock, ready);
    --sleeping;
  }

  void ensure_workers(int n) {
    while (static_cast<int>(workers_.size()) < n) {
      try {
        workers_.emplace_back([this] { work(); });
      } catch (const std::system_error& e) {  // a set_num_threads(20000) past what the system gives
        detail::fail("cannot start thread ", workers_.size() + 2, " of the ", n + 1, " that set_num_threads asked for (",
                     e.what(), "): ask for fewer");
      }
    }
  }

  // Whether this worker may join job `tag`: each job admits `workers` of them (run()). places_
  // holds the job's tag beside the count, so a worker late for one job takes no place in the next.
  bool take_place(uint32_t tag) {
    uint64_t s = places_.load(std::memory_order_acquire);
    while (static_cast<uint32_t>(s >> 32) == tag && (s & 0xffffffffu) > 0)
      if (places_.compare_exchange_weak(s, s - 1, std::memory_order_acq_rel, std::memory_order_acquire)) return true;
    return false;
  }

  void work() {
    uint32_t seen = tag_of(state_.load(std::memory_order_acquire));
    for (;;) {
      wait_until([&] { return stop_.load(std::memory_order_seq_cst) || tag_of(state_.load(std::memory_order_seq_cst)) != seen; },
                 sleeping_workers_, wake_);
      if (stop_.load(std::memory_order_acquire)) return;
      seen = tag_of(state_.load(std::memory_order_acquire));
      if (take_place(seen)) run_chunks(seen, nullptr, true);
    }
  }

  std::mutex run_mutex_, mutex_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> workers_;
  std::atomic<const std::function<void(int)>*> job_{nullptr};
  std::atomic<int> remaining_{0};   // chunks of the current job not yet finished
  std::atomic<uint64_t> state_{0};  // pack(tag, end, next): the unclaimed chunks
  std::atomic<uint64_t> places_{0};  // tag << 32 | the workers job `tag` still admits
  uint32_t tag_ = 0;                // the last job's tag (only run() touches it)
  std::atomic<int> sleeping_workers_{0}, caller_sleeping_{0};
  std::atomic<bool> stop_{false};
  std::exception_ptr error_;  // the first exception a chunk of the current job threw, under mutex_
};

}  // namespace

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int64_t by_grain = std::max<int64_t>(1, n / std::max<int64_t>(grain, 1));
  // At most 2^16 - 1 chunks: the pool's claim counter is 16 bits.
  const int chunks = static_cast<int>(std::min<int64_t>({num_threads(), by_grain, n, 0xffff}));
  if (chunks <= 1 || t_inside_chunk) {
    fn(0, n);
    return;
  }
  const std::function<void(int)> chunk = [&](int c) {
    const int64_t begin = n * c / chunks, end = n * (c + 1) / chunks;
    if (begin < end) fn(begin, end);
  };
  Pool::instance().run(chunks, chunks - 1, chunk);
}

void parallel_for_each(int64_t n, const std::function<void(int64_t)>& fn) {
  if (n <= 0) return;
  HEED_CHECK(n <= 0xffff, "parallel_for_each: ", n, " items, more than the pool's 65535 chunks");
  if (n == 1 || num_threads() <= 1 || t_inside_chunk) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  Pool::instance().run(static_cast<int>(n), static_cast<int>(std::min<int64_t>(n, num_threads())) - 1, [&](int i) { fn(i); });
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
