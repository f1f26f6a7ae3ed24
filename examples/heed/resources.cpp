#include "resources.h"

#include <sys/resource.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>

#include "commands.h"

namespace heed::cli {

namespace {

std::string g_flag_limit;  // --memory-limit, as given

// What a process of heed's costs before any model: code, libraries, thread stacks, the allocator.
constexpr double kBaseBytes = 48.0 * (1 << 20);

uint64_t read_meminfo_total() {
  std::ifstream f("/proc/meminfo");
  std::string key, unit;
  uint64_t kb = 0;
  while (f >> key >> kb >> unit)
    if (key == "MemTotal:") return kb * 1024;
  return 0;
}

// The cgroup memory limit of this process (0: none or unknown).
uint64_t read_cgroup_limit() {
  auto read_number = [](const std::string& path) -> uint64_t {
    std::ifstream f(path);
    std::string s;
    if (!(f >> s) || s == "max") return 0;
    try {
      return std::stoull(s);
    } catch (const std::exception&) {
      return 0;
    }
  };
  std::ifstream groups("/proc/self/cgroup");
  std::string line;
  while (std::getline(groups, line)) {
    if (line.rfind("0::", 0) == 0) {  // cgroup v2: "0::/path"
      if (uint64_t v = read_number("/sys/fs/cgroup" + line.substr(3) + "/memory.max")) return v;
      if (uint64_t v = read_number("/sys/fs/cgroup/memory.max")) return v;
    }
  }
  const uint64_t v1 = read_number("/sys/fs/cgroup/memory/memory.limit_in_bytes");
  return v1 >= (uint64_t(1) << 60) ? 0 : v1;  // v1 writes a huge number for "no limit"
}

// RLIMIT_AS less the address space already mapped (0: no limit).
uint64_t read_address_space_room() {
  struct rlimit rl {};
  if (::getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return 0;
  uint64_t mapped = 0;
  std::ifstream f("/proc/self/status");
  std::string key;
  while (f >> key) {
    if (key == "VmSize:") {
      f >> mapped;
      mapped *= 1024;
      break;
    }
    f.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return rl.rlim_cur > mapped ? rl.rlim_cur - mapped : 1;
}

}  // namespace

uint64_t parse_size(const std::string& text, const std::string& what) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  double scale = 1;
  const std::string unit = text.substr(used);
  // K, M, G, T in either case (4g as 4G: ulimit's and Docker's habit), or with "iB".
  if (unit == "K" || unit == "k" || unit == "KiB") scale = 1024.0;
  else if (unit == "M" || unit == "m" || unit == "MiB") scale = 1024.0 * 1024;
  else if (unit == "G" || unit == "g" || unit == "GiB") scale = 1024.0 * 1024 * 1024;
  else if (unit == "T" || unit == "t" || unit == "TiB") scale = 1024.0 * 1024 * 1024 * 1024;
  else if (!unit.empty()) used = 0;
  // At least one byte: 0.5 or 1e-300 is not a limit (it used to become one of 0 bytes).
  if (used == 0 || !std::isfinite(v) || v * scale < 1 || v * scale >= 9.2e18)
    throw UsageError(what + " '" + text + "': not a size (bytes, or a number with K, M, G or T: \"4G\")");
  return static_cast<uint64_t>(v * scale);
}

std::string format_bytes(double bytes) {
  char buf[64];
  if (bytes >= 1024.0 * 1024 * 1024 * 1024) std::snprintf(buf, sizeof buf, "%.3g TiB", bytes / (1024.0 * 1024 * 1024 * 1024));
  else if (bytes >= 1024.0 * 1024 * 1024) std::snprintf(buf, sizeof buf, "%.3g GiB", bytes / (1024.0 * 1024 * 1024));
  else if (bytes >= 1024.0 * 1024) std::snprintf(buf, sizeof buf, "%.0f MiB", bytes / (1024.0 * 1024));
  else if (bytes >= 1024.0) std::snprintf(buf, sizeof buf, "%.0f KiB", bytes / 1024.0);
  else std::snprintf(buf, sizeof buf, "%.0f bytes", bytes);
  return buf;
}

void set_memory_limit_flag(const std::string& text) {
  if (!text.empty()) parse_size(text, "--memory-limit");  // refuse a bad value before anything runs
  g_flag_limit = text;
}

uint64_t memory_limit(std::string* source) {
  if (!g_flag_limit.empty()) {
    if (source) *source = "--memory-limit";
    return parse_size(g_flag_limit, "--memory-limit");
  }
  if (const char* env = std::getenv("HEED_MEMORY_LIMIT"); env && *env) {
    if (source) *source = "HEED_MEMORY_LIMIT";
    return parse_size(env, "HEED_MEMORY_LIMIT");
  }
  uint64_t limit = read_meminfo_total();
  std::string from = "the machine's RAM";
  if (const uint64_t c = read_cgroup_limit(); c && (limit == 0 || c < limit)) limit = c, from = "the cgroup's limit";
  if (const uint64_t a = read_address_space_room(); a && (limit == 0 || a < limit)) limit = a, from = "RLIMIT_AS";
  if (limit == 0) limit = uint64_t(1) << 62, from = "unknown";  // no /proc: nothing to go by
  if (source) *source = from;
  return limit;
}

void require_memory(double bytes, const std::string& what, bool usage) {
  std::string source;
  const double limit = static_cast<double>(memory_limit(&source));
  if (bytes <= limit) return;
  const std::string msg = what + " needs about " + format_bytes(bytes) + " of memory, more than the " +
                          format_bytes(limit) + " limit (" + source +
                          "; --memory-limit or HEED_MEMORY_LIMIT set another)";
  if (usage) throw UsageError(msg);
  throw Error(msg);
}

double gpt_parameters(const nn::GPTConfig& c) {
  const double C = double(c.n_embd);
  const double per_layer = 12 * C * C + 2 * C + (c.bias ? 11 * C : 0);
  return double(c.vocab_size) * C + double(c.block_size) * C + double(c.n_layer) * per_layer + (c.bias ? 2 : 1) * C;
}

// Per token of a training batch, in floats, as measured: about 17 * n_embd per layer for the
// activations autograd keeps, the attention probabilities (n_head * T per token and layer), and
// the logits with their gradient. The factors below are the measured ones plus a margin.
double gpt_training_bytes(const nn::GPTConfig& c, int64_t batch) {
  const double P = gpt_parameters(c);
  const double tokens = double(batch) * double(c.block_size);
  const double per_token = double(c.n_layer) * (20.0 * double(c.n_embd) + 1.3 * double(c.n_head) * double(c.block_size)) +
                           4.0 * double(c.vocab_size);
  // weights, gradients, two moments (16 bytes) and a training state being serialised (12 more)
  return kBaseBytes + 28.0 * P + 4.0 * tokens * per_token;
}

double gpt_loading_bytes(const nn::GPTConfig& c) {
  // the file's bytes, the parsed tensors (converted to float32) and the model
  return kBaseBytes + 12.0 * gpt_parameters(c);
}

double gpt_forward_bytes_per_row(const nn::GPTConfig& c, int64_t T) {
  const double per_token = 10.0 * double(c.n_embd) + 1.3 * double(c.n_head) * double(T) + 3.0 * double(c.vocab_size);
  return 4.0 * double(T) * per_token;
}

}  // namespace heed::cli
