// cpu_info against what Linux itself reports (/proc/cpuinfo's flags, sysfs's cache sizes), the
// peaks' caching, and the JSON that `heed bench` prints.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "core/cpu.h"

using namespace heed;

namespace {

// The "flags" line of /proc/cpuinfo as a set of words; empty when there is no such file.
std::set<std::string> linux_cpu_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::set<std::string> flags;
    for (std::string w; words >> w;) flags.insert(w);
    return flags;
  }
  return {};
}

// sysfs's cache size (e.g. "32K") of cpu0's cache at `level` of `type`, in bytes; 0 if absent.
int64_t sysfs_cache_bytes(int level, const std::string& type) {
  for (int index = 0; index < 16; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    std::ifstream lv(dir + "level"), ty(dir + "type"), sz(dir + "size");
    if (!lv) break;
    int l = 0;
    std::string t, s;
    lv >> l;
    ty >> t;
    sz >> s;
    if (l != level || t != type || s.empty()) continue;
    int64_t v = std::stoll(s);
    if (s.back() == 'K') v <<= 10;
    if (s.back() == 'M') v <<= 20;
    return v;
  }
  return 0;
}

}  // namespace

TEST_CASE("cpu_info's instruction sets are the ones Linux reports", "[cpu]") {
  const CpuInfo& c = cpu_info();
  const auto flags = linux_cpu_flags();
  if (flags.empty()) {
    WARN("no /proc/cpuinfo flags here: cpu_info not cross-checked");
    return;
  }
  INFO(c.vendor << " " << c.model_name);
  const std::map<std::string, bool> ours = {{"fma", c.fma},           {"avx2", c.avx2},
                                            {"avx512f", c.avx512f},   {"avx512bw", c.avx512bw},
                                            {"avx512vl", c.avx512vl}, {"avx512_bf16", c.avx512_bf16},
                                            {"amx_bf16", c.amx_bf16}};
  for (const auto& [name, has] : ours) {
    INFO(name);
    CHECK(has == (flags.count(name) == 1));
  }
  CHECK(c.vector_bytes == (c.avx512f ? 64 : c.avx2 ? 32 : 16));
  CHECK(!c.vendor.empty());
}

TEST_CASE("cpu_info's cache sizes are the ones Linux reports", "[cpu]") {
  const CpuInfo& c = cpu_info();
  const int64_t l1 = sysfs_cache_bytes(1, "Data"), l2 = sysfs_cache_bytes(2, "Unified"), l3 = sysfs_cache_bytes(3, "Unified");
  if (l1 == 0) {
    WARN("no sysfs cache description here: cache sizes not cross-checked");
  } else {
    REQUIRE(c.caches_detected);
    CHECK(c.l1d_bytes == l1);
    if (l2) CHECK(c.l2_bytes == l2);
    if (l3) CHECK(c.l3_bytes == l3);
  }
  CHECK(c.l1d_bytes > 0);
  CHECK(c.l1d_bytes <= c.l2_bytes);
  CHECK(c.l2_bytes <= c.l3_bytes);
  CHECK(c.cache_line_bytes >= 16);
  CHECK(c.l3_per_core() > 0);
  CHECK(c.l3_per_core() <= c.l3_bytes);
  CHECK(c.cores >= 1);
  const unsigned hw = std::thread::hardware_concurrency();
  if (hw > 0) CHECK(c.cores <= static_cast<int>(hw));
}

TEST_CASE("cpu_peaks is measured once and cached, bf16 only with AVX512_BF16, AMX only where granted", "[cpu]") {
  const CpuPeaks& p = cpu_peaks();
  CHECK(std::isfinite(p.fp32_fma_gflops));
  CHECK(p.fp32_fma_gflops > 0);
  CHECK(p.seconds > 0);
  if (cpu_info().avx512_bf16) {
    CHECK(std::isfinite(p.bf16_dot_gflops));
    CHECK(p.bf16_dot_gflops > 0);
  } else {
    CHECK(p.bf16_dot_gflops == 0);
  }
  // AMX only where the process may use it; the bf16 products' peak is then AMX's.
  if (amx_ready()) {
    CHECK(p.bf16_amx_gflops > 0);
    CHECK(p.bf16_gflops() == p.bf16_amx_gflops);
  } else {
    CHECK(p.bf16_amx_gflops == 0);
    CHECK(p.bf16_gflops() == p.bf16_dot_gflops);
  }
  const CpuPeaks& again = cpu_peaks();
  CHECK(&again == &p);  // the same cached object: not measured twice
}

TEST_CASE("cpu_json is one JSON object holding cpu_info and cpu_peaks", "[cpu]") {
  const std::string s = cpu_json();
  CHECK(s.find('\n') == std::string::npos);
  const auto j = nlohmann::json::parse(s);
  const CpuInfo& c = cpu_info();
  CHECK(j.at("vendor") == c.vendor);
  CHECK(j.at("model_name") == c.model_name);
  CHECK(j.at("family") == c.family);
  CHECK(j.at("isa").at("avx512_bf16") == c.avx512_bf16);
  CHECK(j.at("isa").at("fma") == c.fma);
  CHECK(j.at("vector_bits") == c.vector_bytes * 8);
  CHECK(j.at("cache_bytes").at("l1d") == c.l1d_bytes);
  CHECK(j.at("cache_bytes").at("l2") == c.l2_bytes);
  CHECK(j.at("cache_bytes").at("l3") == c.l3_bytes);
  CHECK(j.at("cores") == c.cores);
  CHECK(j.at("peak_gflops_per_core").at("fp32_fma").get<double>() ==
        Approx(cpu_peaks().fp32_fma_gflops).margin(0.05));
  CHECK(j.at("peak_gflops_per_core").at("bf16_dot").get<double>() ==
        Approx(cpu_peaks().bf16_dot_gflops).margin(0.05));
  CHECK(j.at("peak_gflops_per_core").at("bf16_amx").get<double>() ==
        Approx(cpu_peaks().bf16_amx_gflops).margin(0.05));
  CHECK(j.at("isa").at("amx_bf16") == c.amx_bf16);
  CHECK(j.at("peak_gflops_per_core").at("seconds").get<double>() == Approx(cpu_peaks().seconds).margin(0.0005));
}
