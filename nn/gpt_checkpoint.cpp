#include "nn/gpt_checkpoint.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <vector>

#include "core/check.h"
#include "nn/init.h"
#include "nn/safetensors.h"

namespace heed::nn {

namespace {

using json = nlohmann::json;

// Limits that keep a hostile config from asking for absurd allocations before any shape is
// compared (every tensor's shape must then also match bytes actually present in the file).
constexpr int64_t kMaxVocab = 0x110000;  // one id per Unicode code point at most
constexpr int64_t kMaxBlock = 1 << 20;
constexpr int64_t kMaxEmbd = 1 << 16;
constexpr int64_t kMaxLayers = 1 << 10;

int64_t size_field(const json& cfg, const char* key, int64_t max, const std::string& what) {
  HEED_CHECK(cfg.contains(key), what, ": metadata \"config\" has no \"", key, "\"");
  const json& v = cfg.at(key);
  HEED_CHECK(v.is_number_integer(), what, ": metadata \"config\" field \"", key,
             "\" must be an integer, got ", v.dump());
  const int64_t n = v.get<int64_t>();
  HEED_CHECK(n >= 1 && n <= max, what, ": metadata \"config\" field \"", key, "\" is ", n,
             ", outside [1, ", max, "]");
  return n;
}

std::string strip_prefix(std::string name) {
  const std::string compiled = "_orig_mod.";
  if (name.rfind(compiled, 0) == 0) name.erase(0, compiled.size());
  return name;
}

}  // namespace

std::vector<std::pair<std::string, Shape>> gpt_tensor_shapes(const GPTConfig& c) {
  const int64_t C = c.n_embd;
  std::vector<std::pair<std::string, Shape>> out{{"transformer.wte.weight", {c.vocab_size, C}},
                                                 {"transformer.wpe.weight", {c.block_size, C}}};
  auto add = [&](const std::string& name, Shape weight, int64_t bias) {
    out.emplace_back(name + ".weight", std::move(weight));
    if (c.bias) out.emplace_back(name + ".bias", Shape{bias});
  };
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string h = "transformer.h." + std::to_string(i);
    add(h + ".ln_1", {C}, C);
    add(h + ".attn.c_attn", {3 * C, C}, 3 * C);
    add(h + ".attn.c_proj", {C, C}, C);
    add(h + ".ln_2", {C}, C);
    add(h + ".mlp.c_fc", {4 * C, C}, 4 * C);
    add(h + ".mlp.c_proj", {C, 4 * C}, C);
  }
  add("transformer.ln_f", {C}, C);
  return out;
}

std::string gpt_config_json(const GPTConfig& c) {
  json j;
  j["n_layer"] = c.n_layer;
  j["n_head"] = c.n_head;
  j["n_embd"] = c.n_embd;
  j["block_size"] = c.block_size;
  j["vocab_size"] = c.vocab_size;
  j["bias"] = c.bias;
  j["dropout"] = c.dropout;
  return j.dump();
}

GPTConfig parse_gpt_config(const std::string& json_text, const std::string& what) {
  json cfg = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  HEED_CHECK(!cfg.is_discarded(), what, ": metadata \"config\" is not valid JSON");
  HEED_CHECK(cfg.is_object(), what, ": metadata \"config\" must be a JSON object, got ", cfg.type_name());
  GPTConfig c;
  c.n_layer = size_field(cfg, "n_layer", kMaxLayers, what);
  c.n_head = size_field(cfg, "n_head", kMaxEmbd, what);
  c.n_embd = size_field(cfg, "n_embd", kMaxEmbd, what);
  c.block_size = size_field(cfg, "block_size", kMaxBlock, what);
  c.vocab_size = size_field(cfg, "vocab_size", kMaxVocab, what);
  HEED_CHECK(c.n_embd % c.n_head == 0, what, ": metadata \"config\": n_embd ", c.n_embd,
             " is not divisible by n_head ", c.n_head);
  if (cfg.contains("bias")) {
    HEED_CHECK(cfg["bias"].is_boolean(), what, ": metadata \"config\" field \"bias\" must be true or false");
    c.bias = cfg["bias"].get<bool>();
  }
  if (cfg.contains("dropout")) {
    HEED_CHECK(cfg["dropout"].is_number(), what, ": metadata \"config\" field \"dropout\" must be a number");
    c.dropout = cfg["dropout"].get<double>();
    HEED_CHECK(c.dropout >= 0.0 && c.dropout < 1.0, what, ": metadata \"config\" field \"dropout\" is ",
               c.dropout, ", outside [0, 1)");
  }
  return c;
}

int64_t first_non_finite(const Tensor& t) {
  const Tensor c = t.to(DType::f32).contiguous();
  const float* v = c.data<float>();
  const int64_t n = c.numel();
  // Blocks of branch-free compares (they vectorise), then the element within the first bad block.
  constexpr int64_t kBlock = 1024;
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t e = std::min(n, b + kBlock);
    bool bad = false;
    for (int64_t i = b; i < e; ++i) bad |= !(std::fabs(v[i]) <= std::numeric_limits<float>::max());
    if (bad)
      for (int64_t i = b; i < e; ++i)
        if (!std::isfinite(v[i])) return i;
  }
  return -1;
}

