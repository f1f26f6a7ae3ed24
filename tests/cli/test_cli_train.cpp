// `heed train`, `heed eval` and `heed sample` end to end (issue 4), on tiny models and a small
// UTF-8 corpus written to a scratch directory: the files a run writes, repeating a run from its
// config.toml, exact --resume (with and without dropout), the vocabulary and the 90/10 split, the
// eval window rule against a loss computed here through the library, greedy/top-k/seeded sampling
// against decodes computed here, progress output on a terminal and on a pipe, and interop with
// PyTorch through the fixture made by scripts/make_torch_fixture.py (tests/data/torch_fixture*).
#include <pty.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <toml++/toml.h>

#include "core/cpu.h"
#include "core/heed.h"
#include "nn/gpt_checkpoint.h"
#include "nn/safetensors.h"
#include "optim/schedule.h"
#include "cli_fixtures.h"
#include "support/process.h"

using namespace heed;
using namespace heed::test;
using nlohmann::json;

namespace {

// UTF-8 by hand (not through the CLI's own encoder, which is under test).
std::string utf8(const std::u32string& s) {
  std::string o;
  for (char32_t c : s) {
    if (c < 0x80) {
      o += char(c);
    } else if (c < 0x800) {
      o += char(0xC0 | (c >> 6));
      o += char(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      o += char(0xE0 | (c >> 12));
      o += char(0x80 | ((c >> 6) & 0x3F));
      o += char(0x80 | (c & 0x3F));
    } else {
      o += char(0xF0 | (c >> 18));
      o += char(0x80 | ((c >> 12) & 0x3F));
      o += char(0x80 | ((c >> 6) & 0x3F));
      o += char(0x80 | (c & 0x3F));
    }
  }
  return o;
}

std::u32string from_utf8(const std::string& s) {
  std::u32string o;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = s[i];
    const int len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    char32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    o += cp;
    i += len;
  }
  return o;
}

// A deterministic corpus of `n_words` words with 1-, 2-, 3- and 4-byte UTF-8 characters.
std::u32string make_text(int n_words, uint64_t seed = 42) {
  const std::u32string words[] = {U"the", U"café",  U"naïve", U"straße", U"→",   U"𝄞",    U"über",
                                  U"ΑΒΓ", U"snow",  U"and",   U"crème",  U"fox", U"jumps", U"déjà",
                                  U"vu",  U"quiet", U"√2",    U"€5",     U"ok",  U"sea"};
  std::u32string t;
  uint64_t x = seed;
  for (int i = 0; i < n_words; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    t += words[(x >> 33) % std::size(words)];
    t += ((x >> 20) % 9 == 0) ? U'\n' : U' ';
  }
  return t;
}

// The tiny recipe every run here shares (a run takes well under a second).
std::vector<std::string> tiny_flags() {
  return {"--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "16", "--batch-size", "4",
          "--eval-iters", "2", "--eval-interval", "5", "--threads", "1", "--sample-tokens", "0", "--seed", "7",
          "--lr", "1e-2", "--min-lr", "1e-3", "--warmup-iters", "2", "--lr-decay-iters", "40"};
}

toml::table read_toml(const std::string& path) {
  try {
    return toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    FAIL(path << ": not TOML: " << e.description());
  }
  return {};
}

ProcessResult train(const std::vector<std::string>& args) {
  ProcessResult r = run_heed(cat({"train"}, args));
  require_ok(r);
  return r;
}

// The evaluations' numbers without elapsed_s (a wall-clock time).
std::vector<std::vector<double>> log_losses(const std::string& path) {
  std::vector<std::vector<double>> out;
  for (const json& j : read_evals(path))
    out.push_back({j.at("iter").get<double>(), j.at("train_loss").get<double>(), j.at("val_loss").get<double>(),
                   j.at("lr").get<double>()});
  return out;
}

std::map<std::string, std::vector<double>> tensors_of(const std::string& path) {
  std::map<std::string, std::vector<double>> out;
  for (auto& [name, t] : nn::load_safetensors(path).tensors) out[name] = t.to_vector<double>();
  return out;
}

std::vector<int32_t> encode(const std::u32string& vocab, const std::u32string& text) {
  std::vector<int32_t> ids;
  for (char32_t c : text) {
    const size_t i = vocab.find(c);
    REQUIRE(i != std::u32string::npos);
    ids.push_back(static_cast<int32_t>(i));
  }
  return ids;
}

// Logits (float64) of the next token after `ids`, the context cropped to block_size as nanoGPT.
std::vector<double> next_logits(nn::GPT& model, const std::vector<int32_t>& ids) {
  NoGradGuard no_grad;
  const int64_t T = std::min<int64_t>(static_cast<int64_t>(ids.size()), model.config().block_size);
  std::vector<int32_t> ctx(ids.end() - T, ids.end());
  return slice(model.forward(ctx, 1, T), 1, T - 1, T).to_vector<double>();
}

std::string greedy_decode(const std::string& checkpoint, const std::string& prompt, int n) {
  nn::LoadedGPT m = nn::load_gpt_checkpoint(checkpoint);
  const std::u32string vocab = from_utf8(m.vocab_utf8);
  std::vector<int32_t> ids = encode(vocab, from_utf8(prompt));
  std::u32string out = from_utf8(prompt);
  for (int k = 0; k < n; ++k) {
    const std::vector<double> row = next_logits(*m.model, ids);
    const int32_t next = static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
    ids.push_back(next);
    out += vocab[next];
  }
  return utf8(out);
}

// Runs args on a pseudo-terminal `columns` wide (stdout and stderr) and returns everything it printed.
std::string run_on_pty(const std::vector<std::string>& args, unsigned short columns = 200) {
  int master = -1;
  winsize size{};
  size.ws_row = 24;
  size.ws_col = columns;
  const pid_t pid = forkpty(&master, nullptr, nullptr, &size);
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(master, buf, sizeof buf);
    if (n > 0) out.append(buf, static_cast<size_t>(n));
    else if (n < 0 && errno == EINTR) continue;
    else break;  // EIO once the child has exited and closed the terminal
  }
  close(master);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  INFO(out);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  return out;
}

}  // namespace

