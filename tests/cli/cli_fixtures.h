// What the command-line tests share beyond running the executable (support/process.h): a scratch
// directory with a tiny corpus and a tiny GPT checkpoint over its characters, and a directory's
// bytes, to show that a refused command changed nothing.
#pragma once

#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "nn/gpt.h"
#include "nn/gpt_checkpoint.h"
#include "support/process.h"

namespace heed::test {

/// A scratch directory with corpus.txt (tiny_corpus(seed)) and model.safetensors: an untrained
/// GPT (1 layer, 2 heads, 16 wide, block 8) over the corpus's 10 characters.
struct CliFixture {
  ScratchDir dir;
  std::string corpus = dir / "corpus.txt";
  std::string ckpt = dir / "model.safetensors";
  CliFixture(const std::string& tag, uint32_t seed) : dir(tag) {
    write_file(corpus, tiny_corpus(seed));
    nn::GPTConfig c;
    c.vocab_size = 10, c.block_size = 8, c.n_layer = 1, c.n_head = 2, c.n_embd = 16;
    nn::GPT model(c, 5);
    nn::save_gpt_checkpoint(ckpt, model, "\n abcdefgh", {{"iter", "0"}});
  }
};

/// Every regular file of a directory, name to bytes; the lock file is left out (it names its
/// last holder, refused ones included).
inline std::map<std::string, std::string> snapshot(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename() != ".heed.lock")
      files[e.path().filename().string()] = read_file(e.path().string());
  return files;
}

/// The lines of a log.jsonl, each required to be a JSON object.
inline std::vector<nlohmann::json> read_log(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::istringstream in(read_file(path));
  std::string line;
  while (std::getline(in, line)) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    INFO(path << ": " << line);
    REQUIRE(j.is_object());
    out.push_back(j);
  }
  return out;
}

/// The evaluations' lines of a log (the others are batch losses, every --log-interval).
inline std::vector<nlohmann::json> read_evals(const std::string& path) {
  std::vector<nlohmann::json> out;
  for (nlohmann::json& j : read_log(path))
    if (j.contains("val_loss")) out.push_back(std::move(j));
  return out;
}

}  // namespace heed::test
