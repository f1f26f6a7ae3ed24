// Adam and AdamW against torch.optim (torch 1.13), the optimizer base (groups, state by name,
// load_state) and nanoGPT's parameter groups.
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <vector>

#include "core/heed.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "support/helpers.h"

using namespace heed;
using heed::optim::NamedTensors;

namespace {

// The PyTorch reference: a 2x3 matrix (weight decay 0.1) and a 3-vector bias (no decay) in two
// groups, betas (0.9, 0.95), eps 1e-8, five steps with the learning rate changed before each one
// and no gradient for the bias at step 2 (so the bias takes 4 steps: per-parameter step counts).
// Printed by `/usr/bin/python3 adam_cpp.py` with adam_cpp.py =
//   import torch
//   def run(kind, dt):
//       W = torch.tensor([[0.5, -0.25, 1.0], [-1.5, 0.75, 0.125]], dtype=dt, requires_grad=True)
//       b = torch.tensor([0.1, -0.2, 0.3], dtype=dt, requires_grad=True)
//       groups = [{"params": [W], "weight_decay": 0.1}, {"params": [b], "weight_decay": 0.0}]
//       opt = {"adamw": torch.optim.AdamW, "adam": torch.optim.Adam}[kind](groups, lr=1e-2, betas=(0.9, 0.95), eps=1e-8)
//       rows = []
//       for k in range(5):
//           for g in opt.param_groups: g["lr"] = [1e-2, 5e-3, 2e-2, 1e-3, 1e-2][k]
//           W.grad = torch.tensor([((k * 7 + j * 3 + 1) % 11 - 5) * 0.125 for j in range(6)], dtype=dt).reshape(2, 3)
//           b.grad = None if k == 2 else torch.tensor([((k * 5 + j * 2 + 3) % 7 - 3) * 0.25 for j in range(3)], dtype=dt)
//           opt.step()
//           rows.append(W.detach().flatten().tolist() + b.detach().flatten().tolist())
//       s = opt.state[W]
//       rows.append(s["exp_avg"].flatten().tolist() + s["exp_avg_sq"].flatten().tolist())
//       return rows
//   for kind in ["adamw", "adam"]:
//       for name, dt in [("f64", torch.float64), ("f32", torch.float32)]:
//           print(f"// {kind} {name}: rows 0-4 = W (6) then b (3) after each step; row 5 = W's exp_avg, exp_avg_sq")
//           print("{")
//           for r in run(kind, dt):
//               print("  {" + ", ".join(repr(v) for v in r) + "},")
//           print("},")
const std::vector<std::vector<double>> kTorch[4] = {
// adamw f64: rows 0-4 = W (6) then b (3) after each step; row 5 = W's exp_avg, exp_avg_sq
{
  {0.5094999998, -0.23975000079999995, 0.9890000004, -1.50849999984, 0.7592499997333333, 0.124875, 0.1, -0.2099999998, 0.30999999986666665},
  {0.5096934553878929, -0.2353739747740972, 0.9887686582840106, -1.5118083940214517, 0.75790620986407, 0.12848736240888656, 0.10367479990888658, -0.21339323843682398, 0.3107261223417341},
  {0.5125931032436443, -0.22719560755997562, 0.9762379969045618, -1.5130474593778551, 0.7533706416028066, 0.12975064494663666, 0.10367479990888658, -0.21339323843682398, 0.3107261223417341},
  {0.5130592191007649, -0.22667380359725536, 0.9756101188384024, -1.5133668794938606, 0.7535625092020458, 0.1299137673234689, 0.10390236879857291, -0.21420406498444816, 0.3111368875464105},
  {0.5153155068232679, -0.2268116892576357, 0.9731377335145893, -1.515884537368838, 0.7525404633157855, 0.1345819967184652, 0.10798780562655219, -0.2222226882493825, 0.31041510707282205},
  {-0.046842499999999995, 0.006486249999999992, 0.02255249999999999, 0.06474374999999997, 0.004346249999999996, -0.07982499999999998, 0.03859451171875003, 0.042702250976562536, 0.030625019531250023, 0.03479885253906253, 0.03535043457031253, 0.03733632812500003},
},
// adamw f32: rows 0-4 = W (6) then b (3) after each step; row 5 = W's exp_avg, exp_avg_sq
{
  {0.5095000267028809, -0.2397499978542328, 0.9890000224113464, -1.5084999799728394, 0.7592499852180481, 0.12487500160932541, 0.10000000149011612, -0.21000000834465027, 0.3100000023841858},
  {0.5096935033798218, -0.23537397384643555, 0.9887686371803284, -1.5118083953857422, 0.7579061985015869, 0.12848736345767975, 0.10367479920387268, -0.21339324116706848, 0.310726135969162},
  {0.512593150138855, -0.227195605635643, 0.9762380123138428, -1.513047456741333, 0.7533706426620483, 0.12975065410137177, 0.10367479920387268, -0.21339324116706848, 0.310726135969162},
  {0.5130592584609985, -0.22667379677295685, 0.9756101369857788, -1.513366937637329, 0.7535625100135803, 0.12991377711296082, 0.10390236973762512, -0.2142040729522705, 0.3111369013786316},
  {0.5153155326843262, -0.22681167721748352, 0.9731377363204956, -1.5158846378326416, 0.7525404691696167, 0.1345820128917694, 0.10798780620098114, -0.222222700715065, 0.310415118932724},
  {-0.04684250056743622, 0.006486252881586552, 0.022552497684955597, 0.06474374979734421, 0.0043462468311190605, -0.07982499897480011, 0.03859451040625572, 0.04270225018262863, 0.03062501922249794, 0.03479884937405586, 0.035350434482097626, 0.0373363271355629},
},
// adam f64: rows 0-4 = W (6) then b (3) after each step; row 5 = W's exp_avg, exp_avg_sq
{
  {0.5099999997777778, -0.24000000066666663, 0.9900000002857143, -1.5099999997894737, 0.7599999996666666, 0.1150000079999936, 0.1, -0.2099999998, 0.30999999986666665},
  {0.509873786885205, -0.23566932327250098, 0.9883845434226184, -1.5131818524799123, 0.758259221532771, 0.11858906234617693, 0.10367479990888658, -0.21339323843682398, 0.3107261223417341},
  {0.5110176916179432, -0.22697334164047112, 0.9749752592154849, -1.510217874360761, 0.7513558747688784, 0.11945577085431774, 0.10367479990888658, -0.21339323843682398, 0.3107261223417341},
  {0.5114436927215679, -0.2264279030508422, 0.9742878330745601, -1.5103654575350063, 0.7514370895759129, 0.11959513742666437, 0.10390236879857291, -0.21420406498444816, 0.3111368875464105},
  {0.5130253687524413, -0.22625309567160823, 0.9704302615074807, -1.5105673529875803, 0.7493058903101514, 0.12415768149470767, 0.10798780562655219, -0.2222226882493825, 0.31041510707282205},
  {-0.02600052617607267, -0.0031195606286399356, 0.06285417046749102, 0.0029419615518505296, 0.03522587346066447, -0.07493490022472049, 0.036452671430834714, 0.04296031854801341, 0.03581297236870141, 0.028643168775066428, 0.0368532318553942, 0.03638767240062045},
},
// adam f32: rows 0-4 = W (6) then b (3) after each step; row 5 = W's exp_avg, exp_avg_sq
{
  {0.5099999904632568, -0.23999999463558197, 0.9900000095367432, -1.5099999904632568, 0.7599999904632568, 0.11500000953674316, 0.10000000149011612, -0.21000000834465027, 0.3100000023841858},
  {0.5098737478256226, -0.2356693148612976, 0.9883845448493958, -1.5131818056106567, 0.7582592368125916, 0.11858906596899033, 0.10367479920387268, -0.21339324116706848, 0.310726135969162},
  {0.5110176801681519, -0.22697332501411438, 0.9749752879142761, -1.5102177858352661, 0.7513558864593506, 0.11945577710866928, 0.10367479920387268, -0.21339324116706848, 0.310726135969162},
  {0.5114436745643616, -0.22642788290977478, 0.9742878675460815, -1.51036536693573, 0.7514371275901794, 0.11959514021873474, 0.10390236973762512, -0.2142040729522705, 0.3111369013786316},
  {0.5130253434181213, -0.22625307738780975, 0.970430314540863, -1.510567307472229, 0.7493059039115906, 0.12415768206119537, 0.10798780620098114, -0.222222700715065, 0.310415118932724},
  {-0.026000527665019035, -0.0031195601914077997, 0.06285416334867477, 0.002941956976428628, 0.03522587567567825, -0.07493489980697632, 0.03645267337560654, 0.04296031594276428, 0.035812973976135254, 0.0286431685090065, 0.036853231489658356, 0.03638767451047897},
},
};
const double kLrs[5] = {1e-2, 5e-3, 2e-2, 1e-3, 1e-2};

// The gradient formulas of the script above, as exact multiples of 1/8 and 1/4.
std::vector<double> grad_w(int k) {
  std::vector<double> g(6);
  for (int j = 0; j < 6; ++j) g[j] = ((k * 7 + j * 3 + 1) % 11 - 5) * 0.125;
  return g;
}
std::vector<double> grad_b(int k) {
  std::vector<double> g(3);
  for (int j = 0; j < 3; ++j) g[j] = ((k * 5 + j * 2 + 3) % 7 - 3) * 0.25;
  return g;
}

void set_grad(const Tensor& p, const std::vector<double>& values) {
  p.impl().grad = Tensor::from_vector(values, p.shape()).to(p.dtype()).impl_ptr();
}

struct Setup {
  Tensor w, b;
  std::vector<optim::ParamGroup> groups() const { return {{{{"w", w}}, 0.1}, {{{"b", b}}, 0.0}}; }
  explicit Setup(DType dt) {
    w = Tensor::from_vector(std::vector<double>{0.5, -0.25, 1.0, -1.5, 0.75, 0.125}, {2, 3}).to(dt).requires_grad_();
    b = Tensor::from_vector(std::vector<double>{0.1, -0.2, 0.3}, {3}).to(dt).requires_grad_();
  }
};

// Step k of the reference sequence: lr, gradients (none for b at step 2 if skip_b), step().
void reference_step(optim::Optimizer& opt, const Setup& s, int k, bool skip_b = true) {
  opt.set_lr(kLrs[k]);
  set_grad(s.w, grad_w(k));
  if (k == 2 && skip_b) s.b.impl().grad.reset();
  else set_grad(s.b, grad_b(k));
  opt.step();
}

template <class Opt>
void check_against_torch(DType dt, const std::vector<std::vector<double>>& ref) {
  Setup s(dt);
  Opt opt(s.groups(), 1e-2, 0.9, 0.95, 1e-8);
  for (int k = 0; k < 5; ++k) {
    reference_step(opt, s, k);
    INFO("step " << k);
    test::require_values(s.w, {2, 3}, std::vector<double>(ref[k].begin(), ref[k].begin() + 6), 1e-6);
    test::require_values(s.b, {3}, std::vector<double>(ref[k].begin() + 6, ref[k].end()), 1e-6);
  }
  NamedTensors st = opt.state_tensors();
  REQUIRE(st.size() == 4);
  REQUIRE(st[0].first == "w.exp_avg");
  REQUIRE(st[1].first == "w.exp_avg_sq");
  REQUIRE(st[2].first == "b.exp_avg");
  REQUIRE(st[3].first == "b.exp_avg_sq");
  test::require_values(st[0].second, {2, 3}, std::vector<double>(ref[5].begin(), ref[5].begin() + 6), 1e-6);
  test::require_values(st[1].second, {2, 3}, std::vector<double>(ref[5].begin() + 6, ref[5].end()), 1e-6);
  REQUIRE(opt.step_count() == 5);
}

}  // namespace

