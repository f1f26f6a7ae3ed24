// Crash safety of `heed train` (issue 7), through the real executable: SIGKILL at varied instants
// (many of them while a checkpoint is being written) never leaves a torn checkpoint and --resume
// then finishes the run exactly as an uninterrupted one; SIGINT/SIGTERM save and exit 128+N; a
// failing write (a full disk, simulated with RLIMIT_FSIZE) is reported and keeps the previous
// checkpoint; a diverging run stops naming the iteration and keeps the last good checkpoint.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "core/heed.h"
#include "nn/gpt_checkpoint.h"
#include "nn/safetensors.h"
#include "support/process.h"

using namespace heed;
using namespace heed::test;
namespace fs = std::filesystem;

namespace {

std::string tiny_corpus() { return test::tiny_corpus(4242); }

// `heed train` with a tiny model that evaluates and checkpoints every `eval_interval` iterations.
std::vector<std::string> train_args(const std::string& corpus, const std::string& out, int64_t max_iters,
                                    int64_t eval_interval, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> a = {heed_exe(), "train", "--data", corpus, "--out", out,
                                "--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "8",
                                "--batch-size", "2", "--eval-iters", "1", "--dropout", "0.1",
                                "--max-iters", std::to_string(max_iters), "--eval-interval", std::to_string(eval_interval),
                                "--log-interval", "1", "--sample-tokens", "0", "--threads", "1"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

// Temporary files (`*.tmp.*`) in a run directory.
std::vector<std::string> temp_files(const std::string& dir) {
  std::vector<std::string> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp") != std::string::npos) out.push_back(e.path().filename().string());
  return out;
}

int64_t meta_iter(const std::map<std::string, std::string>& meta) { return std::stoll(meta.at("iter")); }

// The "iter", "train_loss", "val_loss" of each evaluation's log.jsonl line (elapsed_s differs
// between runs); and the "iter" and "loss" of each batch's line.
std::vector<std::string> log_losses(const std::string& path) {
  std::vector<std::string> out;
  std::istringstream in(read_file(path));
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("val_loss")) out.push_back(j["iter"].dump() + " " + j["train_loss"].dump() + " " + j["val_loss"].dump());
  }
  return out;
}

std::vector<std::string> batch_losses(const std::string& path) {
  std::vector<std::string> out;
  std::istringstream in(read_file(path));
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("loss")) out.push_back(j["iter"].dump() + " " + j["loss"].dump());
  }
  return out;
}

// Loads both checkpoint files (whichever exist) and returns the iteration of each (-1: absent).
std::pair<int64_t, int64_t> check_loadable(const std::string& dir) {
  int64_t model_iter = -1, state_iter = -1;
  if (fs::exists(dir + "/model.safetensors")) {
    nn::LoadedGPT g;
    REQUIRE_NOTHROW(g = nn::load_gpt_checkpoint(dir + "/model.safetensors"));
    model_iter = meta_iter(g.metadata);
  }
  if (fs::exists(dir + "/train_state.safetensors")) {
    nn::SafetensorsFile st;
    REQUIRE_NOTHROW(st = nn::load_safetensors(dir + "/train_state.safetensors"));
    state_iter = meta_iter(st.metadata);
    REQUIRE(st.tensors.size() >= 9);  // the 9 parameters, then AdamW's moments after the first step
  }
  return {model_iter, state_iter};
}

