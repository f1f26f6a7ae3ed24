// DIR/train_state.safetensors: what `heed train --resume` needs beyond the model file. The tensors
// are the weights ("model.<name>") and the optimizer's state ("optim.<name>.exp_avg", ...); the
// metadata holds the step, every random generator's state, the run's recorded options, its
// vocabulary and its last evaluation (docs/checkpoint-format.md). It is written atomically *before*
// model.safetensors, so a crash between the two leaves a state that is complete on its own.
//
// Reading trusts nothing: every field is checked (counters in range, generator states valid,
// options known, typed and in range, tensors present, shaped as the model's and finite) and a
// problem is a heed::Error naming the file and the field. fuzz/fuzz_train_state.cpp drives it.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/random.h"
#include "nn/module.h"
#include "nn/safetensors.h"
#include "optim/optimizer.h"
#include "train_options.h"

namespace heed::cli {

/// The metadata of a training state, validated.
struct TrainStateRecord {
  int64_t iter = 0;          ///< steps done
  bool eval_done = false;    ///< the evaluation at `iter` ran and was logged
  Generator::State data_rng{};
  std::map<std::string, Generator::State> dropout_rng;  ///< by Dropout module path
  TrainOptions options;      ///< the recorded recipe over the table's defaults
  std::string vocab_utf8;
  double elapsed_s = 0;
  nlohmann::json last_eval;  ///< the log line of the evaluation at `iter` (null if none)
  /// The lowest val loss so far, that of best.safetensors (--keep-best; infinite: none yet). An
  /// older state, without the field, has none.
  double best_val_loss = std::numeric_limits<double>::infinity();
};

/// Reads and checks the metadata of a training state (`what` names the file in errors).
TrainStateRecord read_train_state(const nn::SafetensorsFile& file, const std::string& what);

/// Puts the state's weights into `model`, its moments into `optimizer`, and its generator states
/// into `data_gen` and the model's Dropout modules. Checks, before changing anything: every
/// parameter present with its shape and finite, no unknown tensor, the moments finite (second
/// moments not negative) and accepted by the optimizer, every parameter's moments present after
/// the first step and none before (every parameter of heed's models takes part in every step), one
/// generator state per Dropout module.
void restore_train_state(const nn::SafetensorsFile& file, const TrainStateRecord& record, nn::Module& model,
                         optim::Optimizer& optimizer, Generator& data_gen, const std::string& what);

/// Writes a training state atomically.
void save_train_state(const std::string& path, nn::Module& model, const optim::Optimizer& optimizer,
                      const Generator& data_gen, const TrainStateRecord& record);

/// A counter field of a state file's metadata (an iteration, a step count): a decimal integer in
/// [0, kMaxIters], else a heed::Error naming `key` and `what`. One reader for train's and seq2seq's states.
int64_t read_state_count(const std::string& text, const char* key, const std::string& what);
/// The metadata field `key` of a state file, else a heed::Error naming it, `what` and `kind`
/// ("training state", "seq2seq training state").
const std::string& state_field(const nn::SafetensorsFile& file, const char* key, const std::string& what,
                               const char* kind);

/// A generator's state as metadata text, "[s0,s1,s2,s3]" (decimal strings), and back (a
/// heed::Error naming `what` for anything else, or the all-zero state).
std::string encode_generator(const Generator& g);
Generator::State decode_generator(const std::string& text, const std::string& what);

/// The "dropout_rng" metadata: every Dropout module's generator state by module path, as a JSON
/// object, and back (a heed::Error naming `what` for anything else).
std::string encode_dropout_generators(nn::Module& model);
std::map<std::string, Generator::State> decode_dropout_generators(const std::string& text, const std::string& what);
/// The tensors of a training state: "model.<name>" for every parameter, "optim.<name>..." for the
/// optimizer's state.
std::vector<std::pair<std::string, Tensor>> training_tensors(nn::Module& model, const optim::Optimizer& optimizer);

/// The generators of every Dropout module in `model`, by module path.
std::vector<std::pair<std::string, Generator*>> dropout_generators(nn::Module& model);

/// On resume: keeps the lines of log.jsonl whose "iter" is below `iter`, atomically. A line that is
/// not a log entry is an error naming it, except a last line cut short by a crash (dropped).
void truncate_log(const std::string& path, int64_t iter);

}  // namespace heed::cli
