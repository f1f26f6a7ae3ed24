// docs/pytorch.md's snippets, compiled and run: each TEST_CASE holds one ```cpp block of the page
// (indented), and the last test fails if any block of the page is not found here verbatim, so
// the page and this file cannot drift apart.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "nn/nn.h"

using namespace heed;

TEST_CASE("pytorch.md: tensors: ops, methods and dtypes", "[doc]") {
  Tensor x = Tensor({{1.0, 5.0, 3.0}, {4.0, 2.0, 6.0}});
  Tensor ids = x.argmax(1);                         // int64 [1, 2]
  Tensor big = x > 2.5;                             // bool
  Tensor y = x.masked_fill(~big, 0.0);              // [[0, 5, 3], [4, 0, 6]]
  Tensor v = Tensor({1.0, 2.0, 3.0});
  Tensor xv = x.matmul(v);                          // 1-D operand: shape [2]
  CHECK(ids.to_vector<int64_t>() == std::vector<int64_t>{1, 2});
  CHECK(y.sum().item() == 18);
  CHECK(xv.to_vector<float>() == std::vector<float>{20, 26});
  CHECK(x[1][2].item() == 6);
}

TEST_CASE("pytorch.md: functional ops: SwiGLU, mse_loss, std, chunk, and an in-place change refused", "[doc]") {
  nn::Linear w1(8, 16, false), w3(8, 16, false), w2(16, 8, false);
  Tensor x = Tensor::randn({4, 8});
  Tensor h = w2.forward(silu(w1.forward(x)) * w3.forward(x));   // SwiGLU, LLaMA's MLP
  Tensor loss = mse_loss(h, Tensor::zeros({4, 8}));
  Tensor spread = x.std(1);                         // unbiased, as torch: shape [4]
  auto halves = chunk(x, 2, 1);                     // two (4, 4) views
  Tensor heads = halves[1].view({4, 2, 2});         // a view of a strided piece
  Tensor y = x.requires_grad_().sigmoid();
  Tensor total = (y * 3.0).sum();
  CHECK_THROWS(y.mul_(2.0));                        // an op's output in grad mode: torch records it, heed refuses
  {
    NoGradGuard no_grad;
    y.fill_(0.0);                                   // allowed here, but sigmoid's backward reads y:
  }
  CHECK(loss.item() > 0);
  CHECK(spread.shape() == Shape{4});
  CHECK(halves[1].shape() == Shape{4, 4});
  CHECK(heads.storage() == x.storage());
  CHECK_THROWS_WITH(total.backward(), Catch::Contains("modified in place"));
}

TEST_CASE("pytorch.md: masks: scaled_dot_product_attention", "[doc]") {
  Tensor q = Tensor::randn({2, 4, 8}), k = Tensor::randn({2, 6, 8}), v = Tensor::randn({2, 6, 8});
  Tensor keep = Tensor::arange(6) < 4;              // keys 0..3 take part
  Tensor out = scaled_dot_product_attention(q, k, v, keep);
  Tensor causal = scaled_dot_product_attention(q, q, q, Tensor(), /*is_causal=*/true);
  CHECK(out.shape() == Shape{2, 4, 8});
  CHECK(causal.shape() == Shape{2, 4, 8});
}

TEST_CASE("pytorch.md: nn.MultiheadAttention's options", "[doc]") {
  nn::MultiHeadAttention mha({.d_model = 16, .n_head = 4, .kdim = 12, .vdim = 8,
                              .fused_qkv = false, .out_bias = false});
  Tensor query = Tensor::randn({2, 5, 16}), key = Tensor::randn({2, 7, 12}), value = Tensor::randn({2, 7, 8});
  Tensor blocked = triu(Tensor::ones({5, 7}, DType::boolean), 3);   // true = NOT allowed
  Tensor padding = Tensor({{false, false, false, false, false, false, false},
                           {false, false, false, false, false, true, true}});
  auto [out, weights] = mha.forward(query, key, value,
                                    {.key_padding_mask = padding, .attn_mask = blocked, .need_weights = true});
  CHECK(out.shape() == Shape{2, 5, 16});
  CHECK(weights.shape() == Shape{2, 5, 7});          // averaged over the heads
  CHECK(weights[1][0][6].item() == 0);               // a padded key
  Tensor single = mha.forward(query[0], key[0], value[0]).output;   // unbatched (T, C)
  CHECK(single.shape() == Shape{5, 16});
}

TEST_CASE("pytorch.md: modules: integer and bool tensors in safetensors files", "[doc]") {
  Tensor ids = Tensor::arange(4, DType::i64);
  std::string path = (std::filesystem::temp_directory_path() / "heed_doc_ids.safetensors").string();
  nn::save_safetensors(path, {{"ids", ids}, {"big", ids > 1}}, {});
  nn::SafetensorsFile file = nn::load_safetensors(path);
  CHECK(file.tensors[0].second.dtype() == DType::i64);
  CHECK(file.tensors[1].second.dtype() == DType::boolean);
  std::filesystem::remove(path);
}

TEST_CASE("pytorch.md: modules: assignment and state dicts", "[doc]") {
  heed::manual_seed(123);
  nn::Linear lin(2, 1);
  lin.weight = Tensor::from_vector({0.43, 0.15}, {1, 2}).requires_grad_();
  CHECK(lin.named_parameters()[0].second.same(lin.weight));   // the optimizer will see it
  nn::Linear other(2, 1);
  other.load_state_dict(lin.state_dict());
  CHECK(other.weight.to_vector<float>() == lin.weight.to_vector<float>());
}

TEST_CASE("pytorch.md: functional: cross_entropy on id tensors", "[doc]") {
  Tensor logits = Tensor::randn({3, 5}).requires_grad_();
  Tensor targets = Tensor({1, 4, 0});
  Tensor loss = cross_entropy(logits, targets);
  loss.backward();
  CHECK(logits.grad().shape() == Shape{3, 5});
}

namespace {
std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
// Each line without its leading spaces: the snippets are indented here, not on the page.
std::string unindented(const std::string& text) {
  std::istringstream in(text);
  std::string line, out;
  while (std::getline(in, line)) out += line.substr(std::min(line.find_first_not_of(' '), line.size())) + "\n";
  return out;
}
}  // namespace

TEST_CASE("pytorch.md: every snippet of the page is compiled by this file", "[doc]") {
  const std::string page = read_text(std::string(HEED_SOURCE_DIR) + "/docs/pytorch.md");
  const std::string self = unindented(read_text(std::string(HEED_SOURCE_DIR) + "/tests/core/test_pytorch_doc.cpp"));
  const std::string open = "```cpp\n", close = "```";
  int blocks = 0;
  for (size_t at = page.find(open); at != std::string::npos; at = page.find(open, at)) {
    const size_t begin = at + open.size(), end = page.find(close, begin);
    REQUIRE(end != std::string::npos);
    const std::string block = page.substr(begin, end - begin);
    INFO(block);
    REQUIRE(self.find(unindented(block)) != std::string::npos);
    ++blocks;
    at = end + close.size();
  }
  REQUIRE(blocks == 7);
}
