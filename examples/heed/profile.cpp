#include "profile.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/autograd.h"

namespace heed::cli {

static Profiler* g_active = nullptr;

static void on_op(const char* op, const char* phase, double seconds) {
  if (g_active) g_active->add(op, phase, seconds);
}

void Profiler::begin_step() {
  g_active = this;
  set_op_timer(on_op);  // also restarts the clock the first op is measured from
}

void Profiler::end_step() {
  set_op_timer(nullptr);
  g_active = nullptr;
}

void Profiler::add(const std::string& op, const std::string& phase, double seconds) {
  Entry& e = entries_[{op, phase}];
  e.seconds += seconds;
  e.calls += 1;
}

// Ops whose time is (almost all) matrix products: BLAS GEMMs (matmul, linear, add_linear) and
// attention's own product kernels (nn/attention_kernels.h).
static bool is_gemm(const std::string& op) {
  return op == "matmul" || op == "linear" || op == "add_linear" || op.find("attention") != std::string::npos;
}

void Profiler::print(FILE* out, double wall, long long iters) const {
  std::vector<std::pair<std::pair<std::string, std::string>, Entry>> rows(entries_.begin(), entries_.end());
  std::sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.second.seconds > b.second.seconds; });
  double total = 0, gemm = 0;
  for (auto& [key, e] : rows) {
    total += e.seconds;
    if (is_gemm(key.first)) gemm += e.seconds;
  }
  const double per = iters > 0 ? 1e3 / double(iters) : 0;
  std::fprintf(out, "\nprofile over %lld iterations (%.2f ms/iter measured; %.2f ms/iter attributed below)\n",
               iters, wall * per, total * per);
  std::fprintf(out, "  %-22s %-9s %10s %8s %8s\n", "op", "phase", "ms/iter", "share", "calls/it");
  for (auto& [key, e] : rows)
    std::fprintf(out, "  %-22s %-9s %10.3f %7.1f%% %8.1f\n", key.first.c_str(), key.second.c_str(),
                 e.seconds * per, total > 0 ? 100 * e.seconds / total : 0.0, iters > 0 ? double(e.calls) / iters : 0.0);
  std::fprintf(out, "  GEMM ops (matmul, linear, add_linear, attention products): %.1f%% of attributed time\n",
               total > 0 ? 100 * gemm / total : 0.0);
}

}  // namespace heed::cli
