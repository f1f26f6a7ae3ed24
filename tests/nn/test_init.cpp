// Initialisation by name (nn::init::by_name): a parameter's values depend on the root seed and its
// own dotted name only, in user modules, Transformer stacks and GPT; seeded models ignore the
// default generator; unseeded ones draw their root seed from it.
#include <catch2/catch.hpp>
#include <cmath>
#include <map>

#include "core/heed.h"
#include "nn/gpt.h"
#include "nn/init.h"
#include "nn/transformer.h"

using namespace heed;

namespace {

std::map<std::string, std::vector<float>> values_by_name(const nn::Module& m) {
  std::map<std::string, std::vector<float>> out;
  for (const auto& [name, t] : m.named_parameters()) out[name] = t.to_vector<float>();
  return out;
}

// A user's module whose children can be registered in any order, with an optional extra child.
struct Pair : nn::Module {
  Pair(bool swapped, bool extra) {
    auto add = [&](const char* name, int64_t out) { register_module(name, std::make_shared<nn::Linear>(4, out)); };
    if (extra) add("before", 2);
    swapped ? (add("b", 5), add("a", 3)) : (add("a", 3), add("b", 5));
    register_module("drop", std::make_shared<nn::Dropout>(0.5));
    register_parameter("scale", scale, Tensor::zeros({2}));  // a raw parameter: no init of its own, kept
  }
  Tensor scale;
};

nn::GPTConfig config(int64_t n_layer) {
  nn::GPTConfig c;
  c.vocab_size = 11, c.block_size = 8, c.n_layer = n_layer, c.n_head = 2, c.n_embd = 16, c.bias = true;
  c.dropout = 0.1;
  return c;
}

}  // namespace

TEST_CASE("by_name: values follow the names, not the order or the number of children", "[init]") {
  Pair plain(false, false), swapped(true, false), extra(false, true);
  for (auto* m : {&plain, &swapped, &extra}) nn::init::by_name(*m, 77);
  const auto p = values_by_name(plain), s = values_by_name(swapped), e = values_by_name(extra);
  for (const char* name : {"a.weight", "a.bias", "b.weight", "b.bias", "scale"}) {
    INFO(name);
    REQUIRE(p.at(name) == s.at(name));
    REQUIRE(p.at(name) == e.at(name));
  }
  REQUIRE(p.at("scale") == std::vector<float>{0.0f, 0.0f});  // no init of its own: left as it was
  // Each parameter from its own generator, with its layer's default rule: Linear's uniform bound.
  Generator gen(derive_seed(77, "a.weight"));
  REQUIRE(p.at("a.weight") == Tensor::rand({3, 4}, gen, -0.5, 0.5).to_vector<float>());
  // The dropout is reseeded from its path.
  auto* drop = dynamic_cast<nn::Dropout*>(plain.children().back().second.get());
  REQUIRE(drop->generator().state() == Generator(derive_seed(77, "drop")).state());
  // Another root seed, other values.
  Pair other(false, false);
  nn::init::by_name(other, 78);
  REQUIRE(values_by_name(other).at("a.weight") != p.at("a.weight"));
}

TEST_CASE("by_name calls the rule once per parameter (a tied weight once), with owner and dotted path",
          "[init]") {
  nn::GPT model(config(2), 5);
  std::vector<std::string> visited;
  int64_t layer_norms = 0;
  nn::init::by_name(model, 5, [&](nn::Module& owner, const std::string& path, Tensor& t, Generator& gen) {
    visited.push_back(path);
    layer_norms += dynamic_cast<nn::LayerNorm*>(&owner) != nullptr;
    nn::init::layer_default(owner, path, t, gen);
  });
  std::vector<std::string> names;
  for (const auto& [name, _] : model.named_parameters()) names.push_back(name);
  REQUIRE(visited == names);  // lm_head.weight is transformer.wte.weight: not visited twice
  REQUIRE(layer_norms == 10);  // ln_1, ln_2 of two blocks and ln_f, weight and bias each
}

TEST_CASE("GPT init by name: a block's weights do not depend on how many blocks there are", "[init]") {
  nn::GPT two(config(2), 9), three(config(3), 9);
  const auto a = values_by_name(two), b = values_by_name(three);
  for (const auto& [name, v] : a) {
    // c_proj's std scales with depth (0.02 / sqrt(2 n_layer)), so only the scale differs there.
    if (name.find("c_proj.weight") != std::string::npos) {
      const double ratio = std::sqrt(2.0 * 2) / std::sqrt(2.0 * 3);
      const auto& w = b.at(name);
      for (size_t i = 0; i < v.size(); ++i) REQUIRE(v[i] == Approx(w[i] / ratio).epsilon(1e-5));
      continue;
    }
    INFO(name);
    REQUIRE(v == b.at(name));
  }
  // Blocks differ from each other, and the dropouts of one model each have their own stream.
  REQUIRE(a.at("transformer.h.0.attn.c_attn.weight") != a.at("transformer.h.1.attn.c_attn.weight"));
  REQUIRE(two.transformer->h->operator[](0)->attn->attn_dropout->generator().state() ==
          Generator(derive_seed(9, "transformer.h.0.attn.attn_dropout")).state());
  REQUIRE(two.transformer->drop->generator().state() != two.transformer->h->operator[](0)->mlp->dropout->generator().state());
}

