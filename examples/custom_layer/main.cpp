// Gradient-checks the user-defined RMSNorm op and layer in float64, then trains a tiny model that
// uses it for a few steps. Exits non-zero if a check fails or the loss does not fall.
#include <cmath>
#include <cstdio>

#include "rms_norm.h"

using namespace heed;

int main() {
  // 1. The op, on a transposed (non-contiguous) input and a weight.
  Generator gen(42);
  Tensor x = transpose(Tensor::randn({5, 3}, gen, 1.0, 0.0, DType::f64), 0, 1).detach().requires_grad_();
  Tensor w = Tensor::randn({5}, gen, 1.0, 1.0, DType::f64).requires_grad_();
  auto op = gradcheck([](const std::vector<Tensor>& in) { return rms_norm(in[0], in[1]); }, {x, w});
  std::printf("op:    %s\n", op.report().c_str());

  // 2. The layer, converted to float64 for the check.
  RMSNorm norm(5);
  norm.to(DType::f64);
  Tensor xl = Tensor::randn({2, 3, 5}, gen, 1.0, 0.0, DType::f64).requires_grad_();
  auto layer = gradcheck([&](const std::vector<Tensor>& in) { return norm.forward(in[0]); },
                         {xl, norm.weight});
  std::printf("layer: %s\n", layer.report().c_str());

  // 3. Train x -> RMSNorm(x @ W1) @ W2 to fit a fixed random target, with plain SGD.
  RMSNorm train_norm(16);
  Tensor W1 = Tensor::randn({8, 16}, gen, 0.3).requires_grad_();
  Tensor W2 = Tensor::randn({16, 1}, gen, 0.3).requires_grad_();
  Tensor inputs = Tensor::randn({64, 8}, gen);
  Tensor target = Tensor::randn({64, 1}, gen);
  std::vector<Tensor> params{W1, W2, train_norm.weight};
  double first = 0, last = 0;
  for (int step = 0; step < 100; ++step) {
    Tensor loss = mean(pow(matmul(train_norm.forward(matmul(inputs, W1)), W2) - target, 2.0));
    for (auto& p : params) p.zero_grad();
    loss.backward();
    NoGradGuard no_grad;
    for (auto& p : params) p.sub_(p.grad(), 0.05);
    if (step == 0) first = loss.item();
    last = loss.item();
  }
  std::printf("train: loss %.4f -> %.4f over 100 steps\n", first, last);
  const bool ok = op.ok && layer.ok && last < 0.9 * first;
  std::printf("%s\n", ok ? "custom_layer: OK" : "custom_layer: FAILED");
  return ok ? 0 : 1;
}
