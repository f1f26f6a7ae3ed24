// Module registration: assigning a parameter re-registers it (the trap of issue 13), buffers,
// state_dict / load_state_dict and their errors, and a module's state through safetensors.
#include <catch2/catch.hpp>
#include <filesystem>
#include <unistd.h>

#include "core/heed.h"
#include "nn/nn.h"
#include "optim/sgd.h"

using namespace heed;

namespace {

// A user's module with a raw parameter, a buffer and a child.
struct Scaled : nn::Module {
  Scaled() {
    lin = register_module("lin", std::make_shared<nn::Linear>(3, 2));
    register_parameter("scale", scale, Tensor::ones({2}));
    register_buffer("running", running, Tensor::zeros({2}));
  }
  Tensor forward(const Tensor& x) { return lin->forward(x) * scale + running; }
  std::shared_ptr<nn::Linear> lin;
  Tensor scale, running;
};

std::vector<std::string> names(const nn::NamedTensors& ts) {
  std::vector<std::string> out;
  for (const auto& [n, _] : ts) out.push_back(n);
  return out;
}

std::string temp_path(const char* stem) {
  return (std::filesystem::temp_directory_path() / (std::string(stem) + "." + std::to_string(getpid()) + ".safetensors"))
      .string();
}

}  // namespace

TEST_CASE("module: assigning a parameter re-registers it, and training moves the new one", "[module]") {
  manual_seed(3);
  nn::Linear lin(2, 1);
  // The trap: a user replaces the weight after construction, as in a PyTorch port.
  lin.weight = Tensor::from_vector(std::vector<float>{0.43f, 0.15f}, {1, 2}).requires_grad_();
  const auto params = lin.named_parameters();
  REQUIRE(params.size() == 2);
  REQUIRE(params[0].first == "weight");
  REQUIRE(params[0].second.same(lin.weight));  // the optimizer, zero_grad and checkpoints see it
  REQUIRE(lin.state_dict()[0].second.storage() == lin.weight.storage());

  optim::SGD opt({{lin.named_parameters(), 0.0}}, 0.1);
  const Tensor x = Tensor::from_vector(std::vector<float>{1, 2, -1, 0.5f, 0, 1}, {3, 2});
  const Tensor y = Tensor::from_vector(std::vector<float>{1, 0, 2}, {3, 1});
  auto loss_now = [&] { return mean(pow(lin.forward(x) - y, 2.0)); };
  const double first = loss_now().item();
  for (int step = 0; step < 20; ++step) {
    lin.zero_grad();
    Tensor loss = loss_now();
    loss.backward();
    opt.step();
  }
  REQUIRE(loss_now().item() < 0.5 * first);
  REQUIRE(lin.weight.to_vector<float>() != std::vector<float>{0.43f, 0.15f});

  // Assigning an undefined tensor removes the parameter (PyTorch's `lin.bias = None`).
  lin.bias = Tensor();
  REQUIRE(names(lin.named_parameters()) == std::vector<std::string>{"weight"});
}

TEST_CASE("module: buffers are in the state dict but not trained", "[module]") {
  Scaled m;
  REQUIRE(names(m.named_parameters()) == std::vector<std::string>{"scale", "lin.weight", "lin.bias"});
  REQUIRE(names(m.named_buffers()) == std::vector<std::string>{"running"});
  REQUIRE(names(m.state_dict()) == std::vector<std::string>{"scale", "lin.weight", "lin.bias", "running"});
  REQUIRE_FALSE(m.running.requires_grad());
  for (const auto& [_, t] : m.state_dict()) REQUIRE_FALSE(t.requires_grad());  // detached views
  // to(f64) converts parameters and float buffers in place.
  Scaled d;
  d.to(DType::f64);
  for (const auto& [name, t] : d.state_dict()) {
    INFO(name);
    REQUIRE(t.dtype() == DType::f64);
  }
  // A reassigned buffer is the one saved.
  m.running = Tensor::full({2}, 5.0);
  REQUIRE(m.state_dict().back().second.to_vector<float>() == std::vector<float>{5, 5});
}

