// nn::Sequential and nn::Functional: torch's names, values and gradients against torch, the
// modes reaching every step, typed access, and the errors.
#include <catch2/catch.hpp>
#include <cmath>
#include <iterator>
#include <string>
#include <vector>

#include "nn/nn.h"
#include "support/helpers.h"

using namespace heed;
using heed::test::require_gradcheck;
using heed::test::require_values;

namespace {

// scale * sin(0.37 k + phase) for k = 0..numel-1, row-major, in float64 (the same values as the
// torch script that made the expected numbers below).
Tensor wave(const Shape& shape, double phase, double scale) {
  std::vector<double> v(static_cast<size_t>(numel_of(shape)));
  for (size_t k = 0; k < v.size(); ++k) v[k] = scale * std::sin(0.37 * static_cast<double>(k) + phase);
  return Tensor::from_vector(v, shape);
}

std::vector<std::string> names_of(const nn::NamedTensors& named) {
  std::vector<std::string> out;
  for (const auto& [n, _] : named) out.push_back(n);
  return out;
}

// A user's own module, with a forward of its own: any such module can be a step.
struct AddOne : nn::Module {
  Tensor forward(const Tensor& x) { return x + 1.0; }
};

}  // namespace

static_assert(nn::TensorToTensorModule<nn::Linear>);
static_assert(nn::TensorToTensorModule<nn::LayerNorm>);
static_assert(nn::TensorToTensorModule<nn::Dropout>);
static_assert(nn::TensorToTensorModule<nn::GELU>);
static_assert(nn::TensorToTensorModule<nn::MultiHeadAttention>);  // its self-attention forward(x)
static_assert(nn::TensorToTensorModule<nn::Sequential>);          // so Sequentials nest
static_assert(nn::TensorToTensorModule<AddOne>);
static_assert(!nn::TensorToTensorModule<nn::Module>);  // no forward: refused when compiled

TEST_CASE("Sequential: torch's parameter names, values and gradients", "[sequential]") {
  nn::Sequential seq(std::make_shared<nn::Linear>(3, 4), std::make_shared<nn::Tanh>(),
                     std::make_shared<nn::Linear>(4, 2));
  seq.to(DType::f64);
  CHECK(names_of(seq.named_parameters()) == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});
  // torch's state_dict names load as they are.
  seq.load_state_dict({{"0.weight", wave({4, 3}, 0.1, 0.5)},
                       {"0.bias", wave({4}, 0.2, 0.3)},
                       {"2.weight", wave({2, 4}, 0.3, 0.7)},
                       {"2.bias", wave({2}, 0.4, 0.1)}});
  Tensor x = wave({2, 3}, 0.5, 1.0).requires_grad_();
  Tensor y = seq.forward(x);
  // torch 1.13: nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)).double() with the
  // weights above, y = seq(x); (y * y).sum().backward().
  require_values(y, {2, 2}, {0.5760939717759512, 1.088106860677669, 0.6626455470747359, 1.1567608214910607}, 1e-12);
  (y * y).sum().backward();
  require_values(x.grad(), {2, 3},
                 {0.5719177630543532, 0.47929421862508376, 0.3218004501757322, 0.4397694143247893, 0.3742525601723022,
                  0.25808237769862086},
                 1e-12);
  require_values(seq.at<nn::Linear>(0)->weight.grad(), {4, 3},
                 {1.9307485960480613, 2.1676404024811022, 2.111152249299143, 0.6600777455988653, 0.779397533021167,
                  0.7932295206681671, 1.4524894873915868, 1.6895572727967727, 1.6979514074003847, 1.5703362977335904,
                  1.7634756426067517, 1.7179368320913067},
                 1e-12);
}

TEST_CASE("Sequential gradcheck over the input and every step's parameters (float64)", "[sequential]") {
  manual_seed(3);
  auto inner = std::make_shared<nn::Sequential>(std::make_shared<nn::LayerNorm>(5), std::make_shared<nn::GELU>());
  nn::Sequential seq(std::make_shared<nn::Linear>(4, 5), inner, std::make_shared<nn::Linear>(5, 3));
  seq.to(DType::f64);
  CHECK(names_of(seq.named_parameters()) ==
        std::vector<std::string>{"0.weight", "0.bias", "1.0.weight", "1.0.bias", "2.weight", "2.bias"});
  // A transposed (non-contiguous) input, and one used twice: the output is added to a product of x.
  Tensor x = heed::test::randn64({4, 3}, 5).detach().transpose(0, 1).requires_grad_();
  std::vector<Tensor> inputs{x};
  for (const Tensor& p : seq.parameters()) inputs.push_back(p);
  require_gradcheck([&](const std::vector<Tensor>& in) { return seq.forward(in[0]) + slice(in[0], 1, 0, 3) * 0.5; },
                    inputs);
}

