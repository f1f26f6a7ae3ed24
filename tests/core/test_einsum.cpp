// einsum (core/ops/einsum.cpp): values against PyTorch 1.13's torch.einsum for every form of the
// equation, float64 gradchecks of each form (a transposed input, a tensor used twice, broadcast
// axes), batched contractions against matmul (the same GEMM path, so the same bits), and one
// test per refused equation.
#include <cmath>
#include <string>
#include <vector>

#include "support/helpers.h"

using namespace heed;
using heed::test::cos_wave;
using heed::test::randn64;
using heed::test::require_gradcheck;
using heed::test::require_values;
using heed::test::sine_input;
using heed::test::transposed64;

namespace {

constexpr double kTol = 1e-10;

// The einsum of `eq` as a gradcheck function of its inputs.
GradcheckFn einsum_of(const std::string& eq) {
  return [eq](const std::vector<Tensor>& in) { return einsum(eq, in); };
}

// einsum(eq, operands) throws one heed::Error line that starts with "einsum: " and contains `part`.
void require_refused(const std::string& eq, const std::vector<Tensor>& operands, const std::string& part) {
  INFO("equation \"" << eq << "\"");
  std::string message;
  try {
    einsum(eq, operands);
  } catch (const heed::Error& e) {
    message = e.what();
  }
  INFO("message: " << message);
  REQUIRE_FALSE(message.empty());
  CHECK(message.rfind("einsum: ", 0) == 0);
  CHECK(message.find(part) != std::string::npos);
  CHECK(message.find('\n') == std::string::npos);
}

}  // namespace

// ------------------------------------------------------------------------------------------ values
// In the torch calls, x = (3 * torch.sin(0.7 * torch.arange(24, dtype=torch.float64) + 0.3)).reshape(2, 3, 4)
// (sine_input) and cos_wave(shape, phase) as above.

// torch.einsum("ij,jk->ik", x[0], cos_wave((4, 2), 0.1)); torch.einsum(" i j , j k ", ...) (the same);
// torch.einsum("Ab,bc", x[0], cos_wave((4, 2), 0.7)) (implicit: upper case first, "Ac").
TEST_CASE("einsum matrix products: explicit, implicit with spaces, upper case letters", "[einsum]") {
  const Tensor x = sine_input(), w = cos_wave({4, 2}, 0.1);
  const std::vector<double> expected{1.15961831029, -1.2429403252, 0.730977793765, 2.93348510643, -2.53710552593, -4.2850500814};
  require_values(einsum("ij,jk->ik", {x[0], w}), {3, 2}, expected, kTol);
  require_values(einsum(" i j , j k ", {x[0], w}), {3, 2}, expected, kTol);
  require_values(einsum("Ab,bc", {x[0], cos_wave({4, 2}, 0.7)}), {3, 2},
                 {-2.67185447501, -4.64596728789, 4.11963552243, 5.55023007235, -5.09137077428, -5.81313425215}, kTol);
  // Implicit order is upper case, then lower case, each alphabetical: "bA" -> "Ab" is a transpose.
  REQUIRE(einsum("bA", {x[0]}).shape() == Shape{4, 3});
}

// torch.einsum("bij,bjk->bik", x, cos_wave((2, 4, 3), 0.2));
// torch.einsum("bhqd,bhkd->bhqk", x.reshape(1, 2, 3, 4), cos_wave((1, 2, 2, 4), 0.3)).
TEST_CASE("einsum batched contractions: bmm and attention scores", "[einsum]") {
  const Tensor x = sine_input();
  require_values(einsum("bij,bjk->bik", {x, cos_wave({2, 4, 3}, 0.2)}), {2, 3, 3},
                 {-2.58913303738, -3.79275329762, -4.48304219164, 4.30355578589, 4.98224875922, 4.98661773577,
                  -5.52067977418, -5.59601887779, -4.9139630784, -1.31099583458, 0.93554070448, 3.055456198,
                  -0.210453822175, -2.46052072277, -4.37756768636, 1.70758442044, 3.70117448486, 5.19382794575},
                 kTol);
  require_values(einsum("bhqd,bhkd->bhqk", {reshape(x, {1, 2, 3, 4}), cos_wave({1, 2, 2, 4}, 0.3)}), {1, 2, 3, 2},
                 {4.65608942622, -5.94699941482, -3.22846318307, 5.92978707461, 1.42777084802, -5.22735629938,
                  0.173116517292, -3.88948318953, 2.04948812239, 2.53297978116, -4.035263509, -0.883777087016},
                 kTol);
}

