// The seed corpora of the fuzz targets (fuzz/corpus_writer.h): what make_fuzz_corpus writes into
// fuzz/corpus/, and what tests/fuzz/test_fuzz_corpus.cpp compares the committed files with.
#include "corpus_writer.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/heed.h"
#include "nn/gpt.h"
#include "nn/gpt_checkpoint.h"
#include "nn/safetensors.h"
#include "optim/adam.h"
#include "seq2seq.h"
#include "seq2seq_checkpoint.h"
#include "seq2seq_state.h"
#include "train_state.h"

using namespace heed;

static std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

static void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
  f.close();
  HEED_CHECK(f.good(), "cannot write ", path);
  if (bytes.size() >= 10000) std::fprintf(stderr, "warning: %s is %zu bytes\n", path.c_str(), bytes.size());
}

static std::string raw(const std::string& header, const std::string& data) {
  uint64_t n = header.size();
  std::string b(8, '\0');
  std::memcpy(b.data(), &n, 8);
  return b + header + data;
}

// Writes `f` with `edit` applied to a copy.
static void save_edited(const std::string& path, const nn::SafetensorsFile& f,
                        const std::function<void(nn::SafetensorsFile&)>& edit) {
  nn::SafetensorsFile g = f;
  edit(g);
  nn::save_safetensors(path, g.tensors, g.metadata);
}

// One step of `opt` (an AdamW without weight decay) over `model`, taken so that the state has the
// same bytes on every machine and build, which tests/fuzz/test_fuzz_corpus.cpp relies on:
// - on fixed gradients, not on a loss: the gradient of sum(p * g) with respect to p is g exactly,
//   whatever order the sum adds in; a loss's products go through OpenBLAS, whose kernels (picked by
//   the CPU, or by OPENBLAS_CORETYPE) round differently;
// - without weight decay: p * (1 - lr * wd) - update is the one product and sum in AdamW's step
//   that a compiler may fuse into an FMA (g++ -O3 does in the xsimd loop, clang -O1 does not: a
//   third of the decayed weights came out 1 ulp apart), and with no decay the product is exact, so
//   fused or not gives the same bits. What is left is correctly rounded element by element, so the
//   vector width does not matter either (an AVX2 build writes the same bytes: fuzz/README.md).
// The readers check the state's form (names, shapes, finite values, moments present), never how the
// values were reached, so a seed made this way reaches as deep as one from a real step.
static void step_on_fixed_gradients(nn::Module& model, optim::AdamW& opt) {
  for (const optim::ParamGroup& g : opt.param_groups()) HEED_CHECK(g.weight_decay == 0, "the step must not decay weights");
  Generator gen(7);
  Tensor loss = Tensor::scalar(0.0);
  for (const auto& [name, p] : model.named_parameters()) loss = loss + sum(p * Tensor::rand(p.shape(), gen, -1.0, 1.0));
  loss.backward();
  opt.step();
  model.zero_grad();
}