TEST_CASE("AdamW matches torch.optim.AdamW step by step (float64 and float32)", "[optim]") {
  SECTION("float64") { check_against_torch<optim::AdamW>(DType::f64, kTorch[0]); }
  SECTION("float32") { check_against_torch<optim::AdamW>(DType::f32, kTorch[1]); }
}

TEST_CASE("Adam (L2 weight decay) matches torch.optim.Adam step by step (float64 and float32)", "[optim]") {
  SECTION("float64") { check_against_torch<optim::Adam>(DType::f64, kTorch[2]); }
  SECTION("float32") { check_against_torch<optim::Adam>(DType::f32, kTorch[3]); }
}

// 36 elements: several full SIMD batches (8 doubles or 16 floats with AVX-512) plus a tail, so
// the vector body is checked against PyTorch too, not only the scalar tail.
// `/usr/bin/python3 adam_ref2.py f64` (and `f32`) with adam_ref2.py =
//   import torch, sys
//   dt = {"f64": torch.float64, "f32": torch.float32}[sys.argv[1]]
//   W = torch.tensor([((i * 5) % 13 - 6) * 0.125 for i in range(36)], dtype=dt).reshape(4, 9).requires_grad_()
//   opt = torch.optim.AdamW([{"params": [W], "weight_decay": 0.1}], lr=3e-2, betas=(0.9, 0.99), eps=1e-8)
//   for k in range(5):
//       W.grad = torch.tensor([((k * 7 + i * 3 + 1) % 11 - 5) * 0.0625 for i in range(36)], dtype=dt).reshape(4, 9)
//       opt.step()
//   print(", ".join(repr(v) for v in W.detach().flatten().tolist()))
TEST_CASE("AdamW's vectorised body matches torch.optim.AdamW on a 4x9 matrix", "[optim]") {
  const std::vector<double> ref64{-0.6769221482195817, -0.0426736266748865, 0.42811370461674747, -0.5783605035723188, 0.14975806223845692, 0.7830277409916526, -0.2660278129135766, 0.41640636778826084, -0.6238509844672143, -0.023539153497974336, 0.5595920236030012, -0.3075134993177977, 0.3267350222268974, -0.8032484583891986, -0.208951854670535, 0.5191667111402407, -0.44833442201429363, 0.10338083598820735, 0.7858150166900447, -0.25444233556543044, 0.3458694954038095, -0.671770139402945, 0.061895149583986175, 0.6961436711286814, -0.433839809487415, 0.16045679423124887, -0.7121954518657054, -0.0789257731125097, 0.47278948488999123, -0.4455471463159016, 0.11496631333635339, 0.7152781443055936, -0.30236149050116123, 0.4313037984857701, -0.535218491877265, -0.06443116058563102};
  const std::vector<double> ref32{-0.676922082901001, -0.04267360642552376, 0.4281136393547058, -0.5783605575561523, 0.14975805580615997, 0.7830275893211365, -0.2660277783870697, 0.4164063334465027, -0.62385094165802, -0.023539157584309578, 0.5595919489860535, -0.3075134754180908, 0.3267350196838379, -0.8032483458518982, -0.20895186066627502, 0.5191665887832642, -0.44833439588546753, 0.10338082164525986, 0.7858149409294128, -0.2544423043727875, 0.3458694815635681, -0.6717699766159058, 0.06189514324069023, 0.6961435675621033, -0.43383973836898804, 0.16045677661895752, -0.7121953964233398, -0.07892576605081558, 0.4727894365787506, -0.44554710388183594, 0.11496632546186447, 0.7152780890464783, -0.30236145853996277, 0.4313037097454071, -0.5352184176445007, -0.06443116068840027};
  for (DType dt : {DType::f64, DType::f32}) {
    INFO(dtype_name(dt));
    std::vector<double> init(36);
    for (int i = 0; i < 36; ++i) init[i] = ((i * 5) % 13 - 6) * 0.125;
    Tensor w = Tensor::from_vector(init, {4, 9}).to(dt).requires_grad_();
    optim::AdamW opt({{{{"w", w}}, 0.1}}, 3e-2, 0.9, 0.99, 1e-8);
    for (int k = 0; k < 5; ++k) {
      std::vector<double> g(36);
      for (int i = 0; i < 36; ++i) g[i] = ((k * 7 + i * 3 + 1) % 11 - 5) * 0.0625;
      set_grad(w, g);
      opt.step();
    }
    test::require_values(w, {4, 9}, dt == DType::f64 ? ref64 : ref32, 1e-6);
  }
}

