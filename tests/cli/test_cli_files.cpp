// Every file heed reads is validated, and its output is complete or an error (issue 11), through
// the real executable: a tampered train_state.safetensors is refused by --resume naming the field
// (and nothing in the run changes); seq2seq checkpoints are checked like GPT ones (non-finite
// weights, missing or extra tensors); `plot` draws extreme values sensibly and refuses what cannot be
// drawn, never looping on a value's magnitude; output to a full device fails with a message;
// generated text keeps NUL characters.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
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
#include "support/xml.h"

using namespace heed;
using namespace heed::test;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> tiny_train(const std::string& corpus, const std::string& out, int64_t max_iters) {
  return {"train", "--data", corpus, "--out", out, "--n-layer", "1", "--n-head", "2", "--n-embd", "16",
          "--block-size", "8", "--batch-size", "2", "--eval-iters", "1", "--eval-interval", "2", "--dropout", "0.1",
          "--max-iters", std::to_string(max_iters), "--sample-tokens", "0", "--threads", "1"};
}


}  // namespace

TEST_CASE("files: a tampered train_state is refused by --resume naming the field, the run left as it was",
          "[cli]") {
  ScratchDir dir("state");
  const std::string corpus = dir / "corpus.txt", run = dir / "run";
  write_file(corpus, tiny_corpus(5));
  require_ok(run_heed(tiny_train(corpus, run, 4)));
  const std::string state = run + "/train_state.safetensors";
  const nn::SafetensorsFile good = nn::load_safetensors(state);

  using Edit = std::function<void(nn::SafetensorsFile&)>;
  auto meta = [](const std::string& key, const std::string& value) -> Edit {
    return [key, value](nn::SafetensorsFile& f) { f.metadata[key] = value; };
  };
  auto option = [&](const std::string& key, const json& value) -> Edit {
    return [key, value](nn::SafetensorsFile& f) {
      json o = json::parse(f.metadata.at("options"));
      if (value.is_null()) o.erase(key);
      else o[key] = value;
      f.metadata["options"] = o.dump();
    };
  };
  auto tensor = [](const std::string& name, std::function<Tensor(const Tensor&)> change) -> Edit {
    return [name, change](nn::SafetensorsFile& f) {
      for (auto& [n, t] : f.tensors)
        if (n == name) t = change(t);
    };
  };
  const std::vector<std::pair<Edit, std::vector<std::string>>> cases = {
      {meta("iter", "-3"), {"\"iter\" is -3"}},  // once truncated the log
      {meta("iter", "4x"), {"\"iter\"", "not an integer"}},
      {meta("iter", "99999999999999999999"), {"\"iter\""}},
      {meta("optimizer_step", "3"), {"\"optimizer_step\" 3"}},
      {meta("eval_done", "maybe"), {"\"eval_done\""}},
      {meta("data_rng", "[\"0\",\"0\",\"0\",\"0\"]"), {"\"data_rng\"", "all zeros"}},
      {meta("data_rng", "[\"1\",\"2\",\"3\"]"), {"\"data_rng\"", "4 decimal strings"}},
      {meta("data_rng", "[\"1\",\"2\",\"3\",\"-4\"]"), {"\"data_rng\"", "\"-4\""}},
      {meta("dropout_rng", "{}"), {"no random state for dropout"}},
      {meta("dropout_rng", "[1]"), {"\"dropout_rng\""}},
      {meta("elapsed_s", "nan"), {"\"elapsed_s\""}},
      {meta("elapsed_s", "-1"), {"\"elapsed_s\""}},
      {meta("best_val_loss", "-1"), {"\"best_val_loss\""}},
      {meta("best_val_loss", "inf"), {"\"best_val_loss\""}},
      {meta("last_eval", "{\"iter\": 2}"), {"\"last_eval\""}},
      {meta("last_eval", "not json"), {"\"last_eval\""}},
      {meta("vocab", "[1]"), {"\"vocab\""}},
      {meta("options", "[]"), {"\"options\""}},
      {option("n_layers", 2), {"\"options\"", "unknown recorded option \"n_layers\""}},
      {option("lr", "fast"), {"\"options\"", "\"lr\"", "wrong type"}},
      {option("n_layer", -1), {"\"options\"", "n_layer", "--n-layer -1"}},
      {option("dropout", 1.5), {"\"options\"", "--dropout 1.5"}},
      {option("lr_decay_iters", 1), {"\"options\"", "--lr-decay-iters"}},
      // a recorded option missing is no default: the run had its own batch size
      {option("batch_size", nullptr), {"\"options\"", "\"batch_size\" is missing"}},
      {option("eval_iters", nullptr), {"\"options\"", "\"eval_iters\" is missing"}},
      {meta("options", "{}"), {"\"options\"", "is missing"}},
      {option("data", ""), {"\"options\"", "\"data\" is empty"}},
      {[](nn::SafetensorsFile& f) { f.metadata.erase("iter"); }, {"missing \"iter\""}},
      {tensor("model.transformer.h.0.ln_1.weight", [](const Tensor& t) { return Tensor::full(t.shape(), std::nan("")); }),
       {"model.transformer.h.0.ln_1.weight", "not finite"}},
      {tensor("optim.transformer.wpe.weight.exp_avg", [](const Tensor&) { return Tensor::zeros({3, 16}); }),
       {"transformer.wpe.weight.exp_avg", "shape"}},
      {tensor("optim.transformer.wte.weight.exp_avg_sq",
              [](const Tensor& t) { return Tensor::full(t.shape(), -1.0); }),
       {"exp_avg_sq", "negative second moment"}},
      {tensor("model.transformer.wpe.weight", [](const Tensor&) { return Tensor::zeros({9, 16}); }),
       {"model.transformer.wpe.weight", "[9, 16]"}},
      {[](nn::SafetensorsFile& f) { f.tensors.emplace_back("stray", Tensor::zeros({1})); }, {"unexpected tensor 'stray'"}},
      {[](nn::SafetensorsFile& f) { f.tensors.emplace_back("optim.nothing.exp_avg", Tensor::zeros({1})); },
       {"'nothing.exp_avg'", "matches no parameter"}},
      {[](nn::SafetensorsFile& f) {
         std::erase_if(f.tensors, [](const auto& p) { return p.first == "model.transformer.ln_f.weight"; });
       },
       {"missing tensor 'model.transformer.ln_f.weight'"}},
      // A state without its moments was taken for one whose parameters had not been stepped: the
      // run resumed with the moments restarted from zero.
      {[](nn::SafetensorsFile& f) { std::erase_if(f.tensors, [](const auto& p) { return p.first.starts_with("optim."); }); },
       {"missing tensor 'optim.", ".exp_avg' at iteration 4"}},
      {[](nn::SafetensorsFile& f) {
         std::erase_if(f.tensors, [](const auto& p) { return p.first.starts_with("optim.transformer.ln_f.weight."); });
       },
       {"missing tensor 'optim.transformer.ln_f.weight.exp_avg' at iteration 4"}},
  };
  for (const auto& [edit, needles] : cases) {
    INFO(needles[0]);
    nn::SafetensorsFile f = good;
    edit(f);
    nn::save_safetensors(state, f.tensors, f.metadata);
    const auto before = snapshot(run);
    const ProcessResult r = run_heed({"train", "--resume", "--out", run, "--max-iters", "8", "--threads", "1"});
    require_clean_error(r, 1, cat({state}, needles));
    CHECK(snapshot(run) == before);  // log.jsonl included: nothing was truncated
  }
  // The untouched state still resumes.
  nn::save_safetensors(state, good.tensors, good.metadata);
  require_ok(run_heed({"train", "--resume", "--out", run, "--max-iters", "8", "--threads", "1", "--sample-tokens", "0"}));
}

