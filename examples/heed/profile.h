// `heed train --profile` / `heed bench --profile`: time per op type, forward and backward
// separately, plus the optimizer, and the share of all of it spent in matrix products (GEMM).
#pragma once

#include <chrono>
#include <cstdio>
#include <map>
#include <string>

namespace heed::cli {

/// Seconds on a monotonic clock: progress lines, elapsed_s, timings.
inline double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

class Profiler {
 public:
  void begin_step();  ///< starts timing a training step (the first op's time starts here)
  void end_step();    ///< stops timing until the next begin_step (evaluations are not profiled)
  void add(const std::string& op, const std::string& phase, double seconds);
  /// A table sorted by time; `wall` is the measured training time over `iters` iterations.
  void print(FILE* out, double wall, long long iters) const;

 private:
  struct Entry {
    double seconds = 0;
    long long calls = 0;
  };
  std::map<std::pair<std::string, std::string>, Entry> entries_;
};

}  // namespace heed::cli