TEST_CASE("a seeded model ignores the default generator, an unseeded one draws its root from it", "[init]") {
  manual_seed(1);
  nn::GPT a(config(1), 4);
  manual_seed(2);
  nn::GPT b(config(1), 4);
  REQUIRE(values_by_name(a) == values_by_name(b));
  manual_seed(3);
  nn::GPT c(config(1)), d(config(1));
  REQUIRE(values_by_name(c) != values_by_name(d));
  manual_seed(3);
  nn::GPT c2(config(1));
  REQUIRE(values_by_name(c2) == values_by_name(c));
  // The same for the Transformer's options structs.
  nn::TransformerLayerOptions o{.d_model = 8, .n_head = 2, .d_ff = 16, .seed = 6};
  nn::Encoder e1(o, 2), e2(o, 2);
  REQUIRE(values_by_name(e1) == values_by_name(e2));
  const auto e = values_by_name(e1);
  REQUIRE(e.at("layers.0.self_attn.c_attn.weight") != e.at("layers.1.self_attn.c_attn.weight"));
  REQUIRE(e.at("layers.0.ff.c_fc.weight") != e.at("layers.1.ff.c_fc.weight"));
}

TEST_CASE("EncoderDecoder: embeddings normal(0, 1/sqrt(d_model)), the rest its layers' defaults, by name",
          "[init]") {
  nn::EncoderDecoder m({.src_vocab = 50, .tgt_vocab = 60, .d_model = 32, .n_head = 4, .d_ff = 64,
                        .n_encoder_layers = 1, .n_decoder_layers = 1, .max_len = 16, .seed = 12});
  Generator gen(derive_seed(12, "src_embed.weight"));
  const double sd = 1.0 / std::sqrt(32.0);
  REQUIRE(m.src_embed->weight.to_vector<float>() == Tensor::randn({50, 32}, gen, sd).to_vector<float>());
  Generator lin(derive_seed(12, "generator.weight"));
  const double bound = 1.0 / std::sqrt(32.0);
  REQUIRE(m.generator->weight.to_vector<float>() == Tensor::rand({60, 32}, lin, -bound, bound).to_vector<float>());
  for (float v : m.encoder->layers->operator[](0)->norm1->weight.to_vector<float>()) REQUIRE(v == 1.0f);
}

TEST_CASE("SkipInit: initialisers leave parameters alone and draw nothing while it lives, then all is as before",
          "[init]") {
  Tensor t = Tensor::full({3, 4}, 7.0);
  Generator gen(5);
  {
    nn::init::SkipInit skip;
    REQUIRE(nn::init::SkipInit::active());
    nn::init::normal_(t, 0.0, 1.0, gen);
    nn::init::uniform_(t, -1.0, 1.0, gen);
  }
  REQUIRE(!nn::init::SkipInit::active());
  for (float v : t.to_vector<float>()) REQUIRE(v == 7.0f);
  REQUIRE(gen.next_u64() == Generator(5).next_u64());  // the generator did not move
  nn::init::normal_(t, 0.0, 1.0, gen);
  REQUIRE(t.to_vector<float>() != std::vector<float>(12, 7.0f));
  // A model built under SkipInit and then given a seeded model's values equals it (what the
  // checkpoint loader does), and one built after the scope is initialised again.
  const nn::GPTConfig c{.vocab_size = 11, .block_size = 8, .n_layer = 1, .n_head = 2, .n_embd = 8};
  nn::GPT seeded(c, 3);
  std::unique_ptr<nn::GPT> loaded;
  {
    nn::init::SkipInit skip;
    loaded = std::make_unique<nn::GPT>(c, 3);
  }
  const nn::NamedTensors source = seeded.named_parameters(), target = loaded->named_parameters();
  REQUIRE(source.size() == target.size());
  for (size_t i = 0; i < source.size(); ++i) {
    REQUIRE(source[i].first == target[i].first);
    Tensor p = target[i].second;
    p.copy_(source[i].second);
  }
  REQUIRE(values_by_name(*loaded) == values_by_name(seeded));
  REQUIRE(values_by_name(nn::GPT(c, 3)) == values_by_name(seeded));
}
