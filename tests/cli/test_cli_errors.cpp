// The command line's bad-input contract (issue 7), through the real `heed` executable: every bad
// file, flag value and corrupted checkpoint ends with exactly one stderr line "heed: error: ..."
// that names the problem (the file, the flag, the byte offset, the tensor or field) and exit code
// 2 (usage: a flag that makes no sense) or 1 (bad data), never a signal or a sanitizer report.
// The models are tiny (1 layer, 16 wide, block 8) so each run takes milliseconds.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/heed.h"
#include "nn/gpt.h"
#include "nn/gpt_checkpoint.h"
#include "nn/safetensors.h"
#include "support/process.h"

using namespace heed;
using namespace heed::test;

namespace {

std::string tiny_corpus() { return test::tiny_corpus(12345); }

const std::vector<std::string> kTiny = {"--n-layer",   "1", "--n-head",    "2", "--n-embd",       "16",
                                        "--block-size", "8", "--batch-size", "2", "--max-iters",     "3",
                                        "--eval-iters", "1", "--sample-tokens", "0", "--threads", "1"};

nn::GPTConfig tiny_config() {
  nn::GPTConfig c;
  c.vocab_size = 10;
  c.block_size = 8;
  c.n_layer = 1;
  c.n_head = 2;
  c.n_embd = 16;
  return c;
}

// A scratch directory with corpus.txt and a valid tiny checkpoint model.safetensors over its
// vocabulary (written in-process: no training needed to test loading).
struct Fixture {
  ScratchDir dir{"cli-errors"};
  std::string corpus = dir / "corpus.txt";
  std::string ckpt = dir / "model.safetensors";
  std::vector<std::pair<std::string, Tensor>> tensors;  // the checkpoint's tensors, for corrupting
  std::map<std::string, std::string> metadata;          // and its metadata

