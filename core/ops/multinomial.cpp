// Sampling categories from rows of weights: multinomial (torch.multinomial), the draw behind
// nn::sample_token too.
#include <cmath>

#include "core/ops.h"
#include "core/random.h"

namespace heed {

namespace {

// An index drawn with probability w[i] / total (total = sum(w), added up in index order): u is
// uniform in [0, total) and the draw is the first i at which u minus the weights so far goes
// negative. Rounding can leave u >= 0 after the last positive weight: then that one.
int64_t draw(const double* w, int64_t n, double total, Generator& gen) {
  double u = gen.uniform() * total;
  int64_t drawn = -1;
  for (int64_t i = 0; i < n; ++i) {
    if (w[i] <= 0) continue;
    drawn = i;
    if ((u -= w[i]) < 0) break;
  }
  return drawn;
}

double total_of(const double* w, int64_t n) {
  double total = 0;
  for (int64_t i = 0; i < n; ++i) total += w[i];
  return total;
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
    double* row = w.data() + r * n;
    int64_t positive = 0;
    for (int64_t i = 0; i < n; ++i) {
      HEED_CHECK(row[i] >= 0 && row[i] < INFINITY, "multinomial: probability ", row[i], " at ",
                 batched ? "row " + std::to_string(r) + ", " : "", "index ", i, " is not finite and non-negative");
      positive += row[i] > 0;
    }
    const std::string where = batched ? " in row " + std::to_string(r) : "";
    double total = total_of(row, n);
    HEED_CHECK(positive > 0, "multinomial: every probability", where, " is zero");
    HEED_CHECK(total < INFINITY, "multinomial: the probabilities", where, " sum past the largest double");
    HEED_CHECK(replacement || num_samples <= positive, "multinomial: cannot draw ", num_samples,
               " samples without replacement from ", positive, " non-zero probabilities", where);
    for (int64_t s = 0; s < num_samples; ++s) {
      const int64_t i = po[r * num_samples + s] = draw(row, n, total, g);
      if (replacement) continue;
      row[i] = 0;  // drawn: out of the remaining draws, whose total is summed afresh
      total = total_of(row, n);
    }
  }
  return out;
}

}  // namespace heed
