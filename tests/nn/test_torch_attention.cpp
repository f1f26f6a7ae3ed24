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

namespace {

// The state_dict of an nn.MultiheadAttention whose kdim / vdim differ from embed_dim (separate
// q_proj_weight, k_proj_weight, v_proj_weight; in_proj_bias holds the three biases stacked) in
// heed's names for fused_qkv = false; a packed one (in_proj_weight) as torch_to_heed does.
nn::NamedTensors torch_mha_to_heed(const nn::SafetensorsFile& file, const std::string& prefix, int64_t C) {
  bool packed = false;
  for (const auto& [name, _] : file.tensors) packed |= name == prefix + "in_proj_weight";
  nn::NamedTensors out;
  for (const auto& [name, t] : file.tensors) {
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string n = name.substr(prefix.size());
    if (n == "in_proj_weight") {
      out.emplace_back("c_attn.weight", t);
    } else if (n == "q_proj_weight" || n == "k_proj_weight" || n == "v_proj_weight") {
      out.emplace_back(n.substr(0, 6) + ".weight", t);
    } else if (n == "in_proj_bias" && packed) {
      out.emplace_back("c_attn.bias", t);
    } else if (n == "in_proj_bias") {
      out.emplace_back("q_proj.bias", slice(t, 0, 0, C));
      out.emplace_back("k_proj.bias", slice(t, 0, C, 2 * C));
      out.emplace_back("v_proj.bias", slice(t, 0, 2 * C, 3 * C));
    } else if (n.rfind("out_proj.", 0) == 0) {
      out.emplace_back("c_proj." + n.substr(9), t);
    } else {
      FAIL("unexpected PyTorch key " << name);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("torch interop: nn.MultiheadAttention with kdim, vdim, bias switches, masks, unbatched input and "
          "weights", "[module][torch]") {
  const auto file = nn::load_safetensors(kFixture);
  const nn::MultiHeadAttentionOptions options{
      .d_model = 16, .n_head = 4, .kdim = 12, .vdim = 8, .fused_qkv = false, .out_bias = false, .seed = 1};
  nn::MultiHeadAttention attn(options);
  const auto loaded = attn.load_state_dict(torch_mha_to_heed(file, "mhakv.sd.", 16));  // strict
  REQUIRE(loaded.missing_keys.empty());
  REQUIRE(!attn.c_proj->bias.defined());
  attn.eval();
  const Tensor q = get(file, "mhakv.q"), k = get(file, "mhakv.k"), v = get(file, "mhakv.v");
  const Tensor bool_mask = get(file, "mhakv.bool_mask") != 0.0, pad = get(file, "mhakv.pad") != 0.0;
  const Tensor float_mask = get(file, "mhakv.float_mask");

  auto [y_bool, w_bool] =
      attn.forward(q, k, v, {.key_padding_mask = pad, .attn_mask = bool_mask, .need_weights = true});
  require_close(y_bool, get(file, "mhakv.y_bool"), 2e-6);
  require_close(w_bool, get(file, "mhakv.w_bool"), 1e-6);
  // The fused path (no weights asked for) gives the same output.
  require_close(attn.forward(q, k, v, {.key_padding_mask = pad, .attn_mask = bool_mask}).output,
                get(file, "mhakv.y_bool"), 2e-6);

  auto [y_float, w_float] =
      attn.forward(q, k, v, {.attn_mask = float_mask, .need_weights = true, .average_attn_weights = false});
  require_close(y_float, get(file, "mhakv.y_float"), 2e-6);
  require_close(w_float, get(file, "mhakv.w_float"), 1e-6);
  require_close(attn.forward(q, k, v, {.attn_mask = float_mask}).output, get(file, "mhakv.y_float"), 2e-6);

  auto [y_un, w_un] = attn.forward(select(q, 0, 0), select(k, 0, 0), select(v, 0, 0),
                                   {.attn_mask = slice(float_mask, 0, 0, 4), .need_weights = true});
  require_close(y_un, get(file, "mhakv.y_unbatched"), 2e-6);
  require_close(w_un, get(file, "mhakv.w_unbatched"), 1e-6);

  // heed's causal option (bottom-right aligned) combined with the bool mask.
  nn::MultiHeadAttentionOptions causal_options = options;
  causal_options.causal = true;
  nn::MultiHeadAttention causal(causal_options);
  causal.load_state_dict(attn.state_dict());
  causal.eval();
  require_close(causal.forward(q, k, v, {.attn_mask = bool_mask}).output, get(file, "mhakv.y_causal"), 2e-6);

  // Packed weights without q/k/v biases, with an output bias; a per-(batch, head) bool mask.
  nn::MultiHeadAttention packed({.d_model = 16, .n_head = 4, .qkv_bias = false, .seed = 1});
  packed.load_state_dict(torch_mha_to_heed(file, "mhab.sd.", 16));
  packed.eval();
  const Tensor x = get(file, "mhab.x");
  auto [y_b, w_b] = packed.forward(x, x, x, {.key_padding_mask = slice(pad, 1, 0, 5),
                                             .attn_mask = get(file, "mhab.mask") != 0.0, .need_weights = true});
  require_close(y_b, get(file, "mhab.y"), 2e-6);
  require_close(w_b, get(file, "mhab.w"), 1e-6);
}