TEST_CASE("param_groups_nanogpt decays dim >= 2 (embeddings included) and nothing else", "[optim]") {
  NamedTensors named{{"wte.weight", Tensor::zeros({10, 4})},
                     {"ln.weight", Tensor::ones({4})},
                     {"fc.weight", Tensor::zeros({8, 4})},
                     {"fc.bias", Tensor::zeros({8})},
                     {"scale", Tensor::scalar(1.0)}};
  auto groups = optim::param_groups_nanogpt(named, 0.1);
  REQUIRE(groups.size() == 2);
  REQUIRE(groups[0].weight_decay == 0.1);
  REQUIRE(groups[1].weight_decay == 0.0);
  REQUIRE(groups[0].params.size() == 2);
  REQUIRE(groups[0].params[0].first == "wte.weight");
  REQUIRE(groups[0].params[1].first == "fc.weight");
  REQUIRE(groups[1].params.size() == 3);
  REQUIRE(groups[1].params[0].first == "ln.weight");
  REQUIRE(groups[1].params[1].first == "fc.bias");
  REQUIRE(groups[1].params[2].first == "scale");
  REQUIRE(groups[0].params[0].second.same(named[0].second));  // the same tensors, not copies
}

TEST_CASE("Optimizer rejects bad groups and hyper-parameters", "[optim]") {
  Tensor a = Tensor::zeros({2, 2}), b = Tensor::zeros({2});
  using G = std::vector<optim::ParamGroup>;
  REQUIRE_THROWS_WITH(optim::AdamW(G{{{{"a", a}, {"a", b}}, 0.0}}), Catch::Contains("'a' is listed twice"));
  REQUIRE_THROWS_WITH(optim::AdamW(G{{{{"a", a}}, 0.0}, {{{"tied", a}}, 0.0}}),
                      Catch::Contains("'tied' is a tensor already listed"));
  REQUIRE_THROWS_WITH(optim::AdamW(G{{{{"a", a}}, -0.1}}), Catch::Contains("weight_decay"));
  REQUIRE_THROWS_WITH(optim::AdamW(G{{{{"u", Tensor()}}, 0.0}}), Catch::Contains("'u' is an undefined tensor"));
  REQUIRE_THROWS_WITH(optim::AdamW(G{{{{"a", a}}, 0.0}}, -1.0), Catch::Contains("learning rate"));
  REQUIRE_THROWS_WITH(optim::Adam(G{{{{"a", a}}, 0.0}}, 1e-3, 1.0), Catch::Contains("beta1"));
  REQUIRE_THROWS_WITH(optim::AdamW(G{{{{"a", a}}, 0.0}}, 1e-3, 0.9, -0.1), Catch::Contains("beta2"));
  optim::AdamW opt(G{{{{"a", a}}, 0.0}});
  REQUIRE_THROWS_WITH(opt.set_lr(std::nan("")), Catch::Contains("learning rate"));
  REQUIRE(opt.lr() == 1e-3);
}