TEST_CASE("files: --resume refuses a log.jsonl with a line that is not a log entry but drops a torn last line", "[cli]") {
  ScratchDir dir("log");
  const std::string corpus = dir / "corpus.txt", run = dir / "run";
  write_file(corpus, tiny_corpus(6));
  require_ok(run_heed(tiny_train(corpus, run, 4)));
  const std::string log = run + "/log.jsonl";
  const std::string good = read_file(log);
  write_file(log, "{\"iter\": 0, \"train_loss\": \"low\"}\n" + good);
  const auto before = snapshot(run);
  require_clean_error(run_heed({"train", "--resume", "--out", run, "--max-iters", "6", "--threads", "1"}), 1,
                      {log, "line 1", "not a log entry"});
  CHECK(snapshot(run) == before);
  // A line of a richer log (the train loss between evaluations, other fields) is kept; a last line
  // cut short by a crash is dropped.
  const std::string richer = "{\"iter\": 3, \"train_loss\": 2.5, \"tokens_per_s\": 900}\n";
  write_file(log, good + richer + "{\"iter\": 6, \"train_lo");
  require_ok(run_heed({"train", "--resume", "--out", run, "--max-iters", "6", "--threads", "1", "--sample-tokens", "0"}));
  const std::string kept = read_file(log);
  CHECK(kept.find("train_lo\"") == std::string::npos);
  CHECK(kept.find(richer) != std::string::npos);
  // evaluations 0, 2, 4, the batch line of iteration 0 (--log-interval 10), the richer 3, then 6
  CHECK(std::count(kept.begin(), kept.end(), '\n') == 6);
  CHECK(kept.find("\"loss\":") != std::string::npos);  // the batch line
  // and plot draws it: the train curve has the extra point
  require_ok(run_heed({"plot", "--log", log, "--out", dir / "p.svg"}));
}

