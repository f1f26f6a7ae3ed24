// `heed train --keep-best` (issue 14; nanoGPT's always_save_checkpoint = False): best.safetensors,
// the checkpoint of the lowest val loss, is kept beside the latest, loadable like it, and --resume
// keeps the best so far (the run resumed gives the uninterrupted run's files, bit for bit).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_fixtures.h"
#include "nn/safetensors.h"

using namespace heed;
using namespace heed::test;
using nlohmann::json;

namespace {

// A corpus whose train split (the first 90%) alternates "abab..." and whose val split repeats
// "aabb": the model learns the characters' frequencies first (both losses fall), then the
// alternation, which the val split contradicts (its loss rises again).
std::string drifting_corpus() {
  std::string t = "cdefgh";  // more characters, so that learning the frequencies lowers the val loss
  while (t.size() < 540) t += "ab";
  t.resize(540);
  while (t.size() < 600) t += "aabb";
  return t;
}

std::vector<std::string> flags(const std::string& data) {
  return {"--data", data, "--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "8", "--batch-size", "4",
          "--eval-iters", "2", "--eval-interval", "5", "--threads", "1", "--sample-tokens", "0", "--seed", "7",
          "--lr", "1e-1", "--min-lr", "1e-3", "--warmup-iters", "2", "--lr-decay-iters", "40", "--keep-best"};
}

std::map<std::string, std::vector<double>> tensors_of(const std::string& path) {
  std::map<std::string, std::vector<double>> out;
  for (auto& [name, t] : nn::load_safetensors(path).tensors) out[name] = t.to_vector<double>();
  return out;
}

}  // namespace

TEST_CASE("heed train --keep-best keeps the lowest-val-loss checkpoint beside the latest, and --resume keeps the best so far",
          "[cli]") {
  ScratchDir dir("keep-best");
  const std::string data = dir / "corpus.txt";
  write_file(data, drifting_corpus());
  require_ok(run_heed(cat({"train", "--out", dir / "full", "--max-iters", "20"}, flags(data))));

  // best.safetensors is the evaluation with the lowest val loss, not the last one
  const std::vector<json> log = read_evals(dir / "full/log.jsonl");
  REQUIRE(log.size() == 5);  // iterations 0, 5, ..., 20
  size_t best = 0;
  for (size_t i = 1; i < log.size(); ++i)
    if (log[i]["val_loss"].get<double>() < log[best]["val_loss"].get<double>()) best = i;
  REQUIRE(best + 1 < log.size());  // the val loss rises again: the best is not the latest
  const nn::SafetensorsFile best_file = nn::load_safetensors(dir / "full/best.safetensors");
  const int64_t best_iter = log[best]["iter"].get<int64_t>();
  CHECK(best_file.metadata.at("iter") == std::to_string(best_iter));
  CHECK(std::stod(best_file.metadata.at("val_loss")) == Approx(log[best]["val_loss"].get<double>()).margin(1e-4));
  // ... with that iteration's weights: those of a run stopped there
  require_ok(run_heed(cat({"train", "--out", dir / "short", "--max-iters", std::to_string(best_iter)}, flags(data))));
  CHECK(tensors_of(dir / "full/best.safetensors") == tensors_of(dir / "short/model.safetensors"));
  CHECK(tensors_of(dir / "full/best.safetensors") != tensors_of(dir / "full/model.safetensors"));

  // loadable by sample, eval and inspect (which shows the best evaluation's losses)
  require_ok(run_heed({"sample", "--checkpoint", dir / "full/best.safetensors", "--tokens", "5", "--threads", "1"}));
  require_ok(run_heed({"eval", "--checkpoint", dir / "full/best.safetensors", "--data", data, "--threads", "1"}));
  ProcessResult in = run_heed({"inspect", "--json", dir / "full/best.safetensors"});
  require_ok(in);
  const json info = json::parse(in.out);
  CHECK(info["iter"] == best_iter);
  CHECK(info["last_eval"]["val_loss"] == log[best]["val_loss"]);

  // stopped at 10 (after the best) and resumed: the same best, the same latest, the same state
  require_ok(run_heed(cat({"train", "--out", dir / "part", "--max-iters", "10"}, flags(data))));
  require_ok(run_heed({"train", "--resume", "--out", dir / "part", "--max-iters", "20", "--threads", "1",
                       "--sample-tokens", "0"}));
  CHECK(read_file(dir / "part/best.safetensors") == read_file(dir / "full/best.safetensors"));
  CHECK(read_file(dir / "part/model.safetensors") == read_file(dir / "full/model.safetensors"));
  const auto state = [](const std::string& path) { return nn::load_safetensors(path).metadata.at("best_val_loss"); };
  CHECK(state(dir / "part/train_state.safetensors") == state(dir / "full/train_state.safetensors"));

  // --overwrite removes it with the rest of the run
  std::vector<std::string> without = flags(data);
  without.pop_back();  // --keep-best
  require_ok(run_heed(cat({"train", "--out", dir / "full", "--overwrite", "--max-iters", "0"}, without)));
  CHECK(std::filesystem::exists(dir / "full/model.safetensors"));
  CHECK(!std::filesystem::exists(dir / "full/best.safetensors"));
}