// torch.optim.AdamW(params, lr) decays by 0.01 unless told otherwise; Adam and SGD by 0. A group
// that names its own weight decay keeps it, and param_groups() shows the value each group uses.
TEST_CASE("a group without a weight decay takes the optimizer's: 0.01 for AdamW, 0 for Adam and SGD", "[optim]") {
  using G = std::vector<optim::ParamGroup>;
  auto make = [] { return Tensor::from_vector(std::vector<double>{1.0, -2.0, 3.0, 0.5}, {2, 2}); };
  Tensor a = make(), b = make(), c = make();
  optim::AdamW unset(G{{{{"w", a}}}}, 0.1);
  optim::AdamW explicit_decay(G{{{{"w", b}}, 0.01}}, 0.1);
  optim::AdamW own_default(G{{{{"w", c}}}}, 0.1, 0.9, 0.999, 1e-8, 0.5);
  REQUIRE(unset.param_groups()[0].weight_decay == 0.01);
  REQUIRE(own_default.param_groups()[0].weight_decay == 0.5);
  for (Tensor* t : {&a, &b, &c}) t->requires_grad_();
  for (int step = 0; step < 3; ++step) {
    for (Tensor* t : {&a, &b, &c}) sum(*t * *t).backward();
    unset.step(), explicit_decay.step(), own_default.step();
    unset.zero_grad(), explicit_decay.zero_grad(), own_default.zero_grad();
  }
  REQUIRE(a.to_vector<double>() == b.to_vector<double>());
  REQUIRE(a.to_vector<double>() != c.to_vector<double>());
  Tensor d = make();
  REQUIRE(optim::Adam(G{{{{"w", d}}}}).param_groups()[0].weight_decay == 0.0);
  REQUIRE(optim::SGD(G{{{{"w", d}}}}, 0.1).param_groups()[0].weight_decay == 0.0);
}