TEST_CASE("files: seq2seq checkpoints are validated like GPT ones", "[cli][seq2seq]") {
  ScratchDir dir("s2s-files");
  cli::Seq2SeqOptions o = cli::defaults(cli::seq2seq_option_table());
  o.task = "reverse", o.d_model = 8, o.n_head = 2, o.n_layer = 1;
  nn::EncoderDecoder model(cli::seq2seq_model_options(o));
  const std::string path = dir / "m.safetensors", svg = dir / "a.svg";
  cli::save_seq2seq(path, model, o);
  const nn::SafetensorsFile good = nn::load_safetensors(path);
  auto attention = [&] { return run_heed({"attention", "--checkpoint", path, "--text", "abc", "--out", svg}); };
  require_ok(attention());
  const std::string first = good.tensors.front().first;

  auto write = [&](std::function<void(nn::SafetensorsFile&)> edit) {
    nn::SafetensorsFile f = good;
    edit(f);
    nn::save_safetensors(path, f.tensors, f.metadata);
  };
  write([&](auto& f) { f.tensors.front().second = Tensor::full(f.tensors.front().second.shape(), INFINITY); });
  require_clean_error(attention(), 1, {path, first, "not finite"});
  write([&](auto& f) { f.tensors.erase(f.tensors.begin()); });
  require_clean_error(attention(), 1, {path, "parameters"});
  write([&](auto& f) {
    const Tensor t = f.tensors.front().second;
    f.tensors.erase(f.tensors.begin());
    f.tensors.emplace_back("renamed", t);  // as many numbers, under a name the model lacks
  });
  require_clean_error(attention(), 1, {path, first, "missing"});
  write([&](auto& f) { f.metadata["seq2seq"] = R"({"task": "sort", "d_model": 8, "n_head": 2, "n_layer": 1})"; });
  require_clean_error(attention(), 1, {path, "sort"});
  write([&](auto& f) { f.metadata["seq2seq"] = R"({"task": "copy", "d_model": 8, "n_head": 3, "n_layer": 1})"; });
  require_clean_error(attention(), 1, {path, "not divisible"});
  write([&](auto& f) { f.metadata["seq2seq"] = R"({"task": "copy", "d_model": 8.5, "n_head": 2, "n_layer": 1})"; });
  require_clean_error(attention(), 1, {path, "d_model", "integer"});
  write([](auto&) {});
  require_ok(attention());
}

namespace {
size_t count_matches(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}
}  // namespace

TEST_CASE("files: plot draws extreme values sensibly, refuses non-finite ones and never hangs", "[cli][svg]") {
  ScratchDir dir("plot-extreme");
  const std::string log = dir / "log.jsonl", svg = dir / "p.svg";
  auto line = [](const std::string& iter, const std::string& train, const std::string& val) {
    return "{\"iter\": " + iter + ", \"train_loss\": " + train + ", \"val_loss\": " + val + "}\n";
  };
  const std::vector<std::string> logs = {
      line("0", "1e308", "-1e308") + line("1", "-1.7e308", "1.7e308"),           // the whole double range
      line("-1.7e308", "1", "2") + line("1.7e308", "2", "1"),                      // iterations across it
      line("0", "-1.7e308", "1") + line("1", "1.7e308", "2"),                      // a train loss across it
      line("1e300", "1", "2") + line("-1e300", "3", "4"),                          // iterations far apart
      line("1e16", "1", "2") + line("1e16", "1", "2") + line("1.0000000000000002e16", "1", "2"),  // a tiny span
      line("0", "1e-308", "4.9e-324") + line("1", "0", "-4.9e-324"),               // subnormals
      line("0", "5", "5") + line("0", "5", "5"),                                    // one point
      line("0", "123456789.123", "-0.000001") + line("5", "2", "3"),
      line("9007199254740993", "1", "2") + line("-0", "0", "-0"),
  };
  for (const std::string& text : logs) {
    INFO(text);
    write_file(log, text);
    const ProcessResult r = run_heed({"plot", "--log", log, "--out", svg}, timeout_after(10));
    require_ok(r);
    CHECK(r.seconds < 1.0 * kTimeScale);
    const std::string out = read_file(svg);
    REQUIRE_NOTHROW(XmlParser::parse(out));
    // every number in the drawing's attributes is finite
    CHECK(!std::regex_search(out, std::regex("=\"[^\"]*(nan|inf)", std::regex::icase)));
    CHECK(std::count(out.begin(), out.end(), '\n') < 200);  // a bounded number of ticks
    // and ticks on both axes, however wide the range: x labels sit under the plot, y labels left of it
    CHECK(count_matches(out, "text-anchor=\"middle\">") >= 2 + 2);  // the two axis names are centred too
    CHECK(count_matches(out, "text-anchor=\"end\">") >= 2);
  }
  // JSON has no NaN or infinity: Python's NaN and Infinity, and 1e999 (which overflows), are refused
  // naming the line
  for (const std::string& bad : {line("1e999", "1", "2"), line("1", "1e999", "2"), line("1", "2", "-1e999"),
                                 line("1", "NaN", "2"), line("1", "2", "Infinity")}) {
    INFO(bad);
    write_file(log, line("0", "1", "2") + bad);
    require_clean_error(run_heed({"plot", "--log", log, "--out", svg}), 1, {log, "line 2", "not valid JSON"});
  }
}