TEST_CASE("heed train writes model.safetensors, train_state.safetensors, log.jsonl and config.toml as documented", "[cli]") {
  ScratchDir dir("train-files");
  const std::u32string text = make_text(600);
  write_file(dir / "corpus.txt", utf8(text));
  const std::string out = dir / "run";
  ProcessResult r = train(cat(tiny_flags(), {"--data", dir / "corpus.txt", "--out", out, "--max-iters", "10"}));

  // The vocabulary: the sorted set of the corpus's code points (multi-byte ones included).
  std::set<char32_t> set(text.begin(), text.end());
  const std::u32string vocab(set.begin(), set.end());
  REQUIRE(vocab.size() > 30);
  REQUIRE(*vocab.rbegin() == U'𝄞');  // the one 4-byte character sorts last

  {  // model.safetensors: nanoGPT names, F32, no lm_head.weight, config and vocab metadata
    // the raw header, as PyTorch's safetensors would read it
    const std::string bytes = read_file(out + "/model.safetensors");
    REQUIRE(bytes.size() > 8);
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
    REQUIRE(n % 8 == 0);
    json header = json::parse(bytes.substr(8, n));
    REQUIRE(header.contains("__metadata__"));
    json meta = header["__metadata__"];
    header.erase("__metadata__");

    nn::GPTConfig c;
    c.n_layer = 1, c.n_head = 2, c.n_embd = 16, c.block_size = 16, c.vocab_size = int64_t(vocab.size());
    std::set<std::string> names;
    for (auto& [name, info] : header.items()) {
      names.insert(name);
      CHECK(info["dtype"] == "F32");
    }
    std::set<std::string> expected{"transformer.wte.weight", "transformer.wpe.weight", "transformer.ln_f.weight"};
    for (const char* s : {"ln_1.weight", "attn.c_attn.weight", "attn.c_proj.weight", "ln_2.weight",
                          "mlp.c_fc.weight", "mlp.c_proj.weight"})
      expected.insert(std::string("transformer.h.0.") + s);
    CHECK(names == expected);  // no biases (bias off), no lm_head.weight (tied)
    CHECK(header["transformer.wte.weight"]["shape"] == json({vocab.size(), 16}));
    CHECK(header["transformer.h.0.attn.c_attn.weight"]["shape"] == json({48, 16}));  // [out, in]
    CHECK(header["transformer.h.0.mlp.c_proj.weight"]["shape"] == json({16, 64}));

    json config = json::parse(meta["config"].get<std::string>());
    CHECK(config["n_layer"] == 1);
    CHECK(config["n_head"] == 2);
    CHECK(config["n_embd"] == 16);
    CHECK(config["block_size"] == 16);
    CHECK(config["vocab_size"] == vocab.size());
    CHECK(config["bias"] == false);
    // "vocab" is a JSON string whose characters, in order, are the vocabulary
    CHECK(json::parse(meta["vocab"].get<std::string>()).get<std::string>() == utf8(vocab));
    CHECK(meta["format"] == "pt");
    CHECK(meta["iter"] == "10");
  }

  {  // train_state.safetensors: weights, AdamW moments, counters and generator states
    nn::SafetensorsFile st = nn::load_safetensors(out + "/train_state.safetensors");
    std::set<std::string> names;
    for (auto& [name, t] : st.tensors) names.insert(name);
    CHECK(names.count("model.transformer.wte.weight"));
    CHECK(names.count("optim.transformer.wte.weight.exp_avg"));
    CHECK(names.count("optim.transformer.h.0.ln_1.weight.exp_avg_sq"));
    for (const char* key : {"iter", "eval_done", "optimizer_step", "data_rng", "dropout_rng", "options", "vocab"})
      CHECK(st.metadata.count(key));
    CHECK(st.metadata["iter"] == "10");
    CHECK(st.metadata["optimizer_step"] == "10");
    // the weights in the state are the ones in model.safetensors
    auto model = tensors_of(out + "/model.safetensors");
    auto state = tensors_of(out + "/train_state.safetensors");
    for (auto& [name, v] : model) CHECK(state.at("model." + name) == v);
  }

  {  // log.jsonl: a batch's line every --log-interval (10) iterations with exactly iter, loss, lr,
     // tok_s, elapsed_s; and one line per eval interval with exactly iter, train_loss, val_loss, lr, elapsed_s
    std::vector<json> batches;
    for (const json& j : read_log(out + "/log.jsonl"))
      if (j.contains("loss")) batches.push_back(j);
    REQUIRE(batches.size() == 1);
    std::set<std::string> batch_keys;
    for (auto& [k, v] : batches[0].items()) batch_keys.insert(k);
    CHECK(batch_keys == std::set<std::string>{"iter", "loss", "lr", "tok_s", "elapsed_s"});
    CHECK(batches[0]["iter"] == 0);
    CHECK(batches[0]["loss"].get<double>() == Approx(std::log(double(vocab.size()))).epsilon(0.05));
    CHECK(batches[0]["lr"].get<double>() == Approx(optim::cosine_lr(0, 1e-2, 1e-3, 2, 40)).epsilon(1e-12));
    CHECK(batches[0]["tok_s"].get<double>() > 0.0);
    std::vector<json> log = read_evals(out + "/log.jsonl");
    REQUIRE(log.size() == 3);
    for (size_t i = 0; i < log.size(); ++i) {
      const json& j = log[i];
      std::set<std::string> keys;
      for (auto& [k, v] : j.items()) keys.insert(k);
      CHECK(keys == std::set<std::string>{"iter", "train_loss", "val_loss", "lr", "elapsed_s"});
      CHECK(j["iter"] == int(5 * i));
      for (const char* k : {"train_loss", "val_loss"}) {
        CHECK(j[k].get<double>() > 0.5);
        CHECK(j[k].get<double>() < 10.0);
      }
      CHECK(j["lr"].get<double>() == Approx(optim::cosine_lr(5 * int64_t(i), 1e-2, 1e-3, 2, 40)).epsilon(1e-12));
      CHECK(j["elapsed_s"].get<double>() >= 0.0);
    }
    // an untrained model of this vocabulary starts near ln(vocab) and learns within 10 steps
    CHECK(log[0]["train_loss"].get<double>() == Approx(std::log(double(vocab.size()))).epsilon(0.05));
    CHECK(log[2]["train_loss"].get<double>() < log[0]["train_loss"].get<double>() - 0.3);
  }

  {  // the 90/10 split and the vocabulary size are reported
    const size_t n_train = text.size() * 9 / 10;
    const std::string counts = std::to_string(n_train) + " train / " + std::to_string(text.size() - n_train) + " val characters";
    INFO(r.out);
    CHECK(r.out.find("vocab " + std::to_string(vocab.size()) + ",") != std::string::npos);
    CHECK(r.out.find(counts) != std::string::npos);
  }

  {  // config.toml holds the run's flags (read here with the TOML library itself)
    const toml::table cfg = read_toml(out + "/config.toml");
    CHECK(cfg["n_layer"].value<int64_t>() == 1);
    CHECK(cfg["n_embd"].value<int64_t>() == 16);
    CHECK(cfg["max_iters"].value<int64_t>() == 10);
    CHECK(cfg["eval_interval"].value<int64_t>() == 5);
    CHECK(cfg["seed"].value<int64_t>() == 7);
    CHECK(cfg["lr"].value<double>() == 1e-2);
  }
}

