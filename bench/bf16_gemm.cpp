// bf16 matrix products (core/ops/gemm_bf16.h) at the products of a GPT training step, against
// the measured bf16 peak (core/cpu.h), OpenBLAS's fp32 sgemm at the same shapes, and, when built
// with it, oneDNN's bf16 matmul. Google Benchmark; the CPU's description (cpu_json) is printed in
// the context. Counters: GFLOP/s, and peak: that rate over threads x the per-core bf16 peak.
//
//   ./build/heed_bench_bf16 --benchmark_filter='linear/small'           # small's Linear products
//   ./build/heed_bench_bf16 --benchmark_filter='attention/small'
//   ./build/heed_bench_bf16 --benchmark_filter='ceiling'                # operands in cache
//   ./build/heed_bench_bf16 --benchmark_filter='/heed/'                 # one implementation
//
// Linear products per layer: fwd y = x W^T (rows x out x in), dx = dy W (rows x in x out),
// dw += dy^T x (out x in x rows, beta 1). Attention products per head (T x T scores, head_dim hd,
// causal): scores = q k^T, pv = p v, dp = dy v^T, dq = ds k, dk = ds^T q, dv = p^T dy; heed skips
// the masked half (and counts only the useful, causal multiply-adds, as for the others).
// Implementations:
//   heed:    gemm_bf16, fp32 in and out (inputs rounded to bf16 when packed), split over heed's
//            pool (attention: a head per chunk);
//   sgemm:   cblas_sgemm (fp32), single-threaded OpenBLAS split over heed's pool as heed's fp32
//            matmul splits it (the longer side of C, or heads, in chunks of >= 2^19 multiply-adds);
//   dnnl:    oneDNN matmul on bf16 inputs converted beforehand (the matmul alone), fp32 out, its
//            own OpenMP threads;
//   dnnl+cvt: the same plus the fp32 -> bf16 reorders of both inputs on every call, which is what
//            a training step must do (weights and activations change every step).
// Quote figures from one run only, alternating with nothing else running (the machines are shared):
// bench/bf16_compare.py runs every benchmark in its own process, the implementations of a product
// back to back in rotating order, and reports the best of several rounds.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/cpu.h"
#include "core/ops/gemm_bf16.h"
#include "core/parallel.h"
#include "core/random.h"

#ifdef HEED_BENCH_DNNL
#include <omp.h>

#include <dnnl.hpp>
#endif

using namespace heed;

