#include "seq2seq_state.h"

#include <charconv>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "train_options.h"
#include "train_state.h"

namespace heed::cli {

using nlohmann::json;

namespace {

std::string exact(double v) {  // shortest text that reads back to the same double
  std::ostringstream s;
  s.precision(17);
  s << v;
  return s.str();
}


double read_number(const std::string& text, const char* key, double max, const std::string& what) {
  double v = -1;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  HEED_CHECK(r.ec == std::errc() && r.ptr == text.data() + text.size() && std::isfinite(v) && v >= 0 && v <= max,
             what, ": \"", key, "\" must be a number in [0, ", max, "], got \"", text, "\"");
  return v;
}

}  // namespace

std::string seq2seq_state_path(const std::string& dir) {
  return (std::filesystem::path(dir) / "seq2seq_state.safetensors").string();
}

void save_seq2seq_state(const std::string& path, nn::EncoderDecoder& model, const optim::Optimizer& optimizer,
                        const Generator& data_gen, const Seq2SeqStateRecord& record) {
  const auto tensors = training_tensors(model, optimizer);
  const std::map<std::string, std::string> meta{
      {"seq2seq_iter", std::to_string(record.iter)},
      {"optimizer_step", std::to_string(optimizer.step_count())},
      {"data_rng", encode_generator(data_gen)},
      {"dropout_rng", encode_dropout_generators(model)},
      {"options", options_to_json(seq2seq_option_table(), record.options, {Role::recipe, Role::length}).dump()},
      {"interval_loss", exact(record.interval_loss)},
      {"interval_steps", std::to_string(record.interval_steps)},
      {"elapsed_s", exact(record.elapsed_s)}};
  nn::save_safetensors(path, tensors, meta);
}

Seq2SeqStateRecord read_seq2seq_state(const nn::SafetensorsFile& file, const std::string& what) {
  auto meta = [&](const char* key) -> const std::string& {
    return state_field(file, key, what, "seq2seq training state");
  };
  Seq2SeqStateRecord r;
  r.iter = read_state_count(meta("seq2seq_iter"), "seq2seq_iter", what);
  const int64_t optimizer_step = read_state_count(meta("optimizer_step"), "optimizer_step", what);
  HEED_CHECK(optimizer_step == r.iter, what, ": \"optimizer_step\" ", optimizer_step, " differs from \"seq2seq_iter\" ",
             r.iter, " (heed steps the optimizer once per iteration)");
  r.data_rng = decode_generator(meta("data_rng"), what + ": \"data_rng\"");
  r.dropout_rng = decode_dropout_generators(meta("dropout_rng"), what);
  const json options = json::parse(meta("options"), nullptr, false);
  r.options = defaults(seq2seq_option_table());
  options_from_json(seq2seq_option_table(), r.options, options, {Role::recipe, Role::length}, what + ": \"options\"");
  try {
    validate_seq2seq(r.options);
  } catch (const Error& e) {
    detail::fail(what, ": \"options\": ", e.what());
  }
  HEED_CHECK(r.iter <= r.options.max_iters, what, ": \"seq2seq_iter\" ", r.iter, " is past the recorded max_iters ",
             r.options.max_iters);
  r.interval_steps = read_state_count(meta("interval_steps"), "interval_steps", what);
  // The steps summed since the last report are steps done: a larger count was accepted and divided
  // the resumed run's first reported loss by a made-up number (fuzz_seq2seq_state checks it).
  HEED_CHECK(r.interval_steps <= r.iter, what, ": \"interval_steps\" ", r.interval_steps, " is more than the ",
             r.iter, " iterations done (\"seq2seq_iter\")");
  // A loss per step is at most ln(98) at the start; far more is a tampered file.
  r.interval_loss = read_number(meta("interval_loss"), "interval_loss", 1e6 * double(r.interval_steps), what);
  r.elapsed_s = read_number(meta("elapsed_s"), "elapsed_s", 3.2e9, what);
  return r;
}

void restore_seq2seq_state(const nn::SafetensorsFile& file, const Seq2SeqStateRecord& record, nn::EncoderDecoder& model,
                           optim::Optimizer& optimizer, Generator& data_gen, const std::string& what) {
  TrainStateRecord generators;  // what restore_train_state reads of a record: the step and the generators
  generators.iter = record.iter;
  generators.data_rng = record.data_rng;
  generators.dropout_rng = record.dropout_rng;
  restore_train_state(file, generators, model, optimizer, data_gen, what);
}

}  // namespace heed::cli
