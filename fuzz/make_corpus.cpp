// Writes the seed corpora of the fuzz targets, each file well under 16 KB:
//   fuzz/corpus/safetensors/         valid tiny GPT checkpoints (as heed saves them, and as PyTorch
//                                    names them) and malformed ones;
//   fuzz/corpus/train_state/         training states of a tiny GPT, valid and tampered;
//   fuzz/corpus/seq2seq_checkpoint/  tiny seq2seq checkpoints, valid and tampered;
//   fuzz/corpus/seq2seq_state/       training states of a tiny seq2seq model, valid and tampered.
// Built in the fuzz build (-DHEED_FUZZ=ON, as scripts/fuzz.sh configures build-fuzz) as
// `make_fuzz_corpus`, and run by hand as `./build-fuzz/make_fuzz_corpus fuzz/corpus`
// (fuzz/README.md); the files are kept in the repository, so this only needs to run again when a
// format changes.
#include <cmath>
#include <cstdio>
#include <functional>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <filesystem>
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

// A tiny GPT (vocab 3, 1 layer, n_embd 4, dropout on) after one AdamW step, saved as heed train
// saves its state; then tampered copies.
static void write_train_states(const std::string& dir) {
  cli::TrainStateRecord r;
  r.options = cli::defaults(cli::train_option_table());
  r.options.n_layer = 1, r.options.n_head = 2, r.options.n_embd = 4, r.options.block_size = 4;
  r.options.dropout = 0.1, r.options.batch_size = 2, r.options.max_iters = 4;
  r.options.warmup_iters = 1, r.options.lr_decay_iters = 4, r.options.data = "/data/corpus.txt";
  r.iter = 1;
  r.eval_done = true;
  r.vocab_utf8 = "\nab";
  r.elapsed_s = 0.25;
  r.last_eval = {{"iter", 1}, {"train_loss", 1.0986}, {"val_loss", 1.0987}, {"lr", 0.001}, {"elapsed_s", 0.25}};
  nn::GPT model(cli::gpt_config(r.options, 3), 1);
  optim::AdamW opt(optim::param_groups_nanogpt(model.named_parameters(), 0.1), 1e-3, 0.9, 0.99);
  model.loss({0, 1, 2, 0, 1, 2, 0, 1}, {1, 2, 0, 1, 2, 0, 1, 2}, 2, 4).backward();
  opt.step();
  model.zero_grad();
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
  optim::AdamW opt = cli::seq2seq_optimizer(model, o);
  Generator data_gen(1337);
  const cli::Seq2SeqBatch b =
      cli::make_batch({cli::make_example(o.task, data_gen), cli::make_example(o.task, data_gen)});
  Tensor logits = model.forward(b.src, b.B, b.Ts, b.tgt_in, b.Tt, &b.src_mask, &b.tgt_mask);
  Tensor loss = cross_entropy(reshape(logits, {b.B * b.Tt, cli::Seq2SeqVocab::size}), b.tgt_out, cli::Seq2SeqVocab::pad);
  loss.backward();
  opt.step();
  model.zero_grad();
  r.iter = 1;
  r.interval_loss = loss.item();
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

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_fuzz_corpus DIR\n");
    return 2;
  }
  const std::string root = argv[1];
  const std::string dir = root + "/safetensors";
  for (const char* sub : {"safetensors", "train_state", "seq2seq_checkpoint", "seq2seq_state"})
    std::filesystem::create_directories(root + "/" + sub);
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
  // Valid safetensors, not a GPT: every dtype, a scalar, an empty tensor, metadata.
  write_all(path("valid_dtypes.safetensors"),
            raw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                R"("b":{"dtype":"F64","shape":[1],"data_offsets":[8,16]},)"
                R"("h":{"dtype":"F16","shape":[2],"data_offsets":[16,20]},)"
                R"("bf":{"dtype":"BF16","shape":[2,1],"data_offsets":[20,24]},)"
                R"("s":{"dtype":"F32","shape":[],"data_offsets":[24,28]},)"
                R"("e":{"dtype":"F32","shape":[0,3],"data_offsets":[28,28]},)"
                R"("__metadata__":{"format":"pt"}})",
                std::string("\x00\x00\x80\x3f\x00\x00\x00\xc0\x00\x00\x00\x00\x00\x00\xf0\x3f\x00\x3c\x00\x7c\x80\x3f\xc0\x7f"
                            "\x00\x00\xe0\x40",
                            28)));
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
  std::printf("wrote the corpora to %s\n", root.c_str());
  return 0;
}