  Fixture() {
    write_file(corpus, tiny_corpus());
    nn::GPT model(tiny_config(), 7);
    nn::save_gpt_checkpoint(ckpt, model, "\n abcdefgh", {{"iter", "0"}});
    nn::SafetensorsFile f = nn::load_safetensors(ckpt);
    tensors = f.tensors;
    metadata = f.metadata;
  }
  // `heed train` on the corpus with the tiny model; `extra` flags replace the defaults of the same
  // name (CLI11 refuses a flag given twice).
  std::vector<std::string> train(const std::vector<std::string>& extra) const {
    std::vector<std::string> base = cat({"--data", corpus, "--out", dir / "run"}, kTiny);
    std::vector<std::string> args = {"train"};
    for (size_t i = 0; i < base.size(); i += 2)
      if (std::find(extra.begin(), extra.end(), base[i]) == extra.end()) args.insert(args.end(), {base[i], base[i + 1]});
    return cat(args, extra);
  }
};

// Raw safetensors bytes: the 8-byte length (or `len`), the header text, then `data`.
std::string raw_safetensors(const std::string& header, const std::string& data = "", uint64_t len = UINT64_MAX) {
  if (len == UINT64_MAX) len = header.size();
  std::string b(8, '\0');
  std::memcpy(b.data(), &len, 8);
  return b + header + data;
}

// The sample and eval command lines for a checkpoint (both load it the same way; both are tested).
std::vector<std::vector<std::string>> loaders(const Fixture& fx, const std::string& ckpt) {
  return {{"sample", "--checkpoint", ckpt, "--tokens", "3"},
          {"eval", "--checkpoint", ckpt, "--data", fx.corpus},
          {"attention", "--checkpoint", ckpt, "--text", "abc", "--out", fx.dir / "attn.svg"}};
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// files

TEST_CASE("cli errors: missing and unreadable files name the file (exit 1)", "[cli]") {
  Fixture fx;
  const std::string missing = fx.dir / "no-such-file.txt";
  SECTION("train --data") {
    require_clean_error(run_heed(fx.train({"--data", missing})), 1, {missing, "No such file"});
  }
  SECTION("train --data that is a directory") {
    require_clean_error(run_heed(fx.train({"--data", fx.dir.path()})), 1, {fx.dir.path(), "directory"});
  }
  SECTION("sample --checkpoint") {
    require_clean_error(run_heed({"sample", "--checkpoint", missing}), 1, {missing, "No such file"});
    require_clean_error(run_heed({"sample", "--checkpoint", fx.dir.path()}), 1, {fx.dir.path(), "not a regular file"});
  }
  SECTION("eval --checkpoint and eval --data") {
    require_clean_error(run_heed({"eval", "--checkpoint", missing, "--data", fx.corpus}), 1, {missing, "No such file"});
    require_clean_error(run_heed({"eval", "--checkpoint", fx.ckpt, "--data", missing}), 1, {missing, "No such file"});
    require_clean_error(run_heed({"eval", "--checkpoint", fx.ckpt, "--data", fx.dir.path()}), 1,
                        {fx.dir.path(), "directory"});
  }
  SECTION("plot --log") {
    require_clean_error(run_heed({"plot", "--log", missing, "--out", fx.dir / "p.svg"}), 1, {missing, "No such file"});
    require_clean_error(run_heed({"plot", "--log", fx.dir.path(), "--out", fx.dir / "p.svg"}), 1,
                        {fx.dir.path(), "directory"});
    const std::string bad_log = fx.dir / "log.jsonl";
    write_file(bad_log, "{\"iter\": 0, \"train_loss\": 1.0, \"val_loss\": 1.1}\n{\"iter\": 5, \"train_loss\": null}\n");
    require_clean_error(run_heed({"plot", "--log", bad_log, "--out", fx.dir / "p.svg"}), 1, {bad_log, "line 2"});
    const std::string empty_log = fx.dir / "empty.jsonl";
    write_file(empty_log, "");
    require_clean_error(run_heed({"plot", "--log", empty_log, "--out", fx.dir / "p.svg"}), 1,
                        {empty_log, "no log entries"});
  }
  SECTION("a required file flag left out is a usage error") {
    require_clean_error(run_heed({"sample"}), 2, {"--checkpoint"});
    require_clean_error(run_heed({"eval", "--checkpoint", fx.ckpt}), 2, {"--data"});
    require_clean_error(run_heed({"plot", "--out", fx.dir / "p.svg"}), 2, {"--log"});
  }
}

TEST_CASE("cli errors: empty and too-short corpora name the file and the sizes (exit 1)", "[cli]") {
  Fixture fx;
  const std::string empty = fx.dir / "empty.txt";
  write_file(empty, "");
  require_clean_error(run_heed(fx.train({"--data", empty})), 1, {empty, "empty"});
  require_clean_error(run_heed({"eval", "--checkpoint", fx.ckpt, "--data", empty}), 1, {empty, "block_size 8"});

  // block_size + 1 = 9 characters are needed in each split; 12 characters give 10 train / 2 val.
  const std::string shorter = fx.dir / "short.txt";
  write_file(shorter, "abcdefghabcd");
  require_clean_error(run_heed(fx.train({"--data", shorter})), 1, {shorter, "--block-size 8", "split"});
  // eval needs one window: block_size + 1 characters.
  write_file(shorter, "abcdefgh");
  require_clean_error(run_heed({"eval", "--checkpoint", fx.ckpt, "--data", shorter}), 1,
                      {shorter, "8 characters", "block_size 8"});
  write_file(shorter, "abcdefgha");  // exactly one window: fine
  ProcessResult ok = run_heed({"eval", "--checkpoint", fx.ckpt, "--data", shorter});
  INFO(ok.err);
  REQUIRE(ok.exit_code == 0);
  CHECK(ok.out.find("\"tokens\":8") != std::string::npos);
}

TEST_CASE("cli errors: invalid UTF-8 names the file and the byte offset (exit 1)", "[cli]") {
  Fixture fx;
  const std::string bad = fx.dir / "bad.txt";
  const std::string text = tiny_corpus();
  struct Case {
    std::string bytes;
    std::string offset;
  };
  const std::vector<Case> cases = {
      {text.substr(0, 100) + "\xff" + text.substr(100), "byte offset 100"},                // stray byte
      {text.substr(0, 250) + "\xc3" + "a" + text.substr(250), "byte offset 250"},         // bad continuation
      {text.substr(0, 300) + "\xc0\xaf" + text.substr(300), "byte offset 300"},          // overlong '/'
      {text.substr(0, 301) + "\xed\xa0\x80" + text.substr(301), "byte offset 301"},      // surrogate U+D800
      {text.substr(0, 302) + "\xf4\x90\x80\x80" + text.substr(302), "byte offset 302"},  // above U+10FFFF
      {text + "\xe2\x82", "byte offset 600"},                                             // truncated at the end
  };
  for (const Case& c : cases) {
    write_file(bad, c.bytes);
    require_clean_error(run_heed(fx.train({"--data", bad})), 1, {bad, "invalid UTF-8", c.offset});
    require_clean_error(run_heed({"eval", "--checkpoint", fx.ckpt, "--data", bad}), 1, {bad, "invalid UTF-8", c.offset});
  }
  require_clean_error(run_heed({"sample", "--checkpoint", fx.ckpt, "--prompt", "ab\xff" "c"}), 1,
                      {"--prompt", "invalid UTF-8", "byte offset 2"});
}

TEST_CASE("cli errors: characters outside the checkpoint's vocabulary name the character and its offset", "[cli]") {
  Fixture fx;
  const std::string data = fx.dir / "oov.txt";
  // 'z' at character 40; the euro sign at character 41 (after it 'z' is 1 byte, so byte 41 too).
  write_file(data, tiny_corpus().substr(0, 40) + "z\xe2\x82\xac" + tiny_corpus().substr(40));
  require_clean_error(run_heed({"eval", "--checkpoint", fx.ckpt, "--data", data}), 1,
                      {data, "'z'", "U+007A", "byte offset 40", "vocabulary"});
  // A multi-byte character first: the byte offset and the character position differ.
  write_file(data, "ab\xc3\xa9" "cdz" + tiny_corpus());
  require_clean_error(run_heed({"eval", "--checkpoint", fx.ckpt, "--data", data}), 1,
                      {data, "U+00E9", "byte offset 2", "character 2"});
  require_clean_error(run_heed({"sample", "--checkpoint", fx.ckpt, "--prompt", "abc\xe2\x82\xac"}), 1,
                      {"--prompt", "U+20AC", "byte offset 3", "vocabulary"});
  require_clean_error(run_heed({"sample", "--checkpoint", fx.ckpt, "--prompt", "abc\t"}), 1,
                      {"--prompt", "U+0009", "byte offset 3"});
  require_clean_error(run_heed({"attention", "--checkpoint", fx.ckpt, "--text", "abZ", "--out", fx.dir / "a.svg"}),
                      1, {"--text", "U+005A", "byte offset 2"});
}

// ---------------------------------------------------------------------------------------------
// flags

TEST_CASE("cli errors: nonsense numbers for train are usage errors naming the flag (exit 2)", "[cli]") {
  Fixture fx;
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--n-layer", "0"}, "--n-layer"},
      {{"--n-layer", "-2"}, "--n-layer"},
      {{"--n-head", "0"}, "--n-head"},
      {{"--n-embd", "0"}, "--n-embd"},
      {{"--n-embd", "-16"}, "--n-embd"},
      {{"--n-embd", "18", "--n-head", "4"}, "--n-embd 18 is not divisible by --n-head 4"},
      {{"--block-size", "0"}, "--block-size"},
      {{"--block-size", "-8"}, "--block-size"},
      {{"--batch-size", "0"}, "--batch-size"},
      {{"--batch-size", "-1"}, "--batch-size"},
      {{"--lr", "-0.001"}, "--lr"},
      {{"--lr", "0"}, "--lr"},
      {{"--lr", "nan"}, "--lr"},
      {{"--lr", "inf"}, "--lr"},
      {{"--lr", "1e308"}, "--lr 1e+308 is too large"},  // the warm-up's lr x (it + 1) would overflow at step 0
      {{"--min-lr", "-1"}, "--min-lr"},
      {{"--dropout", "1"}, "--dropout"},
      {{"--dropout", "1.5"}, "--dropout"},
      {{"--dropout", "-0.1"}, "--dropout"},
      {{"--dropout", "nan"}, "--dropout"},
      {{"--weight-decay", "-0.1"}, "--weight-decay"},
      {{"--beta1", "1"}, "--beta1"},
      {{"--beta2", "-0.5"}, "--beta2"},
      {{"--grad-clip", "-1"}, "--grad-clip"},
      {{"--warmup-iters", "-1"}, "--warmup-iters"},
      {{"--lr-decay-iters", "0", "--warmup-iters", "0"}, "--lr-decay-iters"},
      {{"--eval-interval", "0"}, "--eval-interval"},
      {{"--eval-iters", "0"}, "--eval-iters"},
      {{"--log-interval", "0"}, "--log-interval"},
      {{"--sample-tokens", "-1"}, "--sample-tokens"},
      {{"--threads", "-1"}, "--threads"},
      {{"--threads", "100000"}, "--threads"},
      {{"--n-embd", "1000000000", "--n-head", "1"}, "--n-embd 1000000000"},
      {{"--block-size", "100000000"}, "--block-size 100000000"},
      {{"--batch-size", "1000000000"}, "--batch-size 1000000000"},
      {{"--batch-size", "abc"}, "--batch-size"},
      {{"--lr", "fast"}, "--lr"},
      {{"--n-layer", "1.5"}, "--n-layer"},
      {{"--n-layer", "99999999999999999999999"}, "--n-layer"},  // more than an int64 holds
      // named as given, never as the INT64_MAX strtoll made of it
      {{"--n-layer", "99999999999999999999"}, "'99999999999999999999' is out of range"},
      {{"--max-iters", "-99999999999999999999"}, "'-99999999999999999999' is out of range"},
      // decimal only, as nanoGPT's argparse: CLI11 alone read 0x10 as 16 (and 010 as 8: below)
      {{"--max-iters", "0x10"}, "--max-iters: '0x10' is not a decimal integer"},
      {{"--batch-size", "1e3"}, "--batch-size: '1e3' is not a decimal integer"},
      {{"--lr", "0x10"}, "--lr: '0x10' is not a decimal number"},
      {{"--dropout", "0x1p-3"}, "--dropout: '0x1p-3' is not a decimal number"},
      {{"--lr", "1e"}, "--lr: '1e' is not a decimal number"},
      {{"--lr", "."}, "--lr: '.' is not a decimal number"},
      // named as written, not as the 0 or inf strtod made of it
      {{"--lr", "1e-400"}, "--lr: '1e-400' is too small for a double: it would read as 0"},
      {{"--lr", "1e400"}, "--lr: '1e400' is out of range"},
  };
  for (const auto& [flags, needle] : cases) {
    INFO(needle);
    require_clean_error(run_heed(fx.train(flags)), 2, {needle});
  }
  // bench shares the model flags and their checks, and has --iters of its own.
  require_clean_error(run_heed({"bench", "--data", fx.corpus, "--batch-size", "0"}), 2, {"--batch-size"});
  require_clean_error(run_heed({"bench", "--data", fx.corpus, "--iters", "0"}), 2, {"--iters"});
}

TEST_CASE("cli: numbers on the command line are decimal, leading zeros and all, as nanoGPT's argparse reads them", "[cli]") {
  Fixture fx;
  // CLI11 reads integers with strtoll in base 0: --max-iters 010 trained 8 iterations.
  ProcessResult r = run_heed(fx.train({"--max-iters", "010", "--lr", ".5e-3", "--eval-interval", "0005"}));
  require_ok(r);
  REQUIRE_THAT(r.out, Catch::Contains("done: 10 iterations"));
  const std::string config = read_file(fx.dir / "run/config.toml");
  CHECK_THAT(config, Catch::Contains("max_iters = 10"));
  CHECK_THAT(config, Catch::Contains("eval_interval = 5"));
  CHECK_THAT(config, Catch::Contains("\nlr = 5e-04\n"));
}

TEST_CASE("cli errors: nonsense numbers for sample and eval are usage errors naming the flag (exit 2)", "[cli]") {
  Fixture fx;
  const std::vector<std::pair<std::vector<std::string>, std::string>> sample_cases = {
      {{"--tokens", "-1"}, "--tokens"},
      {{"--tokens", "many"}, "--tokens"},
      {{"--tokens", "1e3"}, "--tokens"},
      {{"--tokens", "99999999999999"}, "--tokens"},       // more than fits: refused, not run for ever
      {{"--tokens", "99999999999999999999999"}, "--tokens"},  // not even an int64
      {{"--temperature", "-0.5"}, "--temperature"},
      {{"--temperature", "nan"}, "--temperature"},
      {{"--temperature", "inf"}, "--temperature"},
      {{"--top-k", "-1"}, "--top-k"},
      {{"--threads", "-1"}, "--threads"},
      {{"--threads", "100000"}, "--threads"},
  };
  for (const auto& [flags, needle] : sample_cases) {
    INFO(needle);
    require_clean_error(run_heed(cat({"sample", "--checkpoint", fx.ckpt}, flags)), 2, {needle});
  }
  for (const auto& [flags, needle] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--batch-size", "0"}, "--batch-size"},
           {{"--batch-size", "-4"}, "--batch-size"},
           {{"--threads", "-2"}, "--threads"}}) {
    INFO(needle);
    require_clean_error(run_heed(cat({"eval", "--checkpoint", fx.ckpt, "--data", fx.corpus}, flags)), 2, {needle});
  }
  // The limit is on what one run may generate; a sane request still works.
  ProcessResult ok = run_heed({"sample", "--checkpoint", fx.ckpt, "--tokens", "20", "--prompt", "abc"});
  INFO(ok.err);
  REQUIRE(ok.exit_code == 0);
  CHECK(ok.out.size() == 3 + 20 + 1);  // prompt, 20 one-byte characters, newline
}