namespace {

struct Config {
  const char* name;
  int64_t B, T, C, nh;
};
// bench/compare.py's configs: tiny, baby (heed's default), small.
constexpr Config kConfigs[] = {{"tiny", 8, 32, 64, 2}, {"baby", 12, 64, 128, 4}, {"small", 16, 256, 384, 6}};

// One product C (m x n) = op(A) (m x k) op(B) (k x n) + beta C, row-major, as gemm_bf16 takes it.
struct Product {
  std::string label;
  bool ta, tb;
  int64_t m, n, k;
  float beta;
  double useful_macs;  // what the counters count
};

std::vector<Product> linear_products(const Config& c) {
  const int64_t rows = c.B * c.T, C = c.C;
  struct Layer {
    const char* name;
    int64_t in, out;
  };
  const Layer layers[] = {{"c_attn", C, 3 * C}, {"attn_c_proj", C, C}, {"c_fc", C, 4 * C}, {"mlp_c_proj", 4 * C, C}};
  std::vector<Product> ps;
  for (const Layer& l : layers) {
    const double macs = static_cast<double>(rows) * l.in * l.out;
    ps.push_back({std::string(l.name) + "/fwd", false, true, rows, l.out, l.in, 0.0f, macs});
    ps.push_back({std::string(l.name) + "/dx", false, false, rows, l.in, l.out, 0.0f, macs});
    ps.push_back({std::string(l.name) + "/dw", true, false, l.out, l.in, rows, 1.0f, macs});
  }
  return ps;
}

// Attention's six products for one head (the batch is B x nh heads), with heed's causal skip.
struct HeadProduct {
  Product p;
  Bf16Skip skip;
};

std::vector<HeadProduct> attention_products(const Config& c) {
  const int64_t T = c.T, hd = c.C / c.nh;
  const double useful = static_cast<double>(T) * (T + 1) / 2 * hd;  // causal multiply-adds
  return {{{"scores", false, true, T, T, hd, 0.0f, useful}, Bf16Skip::c_above},
          {{"pv", false, false, T, hd, T, 0.0f, useful}, Bf16Skip::a_above},
          {{"dp", false, true, T, T, hd, 0.0f, useful}, Bf16Skip::c_above},
          {{"dq", false, false, T, hd, T, 0.0f, useful}, Bf16Skip::a_above},
          {{"dk", true, false, T, hd, T, 0.0f, useful}, Bf16Skip::a_below},
          {{"dv", true, false, T, hd, T, 0.0f, useful}, Bf16Skip::a_below}};
}

// 64-byte aligned floats, as heed's tensor storage is (an unaligned C costs the kernels a split
// store per vector).
class AlignedFloats {
 public:
  explicit AlignedFloats(int64_t n = 0)
      : data_(static_cast<float*>(std::aligned_alloc(64, static_cast<size_t>((n * 4 + 63) / 64 * 64)))), n_(n) {}
  float* data() { return data_.get(); }
  int64_t size() const { return n_; }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> data_;
  int64_t n_;
};

// Operands for `count` products of one shape, each contiguous, with normal(0, 1) entries.
struct Operands {
  int64_t lda, ldb, ldc, sa, sb, sc;  // leading dimensions and per-product strides
  AlignedFloats a, b, c;
  Operands(const Product& p, int64_t count)
      : lda(p.ta ? p.m : p.k), ldb(p.tb ? p.k : p.n), ldc(p.n), sa(p.m * p.k), sb(p.k * p.n), sc(p.m * p.n),
        a(sa * count), b(sb * count), c(sc * count) {
    Generator gen(7);
    for (AlignedFloats* v : {&a, &b, &c})
      for (int64_t i = 0; i < v->size(); ++i) v->data()[i] = static_cast<float>(gen.normal());
  }
};

// Times each iteration's body, for the fraction of the peak.
class Stopwatch {
 public:
  template <class Body>
  void time(Body body) {
    const auto t0 = std::chrono::steady_clock::now();
    body();
    seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  double seconds() const { return seconds_; }

 private:
  double seconds_ = 0;
};

// GFLOP/s of `macs` multiply-adds per iteration, and "peak": that rate over threads x the
// measured per-core bf16 peak (AMX's where the CPU has it).
void set_counters(benchmark::State& state, double macs, int threads, const Stopwatch& watch) {
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * macs, benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
  const double peak = cpu_peaks().bf16_gflops() * 1e9 * threads;
  if (peak > 0 && watch.seconds() > 0)
    state.counters["peak"] = 2.0 * macs * static_cast<double>(state.iterations()) / watch.seconds() / peak;
}

// ---- heed ----
void run_heed(benchmark::State& state, const Product& p, int64_t heads, Bf16Skip skip, int threads, Bf16Kernel kernel) {
  set_num_threads(threads);
  Operands o(p, heads);
  GemmBf16Options opt;
  opt.kernel = kernel;
  opt.skip = skip;
  opt.diagonal = 0;  // square causal heads: Tk - Tq = 0
  Stopwatch watch;
  for (auto _ : state) {
    watch.time([&] {
      if (heads == 1) {
        gemm_bf16(p.ta, p.tb, p.m, p.n, p.k, o.a.data(), o.lda, o.b.data(), o.ldb, p.beta, o.c.data(), o.ldc, opt);
      } else {
        gemm_bf16_batched(1, heads, p.m, p.n, p.k, {o.a.data(), o.lda, p.ta, 0, o.sa},
                          {o.b.data(), o.ldb, p.tb, 0, o.sb}, p.beta, {o.c.data(), o.ldc, 0, o.sc}, opt);
      }
    });
    benchmark::DoNotOptimize(o.c.data());
  }
  set_counters(state, p.useful_macs * heads, threads, watch);
}

// ---- OpenBLAS sgemm, split as heed's fp32 matmul splits it ----
void run_sgemm(benchmark::State& state, const Product& p, int64_t heads, int threads) {
  set_num_threads(threads);  // also keeps OpenBLAS itself single-threaded (core/parallel.h)
  Operands o(p, heads);
  const auto ta = p.ta ? CblasTrans : CblasNoTrans, tb = p.tb ? CblasTrans : CblasNoTrans;
  // Chunks of at least 2^19 multiply-adds, the grain of heed's fp32 matmul (core/ops/matmul.cpp).
  auto grain = [](int64_t macs_per_item) { return std::max<int64_t>(1, (int64_t(1) << 19) / std::max<int64_t>(macs_per_item, 1)); };
  auto call = [&](int64_t h, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    const float* pa = o.a.data() + h * o.sa + (p.ta ? m0 : m0 * o.lda);
    const float* pb = o.b.data() + h * o.sb + (p.tb ? n0 * o.ldb : n0);
    cblas_sgemm(CblasRowMajor, ta, tb, static_cast<int>(m1 - m0), static_cast<int>(n1 - n0), static_cast<int>(p.k), 1.0f,
                pa, static_cast<int>(o.lda), pb, static_cast<int>(o.ldb), p.beta, o.c.data() + h * o.sc + m0 * o.ldc + n0,
                static_cast<int>(o.ldc));
  };
  Stopwatch watch;
  for (auto _ : state) {
    watch.time([&] {
      if (heads > 1) {
        parallel_for(heads, grain(p.m * p.n * p.k), [&](int64_t h0, int64_t h1) {
          for (int64_t h = h0; h < h1; ++h) call(h, 0, p.m, 0, p.n);
        });
      } else if (p.m >= p.n) {
        parallel_for(p.m, grain(p.n * p.k), [&](int64_t r0, int64_t r1) { call(0, r0, r1, 0, p.n); });
      } else {
        parallel_for(p.n, grain(p.m * p.k), [&](int64_t c0, int64_t c1) { call(0, 0, p.m, c0, c1); });
      }
    });
    benchmark::DoNotOptimize(o.c.data());
  }
  set_counters(state, p.useful_macs * heads, threads, watch);
}

#ifdef HEED_BENCH_DNNL
// ---- oneDNN matmul, bf16 in, fp32 out; `convert`: the fp32 -> bf16 reorders inside the loop ----
void run_dnnl(benchmark::State& state, const Product& p, int64_t heads, int threads, bool convert) {
  using dt = dnnl::memory::data_type;
  using dims = dnnl::memory::dims;
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  omp_set_num_threads(threads);
  Operands o(p, heads);
  // Strides of op(A) (m x k), op(B) (k x n) and C, with a leading batch axis of heads.
  const dims a_dims{heads, p.m, p.k}, b_dims{heads, p.k, p.n}, c_dims{heads, p.m, p.n};
  const dims a_str{o.sa, p.ta ? 1 : o.lda, p.ta ? o.lda : 1}, b_str{o.sb, p.tb ? 1 : o.ldb, p.tb ? o.ldb : 1},
      c_str{o.sc, o.ldc, 1};
  const dnnl::memory::desc a32(a_dims, dt::f32, a_str), b32(b_dims, dt::f32, b_str), c32(c_dims, dt::f32, c_str);
  const dnnl::memory::desc a16(a_dims, dt::bf16, a_str), b16(b_dims, dt::bf16, b_str);
  dnnl::primitive_attr attr;
  if (p.beta == 1.0f) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a16, b16, c32), attr, engine);
  dnnl::memory ma32(a32, engine, o.a.data()), mb32(b32, engine, o.b.data()), mc(c32, engine, o.c.data());
  dnnl::memory ma16(a16, engine), mb16(b16, engine);
  dnnl::reorder cvt_a(ma32, ma16), cvt_b(mb32, mb16);
  cvt_a.execute(stream, ma32, ma16);
  cvt_b.execute(stream, mb32, mb16);
  dnnl::matmul mm(pd);
  Stopwatch watch;
  for (auto _ : state) {
    watch.time([&] {
      if (convert) {
        cvt_a.execute(stream, ma32, ma16);
        cvt_b.execute(stream, mb32, mb16);
      }
      mm.execute(stream, {{DNNL_ARG_SRC, ma16}, {DNNL_ARG_WEIGHTS, mb16}, {DNNL_ARG_DST, mc}});
      stream.wait();
    });
  }
  state.SetLabel(pd.impl_info_str());
  set_counters(state, p.useful_macs * heads, threads, watch);
}
#endif

