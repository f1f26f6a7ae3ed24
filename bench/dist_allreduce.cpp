// heed_bench_allreduce: the time to reduce a gradient across the ranks of an MPI job, heed's
// fixed-order reduction (dist::GradReducer: a reduce-scatter whose additions follow the sum
// tree, then an all-gather) against Open MPI's MPI_Allreduce, for gradients of several sizes.
// The numbers docs/scaling.md projects multi-host efficiency from.
//
//   mpirun -np 2 build/heed_bench_allreduce [floats...]     (default: 1M and 10.7M, small's size)
//
// Each size: one "parameter" of that many floats whose gradient a trivial backward fills
// (loss = sum(w * c)), 2 warm-up and 10 timed reductions, medians printed by rank 0 as JSON.
// Then the bits: whether heed's result is the tree sum of the ranks' gradients over N (it must
// be), and in how many elements MPI_Allreduce's sum differs from the rank-ordered one
// ((c0 + c1) + c2 ...), which it does not promise.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/heed.h"
#include "dist/grad_reducer.h"
#include "dist/sum_tree.h"
#include "dist/runtime.h"

using namespace heed;

namespace {

double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  dist::Runtime runtime;
  dist::Communicator& world = runtime.world();
  std::vector<int64_t> sizes;
  for (int i = 1; i < argc; ++i) sizes.push_back(std::atoll(argv[i]));
  if (sizes.empty()) sizes = {1 << 20, 10'740'000};
  const int N = world.size();
  for (int64_t n : sizes) {
    Generator gen(world.rank() + 1);
    Tensor w = Tensor::randn({n}, gen).requires_grad_();
    const Tensor c = Tensor::randn({n}, gen);
    dist::GradReducer reducer({w}, world, {.micro_batches = N, .overlap = false, .bucket_bytes = int64_t(4) << 20});
    std::vector<double> heed_s, mpi_s;
    std::vector<float> out(n), heed_result;
    for (int it = 0; it < 12; ++it) {
      reducer.backward(sum(mul(w, c)));  // grad = c
      // The backward's own time is not the reduction's: start the clock when every rank is done.
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = now_s();
      reducer.finish_step();
      MPI_Barrier(MPI_COMM_WORLD);
      if (it >= 2) heed_s.push_back(now_s() - t0);
      heed_result = w.grad().to_vector<float>();
      w.zero_grad();
      t0 = now_s();
      MPI_Allreduce(c.data<float>(), out.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      MPI_Barrier(MPI_COMM_WORLD);
      if (it >= 2) mpi_s.push_back(now_s() - t0);
    }
    std::vector<float> all(static_cast<size_t>(n) * N), tree(n);
    MPI_Allgather(c.data<float>(), static_cast<int>(n), MPI_FLOAT, all.data(), static_cast<int>(n), MPI_FLOAT,
                  MPI_COMM_WORLD);
    std::vector<dist::Span> leaves;
    std::vector<const float*> sources;
    for (int r = 0; r < N; ++r) {
      leaves.push_back({r, r + 1});
      sources.push_back(all.data() + static_cast<size_t>(r) * n);
    }
    dist::tree_sum(dist::plan_merges(dist::SumTree(N), leaves), sources, n, tree.data(), static_cast<float>(N));
    int64_t differ = 0;
    for (int64_t i = 0; i < n; ++i) {
      float ordered = 0;
      for (int r = 0; r < N; ++r) ordered += sources[r][i];
      differ += ordered != out[i];
    }
    if (world.rank() == 0)
      std::printf("{\"ranks\": %d, \"floats\": %lld, \"buckets\": %zu, \"heed_ms\": %.2f, \"mpi_allreduce_ms\": %.2f, "
                  "\"heed_is_tree_sum\": %s, \"allreduce_differs_from_rank_order_pct\": %.1f}\n",
                  N, (long long)n, reducer.bucket_count(), median(heed_s) * 1e3, median(mpi_s) * 1e3,
                  heed_result == tree ? "true" : "false", 100.0 * differ / n);
    std::fflush(stdout);
  }
  return 0;
}
