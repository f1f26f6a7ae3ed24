// Resources are checked before they are spent (issue 11), through the real executable: oversized
// flags of every subcommand, and checkpoints whose config claims a huge model, are refused in under
// a second without allocating (peak RSS stays small); the memory limit comes from the system or
// from --memory-limit / HEED_MEMORY_LIMIT; inputs that are not regular files (a never-ending
// device, a FIFO with no writer) are refused at once; eval works in batches whatever its flags;
// seq2seq refuses more held-out examples than its task has distinct sources.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/heed.h"
#include "nn/gpt.h"
#include "nn/gpt_checkpoint.h"
#include "nn/safetensors.h"
#include "seq2seq.h"
#include "seq2seq_checkpoint.h"
#include "cli_fixtures.h"
#include "support/process.h"

using namespace heed;
using namespace heed::test;

namespace {

// Peak RSS of a refusal: the process's code and libraries, nothing model-sized.
constexpr long kSmallRssKb = 64 * 1024;

struct Fixture : CliFixture {
  Fixture() : CliFixture("resources", 31) {}
};

void require_refused_cheaply(const ProcessResult& r, int code, const std::vector<std::string>& needles) {
  require_clean_error(r, code, needles);
  INFO("stderr: " << r.err);
  CHECK(r.seconds < 1.0 * kTimeScale);
  CHECK(r.max_rss_kb < kSmallRssKb * kMemoryScale);
}

}  // namespace

TEST_CASE("resources: oversized flags of every subcommand are refused in under a second without allocating", "[cli]") {
  Fixture fx;
  const std::vector<std::string> train = {"train", "--data", fx.corpus, "--out", fx.dir / "run", "--threads", "1"};
  const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> cases = {
      // sizes past what a checkpoint may hold: the range names the flag
      {cat(train, {"--n-embd", "1000000", "--n-head", "1"}), {"--n-embd 1000000"}},
      {cat(train, {"--n-layer", "5000"}), {"--n-layer 5000"}},
      {cat(train, {"--block-size", "100000000"}), {"--block-size 100000000"}},
      {cat(train, {"--sample-tokens", "100000000"}), {"--sample-tokens 100000000"}},
      // sizes within range whose memory no machine here has: the estimate names every size flag
      {cat(train, {"--n-embd", "65536", "--n-head", "1"}), {"--n-embd 65536", "needs about", "of memory"}},
      {cat(train, {"--n-layer", "1024", "--n-embd", "8192"}), {"--n-layer 1024", "needs about"}},
      {cat(train, {"--batch-size", "1000000000"}), {"--batch-size 1000000000", "needs about"}},
      {cat(train, {"--block-size", "1048576", "--batch-size", "64"}), {"--block-size 1048576", "needs about"}},
      // the step's batch of ids is drawn whole: --grad-accum multiplies it (before, it was left out)
      {cat(train, {"--block-size", "256", "--batch-size", "256", "--grad-accum", "1000000"}),
       {"--grad-accum 1000000", "needs about"}},
      {{"bench", "--data", fx.corpus, "--batch-size", "100000000", "--block-size", "4096"}, {"--batch-size 100000000"}},
      {{"sample", "--checkpoint", fx.ckpt, "--tokens", "100000000"}, {"--tokens 100000000"}},
      {{"seq2seq", "--task", "copy", "--batch-size", "1000000"}, {"--batch-size 1000000", "needs about"}},
      {{"seq2seq", "--task", "copy", "--d-model", "4096", "--n-layer", "64"}, {"--n-embd 4096", "needs about"}},
      {{"seq2seq", "--task", "dates", "--examples", "300000"}, {"--examples 300000", "distinct sources"}},
      {{"seq2seq", "--task", "copy", "--examples", "100000000000"}, {"--examples 100000000000", "distinct sources"}},
      {{"seq2seq", "--task", "reverse", "--examples", "1000000000000"}, {"--examples 1000000000000", "needs about"}},
  };
  for (const auto& [args, needles] : cases) {
    INFO(args[0] << " " << needles[0]);
    require_refused_cheaply(run_heed(args), 2, needles);
  }
  // the usage errors of eval and attention are in test_cli_errors.cpp; their sizes come from files:
}

