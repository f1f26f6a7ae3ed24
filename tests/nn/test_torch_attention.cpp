// Loading the weights of PyTorch's own nn.MultiheadAttention and nn.TransformerEncoderLayer (the
// recipe of docs/pytorch.md): their state_dict saved with safetensors, renamed to heed's names,
// loaded strictly, and the outputs compared with PyTorch's
// (tests/data/torch_attention_fixture.safetensors, scripts/make_torch_attention_fixture.py).
#include <catch2/catch.hpp>
#include <map>

#include "core/heed.h"
#include "nn/nn.h"

using namespace heed;

namespace {

// PyTorch's names (after `prefix`) -> heed's: the packed q/k/v projection is heed's fused c_attn
// (same [3C, C] layout: rows q, then k, then v), out_proj is c_proj, linear1 / linear2 the
// feed-forward's c_fc / c_proj; norm1 / norm2 keep their names.
nn::NamedTensors torch_to_heed(const nn::SafetensorsFile& file, const std::string& prefix) {
  const std::map<std::string, std::string> renames = {
      {"in_proj_weight", "c_attn.weight"}, {"in_proj_bias", "c_attn.bias"},
      {"out_proj.weight", "c_proj.weight"}, {"out_proj.bias", "c_proj.bias"},
      {"linear1.weight", "ff.c_fc.weight"}, {"linear1.bias", "ff.c_fc.bias"},
      {"linear2.weight", "ff.c_proj.weight"}, {"linear2.bias", "ff.c_proj.bias"}};
  nn::NamedTensors out;
  for (const auto& [name, t] : file.tensors) {
    if (name.rfind(prefix, 0) != 0 || name == prefix + "x" || name.rfind(prefix + "y", 0) == 0) continue;
    std::string n = name.substr(prefix.size());
    for (const auto& [from, to] : renames)
      if (n.size() >= from.size() && n.compare(n.size() - from.size(), from.size(), from) == 0)
        n = n.substr(0, n.size() - from.size()) + to;
    out.emplace_back(n, t);
  }
  return out;
}

Tensor get(const nn::SafetensorsFile& file, const std::string& name) {
  for (const auto& [n, t] : file.tensors)
    if (n == name) return t;
  FAIL("fixture has no " << name);
  return {};
}

void require_close(const Tensor& a, const Tensor& b, double tol) {
  REQUIRE(a.shape() == b.shape());
  const auto x = a.to_vector<double>(), y = b.to_vector<double>();
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]));
  INFO("worst difference " << worst);
  REQUIRE(worst <= tol);
}

const std::string kFixture = std::string(HEED_SOURCE_DIR) + "/tests/data/torch_attention_fixture.safetensors";

}  // namespace

TEST_CASE("torch interop: nn.MultiheadAttention's weights load into MultiHeadAttention", "[module][torch]") {
  const auto file = nn::load_safetensors(kFixture);
  nn::MultiHeadAttention attn({.d_model = 16, .n_head = 4, .seed = 1});
  attn.load_state_dict(torch_to_heed(file, "mha."));
  attn.eval();
  const Tensor x = get(file, "mha.x");
  require_close(attn.forward(x), get(file, "mha.y"), 2e-6);
  // The key padding mask: row 1's keys 3 and 4 are padding (True in PyTorch's mask = masked out).
  const KeyPaddingMask pad = padding_mask_from_lengths({5, 3}, 5);
  require_close(attn.forward(x, &pad), get(file, "mha.y_padded"), 2e-6);
}

TEST_CASE("torch interop: nn.TransformerEncoderLayer's weights load into EncoderLayer", "[module][torch]") {
  const auto file = nn::load_safetensors(kFixture);
  nn::EncoderLayer layer({.d_model = 16, .n_head = 4, .d_ff = 32, .norm = nn::NormPlacement::post, .seed = 1});
  const auto result = layer.load_state_dict(torch_to_heed(file, "enc."));
  REQUIRE(result.missing_keys.empty());
  layer.eval();
  require_close(layer.forward(get(file, "enc.x")), get(file, "enc.y"), 1e-5);
}
