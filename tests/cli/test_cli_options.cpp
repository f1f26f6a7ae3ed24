// The option tables (examples/heed/options.h), in process: every table is well formed (each
// spelling names one option, each default is in its range), config.toml written from a table reads
// back to the same options through the same table, checkpoint records round-trip, and the counts
// the memory estimates and the seq2seq loader rely on equal the models' own.
#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <string>

#include "commands.h"
#include "config_file.h"
#include "core/heed.h"
#include "io.h"
#include "nn/gpt.h"
#include "nn/transformer.h"
#include "resources.h"
#include "seq2seq.h"
#include "seq2seq_checkpoint.h"
#include "seq2seq_state.h"
#include "support/process.h"
#include "train_options.h"
#include "train_state.h"
#include "optim/adam.h"
#include <filesystem>

using namespace heed;
using namespace heed::cli;

namespace {

template <class T>
void check_table(const OptionTable<T>& table) {
  std::set<std::string> spellings, names;
  for (const auto& opt : table) {
    INFO(opt.flag);
    CHECK(names.insert(opt.name).second);
    for (const auto& s : opt.spellings()) CHECK(spellings.insert(s).second);  // one option per spelling
    CHECK(opt.flag.find('_') == std::string::npos);                             // flags are kebab-case
    CHECK(opt.name.find('-') == std::string::npos);                             // names are nanoGPT's snake_case
    CHECK(!opt.help.empty());
    CHECK(opt.member.index() == opt.default_value.index());  // the default has the member's type
    if (opt.name != "max_iters")  // seq2seq's -1 stands for the task's default
      CHECK_NOTHROW(check_range(opt.flag, opt.default_value, opt.range));
  }
}

// Writes config.toml for `o` and reads it back through the table.
template <class T>
T round_trip(const OptionTable<T>& table, const T& o, const std::string& dir) {
  const std::string path = dir + "/config.toml";
  write_file_atomically(path, config_toml(table, o, "a test"));
  T back = defaults(table);
  std::set<std::string> from_config;
  apply_config(table, read_config_file(path), path, "heed test", {}, back, from_config);
  CHECK(from_config.size() == table.size());
  return back;
}

}  // namespace

TEST_CASE("options: every table is well formed", "[cli]") {
  check_table(train_option_table());
  check_table(bench_option_table());
  check_table(sample_option_table());
  check_table(eval_option_table());
  check_table(seq2seq_option_table());
  CHECK_NOTHROW(validate(defaults(train_option_table())));
}

TEST_CASE("options: config.toml written from a table reads back to the same options", "[cli]") {
  heed::test::ScratchDir dir("options");
  TrainOptions o = defaults(train_option_table());
  o.data = "/a path/with # and \"quotes\" and \\ and\nnewline, é ☃";
  o.out = "/tmp/run 'x'";
  o.lr = 0.1 + 0.2;  // 0.30000000000000004: every bit kept
  o.min_lr = 1e-300, o.dropout = 0.125, o.bias = true, o.seed = int64_t(1) << 62, o.max_iters = 0;
  const TrainOptions back = round_trip(train_option_table(), o, dir.path());
  for (const auto& opt : train_option_table()) {
    INFO(opt.name);
    CHECK(opt.get(back) == opt.get(o));
  }
  Seq2SeqOptions s = defaults(seq2seq_option_table());
  s.task = "dates", s.lr = 3e-3, s.out = "/x";
  const Seq2SeqOptions s_back = round_trip(seq2seq_option_table(), s, dir.path());
  for (const auto& opt : seq2seq_option_table()) CHECK(opt.get(s_back) == opt.get(s));
}

