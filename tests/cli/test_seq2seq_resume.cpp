// `heed seq2seq --resume` (issue 14): a seq2seq run stopped or finished continues bit for bit
// (weights, optimizer moments, data order, the loss summed since the last report), as train's does;
// the recorded recipe is kept and a flag that contradicts it is refused.
#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_fixtures.h"
#include "nn/safetensors.h"

using namespace heed;
using namespace heed::test;
using nlohmann::json;

namespace {

// A tiny model and an explicit schedule (by default the decay ends at --max-iters, which a run
// extended with --resume keeps from its first part).
const std::vector<std::string> kTiny = {"seq2seq", "--task", "reverse", "--n-embd", "16", "--n-head", "2", "--n-layer",
                                        "1", "--batch-size", "8", "--examples", "20", "--threads", "1",
                                        "--eval-interval", "5", "--warmup-iters", "2", "--lr-decay-iters", "20",
                                        "--lr", "3e-3"};

std::map<std::string, std::vector<double>> tensors_of(const std::string& path) {
  std::map<std::string, std::vector<double>> out;
  for (auto& [name, t] : nn::load_safetensors(path).tensors) out[name] = t.to_vector<double>();
  return out;
}

std::string log_without_times(const std::string& path) {
  std::istringstream in(read_file(path));
  std::string out;
  for (std::string line; std::getline(in, line);) {
    json j = json::parse(line);
    j.erase("elapsed_s");
    out += j.dump() + "\n";
  }
  return out;
}

}  // namespace

TEST_CASE("heed seq2seq --resume continues a finished run exactly as an uninterrupted run", "[cli][seq2seq]") {
  ScratchDir dir("s2s-resume");
  const std::string full = dir / "full", part = dir / "part";
  ProcessResult a = run_heed(cat(kTiny, {"--max-iters", "20", "--out", full}));
  require_ok(a);
  require_ok(run_heed(cat(kTiny, {"--max-iters", "10", "--out", part})));
  // only --out (and how the process runs) is needed: the recipe is the run's
  ProcessResult b = run_heed({"seq2seq", "--resume", "--out", part, "--max-iters", "20", "--threads", "1"});
  require_ok(b);
  CHECK(b.out.find("resuming " + part + " at iteration 10 of 20") != std::string::npos);
  CHECK(read_file(part + "/model.safetensors") == read_file(full + "/model.safetensors"));
  CHECK(tensors_of(part + "/seq2seq_state.safetensors") == tensors_of(full + "/seq2seq_state.safetensors"));
  CHECK(log_without_times(part + "/log.jsonl") == log_without_times(full + "/log.jsonl"));
  CHECK(last_line(b.out) == last_line(a.out));  // the same exact match on the held-out set
  REQUIRE(log_without_times(full + "/log.jsonl").find("\"iter\":15") != std::string::npos);

  // a finished run resumed as it is: nothing to train, the same model scored again
  const std::string model = read_file(full + "/model.safetensors");
  ProcessResult c = run_heed({"seq2seq", "--resume", "--out", full, "--threads", "1"});
  require_ok(c);
  CHECK(last_line(c.out) == last_line(a.out));
  CHECK(read_file(full + "/model.safetensors") == model);
}

