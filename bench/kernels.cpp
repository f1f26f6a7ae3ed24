// Kernel benchmarks (Google Benchmark): the ops a GPT training step spends its time in, at the
// shapes of the baby (default) and small configs, forward and backward, on 1 and 2 threads; and
// the platform facts the kernels are designed around (docs/platform.md): the cost of a fresh
// page, std::exp against xsimd's, and a row softmax written with xtensor expressions.
// Build: apt-get install libbenchmark-dev, then the target heed_bench_kernels appears.
//   ./build/heed_bench_kernels --benchmark_filter=attention
//   ./build/heed_bench_kernels --benchmark_filter="attention_(scores|weighted)"   # the per-head kernels
// Quote figures only from one run, side by side (these machines are noisy).
#include <benchmark/benchmark.h>
#include <sys/mman.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <xtensor/xmath.hpp>
#include <xtensor/xtensor.hpp>

#include "core/heed.h"
#include "core/ops/attention_kernels.h"
#include "core/ops/simd_rows.h"
#include "nn/attention.h"
#include "nn/layer_norm.h"

using namespace heed;

namespace {

// Shapes: {B, T, C, n_head}.
struct Config {
  int64_t B, T, C, nh;
};
constexpr Config kBaby{12, 64, 128, 4};
constexpr Config kSmall{16, 256, 384, 6};

Config config_of(int64_t index) { return index == 0 ? kBaby : kSmall; }

void set_threads(benchmark::State& state) { set_num_threads(static_cast<int>(state.range(1))); }

void args(benchmark::internal::Benchmark* b) {
  for (int64_t cfg : {0, 1})
    for (int64_t threads : {1, 2}) b->Args({cfg, threads});
  b->ArgNames({"small", "threads"})->Unit(benchmark::kMicrosecond);
}

// Reports `flops` per iteration as a GFLOP/s counter.
void set_flops(benchmark::State& state, double flops) {
  state.counters["GFLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

// A module's forward and backward on a (B, T, C) input with a fixed upstream gradient, the
// gradients cleared after each iteration as a training step would.
template <class M>
void module_fwd_bwd(benchmark::State& state, M& module, const Config& c, uint64_t seed) {
  Generator gen(seed);
  Tensor x = Tensor::randn({c.B, c.T, c.C}, gen).requires_grad_();
  Tensor g = Tensor::randn({c.B, c.T, c.C}, gen);
  for (auto _ : state) {
    module.forward(x).backward(g);
    module.zero_grad();
    x.zero_grad();
  }
}

// linear forward + backward at the MLP's c_fc shape: (B T, C) x (4C, C)^T.
void BM_linear_fwd_bwd(benchmark::State& state) {
  set_threads(state);
  const Config c = config_of(state.range(0));
  Generator gen(1);
  Tensor x = Tensor::randn({c.B * c.T, c.C}, gen).requires_grad_();
  Tensor w = Tensor::randn({4 * c.C, c.C}, gen, 0.02).requires_grad_();
  Tensor g = Tensor::randn({c.B * c.T, 4 * c.C}, gen);
  for (auto _ : state) {
    Tensor y = linear(x, w);
    y.backward(g);
    x.zero_grad();
    w.zero_grad();
  }
  set_flops(state, 6.0 * c.B * c.T * c.C * 4 * c.C);
}
BENCHMARK(BM_linear_fwd_bwd)->Apply(args);

// Causal self-attention core (fused qkv in, merged heads out), forward + backward.
void BM_attention_fwd_bwd(benchmark::State& state) {
  set_threads(state);
  const Config c = config_of(state.range(0));
  nn::MultiHeadAttention attn(nn::MultiHeadAttentionOptions{.d_model = c.C, .n_head = c.nh, .causal = true, .bias = false});
  module_fwd_bwd(state, attn, c, 2);
}
BENCHMARK(BM_attention_fwd_bwd)->Apply(args);

// The per-head products inside attention_heads, one head at a time on one thread, at the
// config's head shape (T x T causal scores, head_dim hd), q/k/v read in the fused qkv layout
// (row stride 3C). GFLOP/s counts the useful (causal) multiply-adds only.
struct HeadData {
  int64_t T, hd, ld, kt_ld;
  std::vector<float> qkv, kt, scores, out;
  HeadData(const Config& c, int64_t kt_ld_extra)
      : T(c.T), hd(c.C / c.nh), ld(3 * c.C), kt_ld(c.T + kt_ld_extra), qkv(static_cast<size_t>(c.T * 3 * c.C)),
        kt(static_cast<size_t>(hd * kt_ld)), scores(static_cast<size_t>(c.T * c.T)), out(static_cast<size_t>(c.T * 3 * c.C)) {
    Generator gen(6);
    const std::vector<double> r = Tensor::randn({static_cast<int64_t>(qkv.size())}, gen).to_vector<double>();
    for (size_t i = 0; i < qkv.size(); ++i) qkv[i] = static_cast<float>(r[i]);
    for (size_t i = 0; i < scores.size(); ++i) scores[i] = qkv[i % qkv.size()];
  }
  double causal_flops() const { return 2.0 * T * (T + 1) / 2.0 * hd; }
};

// scores = q k^T (a_bt), with k transposed at heed's padded row stride (range(1) = 1) or at
// exactly T (range(1) = 0: at T = 256 the rows are 1 KB apart and share a quarter of L1's sets).
void BM_attention_scores(benchmark::State& state) {
  HeadData d(config_of(state.range(0)), state.range(1) ? 16 : 0);
  detail::kernels::transpose(d.kt.data(), d.kt_ld, d.qkv.data() + d.hd, d.ld, d.T, d.hd);
  for (auto _ : state) {
    detail::kernels::a_bt(d.scores.data(), d.T, d.qkv.data(), d.ld, d.kt.data(), d.kt_ld, d.T, d.hd,
                      [&](int64_t i) { return i + 1; });
    benchmark::DoNotOptimize(d.scores.data());
  }
  set_flops(state, d.causal_flops());
}
BENCHMARK(BM_attention_scores)->ArgsProduct({{0, 1}, {0, 1}})->ArgNames({"small", "padded"})->Unit(benchmark::kMicrosecond);

// out = P v (p_v), and dk = dS^T q reading dS transposed in place (range(1) = 1).
void BM_attention_weighted_sum(benchmark::State& state) {
  HeadData d(config_of(state.range(0)), 16);
  const bool transposed = state.range(1) != 0;
  for (auto _ : state) {
    if (transposed) {
      detail::kernels::p_v(d.out.data(), d.ld, d.scores.data(), 1, d.T, d.qkv.data(), d.ld, d.T, d.hd,
                       [&](int64_t j) { return std::pair<int64_t, int64_t>{j, d.T}; });
    } else {
      detail::kernels::p_v(d.out.data(), d.ld, d.scores.data(), d.T, 1, d.qkv.data(), d.ld, d.T, d.hd,
                       [&](int64_t i) { return std::pair<int64_t, int64_t>{0, i + 1}; });
    }
    benchmark::DoNotOptimize(d.out.data());
  }
  set_flops(state, d.causal_flops());
}
BENCHMARK(BM_attention_weighted_sum)->ArgsProduct({{0, 1}, {0, 1}})->ArgNames({"small", "transposed"})->Unit(benchmark::kMicrosecond);

// GELU's input at two spreads: std 0.25, about c_fc's pre-activations at initialisation (where
// `heed bench` and the PyTorch reference measure), and std 1 (a trained model's are wider). Before
// core/ops/normal_cdf.h, xsimd's float erf took a slow path as soon as one of 16 lanes had
// |x| > 0.94, so the two cost differently.
void BM_gelu_fwd_bwd(benchmark::State& state) {
  set_threads(state);
  const Config c = config_of(state.range(0));
  Generator gen(3);
  Tensor x = Tensor::randn({c.B * c.T, 4 * c.C}, gen, static_cast<double>(state.range(2)) / 100).requires_grad_();
  Tensor g = Tensor::randn({c.B * c.T, 4 * c.C}, gen);
  for (auto _ : state) {
    gelu(x).backward(g);
    x.zero_grad();
  }
  state.SetItemsProcessed(state.iterations() * x.numel());
}
BENCHMARK(BM_gelu_fwd_bwd)
    ->ArgsProduct({{0, 1}, {1, 2}, {25, 100}})
    ->ArgNames({"small", "threads", "std_x100"})
    ->Unit(benchmark::kMicrosecond);

void BM_layer_norm_fwd_bwd(benchmark::State& state) {
  set_threads(state);
  const Config c = config_of(state.range(0));
  nn::LayerNorm ln(c.C, 1e-5, true, false);
  module_fwd_bwd(state, ln, c, 4);
}
BENCHMARK(BM_layer_norm_fwd_bwd)->Apply(args);

void BM_cross_entropy_fwd_bwd(benchmark::State& state) {
  set_threads(state);
  const Config c = config_of(state.range(0));
  Generator gen(5);
  Tensor logits = Tensor::randn({c.B * c.T, 65}, gen).requires_grad_();
  std::vector<int32_t> targets(static_cast<size_t>(c.B * c.T));
  for (auto& t : targets) t = static_cast<int32_t>(gen.randint(65));
  for (auto _ : state) {
    cross_entropy(logits, targets).backward();
    logits.zero_grad();
  }
}
BENCHMARK(BM_cross_entropy_fwd_bwd)->Apply(args);

// ------------------------------------------------------------------------------------------
// Platform facts (docs/platform.md).

// Writing one byte to every 4 KiB page of a fresh 64 MiB mapping (range(0) = 1) against the same
// pages once they have been touched (0): the first write of a page faults into the kernel, which
// zeroes it. The counter per_page is seconds per page ("11u": 11 microseconds).
void BM_page_first_touch(benchmark::State& state) {
  constexpr size_t kBytes = size_t(64) << 20, kPage = 4096;
  const bool fresh = state.range(0) != 0;
  auto map = [] {
    void* p = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) std::abort();
    return static_cast<char*>(p);
  };
  char* buf = fresh ? nullptr : map();
  if (buf) std::memset(buf, 1, kBytes);
  for (auto _ : state) {
    if (fresh) {
      state.PauseTiming();
      buf = map();
      state.ResumeTiming();
    }
    for (size_t i = 0; i < kBytes; i += kPage) buf[i] = static_cast<char>(i);
    benchmark::ClobberMemory();
    if (fresh) {
      state.PauseTiming();
      munmap(buf, kBytes);
      state.ResumeTiming();
    }
  }
  if (!fresh) munmap(buf, kBytes);
  state.counters["per_page"] = benchmark::Counter(
      static_cast<double>(kBytes / kPage), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_page_first_touch)->Arg(0)->Arg(1)->ArgName("fresh")->Unit(benchmark::kMillisecond);

// sum of exp(x) over 1 M floats: a plain std::exp loop (GCC does not vectorise it) against
// row_exp_sum's xsimd batches (range(0) = 1).
void BM_exp_sum(benchmark::State& state) {
  constexpr int64_t n = int64_t(1) << 20;
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(std::sin(0.001 * static_cast<double>(i)));
  for (auto _ : state) {
    double s = 0;
    if (state.range(0)) {
      s = detail::row_exp_sum<float>(nullptr, x.data(), 1.0f, 0.0f, n);
    } else {
      float block = 0;
      for (int64_t i = 0; i < n; ++i) block += std::exp(x[i]);
      s = block;
    }
    benchmark::DoNotOptimize(s);
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_exp_sum)->Arg(0)->Arg(1)->ArgName("xsimd")->Unit(benchmark::kMicrosecond);

// Softmax over the rows of a 4096 x 1024 float matrix, one thread: xtensor expressions (max and
// sum evaluated into containers first: a lazy keep_dims reducer inside a broadcast is wrong in
// xtensor 0.24.3) against heed's softmax op (range(0) = 1).
void BM_softmax_rows(benchmark::State& state) {
  set_num_threads(1);
  constexpr int64_t R = 4096, C = 1024;
  Generator gen(8);
  const Tensor x = Tensor::randn({R, C}, gen);
  xt::xtensor<float, 2> xx = xt::zeros<float>({R, C});
  std::copy(x.data<float>(), x.data<float>() + R * C, xx.begin());
  NoGradGuard no_grad;
  for (auto _ : state) {
    if (state.range(0)) {
      benchmark::DoNotOptimize(softmax(x, -1).data<float>());
    } else {
      const xt::xtensor<float, 2> m = xt::amax(xx, {1}, xt::keep_dims | xt::evaluation_strategy::immediate);
      const xt::xtensor<float, 2> e = xt::exp(xx - m);
      const xt::xtensor<float, 2> s = xt::sum(e, {1}, xt::keep_dims | xt::evaluation_strategy::immediate);
      const xt::xtensor<float, 2> y = e / s;
      benchmark::DoNotOptimize(y.data());
    }
  }
}
BENCHMARK(BM_softmax_rows)->Arg(0)->Arg(1)->ArgName("heed")->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