// torch.einsum("ii->i", x.reshape(4, 6)[:, :4]); torch.einsum("ii", x.reshape(4, 6)[:, :4]);
// torch.einsum("bii->bi", x[:, :, :3]).
TEST_CASE("einsum repeated subscripts: diagonal, trace, batched diagonal of sliced inputs", "[einsum]") {
  const Tensor x = sine_input();
  const Tensor square = slice(reshape(x, {4, 6}), 1, 0, 4);
  REQUIRE_FALSE(square.is_contiguous());
  require_values(einsum("ii->i", {square}), {4}, {0.886560619984, -2.65036396716, -1.87521194668, 1.95086352047}, kTol);
  require_values(einsum("ii", {square}), {}, {-1.68815177338}, kTol);
  require_values(einsum("bii->bi", {slice(x, 2, 0, 3)}), {2, 3},
                 {0.886560619984, -1.83557367283, 2.55130986189, 1.98890769025, -1.07468784671, 0.0238895513578}, kTol);
}

// torch.einsum("...ij,...jk->...ik", x, cos_wave((1, 4, 2), 0.4)); torch.einsum("...ij,jk", x, cos_wave((4, 2), 0.5));
// torch.einsum("i...", x[0]); torch.einsum("...ij->ij", x); torch.einsum("ij->...ij", x[1]).
TEST_CASE("einsum ellipsis: broadcast batch axes, implicit output first, summed, absent", "[einsum]") {
  const Tensor x = sine_input();
  require_values(einsum("...ij,...jk->...ik", {x, cos_wave({1, 4, 2}, 0.4)}), {2, 3, 2},
                 {-0.791467813661, -3.08211173765, 2.53869362858, 4.44017122519, -3.99255989227, -5.28514531188,
                  4.98506462532, 5.51939274788, -5.40151862704, -5.11584499608, 5.19379842255, 4.12113414552},
                 kTol);
  require_values(einsum("...ij,jk", {x, cos_wave({4, 2}, 0.5)}), {2, 3, 2},
                 {-1.43469289867, -3.64152379457, 3.09839338627, 4.85998671106, -4.40405803878, -5.51685231445,
                  5.20081036121, 5.53621629063, -5.39658138504, -4.91584102916, 4.96874872724, 3.72741419107},
                 kTol);
  require_values(einsum("i...", {x[0]}), {4, 3},
                 {0.886560619984, 0.1247419873, -1.12162999449, 2.52441295442, -1.83557367283, 0.93462409054,
                  2.97499443136, -2.932590353, 2.55130986189, 2.02638954165, -2.65036396716, 2.96807473987},
                 kTol);
  require_values(einsum("...ij->ij", {x}), {3, 4},
                 {2.87546831023, 2.59873923078, 1.09978248468, -0.916419148546, -2.50161453677, -2.91026151954,
                  -1.95016703558, -0.072878522591, 1.83868589833, 2.88548761101, 2.57519941324, 1.05375469283},
                 kTol);
  require_values(einsum("ij->...ij", {x[1]}), {3, 4}, x[1].to_vector<double>(), 0.0);
}

// torch.einsum("i...i->...i", cos_wave((3, 2, 3), 0.2)) (a diagonal across the ellipsis);
// torch.einsum("bqhd,bkhd->bhqk", cos_wave((1, 2, 2, 3), 0.3), cos_wave((1, 3, 2, 3), 0.4)) (heads on axis 2,
// as Hugging Face's layout: both operands permuted views into one matmul).
TEST_CASE("einsum diagonal across an ellipsis, and attention scores from (B, T, H, D) operands", "[einsum]") {
  require_values(einsum("i...i->...i", {cos_wave({3, 2, 3}, 0.2)}), {2, 3},
                 {0.980066577841, -0.938825404274, 0.61911168218, 0.257850032533, -0.7259323042, 0.978689960781}, kTol);
  const Tensor s = einsum("bqhd,bkhd->bhqk", {cos_wave({1, 2, 2, 3}, 0.3), cos_wave({1, 3, 2, 3}, 0.4)});
  require_values(s, {1, 2, 2, 3},
                 {1.6540319105, -2.09732929786, 0.881858469858, -1.85875773984, 2.63166932786, -1.32320559782,
                  0.416760770814, 0.11757925918, -0.558926387147, 0.356150817209, 1.19088447085, -1.79605464005},
                 kTol);
  require_gradcheck(einsum_of("i...i->...i"), {randn64({3, 2, 3}, 61)});
  require_gradcheck(einsum_of("bqhd,bkhd->bhqk"), {randn64({1, 2, 2, 3}, 62), randn64({1, 3, 2, 3}, 63)});
}

