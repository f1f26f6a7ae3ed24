// `heed plot`: train and val loss against iterations from one or more log.jsonl files.
//
// A log is validated as it is read: every line is a JSON object with a number "iter" and a number
// "train_loss", "val_loss" or both (a line that is not is an error naming it). JSON has no NaN or infinity: a line
// holding one (Python's json writes NaN and Infinity; 1e999 overflows a double) is refused too.
// Every finite value is drawn, however extreme (svg.cpp scales any range).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "corpus.h"
#include "io.h"
#include "run_dir.h"
#include "svg.h"

namespace heed::cli {

namespace {

std::vector<Curve> loss_curves(const std::string& log, const std::string& label) {
  // Each line becomes a few doubles: the text, its parse, and the points fit in 4 bytes per byte.
  const std::string text = read_input_file(log, 4.0);
  Curve train{label + " train", {}, {}, false}, val{label + " val", {}, {}, true};
  size_t start = 0;
  int64_t lineno = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    ++lineno;
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line, nullptr, false);
    HEED_CHECK(!j.is_discarded(), log, ": line ", lineno,
               " is not valid JSON (NaN, Infinity and numbers beyond 1.8e308 are not JSON)");
    // An evaluation's line holds both losses; a line of a richer log may hold the train loss only.
    auto number = [&](const char* k) { return j.contains(k) && j[k].is_number(); };
    HEED_CHECK(j.is_object() && number("iter") && (number("train_loss") || number("val_loss")) &&
                   (number("train_loss") || !j.contains("train_loss")) && (number("val_loss") || !j.contains("val_loss")),
               log, ": line ", lineno, " is not a log entry with a number iter and train_loss and/or val_loss");
    const double it = j["iter"].get<double>();
    if (number("train_loss")) train.x.push_back(it), train.y.push_back(j["train_loss"].get<double>());
    if (number("val_loss")) val.x.push_back(it), val.y.push_back(j["val_loss"].get<double>());
  }
  HEED_CHECK(!train.x.empty() || !val.x.empty(), log, ": no log entries");
  return {train, val};
}

}  // namespace

// Each run is named by its directory ("runs/copy/log.jsonl": "copy"), or by the whole path when
// those names are empty or repeat; train and val of one run share a colour (val dashed).
void write_loss_plot(const std::vector<std::string>& logs, const std::string& out) {
  namespace fs = std::filesystem;
  std::vector<std::string> names;
  for (const auto& log : logs) names.push_back(fs::path(log).parent_path().filename().string());
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i].empty() || std::count(names.begin(), names.end(), names[i]) > 1) {
      names.assign(logs.begin(), logs.end());
      break;
    }
  std::vector<Curve> curves;
  for (size_t i = 0; i < logs.size(); ++i) {
    for (auto& c : loss_curves(logs[i], logs.size() == 1 ? std::string() : names[i])) {
      if (logs.size() == 1) c.label = c.label.substr(1);  // " train" -> "train"
      c.color = static_cast<int>(i);
      curves.push_back(std::move(c));
    }
  }
  write_file_atomically(out, line_chart_svg("loss (solid: train, dashed: val)", "iteration", "cross-entropy (nats)",
                                            curves));
}

int run_plot(const std::vector<std::string>& logs, const std::string& out) {
  if (logs.empty()) throw UsageError("--log: give at least one log.jsonl");
  if (out.empty()) throw UsageError("--out is required");
  for (const auto& log : logs)
    if (same_file(log, out)) throw UsageError("--out " + out + " is one of the --log files; it would be overwritten");
  require_own_output(out, "--out", kSvgSignature);
  write_loss_plot(logs, out);
  write_stdout("wrote " + out + "\n");
  return 0;
}

}  // namespace heed::cli