TEST_CASE("options: a run's recorded recipe round-trips through its JSON, refusing what the table does not know",
          "[cli]") {
  TrainOptions o = defaults(train_option_table());
  o.n_layer = 3, o.lr = 2e-3, o.data = "/c.txt", o.seed = 7;
  const nlohmann::json j = options_to_json(train_option_table(), o, {Role::recipe, Role::length});
  CHECK(!j.contains("threads"));  // how a process runs is not part of the recipe
  CHECK(j.at("n_layer") == 3);
  TrainOptions back = defaults(train_option_table());
  options_from_json(train_option_table(), back, j, {Role::recipe, Role::length}, "t");
  for (const auto& opt : train_option_table())
    if (opt.role != Role::local) CHECK(opt.get(back) == opt.get(o));
  // older checkpoints wrote the seed as a decimal string
  nlohmann::json old = j;
  old["seed"] = "1337";
  options_from_json(train_option_table(), back, old, {Role::recipe, Role::length}, "t");
  CHECK(back.seed == 1337);
  old["seed"] = "13x";
  CHECK_THROWS_WITH(options_from_json(train_option_table(), back, old, {Role::recipe, Role::length}, "t"),
                    Catch::Contains("\"seed\" has the wrong type"));
  nlohmann::json unknown = j;
  unknown["threads"] = 2;  // a local option is not a recorded one
  CHECK_THROWS_WITH(options_from_json(train_option_table(), back, unknown, {Role::recipe, Role::length}, "t"),
                    Catch::Contains("unknown recorded option \"threads\""));
}

TEST_CASE("options: the parameter counts of the estimates equal the models' own", "[cli]") {
  for (int64_t L : {1, 3})
    for (int64_t C : {4, 12})
      for (bool bias : {false, true}) {
        nn::GPTConfig c;
        c.vocab_size = 11, c.block_size = 5, c.n_layer = L, c.n_head = 2, c.n_embd = C, c.bias = bias;
        CHECK(gpt_parameters(c) == double(nn::GPT(c).num_params(false)));
      }
  for (int64_t L : {1, 2, 4})
    for (int64_t d : {2, 8, 16}) {
      Seq2SeqOptions o = defaults(seq2seq_option_table());
      o.d_model = d, o.n_head = 2, o.n_layer = L;
      INFO("d_model " << d << ", n_layer " << L);
      CHECK(seq2seq_parameters(d, L) == double(nn::EncoderDecoder(seq2seq_model_options(o)).num_parameters()));
    }
}

TEST_CASE("options: sizes parse with K, M, G and T, and nonsense does not", "[cli]") {
  CHECK(parse_size("123", "x") == 123);
  CHECK(parse_size("4K", "x") == 4096);
  CHECK(parse_size("1.5G", "x") == uint64_t(1.5 * 1024 * 1024 * 1024));
  CHECK(parse_size("2T", "x") == uint64_t(2) << 40);
  for (const char* bad : {"", "G", "-1", "0", "1Q", "nan", "inf", "1e30"})
    CHECK_THROWS_AS(parse_size(bad, "x"), UsageError);
  CHECK(memory_limit() > 0);
}

namespace {

// Each tampered seed (bad_*) in the fuzz corpus directory `dir` (fuzz/corpus_writer.cpp writes them)
// is refused by `load` with an error naming the file and the check it was made for: `refusals` maps
// each seed's name to a part of that message, and lists every tampered seed there is.
template <class Load>
void check_refusals(const std::string& dir, const std::map<std::string, std::string>& refusals, Load load) {
  std::set<std::string> seen;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().stem().string();
    if (name.rfind("bad_", 0) != 0) continue;
    INFO(name);
    REQUIRE(refusals.count(name));
    CHECK_THROWS_WITH(load(e.path().string()), Catch::Contains(e.path().string() + ": ") &&
                                                   Catch::Contains(refusals.at(name)));
    seen.insert(name);
  }
  CHECK(seen.size() == refusals.size());
}

}  // namespace

