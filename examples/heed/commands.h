// The `heed` subcommands, as plain functions over option structs (main.cpp maps flags onto them
// with CLI11). Each returns the process exit code; bad data throws heed::Error (exit 1), bad flags
// throw UsageError (exit 2).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/check.h"

namespace heed::cli {

/// A flag value that makes no sense (exit code 2, like a parse error).
class UsageError : public Error {
 public:
  using Error::Error;
};

/// Model and recipe flags shared by `train` and `bench`; defaults are nanoGPT's documented CPU run.
struct TrainOptions {
  std::string data;  // empty: the bundled corpus
  std::string out = "out";
  bool resume = false;
  int64_t n_layer = 4, n_head = 4, n_embd = 128, block_size = 64;
  double dropout = 0.0;
  bool bias = false;
  int64_t batch_size = 12, max_iters = 2000;
  bool max_iters_given = false;  // --max-iters was given: on --resume it replaces the run's
  std::vector<std::string> flags_given;  // long names of the flags given (--resume refuses a changed recipe)
  double lr = 1e-3, min_lr = 1e-4;
  int64_t warmup_iters = 100, lr_decay_iters = 2000;
  double weight_decay = 0.1, beta1 = 0.9, beta2 = 0.99, grad_clip = 1.0;
  int64_t eval_interval = 250, eval_iters = 200, log_interval = 10;
  uint64_t seed = 1337;
  int threads = 0;  // 0: every core this process may use
  bool profile = false;
  int64_t sample_tokens = 300;  // the short sample printed at the end
  int64_t bench_iters = 0;      // `heed bench --iters`
};

struct SampleOptions {
  std::string checkpoint;
  std::string prompt;  // empty: start from a newline, as nanoGPT's sample.py
  int64_t tokens = 500;
  double temperature = 0.8;
  int64_t top_k = 200;
  uint64_t seed = 1337;
  int threads = 0;
};

struct EvalOptions {
  std::string checkpoint;
  std::string data;
  int64_t batch_size = 64;  // windows per forward pass (does not change the result)
  int threads = 0;
};

/// Validates the flags shared by train and bench (throws UsageError naming the flag).
void validate(const TrainOptions& o);

int run_train(const TrainOptions& o, const std::string& config_text);
int run_bench(const TrainOptions& o);
int run_sample(const SampleOptions& o);
int run_eval(const EvalOptions& o);
int run_attention(const std::string& checkpoint, const std::string& text, const std::string& out);
int run_plot(const std::vector<std::string>& logs, const std::string& out);
/// Draws the loss curves of `logs` into the SVG file `out` (also used by train, next to its log).
void write_loss_plot(const std::vector<std::string>& logs, const std::string& out);

/// The corpus bundled with heed (data/tinyshakespeare.txt in the source tree, or installed).
std::string default_corpus_path();
/// The most threads --threads accepts.
inline constexpr int kMaxThreads = 1024;
/// The most characters one `heed sample` run generates (--tokens): 10 million characters are
/// hours of CPU time for the default model; a larger request is surely a typo.
inline constexpr int64_t kMaxSampleTokens = 10'000'000;

/// Applies --threads (0: all CPUs available to the process) to OpenBLAS and heed's kernels;
/// throws UsageError for a count outside [0, kMaxThreads].
void apply_threads(int threads);
/// The check alone (UsageError naming --threads), for validating flags before anything runs.
void check_threads_flag(int threads);

}  // namespace heed::cli