TEST_CASE("Optimizer skips parameters without a gradient and zero_grad drops gradients", "[optim]") {
  Setup s(DType::f64);
  optim::AdamW opt(s.groups(), 1e-2, 0.9, 0.95);
  set_grad(s.w, grad_w(0));
  opt.step();
  REQUIRE(s.b.to_vector<double>() == std::vector<double>{0.1, -0.2, 0.3});  // untouched, bit for bit
  REQUIRE(s.w.to_vector<double>() != std::vector<double>{0.5, -0.25, 1.0, -1.5, 0.75, 0.125});
  REQUIRE(opt.state_tensors().size() == 2);  // only w has state
  opt.zero_grad();
  REQUIRE_FALSE(s.w.grad().defined());
  const auto before = s.w.to_vector<double>();
  opt.step();  // nothing has a gradient: nothing moves
  REQUIRE(s.w.to_vector<double>() == before);
  REQUIRE(opt.step_count() == 2);
}

TEST_CASE("Optimizer checks gradients before changing anything", "[optim]") {
  Setup s(DType::f64);
  optim::AdamW opt(s.groups());
  set_grad(s.w, grad_w(0));
  s.b.impl().grad = Tensor::zeros({4}, DType::f64).impl_ptr();  // wrong shape
  REQUIRE_THROWS_WITH(opt.step(), Catch::Contains("gradient of 'b'") && Catch::Contains("[4]"));
  REQUIRE(s.w.to_vector<double>() == std::vector<double>{0.5, -0.25, 1.0, -1.5, 0.75, 0.125});
  REQUIRE(opt.step_count() == 0);
  s.b.impl().grad = Tensor::zeros({3}, DType::f32).impl_ptr();  // wrong dtype
  REQUIRE_THROWS_WITH(opt.step(), Catch::Contains("gradient of 'b'") && Catch::Contains("float32"));
}