// Registers one benchmark per implementation, product and thread count, named
// <group>/<config>/<product>/<implementation>/threads:<n>.
void register_all() {
  // The ceiling: a product whose operands stay in L2 (fp32 A 192 KB, B 256 KB), packing included.
  const Product in_cache{"in_cache", false, false, 96, 128, 512, 0.0f, 96.0 * 128 * 512};
  benchmark::RegisterBenchmark("ceiling/in_cache/heed/threads:1", [in_cache](benchmark::State& s) {
    run_heed(s, in_cache, 1, Bf16Skip::none, 1, Bf16Kernel::automatic);
  })->Unit(benchmark::kMicrosecond)->UseRealTime();
#ifdef HEED_BENCH_DNNL
  for (bool convert : {false, true})
    benchmark::RegisterBenchmark(convert ? "ceiling/in_cache/dnnl+cvt/threads:1" : "ceiling/in_cache/dnnl/threads:1",
                                 [in_cache, convert](benchmark::State& s) { run_dnnl(s, in_cache, 1, 1, convert); })
        ->Unit(benchmark::kMicrosecond)->UseRealTime();
#endif
  const std::vector<int> thread_counts{1, 2};
  for (const Config& c : kConfigs) {
    for (const Product& p : linear_products(c)) {
      const std::string base = std::string("linear/") + c.name + "/" + p.label + "/";
      for (int t : thread_counts) {
        const std::string suffix = "/threads:" + std::to_string(t);
        benchmark::RegisterBenchmark((base + "heed" + suffix).c_str(), [p, t](benchmark::State& s) {
          run_heed(s, p, 1, Bf16Skip::none, t, Bf16Kernel::automatic);
        })->Unit(benchmark::kMillisecond)->UseRealTime();
        benchmark::RegisterBenchmark((base + "sgemm" + suffix).c_str(), [p, t](benchmark::State& s) {
          run_sgemm(s, p, 1, t);
        })->Unit(benchmark::kMillisecond)->UseRealTime();
#ifdef HEED_BENCH_DNNL
        for (bool convert : {false, true})
          benchmark::RegisterBenchmark((base + (convert ? "dnnl+cvt" : "dnnl") + suffix).c_str(),
                                       [p, t, convert](benchmark::State& s) { run_dnnl(s, p, 1, t, convert); })
              ->Unit(benchmark::kMillisecond)->UseRealTime();
#endif
      }
      if (std::string(c.name) == "small")  // the fallback's speed, once per shape
        benchmark::RegisterBenchmark((base + "heed-emulated/threads:1").c_str(), [p](benchmark::State& s) {
          run_heed(s, p, 1, Bf16Skip::none, 1, Bf16Kernel::emulated);
        })->Unit(benchmark::kMillisecond)->UseRealTime();
    }
    const int64_t heads = c.B * c.nh;
    for (const HeadProduct& hp : attention_products(c)) {
      const std::string base = std::string("attention/") + c.name + "/" + hp.p.label + "/";
      for (int t : thread_counts) {
        const std::string suffix = "/threads:" + std::to_string(t);
        benchmark::RegisterBenchmark((base + "heed" + suffix).c_str(), [hp, heads, t](benchmark::State& s) {
          run_heed(s, hp.p, heads, hp.skip, t, Bf16Kernel::automatic);
        })->Unit(benchmark::kMillisecond)->UseRealTime();
        benchmark::RegisterBenchmark((base + "sgemm" + suffix).c_str(), [hp, heads, t](benchmark::State& s) {
          run_sgemm(s, hp.p, heads, t);
        })->Unit(benchmark::kMillisecond)->UseRealTime();
#ifdef HEED_BENCH_DNNL
        for (bool convert : {false, true})
          benchmark::RegisterBenchmark((base + (convert ? "dnnl+cvt" : "dnnl") + suffix).c_str(),
                                       [hp, heads, t, convert](benchmark::State& s) { run_dnnl(s, hp.p, heads, t, convert); })
              ->Unit(benchmark::kMillisecond)->UseRealTime();
#endif
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::AddCustomContext("heed_cpu", cpu_json());
  const GemmBf16Blocking small_fwd = gemm_bf16_blocking(4096, 1152, 384, false);
  benchmark::AddCustomContext("heed_blocking_4096x1152x384",
                              "mr " + std::to_string(small_fwd.mr) + " nr " + std::to_string(small_fwd.nr) + " kc " +
                                  std::to_string(small_fwd.kc) + " mc " + std::to_string(small_fwd.mc) + " nc " +
                                  std::to_string(small_fwd.nc));
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
