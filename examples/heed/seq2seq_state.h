// DIR/seq2seq_state.safetensors: what `heed seq2seq --resume` needs beyond model.safetensors, as
// train_state.h is for `heed train`: the weights ("model.<name>") and the optimizer's moments
// ("optim.<name>.exp_avg", ...) as tensors; the iteration, the data generator's and the dropout
// generators' states, the recorded recipe, the training loss summed since the last report and the
// elapsed time as metadata. Written atomically before model.safetensors at every report, at a stop
// and at the end; read trusting nothing (every field checked, errors name the file and the field).
#pragma once

#include <map>
#include <string>

#include "core/random.h"
#include "nn/safetensors.h"
#include "nn/transformer.h"
#include "optim/optimizer.h"
#include "seq2seq.h"

namespace heed::cli {

/// The metadata of a seq2seq training state, validated.
struct Seq2SeqStateRecord {
  int64_t iter = 0;  ///< steps done
  Generator::State data_rng{};
  std::map<std::string, Generator::State> dropout_rng;  ///< by Dropout module path
  Seq2SeqOptions options;     ///< the recorded recipe (and --max-iters) over the table's defaults
  double interval_loss = 0;   ///< training losses summed since the last report
  int64_t interval_steps = 0;  ///< how many
  double elapsed_s = 0;
};

std::string seq2seq_state_path(const std::string& dir);

/// Writes the state atomically.
void save_seq2seq_state(const std::string& path, nn::EncoderDecoder& model, const optim::Optimizer& optimizer,
                        const Generator& data_gen, const Seq2SeqStateRecord& record);

/// Reads and checks the metadata (`what` names the file in errors).
Seq2SeqStateRecord read_seq2seq_state(const nn::SafetensorsFile& file, const std::string& what);

/// Puts the state's weights, moments and generator states into the model built from the record's
/// options, its optimizer and the data generator (checked as restore_train_state checks, before
/// anything changes).
void restore_seq2seq_state(const nn::SafetensorsFile& file, const Seq2SeqStateRecord& record, nn::EncoderDecoder& model,
                           optim::Optimizer& optimizer, Generator& data_gen, const std::string& what);

}  // namespace heed::cli
