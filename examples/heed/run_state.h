// What `heed train --resume` needs beyond the model file: DIR/train_state.safetensors holds the
// weights, the AdamW moments and, in its metadata, the step, every random generator's state and
// the run's recipe (docs/checkpoint-format.md). It is written atomically *before* model.safetensors,
// so a crash between the two leaves a state that is complete on its own.
#pragma once

#include <chrono>
#include <csignal>
#include <map>
#include <string>
#include <vector>

#include "core/random.h"
#include "nn/gpt.h"

namespace heed::cli {

/// Seconds on a monotonic clock: progress lines, elapsed_s, timings.
inline double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

/// Path helpers for a run directory.
std::string model_path(const std::string& dir);
std::string state_path(const std::string& dir);
std::string log_path(const std::string& dir);

/// Creates `dir` if needed and checks it is a directory where files can be created (UsageError
/// naming --out if not).
void prepare_out_dir(const std::string& dir);

/// Removes the temporary files (`model.safetensors.tmp.<pid>`, `train_state...`, `loss.svg...`,
/// `log.jsonl...`) that a killed run left in `dir`, those of processes still alive excepted.
void remove_stale_temp_files(const std::string& dir);

/// Writes `text` to `path` atomically (`path.tmp.<pid>`, fsync, rename: a crash leaves the old
/// file or the new one); throws heed::Error naming the path.
void write_text_file(const std::string& path, const std::string& text);
/// Appends one line to a file and fsyncs it.
void append_line(const std::string& path, const std::string& line);
/// Keeps only the lines of log.jsonl whose "iter" is below `iter` (used on resume), atomically.
void truncate_log(const std::string& path, int64_t iter);

/// The generators of every Dropout module in `model`, by module path (for saving and restoring).
std::vector<std::pair<std::string, Generator*>> dropout_generators(nn::Module& model);

std::string encode_generator(const Generator& g);                 ///< "[s0,s1,s2,s3]" as decimal strings
void decode_generator(Generator& g, const std::string& text, const std::string& what);

/// Set by SIGINT/SIGTERM while `train` runs (the loop saves and exits at the next step boundary).
extern volatile std::sig_atomic_t g_stop_signal;
void install_stop_handlers();

}  // namespace heed::cli