TEST_CASE("files: output to a full device is an error with a message, and a run keeps its checkpoint", "[cli]") {
  ScratchDir dir("full");
  const std::string corpus = dir / "corpus.txt";
  write_file(corpus, tiny_corpus(8));
  require_ok(run_heed(tiny_train(corpus, dir / "run", 4)));
  const std::string ckpt = dir / "run/model.safetensors";
  RunOptions full;
  full.stdout_path = "/dev/full";
  const std::vector<std::vector<std::string>> commands = {
      {"sample", "--checkpoint", ckpt, "--tokens", "5", "--threads", "1"},
      {"sample", "--checkpoint", ckpt, "--tokens", "100000", "--threads", "1"},
      {"eval", "--checkpoint", ckpt, "--data", corpus, "--threads", "1"},
      {"bench", "--data", corpus, "--iters", "1", "--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "8",
       "--threads", "1"},
      {"plot", "--log", dir / "run/log.jsonl", "--out", dir / "p.svg"},
      {"attention", "--checkpoint", ckpt, "--text", "abc", "--out", dir / "a.svg"},
      {"seq2seq", "--task", "copy", "--max-iters", "1", "--d-model", "8", "--n-head", "2", "--n-layer", "1",
       "--examples", "2", "--threads", "1"},
      tiny_train(corpus, dir / "run2", 4),
      {"--help"},  // the help is output too
      {"train", "--help"},
      {"--help-all"},
  };
  for (const auto& args : commands) {
    INFO(args[0]);
    const ProcessResult r = run_heed(args, full);
    require_clean_error(r, 1, {"writing to standard output failed", "No space left on device"});
  }
  // train's progress failed at its first line; it saved the checkpoint it had and says so
  const ProcessResult r = run_heed(tiny_train(corpus, dir / "run3", 4), full);
  CHECK(r.err.find("is saved in " + dir / "run3") != std::string::npos);
  CHECK(fs::exists(dir / "run3/train_state.safetensors"));
  require_ok(run_heed({"train", "--resume", "--out", dir / "run3", "--threads", "1", "--sample-tokens", "0"}));
}

TEST_CASE("files: generated text is written byte for byte, NUL characters included", "[cli]") {
  ScratchDir dir("nul");
  nn::GPTConfig c;
  c.vocab_size = 10, c.block_size = 8, c.n_layer = 1, c.n_head = 2, c.n_embd = 16;
  nn::GPT model(c, 11);
  const std::string vocab("\0\n abcdefg", 10);  // id 0 is NUL
  const std::string ckpt = dir / "m.safetensors";
  nn::save_gpt_checkpoint(ckpt, model, vocab, {});
  const ProcessResult r = run_heed({"sample", "--checkpoint", ckpt, "--prompt", "ab", "--tokens", "400",
                                    "--temperature", "1", "--top-k", "0", "--seed", "3", "--threads", "1"});
  require_ok(r);
  // the prompt, 400 one-byte characters, a newline: nothing dropped, and NULs among them
  CHECK(r.out.size() == 2 + 400 + 1);
  CHECK(std::count(r.out.begin(), r.out.end(), '\0') > 10);
  CHECK(r.out.rfind("ab", 0) == 0);
}