TEST_CASE("cli errors: --out that is a file or cannot be written is a usage error naming --out (exit 2)", "[cli]") {
  Fixture fx;
  // A regular file where the run directory should be.
  require_clean_error(run_heed(fx.train({"--out", fx.corpus})), 2, {"--out", fx.corpus, "not a directory"});
  // A directory below a regular file cannot be created.
  require_clean_error(run_heed(fx.train({"--out", fx.corpus + "/run"})), 2, {"--out", fx.corpus + "/run"});
  // Not writable. The tests run as root, for whom chmod 0555 blocks nothing, so the unwritable
  // directory is one in procfs, where nobody can create files: /proc/self/fdinfo exists on every
  // Linux, access(W_OK) says yes to root for it, and creating a file in it fails even for root.
  require_clean_error(run_heed(fx.train({"--out", "/proc/self/fdinfo"})), 2, {"--out", "/proc/self/fdinfo"});
  require_clean_error(run_heed(fx.train({"--out", ""})), 2, {"--out"});
  // --resume into a directory without a run.
  require_clean_error(run_heed(fx.train({"--resume", "--out", fx.dir / "fresh"})), 2, {"--resume", "train_state"});
  // plot --out in an impossible place.
  ProcessResult ok = run_heed(fx.train({}));
  INFO(ok.err);
  REQUIRE(ok.exit_code == 0);
  require_clean_error(run_heed({"plot", "--log", fx.dir / "run/log.jsonl", "--out", fx.corpus + "/loss.svg"}), 1,
                      {fx.corpus + "/loss.svg"});
  require_clean_error(run_heed({"attention", "--checkpoint", fx.ckpt, "--text", "abc", "--out", fx.corpus + "/a.svg"}),
                      1, {fx.corpus + "/a.svg"});
}