// A tiny GPT (vocab 3, 1 layer, n_embd 4, dropout on) after one AdamW step, saved as heed train
// saves its state; then tampered copies.
static void write_train_states(const std::string& dir) {
  cli::TrainStateRecord r;
  r.options = cli::defaults(cli::train_option_table());
  r.options.n_layer = 1, r.options.n_head = 2, r.options.n_embd = 4, r.options.block_size = 4;
  r.options.dropout = 0.1, r.options.batch_size = 2, r.options.max_iters = 4;
  r.options.warmup_iters = 1, r.options.lr_decay_iters = 4, r.options.data = "/data/corpus.txt";
  r.options.weight_decay = 0;  // as the step below needs
  r.iter = 1;
  r.eval_done = true;
  r.vocab_utf8 = "\nab";
  r.elapsed_s = 0.25;
  r.last_eval = {{"iter", 1}, {"train_loss", 1.0986}, {"val_loss", 1.0987}, {"lr", 0.001}, {"elapsed_s", 0.25}};
  nn::GPT model(cli::gpt_config(r.options, 3), 1);
  optim::AdamW opt(optim::param_groups_nanogpt(model.named_parameters(), r.options.weight_decay), r.options.lr,
                   r.options.beta1, r.options.beta2);
  step_on_fixed_gradients(model, opt);
  Generator data_gen(1337);
  const std::string valid = dir + "/valid.safetensors";
  cli::save_train_state(valid, model, opt, data_gen, r);
  const nn::SafetensorsFile f = nn::load_safetensors(valid);
  auto meta = [](const char* key, const std::string& value) {
    return [key, value](nn::SafetensorsFile& g) { g.metadata[key] = value; };
  };
  save_edited(dir + "/bad_iter.safetensors", f, meta("iter", "-3"));
  save_edited(dir + "/bad_optimizer_step.safetensors", f, meta("optimizer_step", "2"));
  save_edited(dir + "/bad_rng.safetensors", f, meta("data_rng", R"(["0","0","0","0"])"));
  save_edited(dir + "/bad_dropout_rng.safetensors", f, meta("dropout_rng", "{}"));
  save_edited(dir + "/bad_options.safetensors", f, meta("options", R"({"n_layer": -1})"));
  save_edited(dir + "/bad_last_eval.safetensors", f, meta("last_eval", R"({"iter": 7})"));
  save_edited(dir + "/bad_moment.safetensors", f, [](nn::SafetensorsFile& g) {
    for (auto& [name, t] : g.tensors)
      if (name.find("exp_avg_sq") != std::string::npos) t = Tensor::full(t.shape(), -1.0);
  });
  save_edited(dir + "/bad_missing_weight.safetensors", f, [](nn::SafetensorsFile& g) { g.tensors.erase(g.tensors.begin()); });
  // Once resumed with the moments restarted from zero (the optimizer took them for unstepped).
  save_edited(dir + "/bad_missing_moments.safetensors", f, [](nn::SafetensorsFile& g) {
    std::erase_if(g.tensors, [](const auto& named) { return named.first.rfind("optim.", 0) == 0; });
  });
}

// The smallest seq2seq model (d_model 2, 1 head, 1 layer), then tampered copies.
static void write_seq2seq_checkpoints(const std::string& dir) {
  cli::Seq2SeqOptions o = cli::defaults(cli::seq2seq_option_table());
  o.task = "copy", o.d_model = 2, o.n_head = 1, o.n_layer = 1, o.seed = 3;
  nn::EncoderDecoder model(cli::seq2seq_model_options(o));
  const std::string valid = dir + "/valid.safetensors";
  cli::save_seq2seq(valid, model, o);
  const nn::SafetensorsFile f = nn::load_safetensors(valid);
  save_edited(dir + "/bad_huge_config.safetensors", f, [](nn::SafetensorsFile& g) {
    g.metadata["seq2seq"] = R"({"task":"copy","d_model":4096,"n_head":4,"n_layer":64,"seed":"3"})";
  });
  save_edited(dir + "/bad_task.safetensors", f, [](nn::SafetensorsFile& g) {
    g.metadata["seq2seq"] = R"({"task":"sort","d_model":2,"n_head":1,"n_layer":1})";
  });
  save_edited(dir + "/bad_nan.safetensors", f, [](nn::SafetensorsFile& g) {
    g.tensors.back().second = Tensor::full(g.tensors.back().second.shape(), std::nan(""));
  });
  save_edited(dir + "/bad_renamed.safetensors", f, [](nn::SafetensorsFile& g) { g.tensors.back().first = "stray"; });
}

