// The options of `heed train` and `heed bench`: nanoGPT's shakespeare_char recipe for CPU, defined
// once in train_option_table() (see options.h for what reads the table).
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "nn/gpt.h"
#include "options.h"

namespace heed::cli {

/// Model, recipe and run flags shared by `train` and `bench` (defaults: the table's).
struct TrainOptions {
  std::string data;  ///< empty: the bundled corpus
  std::string out;
  std::string init_from;  ///< a checkpoint to fine-tune (empty: a new model from --seed)
  int64_t n_layer, n_head, n_embd, block_size;
  double dropout;
  bool bias;
  int64_t batch_size, max_iters;
  int64_t grad_accum;  ///< micro-batches per optimizer step (the global batch is grad_accum x batch_size)
  double lr, min_lr;
  int64_t warmup_iters, lr_decay_iters;
  double weight_decay, beta1, beta2, grad_clip;
  int64_t eval_interval, eval_iters, log_interval;
  bool keep_best;  ///< also keep the checkpoint of the lowest val loss (best.safetensors)
  int64_t seed;
  int64_t threads;  ///< 0: every core this process may use
  bool profile;
  bool overlap;  ///< under mpirun: gradient buckets travel during backward
  int64_t sample_tokens;  ///< the short sample printed at the end
  int64_t bench_iters;    ///< `heed bench --iters`
  std::string precision;  ///< "fp32" or "bf16" (precision.h)
};

/// The most iterations any iteration count may name (far beyond any run; keeps counters exact).
inline constexpr int64_t kMaxIters = int64_t(1) << 50;
/// The most characters one sample may generate: 10 million characters are hours of CPU time for
/// the default model; a larger request is surely a typo.
inline constexpr int64_t kMaxSampleTokens = 10'000'000;
inline constexpr int64_t kMaxSamples = 1'000'000;
/// What `heed sample --num-samples N` (N > 1) prints after each sample, as nanoGPT's sample.py.
inline constexpr const char* kSampleSeparator = "---------------";
/// The most threads --threads accepts.
inline constexpr int64_t kMaxThreads = 1024;

/// `heed train`'s options; `heed bench`'s are the model and recipe ones plus --iters.
const OptionTable<TrainOptions>& train_option_table();
const OptionTable<TrainOptions>& bench_option_table();

/// What one `heed train` invocation asks beyond the options.
struct TrainRequest {
  TrainOptions options;
  bool resume = false;     ///< continue the run in --out
  bool overwrite = false;  ///< start over in an --out that holds a run
  std::string config;      ///< --config FILE, if given
  std::set<std::string> from_command_line;  ///< names of the options given as flags
  std::set<std::string> from_config;        ///< names of the options --config set
};

/// Checks every value of `table` against its range and the rules between options (--n-embd
/// divisible by --n-head, --min-lr <= --lr, --lr-decay-iters > --warmup-iters); throws UsageError
/// naming the flag.
void validate(const TrainOptions& o, const OptionTable<TrainOptions>& table = train_option_table());

/// The flags that fix a GPT's architecture, which `--init-from` takes from its checkpoint.
inline constexpr const char* kArchitectureOptions[] = {"n_layer", "n_head", "n_embd", "block_size", "bias"};

/// The GPT the options describe, for a corpus of `vocab_size` characters.
nn::GPTConfig gpt_config(const TrainOptions& o, int64_t vocab_size);

}  // namespace heed::cli