// ---------------------------------------------------------------------------------------------
// corrupted checkpoints

TEST_CASE("cli errors: corrupted checkpoints are refused by sample, eval and attention naming the problem", "[cli]") {
  Fixture fx;
  const std::string bad = fx.dir / "bad.safetensors";
  const std::string good_bytes = read_file(fx.ckpt);
  REQUIRE(good_bytes.size() > 1000);
  uint64_t header_len = 0;
  std::memcpy(&header_len, good_bytes.data(), 8);

  auto expect_refused = [&](const std::vector<std::string>& needles) {
    for (const auto& args : loaders(fx, bad)) {
      INFO(args[0]);
      std::vector<std::string> all = needles;
      all.push_back(bad);
      require_clean_error(run_heed(args), 1, all);
    }
  };
  // Writes the fixture's tensors and metadata after `edit` changed them.
  auto write_edited = [&](auto edit) {
    auto tensors = fx.tensors;
    auto metadata = fx.metadata;
    edit(tensors, metadata);
    nn::save_safetensors(bad, tensors, metadata);
  };
  auto config_with = [&](const std::string& key, const nlohmann::json& value) {
    nlohmann::json c = nlohmann::json::parse(fx.metadata.at("config"));
    if (value.is_null()) c.erase(key);
    else c[key] = value;
    return c.dump();
  };

  SECTION("truncated files") {
    for (size_t keep : {size_t(0), size_t(5), size_t(8), size_t(8 + header_len / 2), size_t(8 + header_len),
                        good_bytes.size() / 2, good_bytes.size() - 1}) {
      INFO("kept " << keep << " of " << good_bytes.size() << " bytes");
      write_file(bad, good_bytes.substr(0, keep));
      expect_refused({});
    }
    write_file(bad, good_bytes.substr(0, 5));
    expect_refused({"too short"});
    write_file(bad, good_bytes.substr(0, good_bytes.size() - 1));
    expect_refused({"outside the data section"});
  }
  SECTION("header garbage") {
    std::string g = good_bytes;
    for (size_t i = 8; i < 8 + 40; ++i) g[i] = static_cast<char>('#' + i % 7);
    write_file(bad, g);
    expect_refused({"not valid JSON"});
    write_file(bad, raw_safetensors("[1, 2, 3]"));
    expect_refused({"not a JSON object"});
    write_file(bad, raw_safetensors("{}", "", 1ull << 60));
    expect_refused({"header length"});
    write_file(bad, raw_safetensors("\"just a string\""));
    expect_refused({"not a JSON object"});
    write_file(bad, "not a checkpoint at all, just some text that is long enough");
    expect_refused({"header length"});
  }
  SECTION("malformed tensor entries name the tensor") {
    write_file(bad, raw_safetensors(R"({"transformer.wte.weight": {"dtype": "I8", "shape": [2], "data_offsets": [0, 2]}})",
                                    std::string(2, '\0')));
    expect_refused({"transformer.wte.weight", "dtype"});
    write_file(bad, raw_safetensors(R"({"transformer.wpe.weight": {"dtype": "F32", "shape": [-1, 4], "data_offsets": [0, 16]}})",
                                    std::string(16, '\0')));
    expect_refused({"transformer.wpe.weight", "shape"});
    write_file(bad, raw_safetensors(
                        R"({"transformer.wpe.weight": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 16]}})",
                        std::string(16, '\0')));
    expect_refused({"transformer.wpe.weight", "overflow"});
    write_file(bad, raw_safetensors(R"({"transformer.wpe.weight": {"dtype": "F32", "shape": [4], "data_offsets": [0, 1600]}})",
                                    std::string(16, '\0')));
    expect_refused({"transformer.wpe.weight", "data_offsets"});
    write_file(bad, raw_safetensors(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},)"
                                    R"( "b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})",
                                    std::string(16, '\0')));
    expect_refused({"overlap"});
    write_file(bad, raw_safetensors(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 12]}})",
                                    std::string(16, '\0')));
    expect_refused({"'a'", "needs 16"});
  }
  SECTION("missing, extra and misshapen tensors name the tensor") {
    write_edited([](auto& t, auto&) {
      std::erase_if(t, [](auto& p) { return p.first == "transformer.h.0.mlp.c_fc.weight"; });
    });
    expect_refused({"transformer.h.0.mlp.c_fc.weight", "missing"});
    write_edited([](auto& t, auto&) { t.emplace_back("transformer.h.1.ln_1.weight", Tensor::ones({16})); });
    expect_refused({"transformer.h.1.ln_1.weight", "unexpected"});
    write_edited([](auto& t, auto&) {
      for (auto& [name, x] : t)
        if (name == "transformer.wpe.weight") x = Tensor::zeros({9, 16});
    });
    expect_refused({"transformer.wpe.weight", "[9, 16]", "[8, 16]"});
    write_edited([](auto& t, auto&) {
      for (auto& [name, x] : t)
        if (name == "transformer.h.0.attn.c_attn.weight") x = Tensor::zeros({16, 48});  // transposed
    });
    expect_refused({"transformer.h.0.attn.c_attn.weight", "[48, 16]"});
  }
  SECTION("missing or malformed config") {
    write_edited([](auto&, auto& m) { m.erase("config"); });
    expect_refused({"\"config\""});
    write_edited([](auto&, auto& m) { m["config"] = "{not json"; });
    expect_refused({"\"config\"", "not valid JSON"});
    write_edited([](auto&, auto& m) { m["config"] = "[1, 2]"; });
    expect_refused({"\"config\"", "object"});
    write_edited([&](auto&, auto& m) { m["config"] = config_with("n_head", nullptr); });
    expect_refused({"\"config\"", "n_head"});
    write_edited([&](auto&, auto& m) { m["config"] = config_with("n_layer", -1); });
    expect_refused({"\"config\"", "n_layer", "-1"});
    write_edited([&](auto&, auto& m) { m["config"] = config_with("n_embd", "16"); });
    expect_refused({"\"config\"", "n_embd", "integer"});
    write_edited([&](auto&, auto& m) { m["config"] = config_with("n_head", 3); });
    expect_refused({"\"config\"", "n_embd 16 is not divisible by n_head 3"});
    write_edited([&](auto&, auto& m) { m["config"] = config_with("block_size", int64_t(1) << 40); });
    expect_refused({"\"config\"", "block_size"});
    write_edited([&](auto&, auto& m) { m["config"] = config_with("dropout", 1.5); });
    expect_refused({"\"config\"", "dropout"});
    write_edited([&](auto&, auto& m) { m["config"] = config_with("bias", "yes"); });
    expect_refused({"\"config\"", "bias"});
    // A config that disagrees with the tensors: the shapes name the tensor.
    write_edited([&](auto&, auto& m) { m["config"] = config_with("n_layer", 2); });
    expect_refused({"transformer.h.1.", "missing"});
  }
  SECTION("missing or malformed vocab") {
    write_edited([](auto&, auto& m) { m.erase("vocab"); });
    expect_refused({"\"vocab\""});
    write_edited([](auto&, auto& m) { m["vocab"] = "\n abcdefgh"; });  // not JSON-quoted
    expect_refused({"\"vocab\"", "JSON string"});
    write_edited([](auto&, auto& m) { m["vocab"] = "[\"a\", \"b\"]"; });
    expect_refused({"\"vocab\"", "JSON string"});
    write_edited([](auto&, auto& m) { m["vocab"] = nlohmann::json("\n abcdefg").dump(); });  // 9 characters
    expect_refused({"\"vocab\"", "9 characters", "vocab_size is 10"});
    write_edited([](auto&, auto& m) { m["vocab"] = nlohmann::json("\n abcdefga").dump(); });  // 'a' twice
    expect_refused({"\"vocab\"", "repeats"});
    write_edited([](auto&, auto& m) { m["vocab"] = "\"\\ud800abcdefghi\""; });  // a lone surrogate
    expect_refused({"\"vocab\""});
  }
  SECTION("non-finite weights name the tensor") {
    write_edited([](auto& t, auto&) {
      for (auto& [name, x] : t)
        if (name == "transformer.h.0.ln_2.weight") x = Tensor::full({16}, std::nan(""));
    });
    expect_refused({"transformer.h.0.ln_2.weight", "not finite"});
  }
  SECTION("an integer tensor is not a weight (safetensors reads I64 since issue 13)") {
    write_edited([](auto& t, auto&) {
      for (auto& [name, x] : t)
        if (name == "transformer.h.0.ln_2.weight") x = Tensor::ones({16}, DType::i64);
    });
    expect_refused({"transformer.h.0.ln_2.weight", "int64", "not a floating-point weight"});
  }
  // The untouched checkpoint still works with every loader (the cases above fail for their reason).
  for (const auto& args : loaders(fx, fx.ckpt)) {
    ProcessResult ok = run_heed(args);
    INFO(args[0] << ": " << ok.err);
    REQUIRE(ok.exit_code == 0);
  }
}

