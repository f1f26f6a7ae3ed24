// Kernel benchmarks (Google Benchmark): the ops a GPT training step spends its time in, at the
// shapes of the baby (default) and small configs, forward and backward, on 1 and 2 threads.
// Build: apt-get install libbenchmark-dev, then the target heed_bench_kernels appears.
//   ./build/heed_bench_kernels --benchmark_filter=attention
// Quote figures only from one run, side by side (these machines are noisy).
#include <benchmark/benchmark.h>

#include "core/heed.h"
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
  state.counters["GFLOP/s"] = benchmark::Counter(6.0 * c.B * c.T * c.C * 4 * c.C, benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}
BENCHMARK(BM_linear_fwd_bwd)->Apply(args);

// Causal self-attention core (fused qkv in, merged heads out), forward + backward.
void BM_attention_fwd_bwd(benchmark::State& state) {
  set_threads(state);
  const Config c = config_of(state.range(0));
  nn::MultiHeadAttention attn(nn::MultiHeadAttentionOptions{.d_model = c.C, .n_head = c.nh, .causal = true, .bias = false});
  Generator gen(2);
  Tensor x = Tensor::randn({c.B, c.T, c.C}, gen).requires_grad_();
  Tensor g = Tensor::randn({c.B, c.T, c.C}, gen);
  for (auto _ : state) {
    attn.forward(x).backward(g);
    attn.zero_grad();
    x.zero_grad();
  }
}
BENCHMARK(BM_attention_fwd_bwd)->Apply(args);

void BM_gelu_fwd_bwd(benchmark::State& state) {
  set_threads(state);
  const Config c = config_of(state.range(0));
  Generator gen(3);
  Tensor x = Tensor::randn({c.B * c.T, 4 * c.C}, gen).requires_grad_();
  Tensor g = Tensor::randn({c.B * c.T, 4 * c.C}, gen);
  for (auto _ : state) {
    gelu(x).backward(g);
    x.zero_grad();
  }
  state.SetItemsProcessed(state.iterations() * x.numel());
}
BENCHMARK(BM_gelu_fwd_bwd)->Apply(args);

void BM_layer_norm_fwd_bwd(benchmark::State& state) {
  set_threads(state);
  const Config c = config_of(state.range(0));
  nn::LayerNorm ln(c.C, 1e-5, true, false);
  Generator gen(4);
  Tensor x = Tensor::randn({c.B, c.T, c.C}, gen).requires_grad_();
  Tensor g = Tensor::randn({c.B, c.T, c.C}, gen);
  for (auto _ : state) {
    ln.forward(x).backward(g);
    ln.zero_grad();
    x.zero_grad();
  }
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

}  // namespace

BENCHMARK_MAIN();