TEST_CASE("resources: checkpoints claiming a huge model are refused before anything model-sized is allocated", "[cli]") {
  Fixture fx;
  // A GPT checkpoint whose config says 1024 layers of width 65536: its tensors do not back the
  // config, which the loader finds before building the model.
  nn::SafetensorsFile f = nn::load_safetensors(fx.ckpt);
  nlohmann::json cfg = nlohmann::json::parse(f.metadata.at("config"));
  cfg["n_layer"] = 1024, cfg["n_embd"] = 65536, cfg["n_head"] = 1;
  f.metadata["config"] = cfg.dump();
  const std::string huge_gpt = fx.dir / "huge_gpt.safetensors";
  nn::save_safetensors(huge_gpt, f.tensors, f.metadata);
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"sample", "--checkpoint", huge_gpt},
           {"eval", "--checkpoint", huge_gpt, "--data", fx.corpus},
           {"attention", "--checkpoint", huge_gpt, "--text", "abc", "--out", fx.dir / "a.svg"}})
    require_refused_cheaply(run_heed(args), 1, {huge_gpt});

  // A seq2seq checkpoint of a tiny model whose metadata claims d_model 4096 and 64 layers.
  heed::cli::Seq2SeqOptions o = heed::cli::defaults(heed::cli::seq2seq_option_table());
  o.task = "copy", o.d_model = 8, o.n_head = 2, o.n_layer = 1;
  nn::EncoderDecoder model(heed::cli::seq2seq_model_options(o));
  const std::string s2s = fx.dir / "s2s.safetensors";
  heed::cli::save_seq2seq(s2s, model, o);
  nn::SafetensorsFile g = nn::load_safetensors(s2s);
  g.metadata["seq2seq"] = R"({"task": "copy", "d_model": 4096, "n_head": 4, "n_layer": 64, "seed": "1"})";
  nn::save_safetensors(s2s, g.tensors, g.metadata);
  require_refused_cheaply(run_heed({"attention", "--checkpoint", s2s, "--text", "123", "--out", fx.dir / "a.svg"}), 1,
                          {s2s, "parameters", "d_model 4096"});

  // A GPT whose context is 4096 characters: a --text that long would draw 2 x 4096^2 cells.
  nn::GPTConfig c;
  c.vocab_size = 10, c.block_size = 4096, c.n_layer = 1, c.n_head = 2, c.n_embd = 16;
  nn::GPT wide(c, 5);
  const std::string wide_ckpt = fx.dir / "wide.safetensors";
  nn::save_gpt_checkpoint(wide_ckpt, wide, "\n abcdefgh", {});
  std::string text;
  while (text.size() < 4096) text += "abc ";
  require_clean_error(run_heed({"attention", "--checkpoint", wide_ckpt, "--text", text, "--out", fx.dir / "w.svg"}), 2,
                      {"--text of 4096 characters", "heatmap cells", "shorter --text"});
}

TEST_CASE("resources: the memory limit is the system's, or --memory-limit / HEED_MEMORY_LIMIT", "[cli]") {
  Fixture fx;
  const std::vector<std::string> train = {"train", "--data", fx.corpus, "--out", fx.dir / "run", "--n-layer", "1",
                                          "--n-head", "2", "--n-embd", "16", "--block-size", "8", "--batch-size", "2",
                                          "--max-iters", "2", "--eval-iters", "1", "--sample-tokens", "0", "--threads", "1"};
  RunOptions tight;
  tight.env = {"HEED_MEMORY_LIMIT=10M"};
  require_refused_cheaply(run_heed(train, tight), 2, {"needs about", "10 MiB limit", "HEED_MEMORY_LIMIT"});
  require_refused_cheaply(run_heed(cat(train, {"--memory-limit", "12M"})), 2, {"12 MiB limit", "--memory-limit"});
  require_clean_error(run_heed(cat(train, {"--memory-limit", "lots"})), 2, {"--memory-limit", "lots"});
  // a limit under a MiB is printed as it is, not as "0 MiB"
  require_clean_error(run_heed(cat(train, {"--memory-limit", "1K"})), 2, {"1 KiB limit"});
  require_clean_error(run_heed(cat(train, {"--memory-limit", "100"})), 2, {"100 bytes limit"});
  // units in either case; under a byte is no limit at all (it used to be a limit of 0 bytes)
  require_clean_error(run_heed(cat(train, {"--memory-limit", "1k"})), 2, {"1 KiB limit"});
  for (const char* tiny_limit : {"0.5", "1e-300", "0"})
    require_clean_error(run_heed(cat(train, {"--memory-limit", tiny_limit})), 2, {"--memory-limit", "not a size"});
  // the flag wins over the environment
  require_ok(run_heed(cat(train, {"--memory-limit", "2G"}), tight));
  // without either, the machine's memory: the tiny run fits
  require_ok(run_heed(cat(train, {"--overwrite"})));
  require_ok(run_heed(cat(train, {"--memory-limit", "2g", "--overwrite"})));  // a lower-case unit
}

