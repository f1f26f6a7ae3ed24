// `heed train --init-from CKPT` (issue 14): fine-tuning a checkpoint, here the nanoGPT-named PyTorch
// fixture (tests/data/torch_fixture*, scripts/make_torch_fixture.py), on new text: its loss on that
// text falls, its architecture and vocabulary are kept, the schedule is the run's own from iteration 0,
// --resume continues it bit for bit; a character outside the vocabulary and architecture flags that
// contradict the checkpoint are refused, and so is a source checkpoint the run would write over.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_fixtures.h"
#include "nn/safetensors.h"
#include "optim/schedule.h"

using namespace heed;
using namespace heed::test;
using nlohmann::json;

namespace {

const std::string kData = std::string(HEED_SOURCE_DIR) + "/tests/data/";
const std::string kTorchCkpt = kData + "torch_fixture_nanogpt.safetensors";  // 2 layers, 2 heads, 16 wide, block 16

// New text over the fixture's characters (its model never saw these sentences).
std::string new_text() {
  const char* words[] = {"fox", "dog", "sleeps", "jumps", "over", "the", "lazy", "quick", "brown", "café", "→", "★"};
  std::string t;
  uint32_t x = 11;
  for (int i = 0; i < 160; ++i) {
    x = x * 1103515245u + 12345u;
    t += words[(x >> 16) % std::size(words)];
    t += (x >> 8) % 7 == 0 ? "\n" : " ";
  }
  return t;
}

// The run's recipe: the checkpoint's architecture comes from the checkpoint.
std::vector<std::string> finetune_flags(const std::string& data) {
  return {"--init-from", kTorchCkpt, "--data", data, "--batch-size", "4", "--eval-iters", "2", "--eval-interval", "5",
          "--threads", "1", "--sample-tokens", "0", "--seed", "3", "--lr", "3e-3", "--min-lr", "3e-4",
          "--warmup-iters", "2", "--lr-decay-iters", "40", "--dropout", "0.1"};
}

double eval_loss(const std::string& ckpt, const std::string& data) {
  ProcessResult r = run_heed({"eval", "--checkpoint", ckpt, "--data", data, "--threads", "1"});
  require_ok(r);
  return json::parse(r.out).at("loss").get<double>();
}

std::map<std::string, std::vector<double>> tensors_of(const std::string& path) {
  std::map<std::string, std::vector<double>> out;
  for (auto& [name, t] : nn::load_safetensors(path).tensors) out[name] = t.to_vector<double>();
  return out;
}

std::string evals_of(const std::string& log) {  // the evaluations' lines without their wall-clock time
  std::string out;
  for (json& j : read_evals(log)) {
    j.erase("elapsed_s");
    out += j.dump() + "\n";
  }
  return out;
}

}  // namespace

TEST_CASE("heed train --init-from fine-tunes a PyTorch checkpoint on new text, and --resume continues it bit for bit",
          "[cli]") {
  ScratchDir dir("finetune");
  const std::string text = dir / "new.txt";
  write_file(text, new_text());
  const std::string source_bytes = read_file(kTorchCkpt);
  const double before = eval_loss(kTorchCkpt, text);

  // --n-head 2 is the checkpoint's own: naming it is accepted
  ProcessResult full = run_heed(cat({"train", "--out", dir / "full", "--max-iters", "20", "--n-head", "2"},
                                    finetune_flags(text)));
  require_ok(full);
  CHECK(full.out.find("fine-tuning " + kTorchCkpt) != std::string::npos);
  CHECK(read_file(kTorchCkpt) == source_bytes);  // the source is never written

  // the loss on the new text falls, far
  const double after = eval_loss(dir / "full/model.safetensors", text);
  INFO("loss before " << before << ", after " << after);
  CHECK(after < before - 0.5);

  // the architecture and the vocabulary are the checkpoint's (the new text has fewer characters)
  const nn::SafetensorsFile src = nn::load_safetensors(kTorchCkpt), out = nn::load_safetensors(dir / "full/model.safetensors");
  CHECK(json::parse(out.metadata.at("vocab")) == json::parse(src.metadata.at("vocab")));
  const json c_src = json::parse(src.metadata.at("config")), c_out = json::parse(out.metadata.at("config"));
  for (const char* k : {"n_layer", "n_head", "n_embd", "block_size", "vocab_size", "bias"}) CHECK(c_out[k] == c_src[k]);
  CHECK(c_out["vocab_size"] == 73);

  // the schedule is this run's, from iteration 0: warm-up from lr/3, and the log starts at iteration 0
  std::istringstream log(read_file(dir / "full/log.jsonl"));
  std::string first;
  std::getline(log, first);
  const json j = json::parse(first);
  CHECK(j["iter"] == 0);
  CHECK(j["lr"].get<double>() == optim::cosine_lr(0, 3e-3, 3e-4, 2, 40));
  // and config.toml records the source, so --config repeats the fine-tuning
  CHECK(read_file(dir / "full/config.toml").find("init_from = '" + kTorchCkpt + "'") != std::string::npos);

  // stopped at 10 and resumed to 20: the uninterrupted run's bits (with dropout on)
  require_ok(run_heed(cat({"train", "--out", dir / "part", "--max-iters", "10"}, finetune_flags(text))));
  ProcessResult r = run_heed({"train", "--resume", "--out", dir / "part", "--max-iters", "20", "--threads", "1",
                              "--sample-tokens", "0"});
  require_ok(r);
  CHECK(r.out.find("resuming " + dir / "part" + " at iteration 10 of 20") != std::string::npos);
  CHECK(read_file(dir / "part/model.safetensors") == read_file(dir / "full/model.safetensors"));
  CHECK(tensors_of(dir / "part/train_state.safetensors") == tensors_of(dir / "full/train_state.safetensors"));
  CHECK(evals_of(dir / "part/log.jsonl") == evals_of(dir / "full/log.jsonl"));
}