void save_gpt_checkpoint(const std::string& path, const GPT& model, const std::string& vocab_utf8,
                         const std::map<std::string, std::string>& extra) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (auto& [name, t] : model.named_parameters()) {
    if (name == "lm_head.weight") continue;  // tied to transformer.wte.weight
    tensors.emplace_back(name, t.detach().to(DType::f32));
  }
  std::map<std::string, std::string> metadata = extra;
  metadata["config"] = gpt_config_json(model.config());
  metadata["vocab"] = json(vocab_utf8).dump();
  metadata["format"] = "pt";
  save_safetensors(path, tensors, metadata);
}

namespace {

// Everything load_gpt_checkpoint checks beyond the safetensors structure; `path` names the source.
LoadedGPT gpt_from_safetensors(SafetensorsFile file, const std::string& path) {
  auto meta = [&](const char* key) -> const std::string& {
    auto it = file.metadata.find(key);
    HEED_CHECK(it != file.metadata.end(), path, ": metadata has no \"", key,
               "\" (not a heed GPT checkpoint? see docs/checkpoint-format.md)");
    return it->second;
  };
  const GPTConfig config = parse_gpt_config(meta("config"), path);

  LoadedGPT out;
  {
    json v = json::parse(meta("vocab"), nullptr, /*allow_exceptions=*/false);  // validates UTF-8
    HEED_CHECK(!v.is_discarded() && v.is_string(), path,
               ": metadata \"vocab\" must be a JSON string of the vocabulary's characters");
    out.vocab_utf8 = v.get<std::string>();
    int64_t chars = 0;
    for (unsigned char b : out.vocab_utf8) chars += (b & 0xC0) != 0x80;
    HEED_CHECK(chars == config.vocab_size, path, ": metadata \"vocab\" has ", chars,
               " characters but config vocab_size is ", config.vocab_size);
    std::set<std::string> seen;
    for (size_t i = 0; i < out.vocab_utf8.size();) {
      size_t n = 1;
      while (i + n < out.vocab_utf8.size() && (static_cast<unsigned char>(out.vocab_utf8[i + n]) & 0xC0) == 0x80) ++n;
      HEED_CHECK(seen.insert(out.vocab_utf8.substr(i, n)).second, path,
                 ": metadata \"vocab\" repeats the character at byte ", i);
      i += n;
    }
  }

  // Index the file's tensors under nanoGPT's names before building anything, so a wrong file
  // costs no model-sized allocation.
  std::map<std::string, Tensor> found;
  for (auto& [raw, t] : file.tensors) {
    std::string name = strip_prefix(raw);
    if (name == "lm_head.weight") name = "transformer.wte.weight";
    HEED_CHECK(found.emplace(name, t).second, path, ": tensor \"", raw,
               "\" appears twice (lm_head.weight is tied to transformer.wte.weight)");
  }

  const std::vector<std::pair<std::string, Shape>> expected = gpt_tensor_shapes(config);
  std::set<std::string> expected_names;
  for (auto& [name, shape] : expected) {
    expected_names.insert(name);
    auto it = found.find(name);
    HEED_CHECK(it != found.end(), path, ": tensor \"", name, "\" is missing");
    HEED_CHECK(it->second.shape() == shape, path, ": tensor \"", name, "\" has shape ",
               to_string(it->second.shape()), " but config ", gpt_config_json(config), " needs ",
               to_string(shape));
  }
  for (auto& [name, t] : found)
    HEED_CHECK(expected_names.count(name), path, ": unexpected tensor \"", name, "\" for config ",
               gpt_config_json(config));

  // A NaN or infinite weight (or a float64 one too large for float32) would only surface later as
  // a NaN loss or garbage samples.
  for (auto& [name, t] : found) {
    // Weights are floating point (F32, F64, BF16...); an integer or boolean tensor is not a weight
    // that lost precision but a file that is not a GPT checkpoint.
    HEED_CHECK(is_floating(t.dtype()), path, ": tensor \"", name, "\" has dtype ", dtype_name(t.dtype()),
               ", not a floating-point weight");
    t = t.to(DType::f32).contiguous();
    const int64_t i = first_non_finite(t);
    HEED_CHECK(i < 0, path, ": tensor \"", name, "\" is not finite (element ", i, " is ",
               i < 0 ? 0.0f : t.data<float>()[i], " as float32)");
  }

  // Only now, with every size backed by bytes in the file, is the model built.
  // Every parameter comes from the file (checked above), so none is drawn first.
  std::shared_ptr<GPT> model;
  {
    init::SkipInit skip;
    model = std::make_shared<GPT>(config);
  }
  // Each loaded tensor is float32, contiguous and of its parameter's shape (checked above), and
  // nothing else holds it: the parameter takes its storage rather than a copy (the small config's
  // 42 MB copied into fresh pages cost about a sixth of `heed sample`'s start).
  for (auto& [name, param] : model->named_parameters()) {
    if (name == "lm_head.weight") continue;
    param.set_(found.at(name));
  }
  model->eval();
  out.model = std::move(model);
  out.metadata = std::move(file.metadata);
  return out;
}

}  // namespace

LoadedGPT load_gpt_checkpoint(const std::string& path) { return gpt_from_safetensors(load_safetensors(path), path); }

LoadedGPT load_gpt_checkpoint_from_bytes(const uint8_t* data, size_t size, const std::string& what) {
  return gpt_from_safetensors(parse_safetensors(data, size, what), what);
}

}  // namespace heed::nn
