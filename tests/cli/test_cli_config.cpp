// config.toml is real TOML (issue 11), through the real executable: it is read back here with the
// TOML library itself; a path holding '#', quotes, backslashes, a newline or non-ASCII characters
// round-trips and repeats the run; a bad --config (a directory, a syntax error, an unknown key, a
// value of the wrong type) is a clear usage error; nanoGPT's underscore names work as flags and
// as keys; a relative path in a config file is relative to the file.
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <toml++/toml.h>
#include <vector>

#include "support/process.h"

using namespace heed::test;
namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kTiny = {"--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "8",
                                        "--batch-size", "2", "--eval-iters", "1", "--eval-interval", "2",
                                        "--max-iters", "4", "--sample-tokens", "0", "--threads", "1"};

std::string config_value(const std::string& path, const std::string& key) {
  try {
    const toml::table t = toml::parse_file(path);
    return t[key].value<std::string>().value_or("<not a string>");
  } catch (const toml::parse_error& e) {
    FAIL(path << " is not TOML: " << e.description());
  }
  return "";
}

}  // namespace

TEST_CASE("config: paths with #, quotes, backslashes, a newline and UTF-8 round-trip through config.toml", "[cli]") {
  ScratchDir dir("cfg-paths");
  const std::string odd = dir / "a #b \"c\" d\\e 'f'\ng é ☃";
  fs::create_directories(odd);
  const std::string corpus = odd + "/corpus #1.txt";
  write_file(corpus, tiny_corpus(3));
  const std::string run = odd + "/run [x] = y";
  require_ok(run_heed(cat({"train", "--data", corpus, "--out", run}, kTiny)));
  const std::string cfg = run + "/config.toml";
  INFO(read_file(cfg));
  CHECK(config_value(cfg, "data") == corpus);
  CHECK(config_value(cfg, "out") == run);
  // and repeats the run from it
  require_ok(run_heed({"train", "--config", cfg, "--out", dir / "again"}));
  CHECK(read_file(dir / "again/model.safetensors") == read_file(run + "/model.safetensors"));
}

TEST_CASE("config: a path that is not UTF-8 cannot be recorded and is refused up front", "[cli]") {
  ScratchDir dir("cfg-latin1");
  const std::string corpus = dir / "caf\xe9.txt";  // Latin-1 'é'
  write_file(corpus, tiny_corpus(3));
  require_clean_error(run_heed(cat({"train", "--data", corpus, "--out", dir / "run"}, kTiny)), 2,
                      {"--data", "not valid UTF-8"});
  CHECK(!fs::exists(dir / "run"));
}

TEST_CASE("config: a bad --config is a usage error naming the file and the problem", "[cli]") {
  ScratchDir dir("cfg-bad");
  const std::string out = dir / "run";
  auto with = [&](const std::string& text) {
    write_file(dir / "c.toml", text);
    return run_heed({"train", "--config", dir / "c.toml", "--out", out});
  };
  require_clean_error(run_heed({"train", "--config", dir.path(), "--out", out}), 2, {"--config", dir.path(), "directory"});
  require_clean_error(run_heed({"train", "--config", dir / "missing.toml", "--out", out}), 2, {"--config", "missing.toml"});
  require_clean_error(with("n_layer = 1\nn_head = = 2\n"), 2, {"c.toml", "not valid TOML", "line 2"});
  require_clean_error(with("n_layer = [1, 2]\n"), 2, {"c.toml", "line 1", "n_layer"});
  require_clean_error(with("[train]\nn_layer = 1\n"), 2, {"c.toml", "train"});
  require_clean_error(with("n_layer = 1\nwidth = 4\n"), 2, {"c.toml", "line 2", "'width' is not an option of heed train"});
  require_clean_error(with("n_layer = \"4\"\n"), 2, {"c.toml", "n_layer", "must be an integer, not a string"});
  require_clean_error(with("n_layer = 4.0\n"), 2, {"n_layer", "must be an integer, not a number"});
  require_clean_error(with("bias = 1\n"), 2, {"bias", "true or false"});
  require_clean_error(with("n_layer = 2\nn-layer = 3\n"), 2, {"line 2", "'n-layer' sets the same option as 'n_layer'"});
  require_clean_error(with("n_layer = 0\n"), 2, {"--n-layer 0", "[1, 1024]"});  // validated like a flag
  CHECK(!fs::exists(out));
}

TEST_CASE("config: nanoGPT's names work as flags and as keys, relative paths are relative to the file", "[cli]") {
  ScratchDir dir("cfg-alias");
  write_file(dir / "corpus.txt", tiny_corpus(4));
  // --n_layer and --learning_rate on the command line...
  const std::vector<std::string> nano = {"--n_layer", "1", "--n_head", "2", "--n_embd", "16", "--block_size", "8",
                                         "--batch_size", "2", "--eval_iters", "1", "--eval_interval", "2",
                                         "--max_iters", "4", "--sample_tokens", "0", "--threads", "1",
                                         "--learning_rate", "0.002"};
  require_ok(run_heed(cat({"train", "--data", dir / "corpus.txt", "--out", dir / "a"}, nano)));
  // ... equal the flags' own spellings
  require_ok(run_heed(cat(cat({"train", "--data", dir / "corpus.txt", "--out", dir / "b"}, kTiny), {"--lr", "0.002"})));
  CHECK(read_file(dir / "a/model.safetensors") == read_file(dir / "b/model.safetensors"));
  // a hand-written config in nanoGPT's style, in another directory, naming its corpus relatively
  fs::create_directories(dir / "conf");
  write_file(dir / "conf/corpus.txt", tiny_corpus(4));
  write_file(dir / "conf/shakespeare.toml",
             "# nanoGPT's config/train_shakespeare_char.py, as TOML\n"
             "data = 'corpus.txt'\nn_layer = 1\nn_head = 2\nn_embd = 16\nblock_size = 8\nbatch_size = 2\n"
             "learning_rate = 0.002\nmax_iters = 4\neval_iters = 1\neval_interval = 2\nsample_tokens = 0\n"
             "threads = 1\ndropout = 0.0\nbias = false\n");
  RunOptions elsewhere;
  elsewhere.in_child = [] {
    if (chdir("/") != 0) _exit(126);
  };
  require_ok(run_heed({"train", "--config", dir / "conf/shakespeare.toml", "--out", dir / "c"}, elsewhere));
  CHECK(read_file(dir / "c/model.safetensors") == read_file(dir / "a/model.safetensors"));
  CHECK(config_value(dir / "c/config.toml", "data") == dir / "conf/corpus.txt");
}