// torch.einsum("i,j->ij", x[0, 0], cos_wave((3,), 0.6)); torch.einsum("ij->j", x[1]);
// torch.einsum("ij->", x[1]); torch.einsum("ij,ij->", x[0], x[0]); torch.einsum("ij->ji", x[0]);
// torch.einsum("->", torch.tensor(2.5, dtype=torch.float64)).
TEST_CASE("einsum outer product, sums, dot product of a tensor with itself, transpose, scalar", "[einsum]") {
  const Tensor x = sine_input();
  require_values(einsum("i,j->ij", {x[0][0], cos_wave({3}, 0.6)}), {4, 3},
                 {0.731710054449, 0.501172302822, 0.202803231114, 2.08348791803, 1.42704945959, 0.577466551392,
                  2.45536885836, 1.68176295725, 0.680538329388, 1.67245145841, 1.14551705784, 0.463542297367},
                 kTol);
  require_values(einsum("ij->j", {x[1]}), {4}, {2.32286705901, 0.950501950121, -0.868899077908, -2.27964329267}, kTol);
  require_values(einsum("ij->", {x[1]}), {}, {0.124826638544}, kTol);
  require_values(einsum("ij,ij->", {x[0], x[0]}), {}, {56.5751292551}, kTol);
  const Tensor t = einsum("ij->ji", {x[0]});
  require_values(t, {4, 3}, transpose(x[0], 0, 1).to_vector<double>(), 0.0);
  require_values(einsum("->", {Tensor::scalar(2.5, DType::f64)}), {}, {2.5}, 0.0);
  require_values(einsum("", {Tensor::scalar(2.5, DType::f64)}), {}, {2.5}, 0.0);
}

// torch.einsum("ij,jk,kl->il", x[0], cos_wave((4, 2), 0.8), cos_wave((2, 3), 0.9));
// torch.einsum("i,i,i->", x[0, 0], x[1, 0], x[0, 1]).
TEST_CASE("einsum of three operands, contracted left to right", "[einsum]") {
  const Tensor x = sine_input();
  require_values(einsum("ij,jk,kl->il", {x[0], cos_wave({4, 2}, 0.8), cos_wave({2, 3}, 0.9)}), {3, 3},
                 {0.138156802777, 2.71335615636, 4.92131548311, 0.369242103892, -2.85334708168, -5.68974912541,
                  -0.833973121583, 2.66361857573, 5.80070199442},
                 kTol);
  require_values(einsum("i,i,i->", {x[0][0], x[1][0], x[0][1]}), {}, {32.0405747624}, kTol);
}

// torch.einsum("ij,jk->ik", x[0, :, :1], cos_wave((4, 2), 1.0)) (j: 1 against 4, summed);
// torch.einsum("bi,bi->bi", x[0, :1, :], cos_wave((3, 4), 1.1)) (b: 1 against 3, kept).
TEST_CASE("einsum broadcasts size-1 axes against a subscript's size elsewhere", "[einsum]") {
  const Tensor x = sine_input();
  require_values(einsum("ij,jk->ik", {slice(x[0], 1, 0, 1), cos_wave({4, 2}, 1.0)}), {3, 2},
                 {-1.25363005822, -1.9264333154, -0.17638986131, -0.271055486502, 1.58602699421, 2.43722238529}, kTol);
  require_values(einsum("bi,bi->bi", {slice(x[0], 0, 0, 1), cos_wave({3, 4}, 1.1)}), {3, 4},
                 {0.402140458633, 0.25402090491, -0.791241048879, -1.20885589665, -0.75039203778, -2.47822175864,
                  -2.92777406126, -1.7292314714, -0.538218988735, -0.703429690187, 0.260308988482, 0.895271443473},
                 kTol);
}

