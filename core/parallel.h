// heed: threads. One setting drives every matrix product and heed's own kernels, so a run can be
// pinned to a core budget in one place. All of it runs on one small pool of worker threads that
// spin briefly, then yield, then sleep, between jobs; OpenBLAS is called single-threaded from
// inside it.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace heed {

/// Sets the threads heed uses for matrix products and its own kernels (n >= 1); throws
/// heed::Error otherwise. OpenBLAS is kept single-threaded: heed splits products itself.
void set_num_threads(int n);
/// The thread count last set, or, if never set, OPENBLAS_NUM_THREADS (or the core count).
int num_threads();

/// Runs fn(begin, end) over [0, n) split into at most num_threads() contiguous chunks, and
/// returns when all are done. The chunks' boundaries depend only on n, grain and the thread
/// count; the calling thread and the workers claim chunks as they come free, so a worker that is
/// slow to start (on a busy machine) costs the caller its chunk's time, not a wait. Work smaller than `grain` items
/// per chunk, or a call from inside a chunk, runs inline on the caller. An exception thrown by a
/// chunk is rethrown here (the first one, after every chunk has finished).
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t begin, int64_t end)>& fn);

/// Runs fn(i) for every i in [0, n), each index its own chunk: the calling thread and the workers
/// each take the next one as they come free, so a thread whose core the OS or the host slows runs
/// fewer. For items of a tenth of a millisecond or more, whose number the caller fixed from the
/// work (an item's result must not depend on the thread that runs it): the pieces of a product
/// cut finer than the cores (core/ops/matmul.cpp). At most 65535 items; a call from inside a chunk
/// runs them inline. An exception is rethrown as in parallel_for.
void parallel_for_each(int64_t n, const std::function<void(int64_t i)>& fn);

/// Calls fn(begin, end) once for every fixed block [k block, min(n, (k + 1) block)) of [0, n),
/// the blocks spread over the threads, each thread's share at least min_parallel elements (so
/// n < 2 min_parallel stays on the caller's thread). Block boundaries never depend on the thread
/// count, so neither do per-block results: vector-or-tail paths, or partial sums that the
/// caller adds up in block order.
void parallel_for_blocks(int64_t n, int64_t block, int64_t min_parallel,
                         const std::function<void(int64_t begin, int64_t end)>& fn);

/// parallel_for_blocks over several arrays in one job: fn(array, begin, end) for every fixed
/// block of every array, where array `a` has lengths[a] elements. The threads get equal shares of
/// the total, each at least min_parallel elements. For the optimizer's many small parameters,
/// which one at a time would each be too small to split.
void parallel_for_blocks(const std::vector<int64_t>& lengths, int64_t block, int64_t min_parallel,
                         const std::function<void(size_t array, int64_t begin, int64_t end)>& fn);

}  // namespace heed
