// `heed inspect CKPT`: what a GPT checkpoint holds, without loading it into a run. The last
// losses come from the log.jsonl in the checkpoint's directory (heed train writes both), the
// last evaluation at or before the checkpoint's iteration.
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "commands.h"
#include "io.h"
#include "nn/gpt_checkpoint.h"
#include "stop.h"

namespace heed::cli {

namespace {

// The last evaluation line (one with train_loss and val_loss) of `log` at or before `iter`
// (any iteration when iter < 0); null if there is none or the log cannot be read.
nlohmann::json last_evaluation(const std::string& log, int64_t iter) {
  nlohmann::json last;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(log, ec)) return last;
  std::string text;
  try {
    text = read_input_file(log, 3.0);
  } catch (const Error&) {
    return last;  // an unreadable log does not make the checkpoint uninspectable
  }
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("iter") || !j["iter"].is_number_integer()) continue;
    // A line whose losses are not numbers (hand-edited, another tool's) is not an evaluation.
    if (!j.contains("train_loss") || !j["train_loss"].is_number()) continue;
    if (!j.contains("val_loss") || !j["val_loss"].is_number()) continue;
    if (iter >= 0 && j["iter"].get<int64_t>() > iter) continue;
    last = j;
  }
  return last;
}

}  // namespace

int run_inspect(const std::string& checkpoint, bool as_json) {
  if (checkpoint.empty()) throw UsageError("inspect: give a checkpoint (model.safetensors)");
  // Reading and parsing a large checkpoint polls no stop, and writes nothing: a stop ends it at once
  // (before, a SIGINT during the parse of a 403 MB file was ignored and inspect exited 0).
  std::optional<ExitAtOnceOnStop> only_reading(std::in_place);
  const std::string bytes = read_input_file(checkpoint, 4.0);
  const nn::LoadedGPT loaded =
      nn::load_gpt_checkpoint_from_bytes(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), checkpoint);
  const nn::GPTConfig& c = loaded.model->config();
  int64_t iter = -1;
  if (auto it = loaded.metadata.find("iter"); it != loaded.metadata.end()) {
    try {
      iter = std::stoll(it->second);
    } catch (const std::exception&) {
      iter = -1;
    }
  }
  const std::string log = (std::filesystem::path(checkpoint).parent_path() / "log.jsonl").string();
  const nlohmann::json last = last_evaluation(log, iter);
  only_reading.reset();
  nlohmann::json out = {{"checkpoint", checkpoint},
                        {"config", nlohmann::json::parse(nn::gpt_config_json(c))},
                        {"vocab", loaded.vocab_utf8},
                        {"vocab_size", c.vocab_size},
                        {"parameters", loaded.model->num_params(false)},
                        {"non_embedding_parameters", loaded.model->num_params(true)},
                        {"iter", iter >= 0 ? nlohmann::json(iter) : nlohmann::json()},
                        {"last_eval", last}};
  if (as_json) {
    write_stdout(out.dump() + "\n");
    return 0;
  }
  std::ostringstream s;
  s << "checkpoint: " << checkpoint << "\n"
    << "model:      GPT, " << c.n_layer << " layers, " << c.n_head << " heads, " << c.n_embd << " wide, block "
    << c.block_size << ", bias " << (c.bias ? "true" : "false") << "\n"
    << "parameters: " << loaded.model->num_params(false) << " (" << loaded.model->num_params(true)
    << " without the position embeddings)\n"
    // the vocabulary as a JSON string: newlines, NUL and quotes stay visible and unambiguous
    << "vocabulary: " << c.vocab_size << " characters: " << nlohmann::json(loaded.vocab_utf8).dump() << "\n"
    << "iteration:  " << (iter >= 0 ? std::to_string(iter) : std::string("not recorded")) << "\n";
  if (last.is_null()) {
    s << "last eval:  none in " << log << "\n";
  } else {
    char line[160];
    std::snprintf(line, sizeof line, "last eval:  iter %lld: train loss %.4f, val loss %.4f\n",
                  static_cast<long long>(last["iter"].get<int64_t>()), last["train_loss"].get<double>(),
                  last["val_loss"].get<double>());
    s << line;
  }
  write_stdout(s.str());
  return 0;
}

}  // namespace heed::cli
