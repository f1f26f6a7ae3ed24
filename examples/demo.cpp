// A small demo of heed's autograd: fits y = sin(3x) on [-1, 1] with a 2-layer MLP trained by
// plain gradient descent, and prints the loss as it falls.
#include <cmath>
#include <cstdio>

#include "core/heed.h"

using namespace heed;

int main() {
  Generator gen(0);
  const int64_t n = 256, hidden = 32;
  Tensor x = Tensor::rand({n, 1}, gen, -1.0, 1.0);
  std::vector<float> ys;
  for (float v : x.to_vector<float>()) ys.push_back(std::sin(3.0f * v));
  Tensor y = Tensor::from_vector(ys, {n, 1});

  Tensor w1 = Tensor::randn({1, hidden}, gen, 1.0).requires_grad_();
  Tensor b1 = Tensor::zeros({hidden}).requires_grad_();
  Tensor w2 = Tensor::randn({hidden, 1}, gen, 1.0 / std::sqrt(double(hidden))).requires_grad_();
  Tensor b2 = Tensor::zeros({1}).requires_grad_();
  std::vector<Tensor> params{w1, b1, w2, b2};

  for (int step = 0; step <= 2000; ++step) {
    Tensor h = tanh(matmul(x, w1) + b1);
    Tensor loss = mean(pow(matmul(h, w2) + b2 - y, 2.0));
    for (auto& p : params) p.zero_grad();
    loss.backward();
    {
      NoGradGuard no_grad;
      for (auto& p : params) p.sub_(p.grad(), 0.1);  // torch: p.sub_(p.grad, alpha=0.1)
    }
    if (step % 250 == 0) std::printf("step %4d  mse %.5f\n", step, loss.item());
  }
  return 0;
}