TEST_CASE("heed train --init-from refuses a character outside the checkpoint's vocabulary, naming it and its byte offset",
          "[cli]") {
  ScratchDir dir("finetune-vocab");
  const std::string text = dir / "new.txt";
  // 'Ü' is 2 bytes, '★' 3: the '#' starts at byte 2 + 4 + 3 + 2 = 11 (character 8)
  write_file(text, "Über ★ x#" + new_text());
  ProcessResult r = run_heed(cat({"train", "--out", dir / "run", "--max-iters", "2"}, finetune_flags(text)));
  require_clean_error(r, 1, {text, "'#' (U+0023) at byte offset 11", "not in the model's vocabulary"});
  CHECK(!std::filesystem::exists(dir / "run"));  // no run files, and the directory it made is gone
}

TEST_CASE("heed train --init-from refuses architecture flags that contradict the checkpoint, naming them", "[cli]") {
  ScratchDir dir("finetune-arch");
  const std::string text = dir / "new.txt";
  write_file(text, new_text());
  ProcessResult r = run_heed(cat({"train", "--out", dir / "run", "--n-layer", "3", "--n-embd", "32", "--n-head", "2",
                                  "--block-size", "16"},
                                 finetune_flags(text)));
  require_clean_error(r, 2, {"--n-layer 3 (the checkpoint's is 2)", "--n-embd 32 (the checkpoint's is 16)",
                             "--init-from"});
  CHECK(r.err.find("--n-head") == std::string::npos);  // the checkpoint's own values are no contradiction
  CHECK(r.err.find("--block-size") == std::string::npos);
  CHECK(!std::filesystem::exists(dir / "run"));  // refused before --out is touched
  r = run_heed(cat({"train", "--out", dir / "run", "--bias=false"}, finetune_flags(text)));
  require_clean_error(r, 2, {"--bias false (the checkpoint's is true)"});

  // the checkpoint the run would write over is refused, even with --overwrite
  require_ok(run_heed(cat({"train", "--out", dir / "a", "--max-iters", "1"}, finetune_flags(text))));
  const auto files = snapshot(dir / "a");
  std::vector<std::string> flags = finetune_flags(text);
  flags[1] = dir / "a/model.safetensors";
  r = run_heed(cat({"train", "--out", dir / "a", "--overwrite", "--max-iters", "1"}, flags));
  require_clean_error(r, 2, {"--init-from", "is one of the files the run writes into --out"});
  CHECK(snapshot(dir / "a") == files);
}

TEST_CASE("heed train --init-from takes nanoGPT's words: scratch is no checkpoint, resume and gpt2 are refused by name",
          "[cli]") {
  ScratchDir dir("finetune-words");
  ProcessResult r = run_heed({"train", "--out", dir / "r", "--init-from", "resume", "--max-iters", "1"});
  require_clean_error(r, 2, {"--init-from resume", "--resume"});
  r = run_heed({"train", "--out", dir / "g", "--init-from", "gpt2-xl", "--max-iters", "1"});
  require_clean_error(r, 2, {"--init-from gpt2-xl", "does not download"});
  CHECK(!std::filesystem::exists(dir / "r"));
  CHECK(!std::filesystem::exists(dir / "g"));
  // 'scratch' trains from a fresh initialisation, as nanoGPT's default does.
  const std::string text = dir / "t.txt";
  write_file(text, std::string(200, 'a') + "bc\n");
  require_ok(run_heed({"train", "--out", dir / "s", "--init-from", "scratch", "--data", text, "--max-iters", "1",
                       "--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "8", "--batch-size", "2",
                       "--eval-iters", "1", "--sample-tokens", "0", "--threads", "1"}));
  CHECK(std::filesystem::exists(dir / "s/model.safetensors"));
}