TEST_CASE("the validation split is the last 10% of the corpus", "[cli]") {
  // "abab…" (900 characters) then "aaa…" (100): training sees only a->b and b->a, validation only
  // a->a, so the val loss climbs while the train loss falls.
  ScratchDir dir("split");
  std::string text;
  for (int i = 0; i < 450; ++i) text += "ab";
  write_file(dir / "ab.txt", text + std::string(100, 'a'));
  ProcessResult r = train({"--data", dir / "ab.txt", "--out", dir / "run", "--n-layer", "1", "--n-head", "1",
                           "--n-embd", "8", "--block-size", "8", "--batch-size", "4", "--max-iters", "30",
                           "--eval-interval", "30", "--eval-iters", "2", "--lr", "3e-2", "--min-lr", "1e-2",
                           "--warmup-iters", "0", "--lr-decay-iters", "30", "--threads", "1", "--sample-tokens", "0",
                           // a seed whose init leaves the symmetric start (loss ln 2) within 30 steps: some do
                           // not (1 with the sequential init, 1337 with the init by name)
                           "--seed", "2"});
  CHECK(r.out.find("900 train / 100 val characters") != std::string::npos);
  std::vector<json> log = read_evals(dir / "run/log.jsonl");
  REQUIRE(log.size() == 2);
  CHECK(log[1]["train_loss"].get<double>() < 0.1);
  CHECK(log[1]["val_loss"].get<double>() > 2.0);
}

TEST_CASE("heed train without --data trains on the bundled tiny shakespeare", "[cli]") {
  ScratchDir dir("bundled");
  ProcessResult r = train({"--out", dir / "run", "--n-layer", "1", "--n-head", "1", "--n-embd", "8", "--block-size",
                           "8", "--batch-size", "2", "--max-iters", "0", "--eval-iters", "1", "--threads", "1",
                           "--sample-tokens", "0"});
  INFO(r.out);
  // 1115394 characters, 65 distinct; int(0.9 * 1115394) = 1003854
  CHECK(r.out.find("vocab 65, 1003854 train / 111540 val characters") != std::string::npos);
}

TEST_CASE("heed train --config DIR/config.toml repeats the run, from any directory", "[cli]") {
  ScratchDir dir("config");
  write_file(dir / "corpus.txt", utf8(make_text(500)));
  RunOptions in_dir;
  const std::string cwd = dir.path();
  in_dir.in_child = [cwd] {
    if (chdir(cwd.c_str()) != 0) _exit(126);
  };
  // the first run names its corpus relative to its working directory
  require_ok(run_heed(cat({"train"}, cat(tiny_flags(), {"--data", "corpus.txt", "--out", dir / "a", "--max-iters", "10"})),
                      in_dir));
  INFO(read_file(dir / "a/config.toml"));
  CHECK(read_toml(dir / "a/config.toml")["data"].value<std::string>() == dir.path() + "/corpus.txt");  // made absolute

  RunOptions elsewhere;
  elsewhere.in_child = [] {
    if (chdir("/") != 0) _exit(126);
  };
  elsewhere.timeout_s = 60;  // were the file ignored, this would be the default 2000-iteration run
  require_ok(run_heed({"train", "--config", dir / "a/config.toml", "--out", dir / "b"}, elsewhere));
  CHECK(log_losses(dir / "b/log.jsonl") == log_losses(dir / "a/log.jsonl"));
  CHECK(log_losses(dir / "b/log.jsonl").size() == 3);
  CHECK(read_file(dir / "b/model.safetensors") == read_file(dir / "a/model.safetensors"));

  // flags on the command line win over the file
  require_ok(run_heed({"train", "--config", dir / "a/config.toml", "--out", dir / "c", "--max-iters", "5"}));
  CHECK(log_losses(dir / "c/log.jsonl").size() == 2);
  // and a key that is no flag of train is a usage error
  write_file(dir / "bad.toml", "n-layer=1\nn_layers=2\n");
  require_clean_error(run_heed({"train", "--config", dir / "bad.toml", "--out", dir / "d"}), 2, {"n_layers", "line 2"});
}

// Trains `flags` for 20 iterations in one go and, separately, 10 then --resume to 20; returns
// the two run directories.
static std::pair<std::string, std::string> full_and_resumed(const ScratchDir& dir, const std::string& tag,
                                                            const std::vector<std::string>& flags) {
  const std::string full = dir / ("full-" + tag), part = dir / ("part-" + tag);
  train(cat(flags, {"--out", full, "--max-iters", "20"}));
  train(cat(flags, {"--out", part, "--max-iters", "10"}));
  REQUIRE(log_losses(part + "/log.jsonl").size() == 3);
  // --resume restores the recipe; --max-iters (and --threads) come from the command line
  ProcessResult r = train({"--resume", "--out", part, "--max-iters", "20", "--threads", "1", "--sample-tokens", "0"});
  CHECK(r.out.find("resuming " + part + " at iteration 10 of 20") != std::string::npos);
  return {full, part};
}

TEST_CASE("heed train --resume after a run stopped early gives the uninterrupted run's losses, bit for bit", "[cli]") {
  ScratchDir dir("resume");
  write_file(dir / "corpus.txt", utf8(make_text(600)));
  std::map<std::string, std::string> final_model;
  for (const char* dropout : {"0", "0.2"}) {
    INFO("dropout " << dropout);
    auto [full, part] = full_and_resumed(dir, dropout, cat(tiny_flags(), {"--data", dir / "corpus.txt", "--dropout", dropout}));
    const auto expected = log_losses(full + "/log.jsonl");
    REQUIRE(expected.size() == 5);  // iterations 0, 5, 10, 15, 20
    CHECK(log_losses(part + "/log.jsonl") == expected);
    // the weights and the optimizer state are the same bits
    CHECK(read_file(part + "/model.safetensors") == read_file(full + "/model.safetensors"));
    CHECK(tensors_of(part + "/train_state.safetensors") == tensors_of(full + "/train_state.safetensors"));
    final_model[dropout] = read_file(full + "/model.safetensors");
  }
  // dropout is really on in the second pair, so its generators had to be restored
  CHECK(final_model["0"] != final_model["0.2"]);
}