// Tensor values of a checkpoint, flattened in name order.
std::vector<float> weights(const std::string& path) {
  std::vector<float> out;
  for (auto& [name, t] : nn::load_safetensors(path).tensors) {
    auto v = t.to_vector<float>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

}  // namespace

TEST_CASE("crash: SIGKILL at varied instants, many while saving, never tears a checkpoint, and --resume then finishes the run exactly",
          "[cli]") {
  ScratchDir dir("crash-kill");
  const std::string corpus = dir / "corpus.txt";
  write_file(corpus, tiny_corpus());
  const std::string run = dir / "run", ref = dir / "ref";
  // The killed runs aim far (they must never finish before their kill, however fast the disk);
  // the schedule does not depend on --max-iters, so the run is then finished at a nearer point.
  const int64_t far = 1000000;

  int killed = 0, killed_while_saving = 0;
  int64_t last_state_iter = -1;
  for (int round = 0; round < 20; ++round) {
    const bool resume = fs::exists(run + "/train_state.safetensors");
    std::vector<std::string> args = train_args(corpus, run, far, 1, resume ? std::vector<std::string>{"--resume"}
                                                                                 : std::vector<std::string>{});
    pid_t pid = spawn_process(args, dir / "out", dir / "err");
    // Odd rounds: kill a varied time after a temporary checkpoint file appears (the process is
    // then inside save_safetensors). Even rounds: kill after a varied delay, wherever it is.
    const auto t0 = std::chrono::steady_clock::now();
    const auto delay = std::chrono::microseconds(3000 + 9000 * ((round * 7) % 10));
    bool saw_temp = false;
    while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5)) {
      if (round % 2 == 1) {
        std::error_code ec;
        for (const auto& e : fs::directory_iterator(run, ec))
          if (e.path().filename().string().find(".tmp." + std::to_string(pid)) != std::string::npos) saw_temp = true;
        if (saw_temp) {
          std::this_thread::sleep_for(std::chrono::microseconds(50 * round));
          break;
        }
      } else if (std::chrono::steady_clock::now() - t0 > delay) {
        break;
      }
      if (waitpid(pid, nullptr, WNOHANG) != 0) FAIL("heed train ended before it was killed: " << read_file(dir / "err"));
    }
    kill(pid, SIGKILL);
    ProcessResult k;
    wait_process(pid, k);
    REQUIRE(k.signal == SIGKILL);
    ++killed;
    // Whatever instant it died at, each checkpoint file is complete (the previous one or the new one).
    const std::vector<std::string> temps = temp_files(run);
    if (!temps.empty()) ++killed_while_saving;
    INFO("round " << round << ", temporary files " << temps.size() << (temps.empty() ? "" : " " + temps.front() + " " + temps.back()));
    // Stale temporary files of earlier kills were removed when the next run started.
    CHECK(temps.size() <= 1);
    auto [model_iter, state_iter] = check_loadable(run);
    if (state_iter >= 0) {
      // train_state is written first: the model file may be behind it, or absent after a kill
      // between the two files of the first checkpoint (a run resumed from such a state writes the
      // model at its next checkpoint).
      INFO("model " << model_iter << ", state " << state_iter);
      REQUIRE(model_iter <= state_iter);
      REQUIRE(state_iter >= last_state_iter);  // a resumed run never goes back
      last_state_iter = state_iter;
    }
  }
  REQUIRE(killed == 20);
  // The odd rounds kill inside save_safetensors when a temporary file was seen in time.
  WARN("SIGKILLs that left a temporary file (died while saving): " << killed_while_saving << " of " << killed
       << "; last checkpoint at iteration " << last_state_iter);
  REQUIRE(last_state_iter >= 0);

  // Finish 10 iterations past the last checkpoint, and compare with the same run uninterrupted.
  const int64_t max_iters = last_state_iter + 10;
  ProcessResult r = run_process(train_args(corpus, ref, max_iters, 1));
  require_ok(r);
  r = run_process(train_args(corpus, run, max_iters, 1, {"--resume"}));
  require_ok(r);
  CHECK(temp_files(run).empty());
  CHECK(check_loadable(run) == std::pair<int64_t, int64_t>{max_iters, max_iters});
  // Twenty kills later, the same losses at every evaluation and the same final weights, bit for bit.
  CHECK(log_losses(run + "/log.jsonl") == log_losses(ref + "/log.jsonl"));
  CHECK(batch_losses(run + "/log.jsonl") == batch_losses(ref + "/log.jsonl"));  // each once, the same
  CHECK(log_losses(run + "/log.jsonl").size() == size_t(max_iters + 1));
  CHECK(weights(run + "/model.safetensors") == weights(ref + "/model.safetensors"));
  CHECK(weights(run + "/train_state.safetensors") == weights(ref + "/train_state.safetensors"));
}

TEST_CASE("crash: SIGINT and SIGTERM during train save a checkpoint, exit 128+N, and --resume continues", "[cli]") {
  for (int sig : {SIGINT, SIGTERM}) {
    INFO("signal " << sig);
    ScratchDir dir("crash-sig");
    const std::string corpus = dir / "corpus.txt";
    write_file(corpus, tiny_corpus());
    const std::string run = dir / "run";
    // A long run with rare evaluations: the stop lands between two checkpoints, and must save one.
    pid_t pid = spawn_process(train_args(corpus, run, 1000000, 100000), dir / "out", dir / "err");
    // Wait until it trains (the handlers are installed before the first progress line).
    const auto t0 = std::chrono::steady_clock::now();
    while (read_file(dir / "out").find("iter 20:") == std::string::npos) {
      REQUIRE(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30));
      REQUIRE(waitpid(pid, nullptr, WNOHANG) == 0);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    kill(pid, sig);
    ProcessResult r;
    wait_process(pid, r, 60);
    r.out = read_file(dir / "out");
    r.err = read_file(dir / "err");
    INFO(r.out << r.err);
    REQUIRE(r.signal == 0);
    REQUIRE(r.exit_code == 128 + sig);
    CHECK(r.err.empty());
    CHECK(r.out.find("stopped by signal " + std::to_string(sig)) != std::string::npos);
    CHECK(temp_files(run).empty());
    auto [model_iter, state_iter] = check_loadable(run);
    REQUIRE(state_iter > 20);  // saved where it stopped, not at the last evaluation (iteration 0)
    REQUIRE(model_iter == state_iter);

    ProcessResult resumed = run_process(train_args(corpus, run, state_iter + 5, 100000, {"--resume"}));
    INFO(resumed.out << resumed.err);
    REQUIRE(resumed.exit_code == 0);
    CHECK(resumed.out.find("resuming " + run + " at iteration " + std::to_string(state_iter)) != std::string::npos);
    CHECK(check_loadable(run) == std::pair<int64_t, int64_t>{state_iter + 5, state_iter + 5});
  }
}