TEST_CASE("Optimizer state round-trips through state_tensors / load_state exactly", "[optim]") {
  for (DType dt : {DType::f64, DType::f32}) {
    INFO(dtype_name(dt));
    // An uninterrupted run of five steps in which every parameter has a gradient (a training run;
    // with a skipped parameter its own step count needs state_scalars, tested below)...
    Setup full(dt);
    optim::AdamW opt_full(full.groups(), 1e-2, 0.9, 0.95);
    for (int k = 0; k < 5; ++k) reference_step(opt_full, full, k, false);
    // ...against three steps, a save (copies, as a file would hold), a fresh optimizer, two steps.
    Setup part(dt);
    NamedTensors saved;
    int64_t saved_step;
    {
      optim::AdamW opt(part.groups(), 1e-2, 0.9, 0.95);
      for (int k = 0; k < 3; ++k) reference_step(opt, part, k, false);
      for (auto& [name, t] : opt.state_tensors()) saved.emplace_back(name, t.clone().detach());
      saved_step = opt.step_count();
    }
    REQUIRE(saved.size() == 4);
    REQUIRE(saved_step == 3);
    optim::AdamW resumed(part.groups(), 1e-2, 0.9, 0.95);
    resumed.load_state(saved, saved_step);
    REQUIRE(resumed.step_count() == 3);
    for (int k = 3; k < 5; ++k) reference_step(resumed, part, k, false);
    REQUIRE(part.w.to_vector<double>() == full.w.to_vector<double>());  // bit for bit
    REQUIRE(part.b.to_vector<double>() == full.b.to_vector<double>());
  }
}