// torch.einsum("ij,jk->ik", torch.zeros(2, 0), torch.zeros(0, 3)) (zeros (2, 3));
// torch.einsum("i,i->", torch.zeros(0), torch.zeros(0)) (0); torch.einsum("i,i->i", torch.zeros(0),
// torch.zeros(1)) (shape (0)); torch.einsum("bij,bjk->bik", torch.zeros(0, 2, 3), torch.zeros(0, 3, 4)).
TEST_CASE("einsum with empty axes: sums over nothing are zero", "[einsum]") {
  Tensor a = Tensor::ones({2, 0}).requires_grad_();
  const Tensor p = einsum("ij,jk->ik", {a, Tensor::ones({0, 3})});
  require_values(p, {2, 3}, std::vector<double>(6, 0.0), 0.0);
  sum(p).backward();
  REQUIRE(a.grad().shape() == Shape{2, 0});
  require_values(einsum("i,i->", {Tensor::ones({0}), Tensor::ones({0})}), {}, {0.0}, 0.0);
  REQUIRE(einsum("i,i->i", {Tensor::ones({0}), Tensor::ones({1})}).shape() == Shape{0});
  REQUIRE(einsum("bij,bjk->bik", {Tensor::ones({0, 2, 3}), Tensor::ones({0, 3, 4})}).shape() == Shape{0, 2, 4});
}

// torch.einsum("bij,bjk->bik", torch.ones(1, 2, 3), torch.ones(0, 3, 2)) is zeros (0, 2, 2), as
// is the same with the operands' batch sizes swapped: b of size 1 broadcasts against 0 (heed took
// max(1, 0) = 1, and reshape refused the matmul's empty result).
TEST_CASE("einsum broadcasts a batch subscript of size 1 against size 0 to an empty result", "[einsum]") {
  Tensor a = Tensor::ones({1, 2, 3}).requires_grad_();
  const Tensor p = einsum("bij,bjk->bik", {a, Tensor::ones({0, 3, 2})});
  REQUIRE(p.shape() == Shape{0, 2, 2});
  sum(p).backward();
  require_values(a.grad(), {1, 2, 3}, std::vector<double>(6, 0.0), 0.0);
  REQUIRE(einsum("bij,bjk->bik", {Tensor::ones({0, 2, 3}), Tensor::ones({1, 3, 2})}).shape() == Shape{0, 2, 2});
  REQUIRE(einsum("bij,bjk,bkl->bil", {Tensor::ones({1, 2, 3}), Tensor::ones({1, 3, 2}), Tensor::ones({0, 2, 2})})
              .shape() == Shape{0, 2, 2});
}

TEST_CASE("einsum in float32 gives float32, close to the float64 values", "[einsum]") {
  const Tensor x = sine_input(DType::f32);
  const Tensor y = einsum("bij,bkj->bik", {x, x});
  REQUIRE(y.dtype() == DType::f32);
  const Tensor x64 = sine_input();
  require_values(y, {2, 3, 3}, einsum("bij,bkj->bik", {x64, x64}).to_vector<double>(), 1e-5);
}

// ------------------------------------------------------------------------------------------ GEMM

TEST_CASE("einsum batched contractions are matmul: same values, same op, same gradients", "[einsum]") {
  Generator gen(11);
  const Tensor a = Tensor::randn({3, 17, 9}, gen).requires_grad_(), b = Tensor::randn({3, 9, 13}, gen).requires_grad_();
  const Tensor y = einsum("bij,bjk->bik", {a, b});
  REQUIRE(y.grad_fn() != nullptr);
  CHECK(std::string(y.grad_fn()->name()) == "matmul");
  const Tensor ref = matmul(a, b);
  REQUIRE(y.to_vector<float>() == ref.to_vector<float>());

  // Attention scores: k's last two axes reach the product as a transposed view.
  Tensor q = Tensor::randn({2, 4, 7, 8}, gen).requires_grad_(), k = Tensor::randn({2, 4, 5, 8}, gen).requires_grad_();
  const Tensor s = einsum("bhqd,bhkd->bhqk", {q, k});
  CHECK(std::string(s.grad_fn()->name()) == "matmul");
  const Tensor s_ref = matmul(q, transpose(k, -1, -2));
  REQUIRE(s.to_vector<float>() == s_ref.to_vector<float>());

  // The gradients are matmul's too.
  const Tensor w = Tensor::randn({2, 4, 7, 5}, gen);
  sum(s * w).backward();
  const Tensor gq = q.grad(), gk = k.grad();
  q.zero_grad();
  k.zero_grad();
  sum(s_ref * w).backward();
  REQUIRE(gq.to_vector<float>() == q.grad().to_vector<float>());
  REQUIRE(gk.to_vector<float>() == k.grad().to_vector<float>());
}