TEST_CASE("Sequential: no steps is the identity, steps apply in order", "[sequential]") {
  nn::Sequential empty;
  Tensor x = Tensor({1.0, -2.0});
  CHECK(empty.size() == 0);
  require_values(empty.forward(x), {2}, {1.0, -2.0});

  nn::Sequential seq;
  seq.push_back(std::make_shared<AddOne>());
  seq.push_back(std::make_shared<nn::ReLU>());
  seq.push_back(nn::Functional::make([](const Tensor& t) { return t * 3.0; }));
  CHECK(seq.size() == 3);
  require_values(seq.forward(Tensor({-4.0, 0.5})), {2}, {0.0, 4.5});  // relu(x + 1) * 3, not relu(3x + 1)
}

TEST_CASE("Sequential: named steps, typed access and train/eval reach every step", "[sequential]") {
  auto drop = std::make_shared<nn::Dropout>(0.5, 11);
  nn::Sequential seq;
  seq.push_back("fc", std::make_shared<nn::Linear>(6, 6));
  seq.push_back("drop", drop);
  CHECK(names_of(seq.named_parameters()) == std::vector<std::string>{"fc.weight", "fc.bias"});
  CHECK(seq.at<nn::Linear>(0)->in_features() == 6);
  CHECK(seq[1] == drop);

  Tensor x = Tensor::ones({4, 6});
  seq.eval();
  CHECK_FALSE(drop->is_training());
  Tensor a = seq.forward(x), b = seq.forward(x);
  CHECK(a.to_vector<float>() == b.to_vector<float>());  // no dropout in eval
  seq.train();
  CHECK(drop->is_training());
  CHECK(drop->active());
}

TEST_CASE("Sequential and Functional refuse what they cannot run", "[sequential]") {
  nn::Sequential seq(std::make_shared<nn::ReLU>());
  REQUIRE_THROWS_WITH((void)seq.at<nn::Linear>(0), Catch::Contains("step 0 ('0') is not of the type asked for"));
  REQUIRE_THROWS_WITH((void)seq[1], Catch::Contains("step 1 out of range for 1 steps"));
  REQUIRE_THROWS_WITH(seq.push_back(std::shared_ptr<nn::Linear>()), Catch::Contains("step '1' is null"));
  REQUIRE_THROWS_WITH(seq.push_back("0", std::make_shared<nn::ReLU>()), Catch::Contains("name '0' registered twice"));
  REQUIRE_THROWS_WITH(nn::Functional(nullptr), Catch::Contains("Functional: the function is empty"));
  CHECK(seq.size() == 1);  // the refused steps were not added
}

// torch's seq[-1] is the last step; heed's index was a size_t, so -1 became 18446744073709551615
// and was refused under that number.
TEST_CASE("Sequential counts a negative step index from the end, as torch does", "[sequential]") {
  auto head = std::make_shared<nn::Linear>(8, 2);
  nn::Sequential seq(std::make_shared<nn::Linear>(4, 8), std::make_shared<nn::ReLU>(), head);
  CHECK(seq[-1] == head);
  CHECK(seq.at<nn::Linear>(-1)->out_features() == 2);
  CHECK(seq.at<nn::Linear>(-3)->in_features() == 4);
  CHECK(seq[-2] == seq[1]);
  REQUIRE_THROWS_WITH((void)seq[-4], Catch::Contains("step -4 out of range for 3 steps"));
  REQUIRE_THROWS_WITH((void)seq.at<nn::Linear>(3), Catch::Contains("step 3 out of range for 3 steps"));
  REQUIRE_THROWS_WITH((void)seq.at<nn::Linear>(-2), Catch::Contains("step -2 ('1') is not of the type asked for"));
}

// torch's `for m in seq:` walks the steps in order; heed's range-for gives each step's module.
static_assert(std::forward_iterator<nn::Sequential::const_iterator>);
TEST_CASE("Sequential iterates over its steps' modules in order, as torch's for m in seq", "[sequential]") {
  auto fc = std::make_shared<nn::Linear>(4, 8);
  auto act = std::make_shared<nn::ReLU>();
  auto head = std::make_shared<nn::Linear>(8, 2);
  nn::Sequential seq(fc, act, head);
  std::vector<std::shared_ptr<nn::Module>> seen;
  for (const auto& m : seq) seen.push_back(m);
  CHECK(seen == std::vector<std::shared_ptr<nn::Module>>{fc, act, head});
  int linears = 0;
  for (auto& m : seq) linears += std::dynamic_pointer_cast<nn::Linear>(m) != nullptr;
  CHECK(linears == 2);
  CHECK(std::distance(seq.begin(), seq.end()) == 3);
  CHECK(seq.begin()->get() == fc.get());
  nn::Sequential empty;
  CHECK(empty.begin() == empty.end());
}