TEST_CASE("Adam's per-parameter step counts round-trip through state_scalars", "[optim]") {
  // b skips step 2, so after three steps w has taken 3 and b 2: the optimizer-wide count alone
  // (what checkpoints hold without the scalars) would give b the wrong bias correction.
  Setup full(DType::f64), part(DType::f64);
  optim::AdamW opt_full(full.groups(), 1e-2, 0.9, 0.95);
  for (int k = 0; k < 5; ++k) reference_step(opt_full, full, k);
  NamedTensors saved;
  optim::NamedScalars scalars;
  {
    optim::AdamW opt(part.groups(), 1e-2, 0.9, 0.95);
    for (int k = 0; k < 3; ++k) reference_step(opt, part, k);
    for (auto& [name, t] : opt.state_tensors()) saved.emplace_back(name, t.clone().detach());
    scalars = opt.state_scalars();
  }
  REQUIRE(scalars == optim::NamedScalars{{"w.step", 3.0}, {"b.step", 2.0}});
  optim::AdamW resumed(part.groups(), 1e-2, 0.9, 0.95);
  resumed.load_state(saved, 3, scalars);
  REQUIRE(resumed.state_scalars() == scalars);
  for (int k = 3; k < 5; ++k) reference_step(resumed, part, k);
  REQUIRE(part.w.to_vector<double>() == full.w.to_vector<double>());  // bit for bit
  REQUIRE(part.b.to_vector<double>() == full.b.to_vector<double>());
  // Without the scalars every parameter takes the optimizer's count (3): b's moments are then
  // bias-corrected as if it had taken one more step.
  optim::AdamW approx(part.groups(), 1e-2, 0.9, 0.95);
  approx.load_state(saved, 3);
  REQUIRE(approx.state_scalars() == optim::NamedScalars{{"w.step", 3.0}, {"b.step", 3.0}});
  REQUIRE_THROWS_WITH(approx.load_state(saved, 3, {{"c.step", 1.0}}), Catch::Contains("'c.step' matches no parameter"));
}

TEST_CASE("load_state names the bad entry and leaves the state as it was", "[optim]") {
  Setup s(DType::f64);
  optim::AdamW opt(s.groups());
  reference_step(opt, s, 0);
  const NamedTensors good = opt.state_tensors();
  const auto m_before = good[0].second.clone().to_vector<double>();
  auto attempt = [&](NamedTensors st) { opt.load_state(st, 7); };

  NamedTensors missing{good[0], good[2], good[3]};  // w.exp_avg_sq left out
  REQUIRE_THROWS_WITH(attempt(missing), Catch::Contains("'w.exp_avg_sq' is missing"));
  NamedTensors unknown = good;
  unknown.emplace_back("v.exp_avg", Tensor::zeros({3}, DType::f64));
  REQUIRE_THROWS_WITH(attempt(unknown), Catch::Contains("'v.exp_avg' matches no parameter"));
  NamedTensors misshaped = good;
  misshaped[1].second = Tensor::zeros({3, 2}, DType::f64);
  REQUIRE_THROWS_WITH(attempt(misshaped), Catch::Contains("'w.exp_avg_sq' has shape [3, 2]") &&
                                              Catch::Contains("parameter 'w' has shape [2, 3]"));
  NamedTensors twice = good;
  twice.push_back(good[0]);
  REQUIRE_THROWS_WITH(attempt(twice), Catch::Contains("'w.exp_avg' appears twice"));
  REQUIRE_THROWS_WITH(opt.load_state(good, -1), Catch::Contains("negative step count"));

  REQUIRE(opt.step_count() == 1);
  REQUIRE(opt.state_tensors()[0].second.to_vector<double>() == m_before);

  // A parameter with neither entry simply has no state yet; float32 entries are converted.
  NamedTensors only_w{{"w.exp_avg", good[0].second.to(DType::f32)}, {"w.exp_avg_sq", good[1].second.to(DType::f32)}};
  opt.load_state(only_w, 7);
  REQUIRE(opt.step_count() == 7);
  NamedTensors now = opt.state_tensors();
  REQUIRE(now.size() == 2);
  REQUIRE(now[0].second.dtype() == DType::f64);
  test::require_values(now[0].second, {2, 3}, m_before, 1e-7);
}

