// Off the paved road of the public API: shapes whose element count overflows, empty batches
// through backward, two threads running backward into one parameter, a user's deep chain of ops,
// a FIFO given as a safetensors file, module trees with a cycle. Each case crashed, hung or gave a
// wrong result before (helper-15's review, 2026-11-29); each must now work or end in one
// heed::Error.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "nn/nn.h"
#include "support/helpers.h"

using namespace heed;
using Catch::Matchers::Contains;

TEST_CASE("a shape whose element count overflows int64 is refused, not wrapped", "[edge]") {
  const int64_t big = int64_t{1} << 32;
  REQUIRE_THROWS_WITH(Tensor::zeros({big, big}), Contains("element count overflows int64"));
  REQUIRE_THROWS_WITH(Tensor::zeros({INT64_MAX, 2}), Contains("overflows int64"));
  REQUIRE_THROWS_WITH(Tensor::zeros({0}).reshape({big, big, 0, big}), Contains("overflows int64"));
  REQUIRE_THROWS_WITH(Tensor::zeros({1, 1}).expand({int64_t{1} << 62, int64_t{1} << 62}), Contains("overflows int64"));
  // 2^61 float64 elements fit in int64 but their bytes do not.
  REQUIRE_THROWS_WITH(Tensor::zeros({int64_t{1} << 61}, DType::f64), Contains("more bytes than a 64-bit size holds"));
  // A zero size keeps an empty tensor empty whatever the others are, as long as they multiply.
  REQUIRE(Tensor::zeros({0, big}).numel() == 0);
}

TEST_CASE("backward through an empty batch gives zero parameter gradients", "[edge]") {
  Tensor w = Tensor::ones({4}).requires_grad_(), b = Tensor::zeros({4}).requires_grad_();
  layer_norm(Tensor::zeros({0, 4}), w, b).sum().backward();
  REQUIRE(w.grad().to_vector<float>() == std::vector<float>(4, 0.0f));
  REQUIRE(b.grad().to_vector<float>() == std::vector<float>(4, 0.0f));
  nn::LayerNorm ln(8);
  ln.forward(Tensor::zeros({2, 0, 8})).sum().backward();
  REQUIRE(ln.weight.grad().to_vector<float>() == std::vector<float>(8, 0.0f));
  // Attention with no keys, and with no queries.
  Tensor s = Tensor::zeros({1, 1, 3, 0}).requires_grad_();
  attention_softmax(s, 1.0, false).sum().backward();
  REQUIRE(s.grad().shape() == Shape{1, 1, 3, 0});
  Tensor q = Tensor::zeros({1, 0, 4}).requires_grad_();
  scaled_dot_product_attention(q, q, q).sum().backward();
  REQUIRE(q.grad().shape() == Shape{1, 0, 4});
  Tensor q2 = Tensor::zeros({1, 0, 4}).requires_grad_();
  scaled_dot_product_attention(q2, q2, q2, Tensor(), true).sum().backward();
  REQUIRE(q2.grad().shape() == Shape{1, 0, 4});
}

TEST_CASE("two threads running backward into one parameter add up every gradient", "[edge]") {
  Tensor w = Tensor::ones({4}).requires_grad_();
  constexpr int kSteps = 3000;
  auto run = [&] {
    for (int i = 0; i < kSteps; ++i) (w * 2.0).sum().backward();
  };
  std::thread a(run), b(run);
  a.join();
  b.join();
  REQUIRE(w.grad().to_vector<float>() == std::vector<float>(4, 2.0f * 2 * kSteps));  // exact in float32
  // A leaf as the root of its own backward, from two threads.
  Tensor v = Tensor::ones({1}).requires_grad_();
  auto seed = [&] {
    for (int i = 0; i < kSteps; ++i) v.backward();
  };
  std::thread c(seed), d(seed);
  c.join();
  d.join();
  REQUIRE(v.grad().item() == 2.0 * kSteps);
}