TEST_CASE("heed train --resume on another thread count gives the uninterrupted run's bits, on oneDNN and OpenBLAS", "[cli]") {
  // A product's pieces follow from its shape and the machine's cores, not from --threads
  // (core/tuning.h, kProductPieceMacs), so 10 iterations on 2 threads and 10 more on 3 give the
  // bits of 20 on 1. The model is wide enough that its products are cut in pieces (512 rows x 64
  // x 256 in the MLP). OpenBLAS with its AVX2 kernels, where available: with those, a split that
  // followed the thread count changed the bits (docs/platform.md).
  ScratchDir dir("resume-threads");
  write_file(dir / "corpus.txt", utf8(make_text(2000)));
  const std::vector<std::string> flags = {"--n-layer", "2", "--n-head", "2", "--n-embd", "64", "--block-size", "32",
                                          "--batch-size", "16", "--eval-iters", "2", "--eval-interval", "5",
                                          "--sample-tokens", "0", "--seed", "7", "--data", dir / "corpus.txt"};
  std::vector<std::vector<std::string>> kernels = {{}, {"HEED_FP32_PRODUCTS=openblas"}};
  if (heed::cpu_info().avx2) kernels.back().push_back("OPENBLAS_CORETYPE=Haswell");
  for (const auto& env : kernels) {
    const std::string tag = env.empty() ? "default" : "openblas";
    INFO("kernels: " << tag);
    RunOptions options;
    options.env = env;
    const std::string full = dir / ("full-" + tag), part = dir / ("part-" + tag);
    require_ok(run_heed(cat({"train"}, cat(flags, {"--out", full, "--max-iters", "20", "--threads", "1"})), options));
    require_ok(run_heed(cat({"train"}, cat(flags, {"--out", part, "--max-iters", "10", "--threads", "2"})), options));
    require_ok(run_heed({"train", "--resume", "--out", part, "--max-iters", "20", "--threads", "3", "--sample-tokens", "0"},
                        options));
    CHECK(log_losses(part + "/log.jsonl") == log_losses(full + "/log.jsonl"));
    CHECK(read_file(part + "/model.safetensors") == read_file(full + "/model.safetensors"));
    CHECK(tensors_of(part + "/train_state.safetensors") == tensors_of(full + "/train_state.safetensors"));
  }
}

TEST_CASE("heed train --precision bf16: recorded with the recipe, --resume bit-exact, eval and sample take it too",
          "[cli][bf16]") {
  ScratchDir dir("precision");
  write_file(dir / "corpus.txt", utf8(make_text(600)));
  const auto flags = cat(tiny_flags(), {"--data", dir / "corpus.txt", "--precision", "bf16"});
  if (!(cpu_info().avx512_bf16 && cpu_info().avx512bw)) {  // refused before anything is written
    require_clean_error(run_heed(cat({"train"}, cat(flags, {"--out", dir / "run"}))), 1, {"AVX512_BF16", "fp32"});
    CHECK(!std::filesystem::exists(dir / "run"));
    WARN("this CPU has no AVX512_BF16: only the refusal was checked");
    return;
  }
  // --resume restores the precision from the run's state (not given again), and the bits match
  for (const char* dropout : {"0", "0.2"}) {
    INFO("dropout " << dropout);
    auto [full, part] = full_and_resumed(dir, std::string("bf16-") + dropout, cat(flags, {"--dropout", dropout}));
    CHECK(log_losses(part + "/log.jsonl") == log_losses(full + "/log.jsonl"));
    CHECK(read_file(part + "/model.safetensors") == read_file(full + "/model.safetensors"));
    CHECK(tensors_of(part + "/train_state.safetensors") == tensors_of(full + "/train_state.safetensors"));
    CHECK(read_toml(full + "/config.toml")["precision"].value<std::string>() == "bf16");
  }
  // the same recipe in fp32 trains differently (bf16 really ran), to nearly the same losses
  train(cat(tiny_flags(), {"--data", dir / "corpus.txt", "--dropout", "0", "--out", dir / "fp32", "--max-iters", "20"}));
  CHECK(read_toml(dir / "fp32/config.toml")["precision"].value<std::string>() == "fp32");
  const auto l32 = log_losses(dir / "fp32/log.jsonl"), l16 = log_losses(dir / "full-bf16-0/log.jsonl");
  REQUIRE(l32.size() == l16.size());
  CHECK(l32 != l16);
  for (size_t i = 0; i < l32.size(); ++i)
    for (size_t j = 1; j < l32[i].size(); ++j) CHECK(std::fabs(l32[i][j] - l16[i][j]) < 0.05);
  // a training state written before --precision existed (no "precision" recorded) resumes, in fp32
  {
    const std::string old_state = dir / "fp32/train_state.safetensors";
    nn::SafetensorsFile f = nn::load_safetensors(old_state);
    json o = json::parse(f.metadata.at("options"));
    REQUIRE(o.at("precision") == "fp32");
    o.erase("precision");
    f.metadata["options"] = o.dump();
    nn::save_safetensors(old_state, f.tensors, f.metadata);
    train({"--resume", "--out", dir / "fp32", "--max-iters", "25", "--threads", "1", "--sample-tokens", "0"});
    CHECK(read_toml(dir / "fp32/config.toml")["precision"].value<std::string>() == "fp32");
  }
  // the recipe's precision cannot change on --resume
  require_clean_error(run_heed({"train", "--resume", "--out", dir / "part-bf16-0", "--max-iters", "30", "--precision",
                                "fp32"}),
                      2, {"--precision", "--resume"});

  // eval --precision bf16: the library's loss under AutocastBF16; fp32 differs slightly
  const std::string ckpt = dir / "fp32/model.safetensors";
  ProcessResult r32 = run_heed({"eval", "--checkpoint", ckpt, "--data", dir / "corpus.txt", "--threads", "1"});
  ProcessResult r16 = run_heed(
      {"eval", "--checkpoint", ckpt, "--data", dir / "corpus.txt", "--threads", "1", "--precision", "bf16"});
  require_ok(r32);
  require_ok(r16);
  const double e32 = json::parse(r32.out).at("loss").get<double>(), e16 = json::parse(r16.out).at("loss").get<double>();
  CHECK(e32 != e16);
  CHECK(std::fabs(e32 - e16) < 0.02);
  // sample --precision bf16 runs and prints as many characters
  ProcessResult s16 = run_heed({"sample", "--checkpoint", ckpt, "--tokens", "20", "--precision", "bf16", "--threads", "1"});
  require_ok(s16);
  CHECK(s16.out.size() >= 21);
  require_clean_error(run_heed({"sample", "--checkpoint", ckpt, "--precision", "bf17"}), 2, {"--precision bf17"});
}