// A group with its own 'lr', as torch's param_groups, and set_lr of one group. Printed by
// /usr/bin/python3 with the script of the test above changed to: groups = [{"params": [W],
// "weight_decay": 0.1}, {"params": [b], "weight_decay": 0.0, "lr": 5e-2}]; AdamW(groups, lr=1e-2,
// betas=(0.9, 0.95)) or SGD(groups, lr=1e-2, momentum=0.9); four steps of the gradients above (b's
// at every step), with opt.param_groups[1]["lr"] = 2e-2 before the third; W and b after the last.
TEST_CASE("a group's own learning rate, as torch's per-group 'lr'", "[optim]") {
  using G = std::vector<optim::ParamGroup>;
  const std::vector<double> adamw_expected = {0.5159989565810755,  -0.22169538400634986, 0.9759874019389029,
                                              -1.5189245280938695, 0.7562137303083852,   0.134356000383784,
                                              0.12614466253044723, -0.2896060098386102,  0.36688029448177234};
  const std::vector<double> sgd_expected = {0.5111077863954999, -0.2287874799515,    0.9760366365535,
                                            -1.50914608432025,  0.747555021347,      0.13153035791262502,
                                            0.10859999999999999, -0.25889,           0.3622349999999999};
  for (const bool adamw : {true, false}) {
    INFO((adamw ? "AdamW" : "SGD"));
    Tensor W = Tensor::from_vector(std::vector<double>{0.5, -0.25, 1.0, -1.5, 0.75, 0.125}, {2, 3}).requires_grad_();
    Tensor b = Tensor::from_vector(std::vector<double>{0.1, -0.2, 0.3}, {3}).requires_grad_();
    G groups{{{{"W", W}}, 0.1}, {{{"b", b}}, 0.0, 5e-2}};
    std::unique_ptr<optim::Optimizer> opt;
    if (adamw) {
      opt = std::make_unique<optim::AdamW>(groups, 1e-2, 0.9, 0.95);
    } else {
      opt = std::make_unique<optim::SGD>(groups, 1e-2, 0.9);
    }
    REQUIRE(opt->lr() == 1e-2);  // the first group's: the optimizer's argument
    REQUIRE(opt->lr(1) == 5e-2);
    REQUIRE(opt->param_groups()[0].lr == 1e-2);
    for (int k = 0; k < 4; ++k) {
      if (k == 2) opt->set_lr(1, 2e-2);
      std::vector<double> gw, gb;
      for (int j = 0; j < 6; ++j) gw.push_back(((k * 7 + j * 3 + 1) % 11 - 5) * 0.125);
      for (int j = 0; j < 3; ++j) gb.push_back(((k * 5 + j * 2 + 3) % 7 - 3) * 0.25);
      set_grad(W, gw);
      set_grad(b, gb);
      opt->step();
    }
    REQUIRE(opt->lr(0) == 1e-2);
    REQUIRE(opt->lr(1) == 2e-2);
    std::vector<double> got = W.to_vector<double>();
    for (double v : b.to_vector<double>()) got.push_back(v);
    const std::vector<double>& want = adamw ? adamw_expected : sgd_expected;
    for (size_t i = 0; i < want.size(); ++i) REQUIRE(got[i] == Approx(want[i]).epsilon(1e-14).margin(1e-15));
    // set_lr without a group sets every group's, as `for g in opt.param_groups: g["lr"] = lr`.
    opt->set_lr(3e-3);
    REQUIRE(opt->lr(0) == 3e-3);
    REQUIRE(opt->lr(1) == 3e-3);
    REQUIRE_THROWS_WITH(opt->set_lr(2, 1e-3), Catch::Contains("no group 2 (2 groups)"));
    REQUIRE_THROWS_WITH(opt->set_lr(1, -1.0), Catch::Contains("invalid learning rate -1 for group 1"));
    REQUIRE_THROWS_WITH(opt->lr(5), Catch::Contains("no group 5"));
  }
  Tensor a = Tensor::zeros({2});
  REQUIRE_THROWS_WITH(optim::AdamW(G{{{{"a", a}}, 0.0, std::nan("")}}), Catch::Contains("invalid learning rate nan in group 0"));
}