TEST_CASE("module: load_state_dict copies values and names every bad key", "[module]") {
  manual_seed(1);
  Scaled a, b;
  REQUIRE(a.lin->weight.to_vector<float>() != b.lin->weight.to_vector<float>());
  a.running.fill_(2.0);
  auto result = b.load_state_dict(a.state_dict());
  REQUIRE(result.missing_keys.empty());
  REQUIRE(result.unexpected_keys.empty());
  for (size_t i = 0; i < a.state_dict().size(); ++i)
    REQUIRE(a.state_dict()[i].second.to_vector<float>() == b.state_dict()[i].second.to_vector<float>());
  // b's tensors are its own: loading copied, it did not alias.
  REQUIRE_FALSE(a.lin->weight.storage() == b.lin->weight.storage());

  // Missing, unexpected and mis-shaped keys: one error naming each; nothing copied.
  Scaled c;
  const auto before = c.lin->weight.to_vector<float>();
  nn::NamedTensors bad = {{"lin.weight", Tensor::zeros({2, 3})},
                          {"lin.bias", Tensor::zeros({3})},
                          {"extra", Tensor::zeros({1})}};
  try {
    c.load_state_dict(bad);
    FAIL("no error");
  } catch (const Error& e) {
    const std::string msg = e.what();
    INFO(msg);
    REQUIRE(msg.find("size mismatch: lin.bias ([3] given, [2] in the module)") != std::string::npos);
    REQUIRE(msg.find("missing keys: scale, running") != std::string::npos);
    REQUIRE(msg.find("unexpected keys: extra") != std::string::npos);
  }
  REQUIRE(c.lin->weight.to_vector<float>() == before);
  // Not strict: missing and unexpected keys are reported, the rest is loaded...
  bad[1].second = Tensor::full({2}, 7.0);
  result = c.load_state_dict(bad, false);
  REQUIRE(result.missing_keys == std::vector<std::string>{"scale", "running"});
  REQUIRE(result.unexpected_keys == std::vector<std::string>{"extra"});
  REQUIRE(c.lin->bias.to_vector<float>() == std::vector<float>{7, 7});
  // ...but a shape mismatch is always an error, as in PyTorch.
  bad[1].second = Tensor::zeros({3});
  REQUIRE_THROWS_WITH(c.load_state_dict(bad, false), Catch::Contains("size mismatch: lin.bias"));
}

TEST_CASE("module: a state dict round-trips through safetensors", "[module][safetensors]") {
  manual_seed(5);
  nn::GPTConfig cfg;
  cfg.vocab_size = 7, cfg.block_size = 4, cfg.n_layer = 1, cfg.n_head = 2, cfg.n_embd = 8;
  nn::GPT a(cfg), b(cfg);
  const std::string path = temp_path("heed_state_dict");
  nn::save_state_dict(a, path, {{"note", "test"}});
  auto file = nn::load_safetensors(path);
  REQUIRE(file.metadata.at("note") == "test");
  REQUIRE(file.tensors.size() == a.state_dict().size());  // lm_head.weight saved too, as torch does
  nn::load_state_dict(b, path);
  for (size_t i = 0; i < a.state_dict().size(); ++i)
    REQUIRE(a.state_dict()[i].second.to_vector<float>() == b.state_dict()[i].second.to_vector<float>());
  // The tie survives a load: wte and lm_head are still one tensor.
  REQUIRE(b.lm_head->weight.same(b.transformer->wte->weight));
  // A file for another model: the error names the file and the keys.
  nn::Linear lin(2, 2);
  REQUIRE_THROWS_WITH(nn::load_state_dict(lin, path),
                      Catch::Contains(path) && Catch::Contains("missing keys: weight, bias") &&
                          Catch::Contains("unexpected keys: transformer.wte.weight"));
  std::filesystem::remove(path);
}