TEST_CASE("heed train --resume extends a run that ended off the eval interval exactly as an uninterrupted run", "[cli]") {
  // --eval-interval 4 and --max-iters 10: the first run's closing evaluation at iteration 10 is one
  // the 20-iteration run never makes; it must not change the batches that training draws next.
  ScratchDir dir("resume-off-interval");
  write_file(dir / "corpus.txt", utf8(make_text(600)));
  auto flags = cat(tiny_flags(), {"--data", dir / "corpus.txt", "--dropout", "0.1"});
  auto interval = std::find(flags.begin(), flags.end(), "--eval-interval");
  REQUIRE(interval != flags.end());
  interval[1] = "4";
  const std::string full = dir / "full", part = dir / "part";
  train(cat(flags, {"--out", full, "--max-iters", "20"}));
  train(cat(flags, {"--out", part, "--max-iters", "10"}));
  train({"--resume", "--out", part, "--max-iters", "20", "--threads", "1", "--sample-tokens", "0"});
  CHECK(read_file(part + "/model.safetensors") == read_file(full + "/model.safetensors"));
  auto resumed = log_losses(part + "/log.jsonl");
  REQUIRE(resumed.size() == 7);  // 0, 4, 8, 10 (the first run's end), 12, 16, 20
  CHECK(resumed[3][0] == 10);
  resumed.erase(resumed.begin() + 3);
  CHECK(resumed == log_losses(full + "/log.jsonl"));
}

TEST_CASE("heed train --resume refuses a recipe flag that differs from the run's, accepts the same one", "[cli]") {
  ScratchDir dir("resume-flags");
  write_file(dir / "corpus.txt", utf8(make_text(300)));
  const auto flags = cat(tiny_flags(), {"--data", dir / "corpus.txt", "--out", dir / "run"});
  train(cat(flags, {"--max-iters", "5"}));
  require_clean_error(run_heed({"train", "--resume", "--out", dir / "run", "--lr", "5e-3"}), 2, {"--lr", "--resume"});
  require_clean_error(run_heed({"train", "--resume", "--out", dir / "run", "--bias"}), 2, {"--bias", "--resume"});
  require_clean_error(run_heed({"train", "--resume", "--out", dir / "run", "--seed", "8"}), 2, {"--seed 8", "run's 7"});
  CHECK(log_losses(dir / "run/log.jsonl").size() == 2);  // untouched
  // the run's own command line with --resume and a longer --max-iters is fine
  ProcessResult r = train(cat(flags, {"--max-iters", "10", "--resume"}));
  CHECK(r.out.find("at iteration 5 of 10") != std::string::npos);
  CHECK(log_losses(dir / "run/log.jsonl").size() == 3);
}

TEST_CASE("heed train --resume restores the dropout generators (a different state gives different weights)", "[cli]") {
  ScratchDir dir("resume-dropout");
  write_file(dir / "corpus.txt", utf8(make_text(600)));
  const auto flags = cat(tiny_flags(), {"--data", dir / "corpus.txt", "--dropout", "0.2"});
  auto [full, part] = full_and_resumed(dir, "a", flags);
  REQUIRE(read_file(part + "/model.safetensors") == read_file(full + "/model.safetensors"));

  const std::string tampered = dir / "tampered";
  train(cat(flags, {"--out", tampered, "--max-iters", "10"}));
  nn::SafetensorsFile st = nn::load_safetensors(tampered + "/train_state.safetensors");
  json gens = json::parse(st.metadata.at("dropout_rng"));
  REQUIRE(gens.size() == 4);  // transformer.drop, and block 0's attn_dropout, resid_dropout, mlp.dropout
  Generator other(12345);
  json state = json::array();
  for (uint64_t w : other.state()) state.push_back(std::to_string(w));
  for (auto& [path, g] : gens.items()) g = state.dump();
  st.metadata["dropout_rng"] = gens.dump();
  nn::save_safetensors(tampered + "/train_state.safetensors", st.tensors, st.metadata);
  train({"--resume", "--out", tampered, "--max-iters", "20", "--threads", "1", "--sample-tokens", "0"});
  CHECK(read_file(tampered + "/model.safetensors") != read_file(full + "/model.safetensors"));
}

TEST_CASE("heed train --resume --max-iters N extends a run, also when N is the default 2000", "[cli]") {
  ScratchDir dir("extend");
  write_file(dir / "corpus.txt", utf8(make_text(300)));
  const std::string run = dir / "run";
  train({"--data", dir / "corpus.txt", "--n-layer", "1", "--n-head", "1", "--n-embd", "4", "--block-size", "4",
         "--batch-size", "1", "--eval-interval", "1000", "--eval-iters", "1", "--threads", "1", "--sample-tokens", "0",
         "--out", run, "--max-iters", "10"});
  train({"--resume", "--out", run, "--max-iters", "2000", "--threads", "1", "--sample-tokens", "0"});
  auto log = log_losses(run + "/log.jsonl");
  REQUIRE(log.size() == 4);  // 0, 10 (where the first run ended), 1000, 2000
  CHECK(log[3][0] == 2000);
  // without --max-iters, --resume keeps the run's own (now 2000): nothing left to do
  ProcessResult r = train({"--resume", "--out", run, "--threads", "1", "--sample-tokens", "0"});
  CHECK(r.out.find("at iteration 2000 of 2000") != std::string::npos);
  CHECK(log_losses(run + "/log.jsonl") == log);
}