TEST_CASE("heed seq2seq --resume keeps the recorded recipe and suggests itself for a directory that holds a run",
          "[cli][seq2seq]") {
  ScratchDir dir("s2s-resume-refusals");
  const std::string run = dir / "run";
  require_ok(run_heed(cat(kTiny, {"--max-iters", "5", "--out", run})));
  const auto before = snapshot(run);
  require_clean_error(run_heed({"seq2seq", "--resume", "--out", run, "--n-embd", "32"}), 2,
                      {"--n-embd 32 differs from the run's 16", "--resume"});
  require_clean_error(run_heed({"seq2seq", "--resume", "--out", run, "--task", "copy"}), 2,
                      {"--task copy differs from the run's reverse"});
  require_clean_error(run_heed(cat(kTiny, {"--max-iters", "5", "--out", run})), 2,
                      {"--out " + run, "already holds a seq2seq run", "--resume", "--overwrite"});
  require_clean_error(run_heed({"seq2seq", "--resume", "--out", run, "--max-iters", "3"}), 2,
                      {"--max-iters 3", "5 iterations already"});
  require_clean_error(run_heed({"seq2seq", "--resume", "--out", dir / "none"}), 2, {"--resume", "holds no run"});
  require_clean_error(run_heed({"seq2seq", "--resume"}), 2, {"--resume needs --out"});
  CHECK(snapshot(run) == before);
  // the same values are no contradiction (--d-model is --n-embd's other name)
  require_ok(run_heed({"seq2seq", "--resume", "--out", run, "--d-model", "16", "--task", "reverse", "--max-iters", "6",
                       "--threads", "1"}));
}

TEST_CASE("heed seq2seq --resume refuses a tampered seq2seq_state naming the field, the run left as it was",
          "[cli][seq2seq]") {
  ScratchDir dir("s2s-state");
  const std::string run = dir / "run", state = run + "/seq2seq_state.safetensors";
  require_ok(run_heed(cat(kTiny, {"--max-iters", "5", "--out", run})));
  const nn::SafetensorsFile good = nn::load_safetensors(state);
  auto meta = [&](const std::string& key, const std::string& value) {
    nn::SafetensorsFile f = good;
    if (value.empty()) f.metadata.erase(key);
    else f.metadata[key] = value;
    return f;
  };
  auto option = [&](const std::string& key, const json& value) {
    nn::SafetensorsFile f = good;
    json o = json::parse(f.metadata.at("options"));
    o[key] = value;
    f.metadata["options"] = o.dump();
    return f;
  };
  nn::SafetensorsFile no_moments = good;  // each parameter's moments gone: resumed silently as fresh ones
  std::erase_if(no_moments.tensors, [](const auto& named) { return named.first.rfind("optim.", 0) == 0; });
  nn::SafetensorsFile nan_weight = good;
  for (auto& [name, t] : nan_weight.tensors)
    if (name == "model.generator.bias") t = Tensor::full(t.shape(), std::nan(""));
  const std::vector<std::pair<nn::SafetensorsFile, std::vector<std::string>>> cases = {
      {meta("seq2seq_iter", "x"), {"\"seq2seq_iter\""}},
      {meta("seq2seq_iter", ""), {"missing \"seq2seq_iter\""}},
      {meta("optimizer_step", "4"), {"\"optimizer_step\" 4"}},
      {meta("data_rng", "[\"0\",\"0\",\"0\",\"0\"]"), {"\"data_rng\"", "all zeros"}},
      {meta("interval_loss", "nan"), {"\"interval_loss\""}},
      {meta("interval_steps", "-1"), {"\"interval_steps\""}},
      {meta("interval_steps", "6"), {"\"interval_steps\" 6 is more than the 5 iterations done"}},
      {meta("elapsed_s", "-2"), {"\"elapsed_s\""}},
      {option("n_embd", 31), {"\"options\"", "--n-embd 31"}},
      {option("task", "sort"), {"\"options\"", "sort"}},
      {option("max_iters", 2), {"\"seq2seq_iter\" 5 is past the recorded max_iters 2"}},
      {nan_weight, {"model.generator.bias", "not finite"}},
      {no_moments, {"missing tensor 'optim.", ".exp_avg' at iteration 5"}},
  };
  for (const auto& [file, needles] : cases) {
    INFO(needles[0]);
    nn::save_safetensors(state, file.tensors, file.metadata);
    const auto before = snapshot(run);
    require_clean_error(run_heed({"seq2seq", "--resume", "--out", run, "--max-iters", "8", "--threads", "1"}), 1,
                        cat({state}, needles));
    CHECK(snapshot(run) == before);
  }
  nn::save_safetensors(state, good.tensors, good.metadata);
  require_ok(run_heed({"seq2seq", "--resume", "--out", run, "--max-iters", "8", "--threads", "1"}));
}