// The smallest seq2seq model (d_model 2, 1 head, 1 layer) and its AdamW after one step on a batch
// of two copy examples, saved as `heed seq2seq --out` saves its state; then tampered copies.
static void write_seq2seq_states(const std::string& dir) {
  cli::Seq2SeqStateRecord r;
  cli::Seq2SeqOptions& o = r.options;
  o = cli::defaults(cli::seq2seq_option_table());
  o.task = "copy", o.d_model = 2, o.n_head = 1, o.n_layer = 1, o.seed = 3, o.batch_size = 2, o.max_iters = 4;
  o.test_examples = 10, o.eval_interval = 1, o.threads = 1;
  cli::resolve_seq2seq_defaults(o);
  nn::EncoderDecoder model(cli::seq2seq_model_options(o));
  model.train();
  // seq2seq_optimizer's AdamW less its weight decay, which is fixed (see step_on_fixed_gradients).
  const optim::AdamW as_heed_builds = cli::seq2seq_optimizer(model, o);
  optim::AdamW opt(optim::param_groups_nanogpt(model.named_parameters(), 0.0), as_heed_builds.lr(),
                   as_heed_builds.beta1(), as_heed_builds.beta2());
  step_on_fixed_gradients(model, opt);
  Generator data_gen(1337);
  for (int i = 0; i < 2; ++i) cli::make_example(o.task, data_gen);  // the batch of two the step took
  r.iter = 1;
  r.interval_loss = 4.5;  // about a first step's loss: ln 98, a uniform guess over the 98 tokens
  r.interval_steps = 1;
  r.elapsed_s = 0.25;
  const std::string valid = dir + "/valid.safetensors";
  cli::save_seq2seq_state(valid, model, opt, data_gen, r);
  const nn::SafetensorsFile f = nn::load_safetensors(valid);
  auto meta = [](const char* key, const std::string& value) {
    return [key, value](nn::SafetensorsFile& g) { g.metadata[key] = value; };
  };
  auto option = [](const char* key, const nlohmann::json& value) {
    return [key, value](nn::SafetensorsFile& g) {
      nlohmann::json j = nlohmann::json::parse(g.metadata.at("options"));
      j[key] = value;
      g.metadata["options"] = j.dump();
    };
  };
  save_edited(dir + "/bad_iter.safetensors", f, meta("seq2seq_iter", "-3"));
  save_edited(dir + "/bad_optimizer_step.safetensors", f, meta("optimizer_step", "2"));
  save_edited(dir + "/bad_rng.safetensors", f, meta("data_rng", R"(["0","0","0","0"])"));
  save_edited(dir + "/bad_dropout_rng.safetensors", f, meta("dropout_rng", "{}"));
  save_edited(dir + "/bad_interval_loss.safetensors", f, meta("interval_loss", "1e300"));
  save_edited(dir + "/bad_options.safetensors", f, option("n_head", 4));  // n_embd 2 is not divisible by 4
  save_edited(dir + "/bad_past_max_iters.safetensors", f, [&](nn::SafetensorsFile& g) {
    meta("seq2seq_iter", "5")(g);
    meta("optimizer_step", "5")(g);
  });
  save_edited(dir + "/bad_moment.safetensors", f, [](nn::SafetensorsFile& g) {
    for (auto& [name, t] : g.tensors)
      if (name.find("exp_avg_sq") != std::string::npos) t = Tensor::full(t.shape(), -1.0);
  });
  save_edited(dir + "/bad_missing_weight.safetensors", f, [](nn::SafetensorsFile& g) { g.tensors.erase(g.tensors.begin()); });
  // Two states the reader accepted until it checked them (found reading the code, not by fuzzing;
  // fuzz_seq2seq_state now checks every restored run for both): more steps summed than done, and a
  // state without its optimizer moments.
  save_edited(dir + "/bad_interval_steps.safetensors", f, meta("interval_steps", "2"));
  save_edited(dir + "/bad_missing_moments.safetensors", f, [](nn::SafetensorsFile& g) {
    std::erase_if(g.tensors, [](const auto& named) { return named.first.rfind("optim.", 0) == 0; });
  });
}

