// Sampling categories from rows of weights: multinomial (torch.multinomial), the draw behind
// nn::sample_token too.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/ops.h"
#include "core/random.h"

namespace heed {

namespace {

// One row's draws. With replacement (and any single draw): inverse transform sampling on the
// row's running sums, cum[i] = w[0] + ... + w[i] added in index order: u uniform in [0, total),
// the draw is the first i with cum[i] > u (a positive weight: a zero adds nothing), found by
// binary search, O(log n) a draw after O(n) once. Rounding can leave u at the total: then the
// last positive weight.
void draw_with_replacement(const double* w, int64_t n, int64_t samples, Generator& gen, int64_t* out) {
  std::vector<double> cum(static_cast<size_t>(n));
  double total = 0;
  int64_t last_positive = 0;
  for (int64_t i = 0; i < n; ++i) {
    cum[i] = total += w[i];
    if (w[i] > 0) last_positive = i;
  }
  for (int64_t s = 0; s < samples; ++s) {
    const double u = gen.uniform() * total;
    const int64_t i = std::upper_bound(cum.begin(), cum.end(), u) - cum.begin();
    out[s] = i < n ? i : last_positive;
  }
}

// Several draws without replacement: the exponential race (Efraimidis and Spirakis), as torch's
// own: each positive weight w_i gets the key w_i / E_i with E_i ~ Exp(1) (one uniform each, in
// index order), and the draws are the `samples` largest keys, largest first, ties to the lower
// index. That is the law of drawing one at a time from what is left, in O(n log samples) where
// redrawing from the rest costs O(n) a draw (10^5 draws from 10^5 weights: 15 s that way, 0.013 s
// this way; docs/reliability.md).
void draw_without_replacement(const double* w, int64_t n, double total, int64_t samples, Generator& gen,
                              int64_t* out) {
  std::vector<std::pair<double, int64_t>> keys;
  keys.reserve(static_cast<size_t>(n));
  // The weights over their total (at most 1), so that no key overflows to inf and ties with
  // another (a weight of 1e308 over an E below 1 would); E = 0 gives inf, once in 2^53 draws.
  for (int64_t i = 0; i < n; ++i)
    if (w[i] > 0) keys.emplace_back(w[i] / total / -std::log1p(-gen.uniform()), i);
  auto first = [](const std::pair<double, int64_t>& a, const std::pair<double, int64_t>& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  std::partial_sort(keys.begin(), keys.begin() + samples, keys.end(), first);
  for (int64_t s = 0; s < samples; ++s) out[s] = keys[s].second;
}

}  // namespace

Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement, Generator* gen) {
  HEED_CHECK(probs.dim() == 1 || probs.dim() == 2, "multinomial: probs must be 1-D or 2-D, got ",
             to_string(probs.shape()));
  HEED_CHECK(is_floating(probs.dtype()), "multinomial: probs must be float32 or float64, got ",
             dtype_name(probs.dtype()));
  HEED_CHECK(num_samples > 0, "multinomial: num_samples = ", num_samples, " must be positive");
  const bool batched = probs.dim() == 2;
  const int64_t rows = batched ? probs.size(0) : 1, n = probs.size(-1);
  std::vector<double> w = probs.to_vector<double>();  // row-major whatever the strides
  Generator& g = gen ? *gen : default_generator();
  Tensor out = Tensor::empty(batched ? Shape{rows, num_samples} : Shape{num_samples}, DType::i64);
  int64_t* po = out.data<int64_t>();
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = w.data() + r * n;
    int64_t positive = 0;
    for (int64_t i = 0; i < n; ++i) {
      HEED_CHECK(row[i] >= 0 && row[i] < INFINITY, "multinomial: probability ", row[i], " at ",
                 batched ? "row " + std::to_string(r) + ", " : "", "index ", i, " is not finite and non-negative");
      positive += row[i] > 0;
    }
    const std::string where = batched ? " in row " + std::to_string(r) : "";
    double total = 0;
    for (int64_t i = 0; i < n; ++i) total += row[i];
    HEED_CHECK(positive > 0, "multinomial: every probability", where, " is zero");
    HEED_CHECK(total < INFINITY, "multinomial: the probabilities", where, " sum past the largest double");
    HEED_CHECK(replacement || num_samples <= positive, "multinomial: cannot draw ", num_samples,
               " samples without replacement from ", positive, " non-zero probabilities", where);
    if (replacement || num_samples == 1)
      draw_with_replacement(row, n, num_samples, g, po + r * num_samples);
    else
      draw_without_replacement(row, n, total, num_samples, g, po + r * num_samples);
  }
  return out;
}

}  // namespace heed
