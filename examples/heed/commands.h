// The `heed` subcommands, as plain functions over option structs (main.cpp maps flags onto them
// with CLI11, from the option tables). Each returns the process exit code; bad data throws
// heed::Error (exit 1), bad flags throw UsageError (exit 2), a stop signal ends a command with
// Stopped (stop.h; exit 128+N) once it has saved what it has.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "core/check.h"
#include "options.h"

namespace heed::cli {

/// A flag value that makes no sense (exit code 2, like a parse error).
class UsageError : public Error {
 public:
  using Error::Error;
};

/// --resume: the options of a run continued from its record. Recipe options come from `recorded`
/// (one given with another value is a UsageError naming the flag and `what`, the record's file);
/// length options (--max-iters) too unless given; the others are the ones `given`. `named` is the
/// set of option names given on the command line or in a config file.
template <class T>
T resumed_options(const OptionTable<T>& table, const T& given, const T& recorded, const std::set<std::string>& named,
                  const std::string& what) {
  T o = given;
  for (const auto& opt : table) {
    const bool is_named = named.count(opt.name) > 0;
    if (opt.role == Role::recipe) {
      if (is_named && opt.get(given) != opt.get(recorded))
        throw UsageError("--" + opt.flag + " " + format_value(opt.get(given)) + " differs from the run's " +
                         format_value(opt.get(recorded)) + ": --resume continues the recipe saved in " + what +
                         " (only --max-iters and how the process runs, such as --threads, may change)");
      opt.set(o, opt.get(recorded));
    } else if (opt.role == Role::length && !is_named) {
      opt.set(o, opt.get(recorded));  // extend or shorten a run with the flag
    }
  }
  return o;
}

struct TrainRequest;
struct TrainOptions;

struct SampleOptions {
  std::string checkpoint;
  std::string prompt;  ///< empty: start from a newline, as nanoGPT's sample.py
  std::string prompt_file;  ///< the prompt's bytes from a file (instead of --prompt)
  int64_t tokens;
  int64_t num_samples;
  std::string stop;  ///< end a sample once it has generated this text (empty: never)
  double temperature;
  int64_t top_k;
  int64_t seed;
  int64_t threads;
  std::string precision;  ///< "fp32" or "bf16" (precision.h)
};
const OptionTable<SampleOptions>& sample_option_table();

struct EvalOptions {
  std::string checkpoint;
  std::string data;
  int64_t batch_size;  ///< windows per forward pass (does not change the result)
  int64_t threads;
  std::string precision;  ///< "fp32" or "bf16" (precision.h)
};
const OptionTable<EvalOptions>& eval_option_table();

int run_train(const TrainRequest& request);
int run_bench(const TrainOptions& o);
int run_sample(const SampleOptions& o);
int run_eval(const EvalOptions& o);
int run_attention(const std::string& checkpoint, const std::string& text, const std::string& out);
int run_plot(const std::vector<std::string>& logs, const std::string& out);
/// `heed inspect`: a GPT checkpoint's config, vocabulary, parameter count, iteration and the
/// last evaluation in the log.jsonl beside it; as one JSON object with `json`.
int run_inspect(const std::string& checkpoint, bool json);
/// Draws the loss curves of `logs` into the SVG file `out` (also used by train, next to its log).
void write_loss_plot(const std::vector<std::string>& logs, const std::string& out);

/// The corpus bundled with heed (data/tinyshakespeare.txt in the source tree, or installed).
std::string default_corpus_path();

/// Applies --threads (0: all CPUs available to the process) to OpenBLAS and heed's kernels.
void apply_threads(int64_t threads);

}  // namespace heed::cli
