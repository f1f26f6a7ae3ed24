// `heed plot`: train and val loss against iterations from one or more log.jsonl files.
#include <algorithm>
#include <filesystem>
#include <sstream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "corpus.h"
#include "run_state.h"
#include "svg.h"

namespace heed::cli {

std::vector<Curve> loss_curves(const std::string& log, const std::string& label) {
  std::istringstream f(read_file(log));
  Curve train{label + " train", {}, {}, false}, val{label + " val", {}, {}, true};
  std::string line;
  int64_t lineno = 0;
  while (std::getline(f, line)) {
    ++lineno;
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    HEED_CHECK(j.is_object() && j.contains("iter") && j["iter"].is_number() && j.contains("train_loss") &&
                   j["train_loss"].is_number() && j.contains("val_loss") && j["val_loss"].is_number(),
               log, ": line ", lineno, " is not a log entry with iter, train_loss and val_loss");
    const double it = j["iter"].get<double>();
    train.x.push_back(it), train.y.push_back(j["train_loss"].get<double>());
    val.x.push_back(it), val.y.push_back(j["val_loss"].get<double>());
  }
  HEED_CHECK(!train.x.empty(), log, ": no log entries");
  return {train, val};
}

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
  write_text_file(out, line_chart_svg("loss (solid: train, dashed: val)", "iteration", "cross-entropy (nats)", curves));
}

int run_plot(const std::vector<std::string>& logs, const std::string& out) {
  if (logs.empty()) throw UsageError("--log: give at least one log.jsonl");
  if (out.empty()) throw UsageError("--out is required");
  write_loss_plot(logs, out);
  std::printf("wrote %s\n", out.c_str());
  return 0;
}

}  // namespace heed::cli