TEST_CASE("cli: a checkpoint whose vocab is not sorted loads, with ids in the vocab's order", "[cli]") {
  // The format (docs/checkpoint-format.md) says id i is the vocab's i-th character, nothing about
  // order. Swapping 'g' and 'h' in the vocab must equal swapping them in the text.
  Fixture fx;
  auto metadata = fx.metadata;
  metadata["vocab"] = nlohmann::json("\n abcdefhg").dump();
  const std::string swapped_ckpt = fx.dir / "swapped.safetensors";
  nn::save_safetensors(swapped_ckpt, fx.tensors, metadata);
  std::string text = tiny_corpus();
  const std::string swapped_text_path = fx.dir / "swapped.txt";
  for (char& c : text) c = c == 'g' ? 'h' : c == 'h' ? 'g' : c;
  write_file(swapped_text_path, text);
  ProcessResult a = run_heed({"eval", "--checkpoint", swapped_ckpt, "--data", fx.corpus, "--threads", "1"});
  ProcessResult b = run_heed({"eval", "--checkpoint", fx.ckpt, "--data", swapped_text_path, "--threads", "1"});
  ProcessResult c = run_heed({"eval", "--checkpoint", fx.ckpt, "--data", fx.corpus, "--threads", "1"});
  INFO(a.err << b.err << c.err);
  REQUIRE(a.exit_code == 0);
  REQUIRE(b.exit_code == 0);
  REQUIRE(c.exit_code == 0);
  CHECK(a.out == b.out);
  CHECK(a.out != c.out);
  ProcessResult s = run_heed({"sample", "--checkpoint", swapped_ckpt, "--prompt", "gh", "--tokens", "5"});
  INFO(s.err);
  CHECK(s.exit_code == 0);
}
