#include "optim/clip.h"

#include <cmath>

#include "core/check.h"
#include "core/parallel.h"

namespace heed::optim {

namespace {

// Sum of squares in double: a float accumulator loses digits over a million-element gradient.
// Eight independent accumulators let the compiler vectorise without reassociating a single sum.
template <class T>
double sum_squares(const T* g, int64_t n) {
  double acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += static_cast<double>(g[i + k]) * static_cast<double>(g[i + k]);
  for (; i < n; ++i) acc[0] += static_cast<double>(g[i]) * static_cast<double>(g[i]);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

}  // namespace

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  HEED_CHECK(max_norm >= 0, "clip_grad_norm: max_norm must be >= 0, got ", max_norm);
  std::vector<Tensor> grads;
  std::vector<int64_t> lengths;
  for (size_t i = 0; i < params.size(); ++i) {
    HEED_CHECK(params[i].defined(), "clip_grad_norm: parameter ", i, " is an undefined tensor");
    Tensor g = params[i].grad();
    if (!g.defined()) continue;
    HEED_CHECK(g.is_contiguous(), "clip_grad_norm: the gradient of parameter ", i, " (", to_string(g.shape()),
               ") is not contiguous");
    lengths.push_back(g.numel());
    grads.push_back(std::move(g));
  }
  // Partial sums over fixed blocks of every gradient in one job, then added in order: the same
  // norm on any thread count.
  constexpr int64_t kBlock = 16384, kParallel = int64_t(1) << 15;
  std::vector<std::vector<double>> partial(grads.size());
  for (size_t a = 0; a < grads.size(); ++a) partial[a].assign((lengths[a] + kBlock - 1) / kBlock, 0.0);
  parallel_for_blocks(lengths, kBlock, kParallel, [&](size_t a, int64_t i0, int64_t i1) {
    partial[a][i0 / kBlock] = visit_dtype(grads[a].dtype(), [&]<class T>() { return sum_squares(grads[a].data<T>() + i0, i1 - i0); });
  });
  double total = 0;
  for (const auto& sums : partial) {
    double s = 0;
    for (double x : sums) s += x;
    total += s;
  }
  const double norm = std::sqrt(total);
  // PyTorch's rule: multiply by min(1, max_norm / (norm + 1e-6)); a factor of 1 changes nothing,
  // so skip the pass. A NaN norm gives a NaN factor and, as in PyTorch, NaN gradients.
  const double coef = max_norm / (norm + 1e-6);
  if (!(coef < 1.0) && !std::isnan(coef)) return norm;
  // A parameter listed twice is scaled twice, as PyTorch's foreach multiply does, but by one
  // thread: the same gradient is one entry here, with its count.
  std::vector<Tensor> unique;
  std::vector<int> times;
  std::vector<int64_t> unique_lengths;
  for (const Tensor& g : grads) {
    size_t u = 0;
    while (u < unique.size() && unique[u].impl_ptr() != g.impl_ptr()) ++u;
    if (u == unique.size()) {
      unique.push_back(g);
      times.push_back(0);
      unique_lengths.push_back(g.numel());
    }
    ++times[u];
  }
  for (const Tensor& g : unique) g.increment_version();  // an in-place write (core/tensor.h)
  parallel_for_blocks(unique_lengths, kBlock, kParallel, [&](size_t a, int64_t i0, int64_t i1) {
    visit_dtype(unique[a].dtype(), [&]<class T>() {
      T* p = unique[a].data<T>();
      const T c = static_cast<T>(coef);
      for (int t = 0; t < times[a]; ++t)
        for (int64_t i = i0; i < i1; ++i) p[i] *= c;
    });
  });
  return norm;
}

}  // namespace heed::optim