// ------------------------------------------------------------------------------------------ gradients

TEST_CASE("einsum gradchecks: products, batched and attention forms, transposed inputs", "[einsum]") {
  require_gradcheck(einsum_of("ij,jk->ik"), {randn64({3, 4}, 1), randn64({4, 2}, 2)});
  require_gradcheck(einsum_of("ij,jk"), {randn64({3, 4}, 3), randn64({4, 2}, 4)});
  require_gradcheck(einsum_of("Ab,bc"), {randn64({3, 4}, 5), randn64({4, 2}, 6)});
  require_gradcheck(einsum_of("bij,bjk->bik"), {randn64({2, 3, 4}, 7), randn64({2, 4, 3}, 8)});
  require_gradcheck(einsum_of("bhqd,bhkd->bhqk"), {randn64({2, 2, 3, 4}, 9), randn64({2, 2, 5, 4}, 10)});
  // transposed64 is a (2, 3, 4) view of a (4, 3, 2) tensor: its strides are not contiguous.
  require_gradcheck(einsum_of("bij,bkj->bik"), {transposed64(11), randn64({2, 5, 4}, 12)});
  require_gradcheck(einsum_of("bij,bjk->bki"), {randn64({2, 2, 3}, 13), transposed64(14)});
  require_gradcheck(einsum_of("ijk->kji"), {transposed64(15)});
}

TEST_CASE("einsum gradchecks: diagonals, traces, sums, outer products", "[einsum]") {
  require_gradcheck(einsum_of("ii->i"), {randn64({4, 4}, 21)});
  require_gradcheck(einsum_of("ii"), {randn64({4, 4}, 22)});
  require_gradcheck(einsum_of("bii->bi"), {randn64({2, 3, 3}, 23)});
  require_gradcheck(einsum_of("iji->j"), {randn64({3, 2, 3}, 24)});
  require_gradcheck(einsum_of("ii,ij->j"), {randn64({3, 3}, 25), randn64({3, 4}, 26)});
  require_gradcheck(einsum_of("ij->"), {randn64({3, 4}, 27)});
  require_gradcheck(einsum_of("ij->j"), {randn64({3, 4}, 28)});
  require_gradcheck(einsum_of("i,j->ij"), {randn64({4}, 29), randn64({3}, 30)});
  require_gradcheck(einsum_of("i,j,k"), {randn64({2}, 31), randn64({3}, 32), randn64({2}, 33)});
  // A diagonal of a non-contiguous input.
  require_gradcheck(einsum_of("kjk->j"), {transpose(randn64({2, 3, 2}, 34).detach(), 0, 2).detach().requires_grad_()});
}

TEST_CASE("einsum gradchecks: a tensor used twice, three operands, ellipses, size-1 broadcasting", "[einsum]") {
  require_gradcheck([](const std::vector<Tensor>& in) { return einsum("ij,ij->", {in[0], in[0]}); }, {randn64({3, 4}, 41)});
  require_gradcheck([](const std::vector<Tensor>& in) { return einsum("ij,jk->ik", {in[0], in[0]}); }, {randn64({3, 3}, 42)});
  require_gradcheck(einsum_of("ij,jk,kl->il"), {randn64({3, 4}, 43), randn64({4, 2}, 44), randn64({2, 3}, 45)});
  require_gradcheck(einsum_of("...ij,...jk->...ik"), {randn64({2, 3, 4}, 46), randn64({1, 4, 2}, 47)});
  require_gradcheck(einsum_of("...ij,jk"), {randn64({2, 3, 4}, 48), randn64({4, 2}, 49)});
  require_gradcheck(einsum_of("i..."), {randn64({3, 2, 2}, 50)});
  require_gradcheck(einsum_of("...ij->ij"), {transposed64(51)});
  require_gradcheck(einsum_of("ij->...ij"), {randn64({3, 4}, 52)});
  require_gradcheck(einsum_of("ij,jk->ik"), {randn64({3, 1}, 53), randn64({4, 2}, 54)});
  require_gradcheck(einsum_of("bi,bi->bi"), {randn64({1, 4}, 55), randn64({3, 4}, 56)});
  require_gradcheck(einsum_of("...,..."), {randn64({2, 1}, 57), randn64({3}, 58)});
}