TEST_CASE("heed eval: mean cross-entropy over consecutive block_size windows, as computed through the library", "[cli]") {
  ScratchDir dir("eval");
  const std::u32string text = make_text(600);
  write_file(dir / "corpus.txt", utf8(text));
  train(cat(tiny_flags(), {"--data", dir / "corpus.txt", "--out", dir / "run", "--max-iters", "20"}));
  const std::string ckpt = dir / "run/model.safetensors";
  nn::LoadedGPT m = nn::load_gpt_checkpoint(ckpt);
  const int64_t B = 16;
  const std::u32string vocab = from_utf8(m.vocab_utf8);

  // lengths on both sides of a window boundary: n = 5B+1 holds 5 windows, 5B only 4
  for (const auto& [len, windows] : std::vector<std::pair<int64_t, int64_t>>{
           {5 * B + 1, 5}, {5 * B, 4}, {5 * B + 9, 5}, {B + 1, 1}, {1000, 62}}) {
    INFO("length " << len);
    const std::u32string part = text.substr(100, static_cast<size_t>(len));
    write_file(dir / "eval.txt", utf8(part));
    ProcessResult r = run_heed({"eval", "--checkpoint", ckpt, "--data", dir / "eval.txt", "--threads", "1"});
    require_ok(r);
    REQUIRE(std::count(r.out.begin(), r.out.end(), '\n') == 1);  // exactly one line
    json j = json::parse(r.out);
    REQUIRE(j.size() == 2);
    const int64_t tokens = j.at("tokens").get<int64_t>();
    const double loss = j.at("loss").get<double>();

    // s = 0, B, 2B, ... while s + B + 1 <= len
    const std::vector<int32_t> ids = encode(vocab, part);
    NoGradGuard no_grad;
    double total = 0;
    int64_t count = 0, n_windows = 0;
    for (int64_t s = 0; s + B + 1 <= len; s += B, ++n_windows) {
      std::vector<int32_t> x(ids.begin() + s, ids.begin() + s + B), y(ids.begin() + s + 1, ids.begin() + s + B + 1);
      total += m.model->loss(x, y, 1, B).item() * double(B);
      count += B;
    }
    CHECK(n_windows == windows);
    CHECK(tokens == windows * B);
    CHECK(loss == Approx(total / double(count)).epsilon(1e-6));
    // the batch size only groups windows into forward passes
    ProcessResult r3 = run_heed({"eval", "--checkpoint", ckpt, "--data", dir / "eval.txt", "--batch-size", "3", "--threads", "1"});
    require_ok(r3);
    CHECK(json::parse(r3.out).at("loss").get<double>() == Approx(loss).epsilon(1e-6));
  }
  // too short for one window
  write_file(dir / "short.txt", utf8(text.substr(0, B)));
  require_clean_error(run_heed({"eval", "--checkpoint", ckpt, "--data", dir / "short.txt"}), 1, {"short.txt", "block_size 16"});
}

TEST_CASE("heed sample: prompt first, greedy at temperature 0, context cropped to block_size, top-k and seeds", "[cli]") {
  ScratchDir dir("sample");
  const std::u32string text = make_text(600);
  write_file(dir / "corpus.txt", utf8(text));
  train(cat(tiny_flags(), {"--data", dir / "corpus.txt", "--out", dir / "run", "--max-iters", "30"}));
  const std::string ckpt = dir / "run/model.safetensors";
  // 40 characters, more than block_size 16, with multi-byte ones
  const std::string prompt = utf8(text.substr(0, 40));
  auto sample = [&](std::vector<std::string> extra) {
    ProcessResult r = run_heed(cat({"sample", "--checkpoint", ckpt, "--prompt", prompt, "--threads", "1"}, extra));
    require_ok(r);
    return r.out;
  };

  {  // --temperature 0 is the greedy decode, deterministic, printed after the prompt
    const std::string a = sample({"--temperature", "0", "--tokens", "60"});
    CHECK(a.rfind(prompt, 0) == 0);
    CHECK(a == greedy_decode(ckpt, prompt, 60) + "\n");
    CHECK(sample({"--temperature", "0", "--tokens", "60", "--seed", "99"}) == a);  // no randomness
    // --top-k 1 keeps only the argmax, whatever the temperature
    CHECK(sample({"--temperature", "1.5", "--top-k", "1", "--tokens", "60", "--seed", "3"}) == a);
  }

  {  // the same seed gives the same text, another seed another
    const std::string a = sample({"--temperature", "1", "--tokens", "200", "--seed", "1"});
    CHECK(sample({"--temperature", "1", "--tokens", "200", "--seed", "1"}) == a);
    CHECK(sample({"--temperature", "1", "--tokens", "200", "--seed", "2"}) != a);
    CHECK(a.rfind(prompt, 0) == 0);
  }

  {  // --top-k K draws every character from the K most likely ones
    const std::string out = sample({"--temperature", "2", "--top-k", "3", "--tokens", "100", "--seed", "5"});
    REQUIRE(out.back() == '\n');
    nn::LoadedGPT m = nn::load_gpt_checkpoint(ckpt);
    const std::u32string vocab = from_utf8(m.vocab_utf8);
    std::vector<int32_t> ids = encode(vocab, from_utf8(out.substr(0, out.size() - 1)));
    REQUIRE(ids.size() == 140);
    int outside_top2 = 0;
    for (size_t i = 40; i < ids.size(); ++i) {
      const std::vector<int32_t> ctx(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(i));
      const std::vector<double> row = next_logits(*m.model, ctx);
      const int64_t better = std::count_if(row.begin(), row.end(), [&](double v) { return v > row[ids[i]]; });
      CHECK(better < 3);
      outside_top2 += better == 2;
    }
    CHECK(outside_top2 > 0);  // the temperature really spreads the draws over the three
  }
}

TEST_CASE("models saved by PyTorch load in heed with PyTorch's loss and greedy text", "[cli]") {
  // tests/data/torch_fixture*: /usr/bin/python3 scripts/make_torch_fixture.py --out tests/data
  const std::string data = std::string(HEED_SOURCE_DIR) + "/tests/data/";
  const json fixture = json::parse(read_file(data + "torch_fixture.json"));
  REQUIRE(fixture["models"].size() == 2);
  for (auto& [file, expected] : fixture["models"].items()) {
    INFO(file);
    ProcessResult r = run_heed({"eval", "--checkpoint", data + file, "--data", data + "torch_fixture.txt", "--threads", "1"});
    require_ok(r);
    json j = json::parse(r.out);
    CHECK(j["tokens"] == expected["tokens"]);
    CHECK(j["loss"].get<double>() == Approx(expected["loss"].get<double>()).epsilon(1e-5));

    ProcessResult s = run_heed({"sample", "--checkpoint", data + file, "--prompt", fixture["prompt"].get<std::string>(),
                                "--tokens", std::to_string(fixture["greedy_tokens"].get<int>()), "--temperature", "0",
                                "--threads", "1"});
    require_ok(s);
    CHECK(s.out == expected["greedy"].get<std::string>() + "\n");
  }
  // the two files use both namings of the tied matrix, the second with torch.compile's prefix
  auto names = [&](const std::string& f) {
    std::set<std::string> out;
    for (auto& [name, t] : nn::load_safetensors(data + f).tensors) out.insert(name);
    return out;
  };
  const auto a = names("torch_fixture_nanogpt.safetensors"), b = names("torch_fixture_compiled.safetensors");
  CHECK(a.count("transformer.wte.weight"));
  CHECK(!a.count("lm_head.weight"));
  CHECK(a.count("transformer.h.1.attn.c_attn.bias"));
  CHECK(b.count("_orig_mod.lm_head.weight"));
  CHECK(!b.count("_orig_mod.transformer.wte.weight"));
}