TEST_CASE("the fuzz seeds: the valid training state and seq2seq checkpoint load, each tampered one is refused by its check", "[cli]") {
  // What fuzz/fuzz_train_state.cpp and fuzz/fuzz_seq2seq_checkpoint.cpp do with each input: a
  // valid seed must get through every check, or fuzzing would never reach the restore.
  const std::string root = std::string(HEED_SOURCE_DIR) + "/fuzz/corpus/";
  auto load_state = [](const std::string& path) {
    const nn::SafetensorsFile f = nn::load_safetensors(path);
    const TrainStateRecord r = read_train_state(f, path);
    nn::GPT model(gpt_config(r.options, 3), 1);
    optim::AdamW opt(optim::param_groups_nanogpt(model.named_parameters(), 0.1), 1e-3, 0.9, 0.99);
    Generator gen(0);
    restore_train_state(f, r, model, opt, gen, path);
    return r.iter;
  };
  CHECK(load_state(root + "train_state/valid.safetensors") == 1);
  auto load_s2s = [](const std::string& path) {
    Seq2SeqOptions o = defaults(seq2seq_option_table());
    return load_seq2seq(nn::load_safetensors(path), path, o) != nullptr;
  };
  CHECK(load_s2s(root + "seq2seq_checkpoint/valid.safetensors"));
  check_refusals(root + "train_state", {{"bad_iter", "\"iter\" is -3"},
                                        {"bad_optimizer_step", "\"optimizer_step\" 2 differs"},
                                        {"bad_rng", "\"data_rng\": a random state of all zeros"},
                                        {"bad_dropout_rng", "no random state for dropout"},
                                        {"bad_options", "--n-layer -1: must be in"},
                                        {"bad_last_eval", "\"last_eval\" must be the log line of the evaluation at iteration 1"},
                                        {"bad_moment", "negative second moment"},
                                        {"bad_missing_weight", "missing tensor 'model."},
                                        {"bad_missing_moments", "missing tensor 'optim."}},
                 load_state);
  check_refusals(root + "seq2seq_checkpoint", {{"bad_huge_config", "but d_model 4096 and n_layer 64 need"},
                                               {"bad_task", "unknown task 'sort'"},
                                               {"bad_nan", "is not finite"},
                                               {"bad_renamed", "missing tensor 'generator.bias'"}},
                 load_s2s);
}

namespace {

// What fuzz/fuzz_seq2seq_state.cpp does with its bytes, and `heed seq2seq --resume --out DIR`
// before training: parse, validate, take the recorded options, build the model and the optimizer,
// restore. Returns the iteration restored.
int64_t resume_seq2seq_from(const std::string& bytes, const std::string& what) {
  const nn::SafetensorsFile f =
      nn::parse_safetensors(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), what);
  const Seq2SeqStateRecord r = read_seq2seq_state(f, what);
  Seq2SeqOptions given = defaults(seq2seq_option_table());
  given.out = "run";
  const Seq2SeqOptions o = resumed_options(seq2seq_option_table(), given, r.options, {}, what);
  check_ranges(seq2seq_option_table(), o);
  nn::EncoderDecoder model(seq2seq_model_options(o));
  model.train();
  optim::AdamW opt = seq2seq_optimizer(model, o);
  Generator data_gen(0);
  restore_seq2seq_state(f, r, model, opt, data_gen, what);
  CHECK(data_gen.state() == r.data_rng);
  CHECK(opt.step_count() == r.iter);
  return r.iter;
}

}  // namespace

TEST_CASE("the fuzz seeds: the valid seq2seq training state restores, each tampered copy is refused", "[cli]") {
  const std::string dir = std::string(HEED_SOURCE_DIR) + "/fuzz/corpus/seq2seq_state/";
  auto resume = [](const std::string& path) { return resume_seq2seq_from(heed::test::read_file(path), path); };
  CHECK(resume(dir + "valid.safetensors") == 1);
  // Each tampered copy (fuzz/corpus_writer.cpp) is refused by the check it was made for.
  const std::map<std::string, std::string> refusals = {
      {"bad_iter", "\"seq2seq_iter\" is -3"},
      {"bad_optimizer_step", "\"optimizer_step\" 2 differs"},
      {"bad_rng", "\"data_rng\": a random state of all zeros"},
      {"bad_dropout_rng", "no random state for dropout"},
      {"bad_interval_loss", "\"interval_loss\" must be a number in [0, 1e+06]"},
      {"bad_options", "\"options\": --n-embd 2 is not divisible by --n-head 4"},
      {"bad_past_max_iters", "\"seq2seq_iter\" 5 is past the recorded max_iters 4"},
      {"bad_moment", "negative second moment"},
      {"bad_missing_weight", "missing tensor 'model."},
      {"bad_interval_steps", "\"interval_steps\" 2 is more than the 1 iterations done"},
      {"bad_missing_moments", "missing tensor 'optim."},
  };
  check_refusals(dir, refusals, resume);
}
