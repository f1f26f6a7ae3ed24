// examples/attention_tutorial (the port of an attention tutorial) against PyTorch: the values
// below are printed by `/usr/bin/python3 scripts/attention_tutorial_torch.py` (torch 1.13, CPU),
// which runs the tutorial's PyTorch code with the same formula weights.
#include <catch2/catch.hpp>

#include "examples/attention_tutorial/attention_tutorial.h"

using heed::Tensor;

namespace {
void require_torch(const Tensor& t, const std::vector<double>& torch_values, double tol) {
  const auto v = t.to_vector<double>();
  REQUIRE(v.size() == torch_values.size());
  double worst = 0;
  for (size_t i = 0; i < v.size(); ++i) worst = std::max(worst, std::abs(v[i] - torch_values[i]));
  INFO("worst difference " << worst);
  REQUIRE(worst <= tol);
}
}  // namespace

TEST_CASE("attention tutorial: every stage matches PyTorch", "[tutorial]") {
  require_torch(tutorial::simple_context(),
                {0.44205943, 0.59309864, 0.57898915, 0.44186574, 0.65148199, 0.56830889, 0.44312754, 0.64959466,
                 0.56707311, 0.43038973, 0.62982810, 0.55102706, 0.46710175, 0.59099275, 0.52659655, 0.41772449,
                 0.65032321, 0.56453520},
                2e-6);
  const std::vector<double> causal = {0.19328748, -0.51231039, 0.29405653, -0.59837025, 0.32305080, -0.61797357,
                                      0.29081109, -0.55911261, 0.29532370, -0.49763441, 0.27993652, -0.50451797};
  std::vector<double> causal2 = causal;
  causal2.insert(causal2.end(), causal.begin(), causal.end());
  Tensor ca = tutorial::causal_context();
  REQUIRE(ca.shape() == heed::Shape{2, 6, 2});
  require_torch(ca, causal2, 2e-6);
  const std::vector<double> mha = {
      0.02357504, 0.00911236, -0.45694530, -0.23701116, 0.14168751, 0.04487649, -0.56857222, -0.29301807,
      0.17720032, 0.05297670, -0.60261601, -0.30729190, 0.11956978, 0.02291396, -0.55043721, -0.26776689,
      0.09028417, -0.01302429, -0.52766877, -0.22769973, 0.08038098, -0.00756538, -0.51677567, -0.23118326};
  std::vector<double> mha2 = mha;
  mha2.insert(mha2.end(), mha.begin(), mha.end());
  require_torch(tutorial::mha_context(), mha2, 2e-6);
  // Five SGD steps: the losses fall as PyTorch's do.
  require_torch(Tensor::from_vector(tutorial::train_losses(5, 0.0), {5}),
                {0.24026005, 0.03886174, 0.00952952, 0.00283043, 0.00139256}, 2e-6);
}

TEST_CASE("attention tutorial: training with dropout still learns", "[tutorial]") {
  heed::manual_seed(7);
  const auto losses = tutorial::train_losses(5, 0.1);
  REQUIRE(losses.back() < 0.25 * losses.front());
}
