// A run directory belongs to one run (issue 11), through the real executable: a second `heed train`
// into a run is refused unless --resume or --overwrite says what to do; --config repeats a run but
// never into the directory it recorded unless told; a GPT run and a seq2seq run never replace each
// other; two writers never share a directory (an flock names the holder; a killed holder never
// blocks); no command writes over one of its inputs. Every refusal leaves every byte as it was.
#include <signal.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cli_fixtures.h"
#include "io.h"
#include "nn/safetensors.h"
#include <unistd.h>
#include "support/process.h"

using namespace heed::test;
namespace fs = std::filesystem;

namespace {

// The tiny model and recipe of these tests (a run takes a few milliseconds).
std::vector<std::string> tiny(const std::string& corpus, const std::string& out, int64_t max_iters = 4) {
  return {"train", "--data", corpus, "--out", out, "--n-layer", "1", "--n-head", "2", "--n-embd", "16",
          "--block-size", "8", "--batch-size", "2", "--eval-iters", "1", "--eval-interval", "2",
          "--max-iters", std::to_string(max_iters), "--sample-tokens", "0", "--threads", "1"};
}


struct Fixture {
  ScratchDir dir{"run-dir"};
  std::string corpus = dir / "corpus.txt";
  Fixture() { write_file(corpus, tiny_corpus(777)); }
};

// Waits until `path` holds `needle` (the child is then past that point), failing after 30 s or if
// the child ends first.
void wait_for_output(pid_t pid, const std::string& path, const std::string& needle) {
  const auto t0 = std::chrono::steady_clock::now();
  while (read_file(path).find(needle) == std::string::npos) {
    REQUIRE(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30));
    REQUIRE(waitpid(pid, nullptr, WNOHANG) == 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace

TEST_CASE("run dir: a second train into a run is refused unless --resume or --overwrite, and changes nothing", "[cli]") {
  Fixture fx;
  const std::string run = fx.dir / "run";
  require_ok(run_heed(tiny(fx.corpus, run)));
  const auto before = snapshot(run);
  REQUIRE(before.count("model.safetensors"));
  REQUIRE(before.count("log.jsonl"));

  // README's first command a second time: refused, the first run intact byte for byte.
  require_clean_error(run_heed(tiny(fx.corpus, run)), 2, {"--out " + run, "already holds a GPT run", "--resume", "--overwrite"});
  CHECK(snapshot(run) == before);
  // --resume and --overwrite together make no sense
  require_clean_error(run_heed(cat(tiny(fx.corpus, run), {"--resume", "--overwrite"})), 2, {"--resume", "--overwrite"});
  CHECK(snapshot(run) == before);

  // --resume continues it (nothing to do at the same --max-iters: the files stay)
  require_ok(run_heed({"train", "--resume", "--out", run, "--max-iters", "6", "--threads", "1", "--sample-tokens", "0"}));
  CHECK(read_file(run + "/log.jsonl").size() > before.at("log.jsonl").size());

  // --overwrite starts over: the old run's files are replaced by the new run's
  require_ok(run_heed(cat(tiny(fx.corpus, run, 2), {"--overwrite"})));
  std::istringstream log(read_file(run + "/log.jsonl"));
  std::vector<int64_t> iters;
  for (std::string line; std::getline(log, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("val_loss")) iters.push_back(j["iter"].get<int64_t>());  // the evaluations
  }
  CHECK(iters == std::vector<int64_t>{0, 2});
}

// --overwrite removes the old run only once nothing can refuse the new one: a corpus refused for
// its bytes or its length leaves the old run as it was (before, it left only the lock file).
TEST_CASE("run dir: an --overwrite refused for its corpus leaves the old run as it was", "[cli]") {
  Fixture fx;
  const std::string run = fx.dir / "run";
  require_ok(run_heed(tiny(fx.corpus, run)));
  const auto before = snapshot(run);
  const std::string bad = fx.dir / "bad.txt", short_text = fx.dir / "short.txt";
  write_file(bad, "hello \xff world, and more text than a block of eight characters needs");
  write_file(short_text, "abc");
  require_clean_error(run_heed(cat(tiny(bad, run), {"--overwrite"})), 1, {"UTF-8"});
  CHECK(snapshot(run) == before);
  require_clean_error(run_heed(cat(tiny(short_text, run), {"--overwrite"})), 1, {"--block-size"});
  CHECK(snapshot(run) == before);
  require_ok(run_heed(cat(tiny(fx.corpus, run, 2), {"--overwrite"})));  // and a good one still starts over
  CHECK(snapshot(run) != before);
}

// A file at one of a run's paths that heed did not write (a project's own config.toml, another
// tool's log or safetensors) is refused in every mode, --overwrite included, and kept byte for byte.
TEST_CASE("run dir: a file heed did not write at a run's path is refused, --overwrite included, and kept", "[cli]") {
  Fixture fx;
  const std::vector<std::pair<std::string, std::string>> foreign = {
      {"config.toml", "[tool]\nname = \"mine\"\n"},
      {"log.jsonl", "{\"note\": \"my own log\"}\n"},
      {"loss.svg", "<svg xmlns=\"http://www.w3.org/2000/svg\"><text>mine</text></svg>\n"}};
  for (const auto& [file, text] : foreign) {
    INFO(file);
    const std::string dir = fx.dir / ("proj_" + file);
    fs::create_directories(dir);
    write_file(dir + "/" + file, text);
    for (const std::vector<std::string>& extra : {std::vector<std::string>{}, {"--overwrite"}}) {
      require_clean_error(run_heed(cat(tiny(fx.corpus, dir), extra)), 2, {file, "not written by heed", "--out"});
      CHECK(read_file(dir + "/" + file) == text);
    }
  }
  const std::string dir = fx.dir / "proj_model";
  fs::create_directories(dir);
  heed::nn::save_safetensors(dir + "/model.safetensors", {{"w", heed::Tensor::zeros({2})}}, {});
  const std::string model = read_file(dir + "/model.safetensors");
  require_clean_error(run_heed(cat(tiny(fx.corpus, dir), {"--overwrite"})), 2, {"model.safetensors", "not written by heed"});
  CHECK(read_file(dir + "/model.safetensors") == model);
  // heed's own files of a run are still its own, its config.toml edited by hand included: --resume
  // continues such a run and --overwrite starts it over.
  const std::string run = fx.dir / "edited";
  require_ok(run_heed(tiny(fx.corpus, run)));
  std::string config = read_file(run + "/config.toml");
  config = config.substr(config.find("\n\n") + 2);  // heed's header comment gone
  write_file(run + "/config.toml", config);
  require_ok(run_heed({"train", "--resume", "--out", run, "--max-iters", "6", "--threads", "1", "--sample-tokens", "0"}));
  write_file(run + "/config.toml", config);
  require_ok(run_heed(cat(tiny(fx.corpus, run, 2), {"--overwrite"})));
}

TEST_CASE("run dir: --config repeats a run elsewhere, never into the recorded directory unless told", "[cli]") {
  Fixture fx;
  const std::string a = fx.dir / "a", b = fx.dir / "b";
  require_ok(run_heed(tiny(fx.corpus, a)));
  const auto before = snapshot(a);
  const std::string cfg = a + "/config.toml";
  // README's "repeat a run" without --out: refused, naming the recorded directory and the way out
  require_clean_error(run_heed({"train", "--config", cfg}), 2, {"--config", a, "--out"});
  CHECK(snapshot(a) == before);
  // with --out: the same run, bit for bit
  require_ok(run_heed({"train", "--config", cfg, "--out", b}));
  CHECK(read_file(b + "/model.safetensors") == before.at("model.safetensors"));
  // told to: --resume continues the recorded run (in a), --overwrite starts it over
  require_ok(run_heed({"train", "--config", cfg, "--resume", "--max-iters", "6"}));
  CHECK(read_file(a + "/log.jsonl").size() > before.at("log.jsonl").size());
  require_ok(run_heed({"train", "--config", cfg, "--overwrite", "--max-iters", "4"}));
  CHECK(read_file(a + "/model.safetensors") == before.at("model.safetensors"));  // the same recipe again
}

TEST_CASE("run dir: a GPT run and a seq2seq run never replace each other, whatever the flags", "[cli][seq2seq]") {
  Fixture fx;
  const std::string gpt = fx.dir / "gpt", s2s = fx.dir / "s2s";
  require_ok(run_heed(tiny(fx.corpus, gpt)));
  const std::vector<std::string> seq2seq = {"seq2seq", "--task", "copy", "--max-iters", "2", "--d-model", "8",
                                            "--n-head", "2", "--n-layer", "1", "--examples", "4", "--threads", "1"};
  require_ok(run_heed(cat(seq2seq, {"--out", s2s})));
  const auto gpt_before = snapshot(gpt), s2s_before = snapshot(s2s);

  for (const auto& extra : std::vector<std::vector<std::string>>{{}, {"--overwrite"}}) {
    INFO(extra.size());
    require_clean_error(run_heed(cat(cat(seq2seq, {"--out", gpt}), extra)), 2, {"--out " + gpt, "GPT run", "never"});
    require_clean_error(run_heed(cat(tiny(fx.corpus, s2s), extra)), 2, {"--out " + s2s, "seq2seq run", "never"});
  }
  require_clean_error(run_heed({"train", "--resume", "--out", s2s}), 2, {"--out " + s2s, "seq2seq run"});
  CHECK(snapshot(gpt) == gpt_before);
  CHECK(snapshot(s2s) == s2s_before);
  // a seq2seq run into its own directory: refused, then --overwrite replaces it
  {
    const ProcessResult again = run_heed(cat(seq2seq, {"--out", s2s}));
    require_clean_error(again, 2, {"--out " + s2s, "already holds", "--overwrite"});
    CHECK(again.err.find("add --resume to continue it") != std::string::npos);  // as train's message
  }
  CHECK(snapshot(s2s) == s2s_before);
  require_ok(run_heed(cat(seq2seq, {"--out", s2s, "--overwrite"})));
}

TEST_CASE("run dir: two trainings into one --out: the second is refused naming the first, which goes on", "[cli]") {
  Fixture fx;
  const std::string run = fx.dir / "run";
  // A long run (far --max-iters, rare evaluations) holds the directory...
  std::vector<std::string> first = tiny(fx.corpus, run, 1000000);
  first[std::find(first.begin(), first.end(), "--eval-interval") - first.begin() + 1] = "100000";
  first.insert(first.begin(), heed_exe());
  const pid_t pid = spawn_process(first, fx.dir / "out1", fx.dir / "err1");
  wait_for_output(pid, fx.dir / "out1", "iter 10:");
  // ... a second writer, whatever its flags, is refused at once, naming the holder's pid.
  for (const auto& args : {tiny(fx.corpus, run), cat(tiny(fx.corpus, run), {"--overwrite"}),
                           std::vector<std::string>{"train", "--resume", "--out", run}}) {
    const ProcessResult second = run_heed(args);
    require_clean_error(second, 1, {"--out " + run, "in use by another heed", "pid " + std::to_string(pid), "heed train"});
    CHECK(second.seconds < 1.0 * kTimeScale);
  }
  // The first run was not disturbed: it stops on SIGINT with its checkpoint, as always.
  REQUIRE(waitpid(pid, nullptr, WNOHANG) == 0);
  kill(pid, SIGINT);
  ProcessResult r;
  wait_process(pid, r, 60);
  INFO(read_file(fx.dir / "out1") << read_file(fx.dir / "err1"));
  CHECK(r.exit_code == 128 + SIGINT);
  CHECK(read_file(fx.dir / "err1").empty());
  // Afterwards the directory is free again.
  require_ok(run_heed({"train", "--resume", "--out", run, "--max-iters", "30", "--threads", "1", "--sample-tokens", "0"}));
}

TEST_CASE("run dir: a train refused before it writes leaves no directory and no lock file it made", "[cli]") {
  Fixture fx;
  const std::string short_corpus = fx.dir / "short.txt";
  write_file(short_corpus, "too short for a block of 8 and its validation split");
  auto refused = [&](const std::string& out) {
    const ProcessResult r = run_heed(tiny(short_corpus, out));
    require_clean_error(r, 1, {"too few for --block-size 8"});
  };
  // A new directory, three levels of it: none of them is left.
  refused(fx.dir / "new/a/b");
  CHECK_FALSE(fs::exists(fx.dir / "new"));
  // A directory of the user's: kept with its files, without a lock file.
  fs::create_directories(fx.dir / "mine");
  write_file(fx.dir / "mine/notes.txt", "mine");
  refused(fx.dir / "mine");
  CHECK(read_file(fx.dir / "mine/notes.txt") == "mine");
  CHECK_FALSE(fs::exists(fx.dir / "mine/.heed.lock"));
  // A lock file that was there before (an earlier run's directory, its files moved away) stays.
  fs::create_directories(fx.dir / "old");
  write_file(fx.dir / "old/.heed.lock", "pid 1, heed train, started 2026-01-01 00:00:00\n");
  refused(fx.dir / "old");
  CHECK(fs::exists(fx.dir / "old/.heed.lock"));
  // A run that writes keeps its directory and lock file, as before.
  require_ok(run_heed(tiny(fx.corpus, fx.dir / "ok/run")));
  CHECK(fs::exists(fx.dir / "ok/run/.heed.lock"));
  CHECK(fs::exists(fx.dir / "ok/run/model.safetensors"));
  // Refused for what the directory holds: a user's own config.toml, or a run copied without its
  // dotfiles. Neither gets a lock file it did not have.
  fs::create_directories(fx.dir / "notes");
  write_file(fx.dir / "notes/config.toml", "mine = true\n");
  require_clean_error(run_heed(tiny(fx.corpus, fx.dir / "notes")), 2, {"was not written by heed"});
  CHECK_FALSE(fs::exists(fx.dir / "notes/.heed.lock"));
  fs::create_directories(fx.dir / "copy");
  for (const char* f : {"model.safetensors", "train_state.safetensors", "log.jsonl", "config.toml"})
    fs::copy_file(fs::path(fx.dir / "ok/run") / f, fs::path(fx.dir / "copy") / f);
  require_clean_error(run_heed(tiny(fx.corpus, fx.dir / "copy")), 2, {"already holds a GPT run"});
  CHECK_FALSE(fs::exists(fx.dir / "copy/.heed.lock"));
  // seq2seq's --out is named as train's (a/../b is b), so what it made is what it removes.
  require_clean_error(run_heed({"seq2seq", "--resume", "--out", fx.dir / "s2s-a/../s2s-b"}), 2,
                      {"holds no run to continue"});
  CHECK_FALSE(fs::exists(fx.dir / "s2s-a"));
  CHECK_FALSE(fs::exists(fx.dir / "s2s-b"));
}

TEST_CASE("run dir: the lock of a killed run never blocks the next one", "[cli]") {
  Fixture fx;
  const std::string run = fx.dir / "run";
  std::vector<std::string> args = tiny(fx.corpus, run, 1000000);
  args.insert(args.begin(), heed_exe());
  const pid_t pid = spawn_process(args, fx.dir / "out", fx.dir / "err");
  wait_for_output(pid, fx.dir / "out", "iter 10:");
  kill(pid, SIGKILL);
  ProcessResult killed;
  wait_process(pid, killed);
  REQUIRE(killed.signal == SIGKILL);
  // The lock file is still there, naming the dead process; it blocks nothing.
  CHECK(read_file(run + "/.heed.lock").find("pid " + std::to_string(pid)) != std::string::npos);
  const ProcessResult next = run_heed({"train", "--resume", "--out", run, "--max-iters", "20", "--threads", "1",
                                       "--sample-tokens", "0"});
  require_ok(next);
  CHECK(next.out.find("resuming " + run) != std::string::npos);
  // and seq2seq's directories are locked the same way (a run there finishes and frees it)
  require_ok(run_heed({"seq2seq", "--task", "copy", "--max-iters", "1", "--d-model", "8", "--n-head", "2",
                       "--n-layer", "1", "--examples", "2", "--threads", "1", "--out", fx.dir / "s2s"}));
  CHECK(fs::exists(fx.dir / "s2s/.heed.lock"));
}

TEST_CASE("run dir: no command writes its output over one of its inputs", "[cli]") {
  Fixture fx;
  const std::string run = fx.dir / "run";
  require_ok(run_heed(tiny(fx.corpus, run)));
  const auto before = snapshot(run);
  const std::string ckpt = run + "/model.safetensors", log = run + "/log.jsonl";
  require_clean_error(run_heed({"attention", "--checkpoint", ckpt, "--text", "abc", "--out", ckpt}), 2,
                      {"--out " + ckpt, "--checkpoint"});
  // the same file under another spelling
  require_clean_error(run_heed({"attention", "--checkpoint", ckpt, "--text", "abc", "--out", run + "/./model.safetensors"}),
                      2, {"--checkpoint"});
  require_clean_error(run_heed({"plot", "--log", log, "--out", log}), 2, {"--out " + log, "--log"});
  require_clean_error(run_heed({"plot", "--log", fx.corpus, "--log", log, "--out", run + "/../run/log.jsonl"}), 2, {"--log"});
  // training on a file the run writes
  require_clean_error(run_heed(cat(tiny(log, run), {"--resume"})), 2, {"--data " + log, "--out " + run});
  CHECK(snapshot(run) == before);
  // a drawing replaces only a drawing: never a checkpoint or a text given by mistake
  require_clean_error(run_heed({"plot", "--log", log, "--out", fx.corpus}), 2, {"--out " + fx.corpus, "not an SVG"});
  const std::string other = fx.dir / "other.safetensors";
  write_file(other, before.at("model.safetensors"));
  require_clean_error(run_heed({"attention", "--checkpoint", ckpt, "--text", "abc", "--out", other}), 2,
                      {"--out " + other, "not an SVG"});
  CHECK(read_file(other) == before.at("model.safetensors"));
  CHECK(read_file(fx.corpus) == tiny_corpus(777));
  // a user's SVG is not heed's drawing: kept
  const std::string mine = fx.dir / "mine.svg";
  write_file(mine, "<svg xmlns=\"http://www.w3.org/2000/svg\"><circle r=\"5\"/></svg>\n");
  const std::string mine_before = read_file(mine);
  require_clean_error(run_heed({"plot", "--log", log, "--out", mine}), 2, {"--out " + mine, "not an SVG drawing heed made"});
  require_clean_error(run_heed({"attention", "--checkpoint", ckpt, "--text", "abc", "--out", mine}), 2,
                      {"--out " + mine, "not an SVG drawing heed made"});
  CHECK(read_file(mine) == mine_before);
  // an SVG heed drew is redrawn
  require_ok(run_heed({"plot", "--log", log, "--out", run + "/loss.svg"}));
  require_ok(run_heed({"plot", "--log", log, "--out", run + "/loss.svg"}));
}

TEST_CASE("run dir: heed never writes through a symlink planted in a run directory", "[cli]") {
  Fixture fx;
  const std::string precious = fx.dir / "precious.txt";
  write_file(precious, "precious\n");
  {  // the lock: refused, naming it, before anything is written
    const std::string run = fx.dir / "lock";
    fs::create_directories(run);
    fs::create_symlink(precious, run + "/.heed.lock");
    require_clean_error(run_heed(tiny(fx.corpus, run)), 1, {run + "/.heed.lock", "symbolic link"});
    CHECK(read_file(precious) == "precious\n");
    CHECK(!fs::exists(run + "/log.jsonl"));
    // a lock that is not a regular file (a directory here) is refused too
    const std::string dir_lock = fx.dir / "dirlock";
    fs::create_directories(dir_lock + "/.heed.lock");
    require_clean_error(run_heed(tiny(fx.corpus, dir_lock)), 1, {dir_lock + "/.heed.lock"});
  }
  {  // the log, which is appended to: --overwrite removes the link, never its target
    const std::string run = fx.dir / "log";
    fs::create_directories(run);
    fs::create_symlink(precious, run + "/log.jsonl");
    require_ok(run_heed(cat(tiny(fx.corpus, run), {"--overwrite"})));
    CHECK(read_file(precious) == "precious\n");
    CHECK(!fs::is_symlink(run + "/log.jsonl"));
  }
  {  // the temporary files of both atomic writers (named after the writing process: this one here)
    const std::string svg = fx.dir / "plot.svg", st = fx.dir / "model.safetensors";
    const std::string pid = std::to_string(::getpid());
    fs::create_symlink(precious, svg + ".tmp." + pid);
    fs::create_symlink(precious, st + ".tmp." + pid);
    heed::cli::write_file_atomically(svg, "<svg/>");
    heed::nn::save_safetensors(st, {{"w", heed::Tensor::zeros({2})}}, {});
    CHECK(read_file(precious) == "precious\n");
    CHECK(read_file(svg) == "<svg/>");
    CHECK(heed::nn::load_safetensors(st).tensors.size() == 1);
    CHECK(!fs::exists(svg + ".tmp." + pid));
    CHECK(!fs::exists(st + ".tmp." + pid));
  }
}
