#include "generate.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/autograd.h"
#include "core/ops.h"

namespace heed::cli {

void generate(nn::GPT& model, std::vector<int32_t>& ids, int64_t n, double temperature, int64_t top_k,
              Generator& gen, const std::function<void(int32_t)>& on_token) {
  HEED_CHECK(!ids.empty(), "generate: empty context");
  NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  const int64_t block = model.config().block_size;
  const int64_t V = model.config().vocab_size;
  std::vector<double> p(V);
  for (int64_t step = 0; step < n; ++step) {
    const int64_t T = std::min<int64_t>(static_cast<int64_t>(ids.size()), block);
    std::vector<int32_t> ctx(ids.end() - T, ids.end());
    Tensor logits = model.forward(ctx, 1, T);  // (1, T, V)
    std::vector<double> row = slice(logits, 1, T - 1, T).to_vector<double>();
    int32_t next;
    if (temperature == 0.0) {
      next = static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
    } else {
      for (double& v : row) v /= temperature;
      if (top_k > 0 && top_k < V) {  // keep the k largest logits
        std::vector<double> sorted = row;
        std::nth_element(sorted.begin(), sorted.begin() + (top_k - 1), sorted.end(), std::greater<>());
        const double kth = sorted[top_k - 1];
        for (double& v : row)
          if (v < kth) v = -std::numeric_limits<double>::infinity();
      }
      const double mx = *std::max_element(row.begin(), row.end());
      double total = 0;
      for (int64_t i = 0; i < V; ++i) total += (p[i] = std::exp(row[i] - mx));
      double u = gen.uniform() * total;
      next = -1;
      for (int64_t i = 0; i < V; ++i) {
        if (p[i] <= 0) continue;
        next = static_cast<int32_t>(i);  // rounding can leave u >= 0: then the last candidate
        if ((u -= p[i]) < 0) break;
      }
    }
    ids.push_back(next);
    on_token(next);
  }
  model.train(was_training);
}

}  // namespace heed::cli