TEST_CASE("crash: a failing write (full disk) is reported in one line and keeps the previous checkpoint", "[cli]") {
  ScratchDir dir("crash-full");
  const std::string corpus = dir / "corpus.txt";
  write_file(corpus, tiny_corpus());
  const std::string run = dir / "run";
  ProcessResult r = run_process(train_args(corpus, run, 4, 4));
  require_ok(r);
  const std::string model_before = read_file(run + "/model.safetensors");
  const std::string state_before = read_file(run + "/train_state.safetensors");
  REQUIRE(check_loadable(run) == std::pair<int64_t, int64_t>{4, 4});

  // RLIMIT_FSIZE below the training state's size: writing it fails with EFBIG, as writes do on a
  // full disk with ENOSPC (SIGXFSZ, which would kill the process instead, is ignored).
  const rlim_t limit = model_before.size() + 1024;
  REQUIRE(state_before.size() > limit);
  RunOptions limited;
  limited.in_child = [limit] {
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {limit, limit};
    setrlimit(RLIMIT_FSIZE, &rl);
  };
  r = run_process(train_args(corpus, run, 8, 4, {"--resume"}), limited);
  require_clean_error(r, 1, {"train_state.safetensors", "File too large", "the checkpoint of iteration 4", "kept"});
  // The previous checkpoint, byte for byte, and no temporary file left behind.
  CHECK(read_file(run + "/model.safetensors") == model_before);
  CHECK(read_file(run + "/train_state.safetensors") == state_before);
  CHECK(temp_files(run).empty());
  CHECK(check_loadable(run) == std::pair<int64_t, int64_t>{4, 4});

  // With room again, --resume goes on from the kept checkpoint.
  r = run_process(train_args(corpus, run, 8, 4, {"--resume"}));
  require_ok(r);
  CHECK(r.out.find("resuming " + run + " at iteration 4") != std::string::npos);
  CHECK(check_loadable(run) == std::pair<int64_t, int64_t>{8, 8});

  // A fresh run whose very first save fails says that nothing was saved.
  const std::string fresh = dir / "fresh";
  r = run_process(train_args(corpus, fresh, 8, 4), limited);
  require_clean_error(r, 1, {"train_state.safetensors", "File too large", "no checkpoint was saved"});
  CHECK(temp_files(fresh).empty());
  CHECK(!fs::exists(fresh + "/model.safetensors"));
  CHECK(!fs::exists(fresh + "/train_state.safetensors"));
}

TEST_CASE("crash: a NaN or infinite loss stops training naming the iteration and keeps the last good checkpoint",
          "[cli]") {
  ScratchDir dir("crash-nan");
  const std::string corpus = dir / "corpus.txt";
  write_file(corpus, tiny_corpus());
  // An absurd learning rate (no warm-up) diverges within a few steps: through a non-finite
  // evaluation loss (lr 1e3) or a non-finite gradient (lr 1e30).
  for (const char* lr : {"1e3", "1e30"}) {
    INFO("--lr " << lr);
    const std::string run = dir / (std::string("run-") + lr);
    ProcessResult r = run_process(train_args(corpus, run, 50, 1,
                                             {"--lr", lr, "--min-lr", "0", "--warmup-iters", "0", "--lr-decay-iters", "50"}));
    require_clean_error(r, 1, {"training diverged", "at iteration", "is kept"});
    std::smatch m;
    REQUIRE(std::regex_search(r.err, m, std::regex("at iteration (\\d+).*the checkpoint of iteration (\\d+)")));
    const int64_t bad_iter = std::stoll(m[1]), kept_iter = std::stoll(m[2]);
    CHECK(bad_iter >= 1);
    CHECK(bad_iter < 50);
    CHECK(kept_iter <= bad_iter);
    CHECK(std::regex_search(r.err, std::regex("nan|inf")));
    // The kept checkpoint is the one named, loads (the loader refuses non-finite weights) and
    // evaluates to a finite loss; the log holds only finite losses.
    CHECK(check_loadable(run) == std::pair<int64_t, int64_t>{kept_iter, kept_iter});
    ProcessResult e = run_heed({"eval", "--checkpoint", run + "/model.safetensors", "--data", corpus});
    INFO(e.err);
    REQUIRE(e.exit_code == 0);
    const double loss = nlohmann::json::parse(e.out)["loss"].get<double>();
    CHECK(std::isfinite(loss));
    const std::string log = read_file(run + "/log.jsonl");
    CHECK(log.find("null") == std::string::npos);
    CHECK(log_losses(run + "/log.jsonl").size() == size_t(kept_iter + 1));
  }
}
