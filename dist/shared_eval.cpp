#include "dist/shared_eval.h"

#include <cstring>

#include "core/check.h"

namespace heed::dist {

Span share_of(int64_t count, int rank, int size) {
  HEED_CHECK(count >= 0 && size >= 1 && rank >= 0 && rank < size, "share_of: bad arguments (count ", count, ", rank ",
             rank, ", size ", size, ")");
  const int64_t base = count / size, extra = count % size;
  const int64_t lo = rank * base + std::min<int64_t>(rank, extra);
  return {lo, lo + base + (rank < extra ? 1 : 0)};
}

double mean_in_order(Communicator& comm, const std::vector<double>& mine, int64_t count) {
  const int N = comm.size();
  const Span my_share = share_of(count, comm.rank(), N);
  HEED_CHECK(static_cast<int64_t>(mine.size()) == my_share.size(), "mean_in_order: rank ", comm.rank(), " has ",
             mine.size(), " values for its share of ", my_share.size());
  HEED_CHECK(count >= 1, "mean_in_order: no values");
  // Every rank sends the largest share's worth (all-gather wants equal sizes); the padding is unused.
  const int64_t most = share_of(count, 0, N).size();
  std::vector<double> padded(most, 0.0);
  std::copy(mine.begin(), mine.end(), padded.begin());
  const std::vector<char> bytes = comm.all_gather(padded.data(), padded.size() * sizeof(double));
  double total = 0;
  for (int r = 0; r < N; ++r) {
    const Span s = share_of(count, r, N);
    for (int64_t i = 0; i < s.size(); ++i) {
      double v;
      std::memcpy(&v, bytes.data() + (r * most + i) * sizeof(double), sizeof v);
      total += v;
    }
  }
  return total / static_cast<double>(count);
}

}  // namespace heed::dist