TEST_CASE("a deep chain of a user's ops that capture their inputs is freed without recursion", "[edge]") {
  Tensor y = Tensor::ones({1}).requires_grad_();
  for (int i = 0; i < 100000; ++i) {
    const Tensor in = y;  // captured by value, as core/autograd.h allows
    y = record("mine", mul(y, 1.0).detach(), {y}, [in](const Tensor& g) { return std::vector<Tensor>{g}; });
  }
  y = Tensor();  // the whole chain goes here: a recursion 100 000 deep overflowed the stack
  SUCCEED();
}

TEST_CASE("load_safetensors refuses a FIFO at once and a non-safetensors file before reading it", "[edge]") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("heed_edge_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string fifo = (dir / "fifo").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE_THROWS_WITH(nn::load_safetensors(fifo), Contains("not a regular file"));
  REQUIRE(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));  // it used to block in open()
  const std::string text = (dir / "notes.txt").string();
  std::ofstream(text) << "just some text, not a checkpoint\n";
  REQUIRE_THROWS_WITH(nn::load_safetensors(text), Contains("not a safetensors file") && Contains("past the end of the file"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("a module refuses an integer dtype and a cycle in its tree", "[edge]") {
  nn::Linear lin(2, 3);
  REQUIRE_THROWS_WITH(lin.to(DType::i64), Contains("converts to float32 or float64"));
  REQUIRE_THROWS_WITH(lin.to(DType::boolean), Contains("cannot hold gradients"));
  REQUIRE(lin.weight.dtype() == DType::f32);  // unchanged
  struct Holder : nn::Module {
    void add(const std::string& name, std::shared_ptr<Module> m) { register_module(name, std::move(m)); }
  };
  auto a = std::make_shared<Holder>(), b = std::make_shared<Holder>();
  REQUIRE_THROWS_WITH(a->add("self", a), Contains("child 'self' contains this module") && Contains("cycle"));
  b->add("a", a);
  REQUIRE_THROWS_WITH(a->add("b", b), Contains("contains this module (as 'a')"));
  REQUIRE(a->named_parameters().empty());  // still walkable
  // One child under two parents is no cycle (b holds a, both hold lin).
  auto lin2 = std::make_shared<nn::Linear>(2, 2);
  a->add("lin", lin2);
  b->add("lin_again", lin2);
  REQUIRE(b->named_parameters().size() == 2);  // the shared weight and bias, once each
}

TEST_CASE("empty tensors and out-of-range int64 ids end in the right message", "[edge]") {
  // An empty tensor has no element to share memory: its literal and copies into it work.
  const Tensor empty_rows = Tensor({{}, {}});
  REQUIRE(empty_rows.shape() == Shape{2, 0});
  REQUIRE_NOTHROW(Tensor::zeros({1, 0}).expand({3, 0}).copy_(Tensor::zeros({3, 0})));
  REQUIRE_THROWS_WITH(padding_mask_from_lengths({0}, -1), Contains("negative length T = -1"));
  const int64_t far = int64_t{1} << 32;
  REQUIRE_THROWS_WITH(embedding(Tensor::zeros({3, 2}), Tensor::from_vector(std::vector<int64_t>{0, far}, {2})),
                      Contains("embedding: id 4294967296 is out of range"));
  REQUIRE_THROWS_WITH(cross_entropy(Tensor::zeros({1, 3}), Tensor::from_vector(std::vector<int64_t>{-far}, {1})),
                      Contains("cross_entropy: id -4294967296 is out of range"));
}

TEST_CASE("conversions and literals never round or overflow silently", "[edge]") {
  // A float that no integer holds: undefined behaviour in C++ (INT64_MIN on x86); refused, as
  // torch's fill_ refuses it, with the destination unchanged.
  Tensor i = Tensor::zeros({3}, DType::i64);
  REQUIRE_THROWS_WITH(i.fill_(std::nan("")), Contains("cannot be converted to int64 without overflow"));
  REQUIRE_THROWS_WITH(i.copy_(Tensor::from_vector(std::vector<double>{1.0, 1e300, 2.0}, {3})),
                      Contains("the value 1e+300 cannot be converted to int64"));
  REQUIRE(i.to_vector<int64_t>() == std::vector<int64_t>{0, 0, 0});
  REQUIRE_THROWS_WITH(Tensor::full({2}, INFINITY, DType::i32), Contains("int32 without overflow"));
  REQUIRE_THROWS_WITH(Tensor::from_vector(std::vector<float>{3e9f}, {1}).to(DType::i32), Contains("int32"));
  REQUIRE(Tensor::from_vector(std::vector<double>{-2.7, 2147483647.0}, {2}).to(DType::i32).to_vector<int64_t>() ==
          std::vector<int64_t>{-2, 2147483647});  // truncated toward zero, as torch
  // An integer literal past 2^53 would round through the double it is held in.
  REQUIRE_THROWS_WITH(Tensor({9007199254740993L}), Contains("past 2^53"));
  REQUIRE(Tensor({9007199254740992L}).to_vector<int64_t>() == std::vector<int64_t>{9007199254740992L});
}

TEST_CASE("record, load_state_dict and module names refuse what would fail later", "[edge]") {
  Tensor x = Tensor::ones({2}).requires_grad_();
  REQUIRE_THROWS_WITH(record("mine", mul(x, 1.0).detach(), {x}, BackwardFn()),
                      Contains("record: op 'mine' was given an empty backward function"));
  {
    // An output that is also one of the inputs gets a handle of its own: the input is not made
    // the op's output (its node would hold itself, and never be freed).
    Tensor out = Tensor::zeros({2});
    std::weak_ptr<Node> node;
    {
      Tensor r = record("mine", out, {out, x}, [](const Tensor& g) { return std::vector<Tensor>{g, g}; });
      REQUIRE_FALSE(r.same(out));
      REQUIRE(out.grad_fn() == nullptr);
      node = r.grad_fn();
      x.zero_grad();
      r.sum().backward();
      REQUIRE(x.grad().to_vector<float>() == std::vector<float>{1, 1});
    }
    REQUIRE(node.expired());  // freed with its output
  }
  nn::Linear lin(2, 2);
  REQUIRE_THROWS_WITH(lin.load_state_dict({{"weight", Tensor()}, {"bias", Tensor::zeros({2})}}),
                      Contains("key 'weight' holds an undefined tensor"));
  struct Named : nn::Module {
    Tensor meta;
    Named() { register_buffer("__metadata__", meta, Tensor::zeros({1})); }
  };
  REQUIRE_THROWS_WITH(Named(), Contains("'__metadata__' cannot name"));
}

// fairseq's make_positions, (cumsum(mask, 1).type_as(mask) * mask).long() + 1, ported as is: torch
// computes it in int32; heed's arithmetic takes float tensors only (docs/pytorch.md), and said so
// without naming the op, so a porter could not tell which part of the expression it was.
TEST_CASE("elementwise ops refuse an integer or bool tensor naming the op", "[edge]") {
  const Tensor mask = (Tensor({{5, 7, 1}, {4, 1, 1}}) != 1.0).to(DType::i32);
  REQUIRE_THROWS_WITH(cumsum(mask, 1).to(DType::i32) * mask,
                      Contains("mul: expected a float32 or float64 tensor, got int32 [2, 3]") &&
                          Contains("convert with .to(DType::f32)"));
  REQUIRE_THROWS_WITH(add(Tensor::arange(3), Tensor::arange(3).reshape({3, 1})), Contains("add: expected a float32"));
  REQUIRE_THROWS_WITH(Tensor::arange(3) + 1.0, Contains("add: expected a float32 or float64 tensor, got int64 [3]"));
  REQUIRE_THROWS_WITH(1.0 - Tensor::arange(3), Contains("rsub: expected"));
  REQUIRE_THROWS_WITH(-Tensor::arange(3), Contains("neg: expected"));
  REQUIRE_THROWS_WITH(exp(mask), Contains("exp: expected"));
  REQUIRE_THROWS_WITH(relu(mask > 0), Contains("relu: expected a float32 or float64 tensor, got bool"));
  REQUIRE_THROWS_WITH(sigmoid(mask), Contains("sigmoid: expected"));
  REQUIRE_THROWS_WITH(mask.clamp(0.0, 1.0), Contains("clamp: expected"));
  // The float forms still run: the porter's line with float masks.
  const Tensor fmask = mask.to(DType::f32);
  REQUIRE((cumsum(fmask, 1) * fmask + 1.0).to_vector<float>() == std::vector<float>{2, 3, 1, 2, 1, 1});
}

// torch 1.13 refuses each of these ("value cannot be converted to type float without overflow"):
// torch.full((2,), 1e39), torch.zeros(2).fill_(1e39), x.masked_fill(m, 1e39), F.pad(x, (1, 1),
// value=1e39), torch.where(m, x, 1e39). heed stored inf. inf itself, and 1e39 in float64, are taken.
TEST_CASE("a fill value past float32's range is refused, naming the op, where torch refuses it", "[edge]") {
  const double big = 1e39;
  const Tensor x = Tensor::zeros({3});
  const Tensor m = gt(Tensor::from_vector(std::vector<float>{1, 0, 1}, {3}), 0.5);
  auto refused = [](const char* op) {
    return Catch::Contains(std::string(op) + ": the value 1e+39 cannot be converted to float32 without overflow");
  };
  REQUIRE_THROWS_WITH(Tensor::full({2}, big), refused("full"));
  REQUIRE_THROWS_WITH(Tensor::zeros({2}).fill_(big), refused("fill_"));
  REQUIRE_THROWS_WITH(masked_fill(x, m, big), refused("masked_fill"));
  REQUIRE_THROWS_WITH(pad(x, {1, 1}, big), refused("pad"));
  REQUIRE_THROWS_WITH(where(m, x, big), refused("where"));
  REQUIRE_THROWS_WITH(where(m, -big, x), Catch::Contains("where: the value -1e+39 cannot be converted"));
  const double inf = std::numeric_limits<double>::infinity();
  REQUIRE(std::isinf(Tensor::full({2}, inf).to_vector<float>()[1]));
  REQUIRE(std::isinf(masked_fill(x, m, -inf).to_vector<float>()[0]));
  REQUIRE(std::isnan(pad(x, {1, 0}, std::nan("")).to_vector<float>()[0]));
  REQUIRE(Tensor::full({2}, big, DType::f64).to_vector<double>()[0] == big);
  REQUIRE(masked_fill(x.to(DType::f64), m, big).to_vector<double>()[2] == big);
}

// Where torch rounds a scalar past float32's range to inf instead (torch 1.13):
// torch.ones(2) < 1e39 and torch.ones(2) > -1e39 are [True, True], torch.tensor(1e39) is inf,
// torch.full((1, 1), 3e38).expand(2, 1).sum() is inf, and F.cross_entropy(torch.tensor([[3e38,
// -3e38]]), torch.tensor([1])) is inf. These make their scalar with Tensor::scalar, which full's
// refusal of 1e39 had reached: each threw "full: the value ... cannot be converted".
TEST_CASE("a comparison or sum or loss past float32's range rounds to inf as torch does and is not refused",
          "[edge]") {
  const Tensor ones = Tensor::ones({2});
  REQUIRE(lt(ones, 1e39).to_vector<int32_t>() == std::vector<int32_t>{1, 1});
  REQUIRE(gt(ones, -1e39).to_vector<int32_t>() == std::vector<int32_t>{1, 1});
  REQUIRE(eq(ones, 1e39).to_vector<int32_t>() == std::vector<int32_t>{0, 0});
  REQUIRE(std::isinf(Tensor::scalar(1e39).item()));
  REQUIRE(std::isinf(sum(expand(Tensor::full({1, 1}, 3e38), {2, 1})).item()));
  const Tensor logits = Tensor::from_vector(std::vector<float>{3e38f, -3e38f}, {1, 2});
  REQUIRE(std::isinf(cross_entropy(logits, Tensor::from_vector(std::vector<int64_t>{1}, {1})).item()));
  REQUIRE(Tensor::scalar(1e39, DType::f64).item() == 1e39);
}
