// cpu_info against what Linux itself reports (/proc/cpuinfo's flags, sysfs's cache sizes), the
// peaks' caching, and the JSON that `heed bench` prints.
#include <catch2/catch.hpp>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "core/check.h"
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
  INFO(c.vendor << " " << c.model_name << ", HEED_MAX_CPU_ISA " << cpu_isa_cap_name(c.max_isa));
  // What Linux reports, capped as HEED_MAX_CPU_ISA says (the "avx2:" run of the tests sets it).
  CpuInfo linux_cpu;
  linux_cpu.fma = flags.count("fma") == 1;
  linux_cpu.avx2 = flags.count("avx2") == 1;
  linux_cpu.avx512f = flags.count("avx512f") == 1;
  linux_cpu.avx512bw = flags.count("avx512bw") == 1;
  linux_cpu.avx512vl = flags.count("avx512vl") == 1;
  linux_cpu.avx512_bf16 = flags.count("avx512_bf16") == 1;
  linux_cpu.amx_bf16 = flags.count("amx_bf16") == 1 && flags.count("amx_tile") == 1;
  const char* cap = std::getenv("HEED_MAX_CPU_ISA");
  const CpuInfo expected = capped_cpu_info(linux_cpu, parse_cpu_isa_cap(cap ? cap : ""));
  std::string cap_name = cap ? cap : "";
  for (char& ch : cap_name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  CHECK(cpu_isa_cap_name(c.max_isa) == (cap_name.empty() ? "all" : cap_name));
  const std::map<std::string, std::pair<bool, bool>> ours = {
      {"fma", {c.fma, expected.fma}},
      {"avx2", {c.avx2, expected.avx2}},
      {"avx512f", {c.avx512f, expected.avx512f}},
      {"avx512bw", {c.avx512bw, expected.avx512bw}},
      {"avx512vl", {c.avx512vl, expected.avx512vl}},
      {"avx512_bf16", {c.avx512_bf16, expected.avx512_bf16}},
      {"amx_bf16", {c.amx_bf16, expected.amx_bf16}}};
  for (const auto& [name, has] : ours) {
    INFO(name);
    CHECK(has.first == has.second);
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
  CHECK(j.at("max_isa") == cpu_isa_cap_name(c.max_isa));
  CHECK(j.at("compiled_for") == std::string(compiled_vector_isa()));
  CHECK(j.at("peak_gflops_per_core").at("seconds").get<double>() == Approx(cpu_peaks().seconds).margin(0.0005));
}

TEST_CASE("HEED_MAX_CPU_ISA's values are oneDNN's names in any case, and another is refused naming them", "[cpu]") {
  CHECK(parse_cpu_isa_cap("sse41") == CpuIsaCap::sse41);
  CHECK(parse_cpu_isa_cap("AVX2") == CpuIsaCap::avx2);
  CHECK(parse_cpu_isa_cap("avx512_core") == CpuIsaCap::avx512_core);
  CHECK(parse_cpu_isa_cap("AVX512_CORE_BF16") == CpuIsaCap::avx512_core_bf16);
  CHECK(parse_cpu_isa_cap("Avx512_Core_Amx") == CpuIsaCap::avx512_core_amx);
  CHECK(parse_cpu_isa_cap("all") == CpuIsaCap::all);
  CHECK(parse_cpu_isa_cap("") == CpuIsaCap::all);
  for (const char* bad : {"avx512", "avx2 ", "AVX512_CORE_VNNI", "amx", "none"}) {
    INFO(bad);
    try {
      parse_cpu_isa_cap(bad);
      FAIL("accepted");
    } catch (const Error& e) {
      const std::string m = e.what();
      CHECK(m.find("HEED_MAX_CPU_ISA") != std::string::npos);
      CHECK(m.find(std::string("'") + bad + "'") != std::string::npos);
      CHECK(m.find("avx512_core_bf16") != std::string::npos);
    }
  }
}

TEST_CASE("capped_cpu_info turns off what is newer than the cap, and never turns anything on", "[cpu]") {
  CpuInfo everything;
  everything.fma = everything.avx2 = everything.avx512f = everything.avx512bw = everything.avx512vl = true;
  everything.avx512_bf16 = everything.amx_bf16 = true;
  everything.vector_bytes = 64;
  everything.l2_bytes = 2 << 20;
  everything.cores = 3;
  struct Level {
    CpuIsaCap cap;
    bool fma, avx2, avx512, bf16, amx;
    int vector_bytes;
  };
  for (const Level& l : {Level{CpuIsaCap::sse41, false, false, false, false, false, 16},
                         Level{CpuIsaCap::avx2, true, true, false, false, false, 32},
                         Level{CpuIsaCap::avx512_core, true, true, true, false, false, 64},
                         Level{CpuIsaCap::avx512_core_bf16, true, true, true, true, false, 64},
                         Level{CpuIsaCap::avx512_core_amx, true, true, true, true, true, 64},
                         Level{CpuIsaCap::all, true, true, true, true, true, 64}}) {
    INFO(static_cast<int>(l.cap));
    const CpuInfo c = capped_cpu_info(everything, l.cap);
    CHECK(c.fma == l.fma);
    CHECK(c.avx2 == l.avx2);
    CHECK(c.avx512f == l.avx512);
    CHECK(c.avx512bw == l.avx512);
    CHECK(c.avx512vl == l.avx512);
    CHECK(c.avx512_bf16 == l.bf16);
    CHECK(c.amx_bf16 == l.amx);
    CHECK(c.vector_bytes == l.vector_bytes);
    CHECK(c.l2_bytes == everything.l2_bytes);  // caches and cores are not the cap's
    CHECK(c.cores == 3);
  }
  // A CPU with AVX2 only stays as it is under any higher cap.
  CpuInfo avx2_cpu;
  avx2_cpu.fma = avx2_cpu.avx2 = true;
  avx2_cpu.vector_bytes = 32;
  for (CpuIsaCap cap : {CpuIsaCap::avx2, CpuIsaCap::avx512_core, CpuIsaCap::avx512_core_amx, CpuIsaCap::all}) {
    const CpuInfo c = capped_cpu_info(avx2_cpu, cap);
    CHECK(c.avx2);
    CHECK(c.fma);
    CHECK_FALSE(c.avx512f);
    CHECK_FALSE(c.avx512_bf16);
    CHECK_FALSE(c.amx_bf16);
    CHECK(c.vector_bytes == 32);
  }
}

TEST_CASE("the instruction sets this build was compiled for are the -march ones, and this CPU has each as Linux says", "[cpu]") {
  const auto isas = compiled_isas_here();
  std::set<std::string> names;
  for (const auto& [name, present] : isas) names.insert(name);
  const std::string vector_isa = compiled_vector_isa();
  INFO("compiled for " << vector_isa);
  if (vector_isa == "avx512") {
    for (const char* name : {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx2", "fma", "avx"}) {
      INFO(name);
      CHECK(names.count(name) == 1);
    }
  } else if (vector_isa == "avx2") {
    CHECK(names.count("avx2") == 1);
    CHECK(names.count("avx512f") == 0);
  } else if (vector_isa == "sse2") {
    CHECK(names.empty());  // plain x86-64: nothing to check
  }
  // Each one's presence is what /proc/cpuinfo says (the process would not have got here otherwise,
  // but the names must also be the ones the check asks about).
  const auto flags = linux_cpu_flags();
  if (flags.empty()) return;
  const std::map<std::string, std::string> linux_name = {
      {"sse4.2", "sse4_2"},          {"bmi", "bmi1"},
      {"avx512vnni", "avx512_vnni"}, {"avx512bf16", "avx512_bf16"},
      {"avx512vbmi2", "avx512_vbmi2"}, {"avx512bitalg", "avx512_bitalg"},
      {"avx512vpopcntdq", "avx512_vpopcntdq"}, {"avx512fp16", "avx512_fp16"},
      {"avxvnni", "avx_vnni"}};
  for (const auto& [name, present] : isas) {
    INFO(name);
    const auto renamed = linux_name.find(name);
    CHECK(present == (flags.count(renamed == linux_name.end() ? name : renamed->second) == 1));
  }
}