TEST_CASE("heed train's flags are the issue's, with nanoGPT's CPU-run defaults", "[cli]") {
  ProcessResult help = run_heed({"train", "--help"});
  require_ok(help);
  for (const char* flag : {"--data", "--out", "--resume", "--config", "--n-layer", "--n-head", "--n-embd",
                           "--block-size", "--dropout", "--bias", "--batch-size", "--max-iters", "--lr",
                           "--min-lr", "--warmup-iters", "--lr-decay-iters", "--weight-decay", "--beta1",
                           "--beta2", "--grad-clip", "--eval-interval", "--eval-iters", "--seed", "--threads"})
    CHECK((help.out.find(std::string(" ") + flag + " ") != std::string::npos ||
           help.out.find(std::string(" ") + flag + ",") != std::string::npos));
  // each flag answers to nanoGPT's name too
  CHECK(help.out.find("--max-iters,--max_iters INT=2000\n") != std::string::npos);
  CHECK(help.out.find("--eval-iters,--eval_iters INT=20\n") != std::string::npos);

  // the effective defaults, as the run records them (only the run length is shortened here)
  ScratchDir dir("defaults");
  write_file(dir / "corpus.txt", utf8(make_text(500)));
  train({"--data", dir / "corpus.txt", "--out", dir / "run", "--max-iters", "0", "--eval-iters", "1", "--threads", "1",
         "--sample-tokens", "0"});
  INFO(read_file(dir / "run/config.toml"));
  const toml::table cfg = read_toml(dir / "run/config.toml");
  for (const auto& [key, value] : std::vector<std::pair<const char*, int64_t>>{
           {"n_layer", 4}, {"n_head", 4}, {"n_embd", 128}, {"block_size", 64}, {"batch_size", 12},
           {"warmup_iters", 100}, {"lr_decay_iters", 2000}, {"eval_interval", 250}, {"seed", 1337}}) {
    INFO(key);
    CHECK(cfg[key].value<int64_t>() == value);
  }
  for (const auto& [key, value] : std::vector<std::pair<const char*, double>>{
           {"dropout", 0}, {"lr", 0.001}, {"min_lr", 0.0001}, {"weight_decay", 0.1}, {"beta1", 0.9},
           {"beta2", 0.99}, {"grad_clip", 1}}) {
    INFO(key);
    CHECK(cfg[key].value_exact<double>() == value);
  }
  CHECK(cfg["bias"].value<bool>() == false);
}

TEST_CASE("heed sample: --num-samples, --stop and --prompt-file (bytes exact, NUL included)", "[cli]") {
  ScratchDir dir("sample-more");
  std::string corpus = utf8(make_text(600));
  for (size_t i = 7; i < corpus.size(); i += 13)
    if (static_cast<unsigned char>(corpus[i]) < 0x80) corpus[i] = '\0';  // NUL is a character like any other
  write_file(dir / "corpus.txt", corpus);
  train(cat(tiny_flags(), {"--data", dir / "corpus.txt", "--out", dir / "run", "--max-iters", "30"}));
  const std::string ckpt = dir / "run/model.safetensors";
  auto sample = [&](std::vector<std::string> extra) {
    ProcessResult r = run_heed(cat({"sample", "--checkpoint", ckpt, "--threads", "1", "--seed", "4"}, extra));
    require_ok(r);
    return r.out;
  };
  const std::string sep = "---------------\n";

  {  // N samples one after another from one random stream, each followed by nanoGPT's separator
    const std::string one = sample({"--tokens", "50"});
    const std::string three = sample({"--tokens", "50", "--num-samples", "3"});
    REQUIRE(from_utf8(one).size() == 51);  // 50 characters and the newline
    CHECK(three.rfind(one + sep, 0) == 0);  // the first sample is the single one
    std::vector<std::string> parts;
    for (size_t at = 0, next; (next = three.find(sep, at)) != std::string::npos; at = next + sep.size())
      parts.push_back(three.substr(at, next - at));
    REQUIRE(parts.size() == 3);
    for (const auto& p : parts) CHECK(from_utf8(p).size() == 51);
    CHECK(parts[1] != parts[0]);
    CHECK(three == parts[0] + sep + parts[1] + sep + parts[2] + sep);
  }

  // A prompt with NUL bytes, from a file: printed byte for byte, and continued as --prompt would.
  const std::string prompt = corpus.substr(0, 30);
  REQUIRE(prompt.find('\0') != std::string::npos);
  write_file(dir / "prompt.bin", prompt);
  const std::string greedy = sample({"--prompt-file", dir / "prompt.bin", "--temperature", "0", "--tokens", "40"});
  CHECK(greedy.rfind(prompt, 0) == 0);
  CHECK(greedy == greedy_decode(ckpt, prompt, 40) + "\n");
  require_clean_error(run_heed({"sample", "--checkpoint", ckpt, "--prompt", "ab", "--prompt-file", dir / "prompt.bin"}),
                      2, {"--prompt-file"});

  {  // --stop ends a sample right after the stop text (printed); a stop never generated changes nothing
    const std::string full = sample({"--prompt-file", dir / "prompt.bin", "--tokens", "200"});
    const std::string generated = full.substr(prompt.size(), full.size() - prompt.size() - 1);
    const std::u32string chars = from_utf8(generated);
    REQUIRE(chars.size() == 200);
    const std::string stop = utf8(chars.substr(10, 2));
    const size_t first = generated.find(stop);
    const std::string stopped = sample({"--prompt-file", dir / "prompt.bin", "--tokens", "200", "--stop", stop});
    CHECK(stopped == prompt + generated.substr(0, first + stop.size()) + "\n");
    const std::string never = std::string(1, corpus[0]) + std::string(1, corpus[0]) + std::string(1, corpus[0]) +
                              std::string(1, corpus[0]) + std::string(1, corpus[0]) + std::string(1, corpus[0]);
    if (generated.find(never) == std::string::npos)
      CHECK(sample({"--prompt-file", dir / "prompt.bin", "--tokens", "200", "--stop", never}) == full);
    // a stop text outside the vocabulary is an error naming it
    require_clean_error(run_heed({"sample", "--checkpoint", ckpt, "--stop", "\x01"}), 1, {"--stop"});
  }
}

