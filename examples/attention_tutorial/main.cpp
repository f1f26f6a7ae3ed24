// The attention tutorial, run: prints what scripts/attention_tutorial_torch.py prints in PyTorch,
// then the same training with dropout on (masks from heed::manual_seed, so not PyTorch's).
#include <iostream>

#include "attention_tutorial.h"

int main() {
  std::cout << "simplified self-attention:\n" << tutorial::simple_context() << "\n";
  std::cout << "causal attention:\n" << tutorial::causal_context() << "\n";
  std::cout << "multi-head attention:\n" << tutorial::mha_context() << "\n";
  // Dropout on a matrix of ones: about half the entries zeroed, the others scaled by 2.
  heed::manual_seed(123);
  heed::nn::Dropout dropout(0.5);
  std::cout << "dropout(0.5) of ones(6, 6):\n" << dropout.forward(heed::Tensor::ones({6, 6})) << "\n";
  std::cout << "training losses (no dropout):";
  for (double l : tutorial::train_losses(5, 0.0)) std::cout << " " << l;
  std::cout << "\ntraining losses (dropout 0.1):";
  for (double l : tutorial::train_losses(5, 0.1)) std::cout << " " << l;
  std::cout << "\n";
}