// ------------------------------------------------------------------------------------------ refusals

TEST_CASE("einsum refuses an unknown character", "[einsum]") {
  const Tensor a = Tensor::zeros({2, 3});
  require_refused("ij#", {a}, "invalid character '#' at index 2");
  require_refused("i1", {Tensor::zeros({2, 3})}, "invalid character '1'");
  require_refused("ij->j\n", {a}, "invalid character (byte 10)");
  require_refused("i-j", {a}, "a stray '-'");
}

TEST_CASE("einsum refuses a wrong number of operands", "[einsum]") {
  const Tensor a = Tensor::zeros({2, 3});
  require_refused("ij,jk->ik", {a}, "has subscripts for 2 operands but 1 was given");
  require_refused("ij", {a, a}, "has subscripts for 1 operand but 2 were given");
  require_refused("ij", {}, "but 0 were given");
}

TEST_CASE("einsum refuses subscripts that do not match an operand's rank", "[einsum]") {
  require_refused("ijk", {Tensor::zeros({2, 3})}, "operand 0 has 2 dims [2, 3] but its subscripts \"ijk\" name 3");
  require_refused("ij,j", {Tensor::zeros({2, 3}), Tensor::zeros({3, 1})}, "operand 1 has 2 dims [3, 1]");
  require_refused("ijk...", {Tensor::zeros({2, 3})}, "fewer than the 3 letters of its subscripts \"ijk...\"");
}

TEST_CASE("einsum refuses an output subscript that is in no input", "[einsum]") {
  require_refused("ij->k", {Tensor::zeros({2, 3})}, "output subscript 'k' in \"ij->k\" does not appear in any input");
}

TEST_CASE("einsum refuses a repeated output subscript", "[einsum]") {
  require_refused("ij->ii", {Tensor::zeros({2, 3})}, "output subscript 'i' appears more than once");
}

TEST_CASE("einsum refuses one subscript with two sizes", "[einsum]") {
  require_refused("ij,jk", {Tensor::zeros({2, 3}), Tensor::zeros({4, 4})},
                  "subscript 'j' has size 4 in operand 1 [4, 4] but 3 in operand 0 [2, 3]");
  require_refused("ii->i", {Tensor::zeros({3, 4})}, "subscript 'i' is repeated in operand 0 [3, 4] over axes of different sizes, 3 and 4");
  require_refused("...i,...i", {Tensor::zeros({2, 3}), Tensor::zeros({4, 3})}, "the ellipsis's dim 0 has size 4 in operand 1");
}

TEST_CASE("einsum refuses two ellipses in one operand, and a lone dot", "[einsum]") {
  require_refused("...i...", {Tensor::zeros({2, 3})}, "operand 0's subscripts in \"...i...\" have more than one ellipsis");
  require_refused("i->......", {Tensor::zeros({2})}, "the output's subscripts");
  require_refused("..i", {Tensor::zeros({2, 3})}, "is not part of an ellipsis");
}

TEST_CASE("einsum refuses a second arrow and a comma in the output", "[einsum]") {
  require_refused("ij->ji->ij", {Tensor::zeros({2, 3})}, "a second '->'");
  require_refused("ij->i,j", {Tensor::zeros({2, 3})}, "is in the output's subscripts");
}

TEST_CASE("einsum refuses mixed dtypes and integer operands", "[einsum]") {
  require_refused("ij,jk", {Tensor::zeros({2, 3}), Tensor::zeros({3, 2}, DType::f64)},
                  "operand 1 is float64 but operand 0 is float32");
  require_refused("ij", {Tensor::zeros({2, 3}, DType::i64)}, "expected a float32 or float64 tensor, got int64");
  require_refused("ij", {Tensor()}, "operand 0 is an undefined tensor");
}