TEST_CASE("heed inspect: config, vocabulary, parameters, iteration and last losses, and --json", "[cli]") {
  ScratchDir dir("inspect");
  write_file(dir / "corpus.txt", utf8(make_text(300)));
  train(cat(tiny_flags(), {"--data", dir / "corpus.txt", "--out", dir / "run", "--max-iters", "12"}));
  const std::string ckpt = dir / "run/model.safetensors";
  nn::LoadedGPT m = nn::load_gpt_checkpoint(ckpt);
  const std::vector<json> evals = read_evals(dir / "run/log.jsonl");
  REQUIRE(!evals.empty());

  ProcessResult r = run_heed({"inspect", ckpt, "--json"});
  require_ok(r);
  const json j = json::parse(r.out);
  CHECK(j["config"]["n_layer"] == m.model->config().n_layer);
  CHECK(j["config"]["n_embd"] == m.model->config().n_embd);
  CHECK(j["config"]["block_size"] == m.model->config().block_size);
  CHECK(j["vocab"].get<std::string>() == m.vocab_utf8);
  CHECK(j["vocab_size"] == m.model->config().vocab_size);
  CHECK(j["parameters"] == m.model->num_params(false));
  CHECK(j["non_embedding_parameters"] == m.model->num_params(true));
  CHECK(j["iter"] == 12);
  CHECK(j["last_eval"] == evals.back());

  ProcessResult human = run_heed({"inspect", ckpt});
  require_ok(human);
  INFO(human.out);
  CHECK(human.out.find(std::to_string(m.model->config().n_layer) + " layers") != std::string::npos);
  CHECK(human.out.find("parameters: " + std::to_string(m.model->num_params(false))) != std::string::npos);
  CHECK(human.out.find("iteration:  12\n") != std::string::npos);
  CHECK(human.out.find(json(m.vocab_utf8).dump()) != std::string::npos);
  CHECK(human.out.find("last eval:  iter 12: train loss") != std::string::npos);

  require_clean_error(run_heed({"inspect", dir / "corpus.txt"}), 1, {"corpus.txt"});

  // A log line whose losses are not numbers (hand-edited, another tool's) is not an evaluation:
  // inspect reports the last one that is (before, it failed with nlohmann's type error).
  const std::string log = dir / "run/log.jsonl";
  write_file(log, read_file(log) + "{\"iter\": 12, \"train_loss\": \"x\", \"val_loss\": 2}\n" +
                      "{\"iter\": 12, \"train_loss\": 1.5, \"val_loss\": null}\n");
  ProcessResult edited = run_heed({"inspect", ckpt, "--json"});
  require_ok(edited);
  CHECK(json::parse(edited.out)["last_eval"] == evals.back());
}

TEST_CASE("heed --version, and plain heed prints the help", "[cli]") {
  ProcessResult v = run_heed({"--version"});
  require_ok(v);
  CHECK(std::regex_match(v.out, std::regex("heed [0-9]+\\.[0-9]+\\.[0-9]+\n")));
  ProcessResult plain = run_heed({});
  require_ok(plain);
  for (const char* sub : {"train", "sample", "eval", "plot", "seq2seq", "attention", "--version"})
    CHECK(plain.out.find(sub) != std::string::npos);
  CHECK(plain.err.empty());
}

TEST_CASE("every subcommand has --help", "[cli]") {
  for (const char* cmd : {"train", "bench", "sample", "eval", "plot", "seq2seq", "attention"}) {
    INFO(cmd);
    ProcessResult r = run_heed({cmd, "--help"});
    require_ok(r);
    CHECK(r.out.find(std::string("heed ") + cmd) != std::string::npos);
    CHECK(r.out.find("--help") != std::string::npos);
  }
}

TEST_CASE("heed train's progress: a live line on a terminal, plain lines on a pipe", "[cli]") {
  ScratchDir dir("progress");
  write_file(dir / "corpus.txt", utf8(make_text(500)));
  const auto flags = cat(tiny_flags(), {"--data", dir / "corpus.txt", "--max-iters", "12", "--log-interval", "4"});

  const std::string tty = run_on_pty(cat({heed_exe(), "train", "--out", dir / "tty"}, flags));
  INFO(tty);
  // iteration, loss, lr, tokens/s, elapsed and remaining time, redrawn in place
  const std::regex live("\r\033\\[Kiter ([0-9]+)/12  loss [0-9.]+  lr [0-9.e+-]+  [0-9]+ tok/s  elapsed [0-9.hms]+  remaining [0-9.hms]+");
  const auto n_live = std::distance(std::sregex_iterator(tty.begin(), tty.end(), live), std::sregex_iterator());
  CHECK(n_live == 12);

  // On an 80-column terminal (and a narrower one) no redraw reaches the last column, so none
  // wraps; iteration and loss always stay.
  for (unsigned short columns : {80, 40}) {
    const std::string narrow = run_on_pty(cat({heed_exe(), "train", "--out", dir / ("tty" + std::to_string(columns))},
                                              flags), columns);
    INFO(columns << " columns: " << narrow);
    size_t redraws = 0, evals = 0;
    for (size_t at = narrow.find("\r\033[K"); at != std::string::npos; at = narrow.find("\r\033[K", at + 1)) {
      const size_t begin = at + 4;
      const size_t end = std::min(narrow.find_first_of("\r\n", begin), narrow.size());
      const std::string shown = narrow.substr(begin, end - begin);
      if (shown.rfind("iter ", 0) == 0) {
        ++redraws;
        CHECK(shown.size() < columns);
        CHECK(shown.find("loss ") != std::string::npos);
      }
      if (shown.rfind("evaluating at iter ", 0) == 0 || shown.rfind("evaluating", 0) == 0) {
        ++evals;  // evaluation shows its progress, on one line too
        CHECK(shown.size() < columns);
      }
    }
    CHECK(redraws == 12);
    CHECK(evals >= 2);
  }

  ProcessResult piped = train(cat({"--out", dir / "pipe"}, flags));
  INFO(piped.out);
  CHECK(piped.out.find('\r') == std::string::npos);
  CHECK(piped.out.find('\033') == std::string::npos);
  const std::regex plain("iter ([0-9]+): loss [0-9.]+, lr [0-9.e+-]+, [0-9]+ tok/s, elapsed [0-9.hms]+, remaining [0-9.hms]+");
  std::vector<int> iters;
  std::istringstream lines(piped.out);
  std::smatch m;
  for (std::string line; std::getline(lines, line);)
    if (std::regex_match(line, m, plain)) iters.push_back(std::stoi(m[1]));
  CHECK(iters == std::vector<int>{0, 4, 8});
  CHECK(piped.out.find("eval iter 10: train loss") != std::string::npos);
}
