// Shared evaluation (dist/shared_eval.h) and parameter checksums (dist/param_checksum.h), with
// ranks as threads.
#include <catch2/catch.hpp>
#include <cstring>
#include <mutex>

#include "core/ops.h"
#include "core/random.h"
#include "dist/param_checksum.h"
#include "dist/shared_eval.h"
#include "thread_hub.h"

using namespace heed;
using dist::Span;

TEST_CASE("share_of splits items into consecutive shares, the first ones one larger", "[dist][eval]") {
  for (int64_t count : {0, 1, 5, 7, 200})
    for (int size = 1; size <= 5; ++size) {
      int64_t next = 0;
      for (int r = 0; r < size; ++r) {
        const Span s = dist::share_of(count, r, size);
        REQUIRE(s.lo == next);
        REQUIRE((s.size() == count / size || s.size() == count / size + 1));
        REQUIRE(s.size() >= dist::share_of(count, size - 1, size).size());
        next = s.hi;
      }
      REQUIRE(next == count);
    }
  REQUIRE_THROWS_WITH(dist::share_of(3, 2, 2), Catch::Contains("bad arguments"));
}

TEST_CASE("the shared mean is the in-order mean one process computes, bit for bit, on every rank", "[dist][eval]") {
  // Magnitudes that make the order of the additions show: 1e16 + 1 rounds away the 1.
  const std::vector<double> values{1e16, 1.0, -1e16, 1.0, 3.0, 0.1, 0.2};
  const int64_t count = static_cast<int64_t>(values.size());
  double in_order = 0;
  for (double v : values) in_order += v;
  in_order /= static_cast<double>(count);
  double reversed = 0;
  for (auto it = values.rbegin(); it != values.rend(); ++it) reversed += *it;
  REQUIRE(reversed / count != in_order);  // the order matters for these values
  for (int N = 1; N <= 5; ++N) {
    std::vector<double> got(N);
    test::ThreadHub::run(N, [&](dist::Communicator& comm) {
      const Span mine = dist::share_of(count, comm.rank(), N);
      std::vector<double> share(values.begin() + mine.lo, values.begin() + mine.hi);
      got[comm.rank()] = dist::mean_in_order(comm, share, count);
    });
    for (double g : got) REQUIRE(std::memcmp(&g, &in_order, sizeof g) == 0);
  }
}

TEST_CASE("checksums see every bit of a tensor's values", "[dist][checksum]") {
  Generator gen(5);
  for (int64_t n : {1, 7, 8, 9, 31, 33, 1000}) {
    Tensor t = Tensor::randn({n}, gen);
    const uint64_t sum = dist::checksum(t);
    REQUIRE(dist::checksum(t.clone()) == sum);
    for (int64_t i : {int64_t(0), n / 2, n - 1})
      for (int bit : {0, 17, 31}) {
        Tensor u = t.clone();
        uint32_t word;
        std::memcpy(&word, u.data<float>() + i, 4);
        word ^= 1u << bit;
        std::memcpy(u.data<float>() + i, &word, 4);
        REQUIRE(dist::checksum(u) != sum);
      }
  }
  // Values, not layout: a transposed view checks as its row-major copy; the length counts.
  Tensor m = Tensor::randn({3, 5}, gen);
  Tensor mt = transpose(m, 0, 1);
  REQUIRE(dist::checksum(mt) == dist::checksum(mt.contiguous()));
  REQUIRE(dist::checksum(mt) != dist::checksum(m));
  REQUIRE(dist::checksum(Tensor::zeros({1})) != dist::checksum(Tensor::zeros({2})));
}

TEST_CASE("parameters that differ on one rank stop every rank, naming the tensor and the rank", "[dist][checksum]") {
  std::mutex mu;
  std::vector<std::string> errors;
  test::ThreadHub::run(3, [&](dist::Communicator& comm) {
    Generator gen(9);  // the same values on every rank
    std::vector<std::pair<std::string, Tensor>> named{{"a", Tensor::randn({4, 4}, gen)},
                                                      {"b", Tensor::randn({10}, gen)},
                                                      {"c", Tensor::randn({3}, gen)}};
    dist::require_same_parameters(comm, named);  // identical: passes
    if (comm.rank() == 2) {
      named[1].second.data<float>()[3] += 1e-6f;
      named[2].second.data<float>()[0] = -named[2].second.data<float>()[0];
    }
    try {
      dist::require_same_parameters(comm, named);
    } catch (const Error& e) {
      std::lock_guard<std::mutex> lock(mu);
      errors.push_back(e.what());
    }
  });
  REQUIRE(errors.size() == 3);  // every rank, not only the odd one out
  for (const std::string& e : errors) {
    REQUIRE(e == errors[0]);
    REQUIRE_THAT(e, Catch::Contains("'b' on rank 2 is not rank 0's") && Catch::Contains("2 of 3 tensors differ"));
  }
}