TEST_CASE("resources: a never-ending device or a FIFO as an input is refused at once, never read", "[cli]") {
  Fixture fx;
  const std::string fifo = fx.dir / "fifo";
  REQUIRE(mkfifo(fifo.c_str(), 0644) == 0);  // no writer: reading it would block for ever
  const std::string svg = fx.dir / "x.svg";
  for (const std::string& special : {std::string("/dev/zero"), std::string("/dev/urandom"), fifo}) {
    INFO(special);
    const std::vector<std::vector<std::string>> uses = {
        {"train", "--data", special, "--out", fx.dir / "run", "--threads", "1"},
        {"bench", "--data", special, "--threads", "1"},
        {"eval", "--checkpoint", fx.ckpt, "--data", special},
        {"eval", "--checkpoint", special, "--data", fx.corpus},
        {"sample", "--checkpoint", special},
        {"attention", "--checkpoint", special, "--text", "abc", "--out", svg},
        {"plot", "--log", special, "--out", svg},
        {"train", "--config", special, "--out", fx.dir / "run"},
    };
    for (const auto& args : uses) {
      INFO(args[0] << " " << args[1]);
      const ProcessResult r = run_heed(args, timeout_after(10));
      require_clean_error(r, args[1] == "--config" ? 2 : 1, {special, "not a regular file"});
      CHECK(r.seconds < 1.0 * kTimeScale);
      CHECK(r.max_rss_kb < kSmallRssKb * kMemoryScale);
    }
  }
}

TEST_CASE("resources: a --data file too large for memory is refused as the file's fault, naming it", "[cli]") {
  Fixture fx;
  const std::string huge = fx.dir / "huge.txt";  // 1 TiB, sparse: nothing is written or read
  write_file(huge, "");
  std::filesystem::resize_file(huge, uint64_t(1) << 40);
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"train", "--data", huge, "--out", fx.dir / "run", "--n-layer", "1", "--n-head", "1", "--n-embd", "16",
            "--block-size", "8", "--batch-size", "2", "--threads", "1"},
           {"bench", "--data", huge, "--n-layer", "1", "--n-head", "1", "--n-embd", "16", "--block-size", "8",
            "--batch-size", "2", "--threads", "1"}}) {
    INFO(args[0]);
    const ProcessResult r = run_heed(args);
    require_refused_cheaply(r, 1, {"--data " + huge + " (1 TiB)", "needs about 13 TiB"});
    CHECK(r.err.find("the model and batch") == std::string::npos);  // the flags are not at fault
  }
  CHECK(!std::filesystem::exists(fx.dir / "run/log.jsonl"));
}

TEST_CASE("resources: eval works in batches whatever --batch-size says, with the same result", "[cli]") {
  Fixture fx;
  const std::string text = fx.dir / "text.txt";
  std::string t;
  for (uint32_t i = 0; t.size() < 200'000; ++i) t += tiny_corpus(i);
  write_file(text, t);
  const ProcessResult small = run_heed({"eval", "--checkpoint", fx.ckpt, "--data", text, "--batch-size", "7", "--threads", "1"});
  require_ok(small);
  // a billion windows per batch: heed takes as many as there are (25000), as memory allows
  const ProcessResult huge =
      run_heed({"eval", "--checkpoint", fx.ckpt, "--data", text, "--batch-size", "1000000000", "--threads", "1"});
  require_ok(huge);
  // and under a tight limit, fewer per batch; the mean is the same
  RunOptions tight;
  tight.env = {"HEED_MEMORY_LIMIT=60M"};
  const ProcessResult limited =
      run_heed({"eval", "--checkpoint", fx.ckpt, "--data", text, "--batch-size", "1000000000", "--threads", "1"}, tight);
  require_ok(limited);
  const double a = nlohmann::json::parse(small.out)["loss"], b = nlohmann::json::parse(huge.out)["loss"],
               c = nlohmann::json::parse(limited.out)["loss"];
  // each token's loss is summed in double in text order: only the float32 matrix products' order
  // of summation, which depends on the rows per product, is left (a 1e-11 relative difference)
  CHECK(b == Approx(a).epsilon(1e-9));
  CHECK(c == Approx(a).epsilon(1e-9));
  CHECK(limited.max_rss_kb < 60 * 1024 * kMemoryScale);
  // a billion windows asked for, no limit set: a batch is bounded anyway (16384 tokens here)
  CHECK(huge.max_rss_kb < 100 * 1024 * kMemoryScale);
}
