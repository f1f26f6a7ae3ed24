// OpenBLAS alone, one thread, at the small config's Linear shapes: what one core gets from
// cblas_sgemm for the products heed's training step calls (forward y = x W^T, and the backward's
// dx = g W and dw = g^T x), beta = 0 as heed calls them. The ceiling for heed's linear layers,
// which docs/performance.md compares them against.
//   ./build/heed_bench_kernels --benchmark_filter=sgemm
// <cblas.h> is kept to this file (it clashes with xtensor-blas; see docs on dependencies).
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <algorithm>
#include <string>
#include <vector>

namespace {

struct Shape {
  const char* name;
  int rows, in, out;  // x (rows, in), W (out, in)
};
// B T = 16 * 256 rows; C = 384.
constexpr Shape kShapes[] = {{"c_attn", 4096, 384, 1152}, {"attn_c_proj", 4096, 384, 384},
                             {"c_fc", 4096, 384, 1536}, {"mlp_c_proj", 4096, 1536, 384}};

void BM_sgemm(benchmark::State& state) {
  openblas_set_num_threads(1);
  const Shape& s = kShapes[state.range(0)];
  const int product = static_cast<int>(state.range(1));  // 0: y = x W^T, 1: dx = g W, 2: dw = g^T x
  std::vector<float> x(size_t(s.rows) * s.in, 0.5f), w(size_t(s.out) * s.in, 0.25f), g(size_t(s.rows) * s.out, 0.1f);
  std::vector<float> c(size_t(s.rows) * std::max(s.in, s.out) + size_t(s.out) * s.in);
  for (auto _ : state) {
    if (product == 0) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s.rows, s.out, s.in, 1, x.data(), s.in, w.data(), s.in, 0,
                  c.data(), s.out);
    } else if (product == 1) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.rows, s.in, s.out, 1, g.data(), s.out, w.data(), s.in, 0,
                  c.data(), s.in);
    } else {
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, s.out, s.in, s.rows, 1, g.data(), s.out, x.data(), s.in, 0,
                  c.data(), s.in);
    }
    benchmark::DoNotOptimize(c.data());
  }
  state.SetLabel(std::string(s.name) + (product == 0 ? " y=xW^T" : product == 1 ? " dx=gW" : " dw=g^Tx"));
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * s.rows * s.in * s.out, benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}
BENCHMARK(BM_sgemm)->ArgsProduct({{0, 1, 2, 3}, {0, 1, 2}})->ArgNames({"shape", "product"})->Unit(benchmark::kMillisecond);

}  // namespace
