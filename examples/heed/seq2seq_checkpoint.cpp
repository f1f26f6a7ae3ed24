#include "seq2seq_checkpoint.h"

#include <map>
#include <nlohmann/json.hpp>

#include "core/autograd.h"
#include "nn/gpt_checkpoint.h"

namespace heed::cli {

using nlohmann::json;

double seq2seq_parameters(int64_t d_model, int64_t n_layer) {
  const double d = double(d_model), L = double(n_layer), V = Seq2SeqVocab::size;
  // Per encoder layer: self-attention 4d^2+4d, feed-forward 8d^2+5d, two norms 4d; per decoder
  // layer also cross-attention 4d^2+4d and a third norm 2d. Two embeddings and the generator
  // (with its bias), and each stack's final norm. A test checks this against the built model.
  return L * (12 * d * d + 13 * d) + L * (16 * d * d + 19 * d) + 3 * V * d + V + 4 * d;
}

void save_seq2seq(const std::string& path, const nn::EncoderDecoder& model, const Seq2SeqOptions& o) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (auto& [name, t] : model.named_parameters()) {
    const int64_t bad = nn::first_non_finite(t);
    HEED_CHECK(bad < 0, path, ": parameter '", name, "' is not finite (element ", bad, "); not saved");
    tensors.emplace_back(name, t);
  }
  const json cfg = {{"task", o.task}, {"d_model", o.d_model}, {"n_head", o.n_head}, {"n_layer", o.n_layer},
                    {"seed", std::to_string(o.seed)}};
  nn::save_safetensors(path, tensors, {{"seq2seq", cfg.dump()}, {"format", "pt"}});
}

std::shared_ptr<nn::EncoderDecoder> load_seq2seq(const nn::SafetensorsFile& file, const std::string& what,
                                                 Seq2SeqOptions& o) {
  auto it = file.metadata.find("seq2seq");
  HEED_CHECK(it != file.metadata.end(), what, ": not a seq2seq checkpoint (no \"seq2seq\" metadata)");
  const json cfg = json::parse(it->second, nullptr, false);
  HEED_CHECK(cfg.is_object(), what, ": metadata \"seq2seq\" is not a JSON object");
  auto size = [&](const char* key, int64_t max) {
    HEED_CHECK(cfg.contains(key) && cfg[key].is_number_integer(), what, ": metadata \"seq2seq\" field \"", key,
               "\" must be an integer");
    const int64_t v = cfg[key].get<int64_t>();
    HEED_CHECK(v >= 1 && v <= max, what, ": metadata \"seq2seq\" field \"", key, "\" is ", v, ", outside [1, ", max,
               "]");
    return v;
  };
  Seq2SeqOptions r = defaults(seq2seq_option_table());
  HEED_CHECK(cfg.contains("task") && cfg["task"].is_string(), what, ": metadata \"seq2seq\" field \"task\" must be a string");
  r.task = cfg["task"].get<std::string>();
  try {
    check_task(r.task);
  } catch (const Error& e) {
    detail::fail(what, ": metadata \"seq2seq\": ", e.what());
  }
  r.d_model = size("d_model", kSeq2SeqMaxWidth);
  r.n_head = size("n_head", kSeq2SeqMaxWidth);
  r.n_layer = size("n_layer", kSeq2SeqMaxLayers);
  HEED_CHECK(r.d_model % r.n_head == 0, what, ": metadata \"seq2seq\": d_model ", r.d_model,
             " is not divisible by n_head ", r.n_head);
  if (cfg.contains("seed")) {  // informational: the weights are in the file
    const auto seed = value_from_json(cfg["seed"], OptionValue(int64_t(0)));
    HEED_CHECK(seed.has_value() && std::get<int64_t>(*seed) >= 0, what,
               ": metadata \"seq2seq\" field \"seed\" must be a non-negative integer");
    r.seed = std::get<int64_t>(*seed);
  }
  // The file must hold exactly the parameters the config implies before anything is built.
  double held = 0;
  for (const auto& [name, t] : file.tensors) held += double(t.numel());
  const double needed = seq2seq_parameters(r.d_model, r.n_layer);
  HEED_CHECK(held == needed, what, ": holds ", held, " parameters, but d_model ", r.d_model, " and n_layer ",
             r.n_layer, " need ", needed);
  std::map<std::string, Tensor> by_name;
  for (const auto& [name, t] : file.tensors) {
    HEED_CHECK(by_name.emplace(name, t).second, what, ": tensor '", name, "' appears twice");
    const int64_t bad = nn::first_non_finite(t);
    HEED_CHECK(bad < 0, what, ": tensor '", name, "' is not finite (element ", bad, ")");
  }
  auto model = std::make_shared<nn::EncoderDecoder>(seq2seq_model_options(r));
  auto params = model->named_parameters();
  NoGradGuard no_grad;
  for (auto& [name, t] : params) {
    auto f = by_name.find(name);
    HEED_CHECK(f != by_name.end(), what, ": missing tensor '", name, "'");
    HEED_CHECK(f->second.shape() == t.shape(), what, ": tensor '", name, "' has shape ", to_string(f->second.shape()),
               ", expected ", to_string(t.shape()));
    t.copy_(f->second);
  }
  for (auto& [name, t] : by_name) {
    bool known = false;
    for (auto& [pname, p] : params) known |= pname == name;
    HEED_CHECK(known, what, ": unexpected tensor '", name, "'");
  }
  model->eval();
  o.task = r.task, o.d_model = r.d_model, o.n_head = r.n_head, o.n_layer = r.n_layer, o.seed = r.seed;
  return model;
}

}  // namespace heed::cli