namespace heed::fuzz {

void write_fuzz_corpus(const std::string& root) {
  const std::string dir = root + "/safetensors";
  for (const char* target : kFuzzCorpusTargets) std::filesystem::create_directories(root + "/" + target);
  auto path = [&](const std::string& name) { return dir + "/" + name; };

  // Valid: the smallest sensible GPTs (vocab 3-4, n_embd 4), with and without biases.
  for (bool bias : {false, true}) {
    nn::GPTConfig c;
    c.vocab_size = 3;
    c.block_size = 2;
    c.n_layer = 1;
    c.n_head = 2;
    c.n_embd = 4;
    c.bias = bias;
    nn::GPT model(c, 1);
    nn::save_gpt_checkpoint(path(bias ? "valid_gpt_bias.safetensors" : "valid_gpt.safetensors"), model, "\nab",
                            {{"iter", "0"}});
  }
  {
    nn::GPTConfig c;
    c.vocab_size = 4;
    c.block_size = 3;
    c.n_layer = 2;
    c.n_head = 1;
    c.n_embd = 2;
    nn::GPT model(c, 2);
    nn::save_gpt_checkpoint(path("valid_gpt_2layer.safetensors"), model, "\xc3\xa9 z\n", {});  // non-ASCII vocab
  }
  // Valid as PyTorch writes it: lm_head.weight instead of transformer.wte.weight, _orig_mod. prefix.
  {
    nn::SafetensorsFile f = nn::load_safetensors(path("valid_gpt.safetensors"));
    std::vector<std::pair<std::string, Tensor>> renamed;
    for (auto& [name, t] : f.tensors)
      renamed.emplace_back("_orig_mod." + (name == "transformer.wte.weight" ? std::string("lm_head.weight") : name), t);
    nn::save_safetensors(path("valid_gpt_torch_names.safetensors"), renamed, f.metadata);
  }
  // Valid safetensors, not a GPT: every dtype heed reads, a scalar, an empty tensor, metadata.
  write_all(path("valid_dtypes.safetensors"),
            raw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                R"("b":{"dtype":"F64","shape":[1],"data_offsets":[8,16]},)"
                R"("h":{"dtype":"F16","shape":[2],"data_offsets":[16,20]},)"
                R"("bf":{"dtype":"BF16","shape":[2,1],"data_offsets":[20,24]},)"
                R"("s":{"dtype":"F32","shape":[],"data_offsets":[24,28]},)"
                R"("e":{"dtype":"F32","shape":[0,3],"data_offsets":[28,28]},)"
                R"("i":{"dtype":"I32","shape":[2],"data_offsets":[28,36]},)"
                R"("l":{"dtype":"I64","shape":[1],"data_offsets":[36,44]},)"
                R"("o":{"dtype":"BOOL","shape":[3],"data_offsets":[44,47]},)"
                R"("__metadata__":{"format":"pt"}})",
                std::string("\x00\x00\x80\x3f\x00\x00\x00\xc0\x00\x00\x00\x00\x00\x00\xf0\x3f\x00\x3c\x00\x7c\x80\x3f\xc0\x7f"
                            "\x00\x00\xe0\x40"
                            "\xff\xff\xff\xff\x07\x00\x00\x00"   // I32 -1, 7
                            "\x00\x00\x00\x00\x00\x01\x00\x00"   // I64 2^40
                            "\x01\x00\x02",                       // BOOL true, false, true (any non-zero byte)
                            47)));
  // Malformed: each a different check.
  const std::string good = read_all(path("valid_gpt.safetensors"));
  write_all(path("bad_truncated.safetensors"), good.substr(0, good.size() / 2));
  write_all(path("bad_short.safetensors"), good.substr(0, 5));
  std::string len_past_end = good;
  len_past_end[6] = '\x7f';
  write_all(path("bad_header_length.safetensors"), len_past_end);
  write_all(path("bad_not_json.safetensors"), raw("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_off", ""));
  write_all(path("bad_array.safetensors"), raw("[{}, {}]", ""));
  write_all(path("bad_dtype.safetensors"), raw(R"({"a":{"dtype":"I16","shape":[1],"data_offsets":[0,2]}})", std::string(2, '\0')));
  write_all(path("bad_shape_overflow.safetensors"),
            raw(R"({"a":{"dtype":"F32","shape":[0,9223372036854775807,9223372036854775807],"data_offsets":[0,0]}})", ""));
  write_all(path("bad_negative_shape.safetensors"), raw(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", "abcd"));
  write_all(path("bad_overlap.safetensors"),
            raw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                std::string(8, '\0')));
  write_all(path("bad_offsets.safetensors"), raw(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", "abcd"));
  write_all(path("bad_metadata.safetensors"), raw(R"({"__metadata__":{"config":7}})", ""));
  write_all(path("bad_duplicate_key.safetensors"),
            raw(R"({"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]}})", "abcd"));
  // GPT-level: a valid file whose config or vocab is wrong, or with a tensor missing.
  {
    nn::SafetensorsFile f = nn::load_safetensors(path("valid_gpt.safetensors"));
    auto meta = f.metadata;
    meta["config"] = R"({"n_layer":1,"n_head":3,"n_embd":4,"block_size":2,"vocab_size":3})";
    nn::save_safetensors(path("bad_config.safetensors"), f.tensors, meta);
    meta = f.metadata;
    meta["vocab"] = "\"\\nabc\"";
    nn::save_safetensors(path("bad_vocab.safetensors"), f.tensors, meta);
    auto tensors = f.tensors;
    tensors.pop_back();
    nn::save_safetensors(path("bad_missing_tensor.safetensors"), tensors, f.metadata);
    tensors = f.tensors;
    tensors[0].second = Tensor::full(tensors[0].second.shape(), 1e300, DType::f64);  // infinite as float32
    nn::save_safetensors(path("bad_f64_overflow.safetensors"), tensors, f.metadata);
  }
  write_train_states(root + "/train_state");
  write_seq2seq_checkpoints(root + "/seq2seq_checkpoint");
  write_seq2seq_states(root + "/seq2seq_state");
}

}  // namespace heed::fuzz
