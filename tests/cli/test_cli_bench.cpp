// `heed bench` and `--profile`, through the executable: the JSON line bench/compare.sh parses, and
// the per-op table the next optimisation is chosen from.
#include <catch2/catch.hpp>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "core/cpu.h"
#include "core/ops/gemm_bf16.h"
#include "core/ops/sgemm.h"
#include "nn/gpt.h"
#include "support/process.h"

#if defined(__x86_64__) && defined(__linux__)
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#define HEED_TEST_SECCOMP 1
#endif

using namespace heed;
using namespace heed::test;
using nlohmann::json;

namespace {

// A corpus of 9 distinct characters (a-g, space, newline), so the vocabulary is known.
std::string write_corpus(const ScratchDir& dir) {
  std::string s;
  for (int i = 0; i < 400; ++i) s += "abc defg\n"[i % 9];
  write_file(dir / "corpus.txt", s);
  return dir / "corpus.txt";
}

const std::vector<std::string> kModel = {"--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "8",
                                         "--batch-size", "3", "--threads", "1"};

}  // namespace

TEST_CASE("heed bench prints one JSON line: median ms per iteration, tokens/s and parameters", "[cli]") {
  ScratchDir dir("bench");
  const std::string corpus = write_corpus(dir);
  ProcessResult r = run_heed(cat({"bench", "--data", corpus, "--iters", "5"}, kModel));
  require_ok(r);
  INFO("stdout: " << r.out);
  REQUIRE(std::count(r.out.begin(), r.out.end(), '\n') == 1);
  const json j = json::parse(r.out);
  const double ms = j.at("ms_per_iter").get<double>(), tps = j.at("tokens_per_s").get<double>();
  REQUIRE(ms > 0);
  REQUIRE(j.at("iters").get<int>() == 5);
  REQUIRE(j.at("ms_per_iter_min").get<double>() <= ms);
  REQUIRE(ms <= j.at("ms_per_iter_max").get<double>());
  // tokens/s is batch * block / the median (both rounded in print: 0.1 us and 0.1 token/s).
  REQUIRE(std::abs(tps - 3 * 8 / (ms / 1e3)) <= 0.01 * tps);
  // Every parameter of the model bench built, the position embedding included.
  nn::GPT model(nn::GPTConfig{.vocab_size = 9, .block_size = 8, .n_layer = 1, .n_head = 2, .n_embd = 16});
  REQUIRE(j.at("params").get<int64_t>() == model.num_params(false));
}

TEST_CASE("heed bench reports the precision, model FLOPs, MFU against the CPU's measured peaks, and the CPU", "[cli]") {
  ScratchDir dir("bench-precision");
  const std::string corpus = write_corpus(dir);
  const bool bf16_cpu = cpu_info().avx512_bf16 && cpu_info().avx512bw;
  for (const char* precision : {"fp32", "bf16"}) {
    INFO(precision);
    ProcessResult r = run_heed(cat({"bench", "--data", corpus, "--iters", "3", "--precision", precision},
                                   kModel));
    if (std::string(precision) == "bf16" && !bf16_cpu) {  // refused, naming what is missing
      require_clean_error(r, 1, {"--precision bf16", "AVX512_BF16"});
      continue;
    }
    require_ok(r);
    const json j = json::parse(r.out);
    CHECK(j.at("precision") == precision);
    CHECK(j.at("threads") == 1);
    // nanoGPT's count: (6 N + 12 L C T) T B, N without the position embedding (8 x 16)
    nn::GPT model(nn::GPTConfig{.vocab_size = 9, .block_size = 8, .n_layer = 1, .n_head = 2, .n_embd = 16});
    const double flops = (6.0 * double(model.num_params(true)) + 12.0 * 16 * 8) * 8 * 3;
    CHECK(j.at("flops_per_iter").get<double>() == flops);
    // GFLOP/s from the printed median (rounded to 0.1 us) and
    // itself printed to 0.1
    const double ms = j.at("ms_per_iter").get<double>(), gflops = flops / (ms / 1e3) / 1e9;
    CHECK(j.at("gflops").get<double>() == Approx(gflops).epsilon(0.6e-3 / ms).margin(0.06));
    const double printed_gflops = j.at("gflops").get<double>();
    const json& cpu = j.at("cpu");
    CHECK(cpu.at("model_name").is_string());
    // The work splits derived for this CPU (core/tuning.h), so each host's run shows them.
    CHECK(j.at("tuning").at("gemm_grain_macs").get<int64_t>() > 0);
    CHECK(j.at("tuning").at("elementwise_grain").get<int64_t>() > 0);
    const double fp32_peak = cpu.at("peak_gflops_per_core").at("fp32_fma").get<double>();
    REQUIRE(fp32_peak > 0);
    // MFU is gflops / peak before either is rounded: the printed GFLOP/s is off by up to 0.05 (that is
    // 0.05 / peak in MFU, large where a sanitized build measures a small peak) and MFU by 0.0005.
    auto mfu_margin = [](double peak) { return 0.05 / peak + 0.0005 + 1e-9; };
    CHECK(j.at("mfu_fp32_peak").get<double>() == Approx(printed_gflops / fp32_peak).margin(mfu_margin(fp32_peak)));
    if (bf16_cpu) {
      // Against the peak of what the bf16 products run on: AMX's where the CPU has it, else VDPBF16PS's.
      const double amx_peak = cpu.at("peak_gflops_per_core").at("bf16_amx").get<double>();
      const double bf16_peak = amx_peak > 0 ? amx_peak : cpu.at("peak_gflops_per_core").at("bf16_dot").get<double>();
      CHECK(j.at("mfu_bf16_peak").get<double>() == Approx(printed_gflops / bf16_peak).margin(mfu_margin(bf16_peak)));
    } else {
      CHECK(j.at("mfu_bf16_peak").is_null());
    }
  }
  require_clean_error(run_heed(cat({"bench", "--data", corpus, "--precision", "fp16"}, kModel)), 2,
                      {"--precision fp16", "fp32 or bf16"});
}

TEST_CASE("heed train and bench --profile print time per op type, forward and backward apart, and the GEMM share", "[cli]") {
  ScratchDir dir("profile");
  const std::string corpus = write_corpus(dir);
  for (const char* cmd : {"bench", "train"}) {
    INFO(cmd);
    std::vector<std::string> args = cat({cmd, "--data", corpus, "--profile"}, kModel);
    if (std::string(cmd) == "bench") args = cat(args, {"--iters", "3"});
    else args = cat(args, {"--out", dir / "run", "--max-iters", "4", "--eval-interval", "2", "--eval-iters", "1",
                            "--sample-tokens", "0"});
    ProcessResult r = run_heed(args);
    require_ok(r);
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    // Rows "op phase ms/iter share calls/it"; collect (op, phase).
    std::set<std::pair<std::string, std::string>> rows;
    // train prints the table after its log on stdout; bench on stderr, its stdout being the JSON.
    std::istringstream in(std::string(cmd) == "train" ? r.out : r.err);
    std::string line;
    const std::regex row(R"(^\s+(\w+)\s+(forward|backward|step)\s+[0-9.]+\s+[0-9.]+%\s+[0-9.]+\s*$)");
    double gemm_share = -1;
    const std::regex gemm(R"(GEMM ops .*: ([0-9.]+)% of attributed time)");
    while (std::getline(in, line)) {
      std::smatch m;
      if (std::regex_match(line, m, row)) rows.insert({m[1], m[2]});
      if (std::regex_search(line, m, gemm)) gemm_share = std::stod(m[1]);
    }
    for (const char* op : {"linear", "add", "attention_heads", "layer_norm", "gelu", "cross_entropy"}) {
      INFO(op);
      CHECK(rows.count({op, "forward"}) == 1);
      CHECK(rows.count({op, "backward"}) == 1);
    }
    CHECK(rows.count({"adamw", "step"}) == 1);
    CHECK(gemm_share > 0);
    CHECK(gemm_share < 100);
  }
}

// bench's tuning.fp32_products is what core/ops/sgemm.h's rule gives for `cpu` (this one, or it
// capped as the child was), the OpenBLAS kernels the child reports and HEED_FP32_PRODUCTS=`choice`.
static void check_fp32_kernel(const json& tuning, const char* choice, const CpuInfo& cpu = cpu_info()) {
  const bool fits = detail::openblas_kernels_fit_cpu(tuning.at("openblas_kernels").get<std::string>(), cpu.avx2, cpu.fma);
  const bool onednn = detail::fp32_products_on_onednn(choice, cpu.avx512f, fits);
  CHECK(tuning.at("fp32_products").get<std::string>().rfind(onednn ? "oneDNN " : "OpenBLAS cblas_sgemm", 0) == 0);
}

TEST_CASE("HEED_FP32_PRODUCTS chooses the fp32 product kernel bench reports, and a bad value is a clean error", "[cli]") {
  ScratchDir dir("bench_kernel");
  const std::string corpus = write_corpus(dir);
  const std::vector<std::string> args = cat({"bench", "--data", corpus, "--iters", "1"}, kModel);
  for (const char* value : {"openblas", "onednn", ""}) {
    INFO("HEED_FP32_PRODUCTS=" << value);
    RunOptions opt;
    opt.env = {std::string("HEED_FP32_PRODUCTS=") + value};  // empty: as unset
    ProcessResult r = run_heed(args, opt);
    require_ok(r);
    check_fp32_kernel(json::parse(r.out).at("tuning"), value);
  }
  RunOptions bad;
  bad.env = {"HEED_FP32_PRODUCTS=mkl"};
  require_clean_error(run_heed(args, bad), 1, {"HEED_FP32_PRODUCTS", "mkl", "onednn or openblas"});
}

TEST_CASE("HEED_MAX_CPU_ISA caps the CPU bench reports and the kernels it runs on, and a bad value is a clean error", "[cli]") {
  if (cpu_info().max_isa != CpuIsaCap::all) {
    WARN("this process runs under HEED_MAX_CPU_ISA=" << cpu_isa_cap_name(cpu_info().max_isa)
                                                     << ": the children's caps not checked");
    return;
  }
  ScratchDir dir("bench_max_isa");
  const std::string corpus = write_corpus(dir);
  const std::vector<std::string> args = cat({"bench", "--data", corpus, "--iters", "1"}, kModel);
  for (const char* cap : {"avx2", "AVX512_CORE_BF16", "sse41"}) {
    INFO("HEED_MAX_CPU_ISA=" << cap);
    RunOptions opt;
    opt.env = {std::string("HEED_MAX_CPU_ISA=") + cap, "HEED_FP32_PRODUCTS="};
    const CpuInfo expected = capped_cpu_info(cpu_info(), parse_cpu_isa_cap(cap));
    const bool bf16_hardware = expected.avx512_bf16 && expected.avx512bw;
    ProcessResult r = run_heed(cat(args, {"--precision", bf16_hardware ? "bf16" : "fp32"}), opt);
    require_ok(r);
    const json report = json::parse(r.out);
    const json& cpu = report.at("cpu");
    const json& tuning = report.at("tuning");
    std::string lower = cap;
    for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    CHECK(cpu.at("max_isa") == lower);  // oneDNN's name in lower case
    CHECK(cpu.at("compiled_for") == std::string(compiled_vector_isa()));  // the build's, whatever the cap
    CHECK(cpu.at("isa").at("fma") == expected.fma);
    CHECK(cpu.at("isa").at("avx2") == expected.avx2);
    CHECK(cpu.at("isa").at("avx512f") == expected.avx512f);
    CHECK(cpu.at("isa").at("avx512_bf16") == expected.avx512_bf16);
    CHECK(cpu.at("isa").at("amx_bf16") == false);
    CHECK(cpu.at("vector_bits") == expected.vector_bytes * 8);
    CHECK(cpu.at("peak_gflops_per_core").at("bf16_amx") == 0.0);
    if (!expected.avx512_bf16) CHECK(cpu.at("peak_gflops_per_core").at("bf16_dot") == 0.0);
    CHECK(tuning.at("bf16_products") == (bf16_hardware ? "AVX512_BF16 VDPBF16PS" : "emulated on fp32 FMAs"));
    check_fp32_kernel(tuning, "", expected);
    if (!expected.avx512f) CHECK(tuning.at("fp32_products").get<std::string>().find("A^T B") == std::string::npos);
    if (!bf16_hardware) {  // the command line refuses the emulated bf16 kernel, naming the cap
      require_clean_error(run_heed(cat(args, {"--precision", "bf16"}), opt), 1,
                          {"--precision bf16 needs a CPU with AVX512_BF16", "HEED_MAX_CPU_ISA=" + lower});
    }
  }
  RunOptions all;
  all.env = {"HEED_MAX_CPU_ISA=ALL"};
  ProcessResult uncapped = run_heed(args, all);
  require_ok(uncapped);
  const json uncapped_cpu = json::parse(uncapped.out).at("cpu");
  CHECK(uncapped_cpu.at("max_isa") == "all");
  CHECK(uncapped_cpu.at("isa").at("avx512f") == cpu_info().avx512f);
  // The cap reaches oneDNN: with OpenBLAS on its SSE3 kernels (which miss an AVX2 CPU), the fp32
  // products run on oneDNN, at most on AVX2.
  RunOptions sse3_openblas;
  sse3_openblas.env = {"HEED_MAX_CPU_ISA=avx2", "OPENBLAS_CORETYPE=Prescott", "HEED_FP32_PRODUCTS="};
  ProcessResult r = run_heed(args, sse3_openblas);
  require_ok(r);
  const json tuning = json::parse(r.out).at("tuning");
  if (tuning.at("openblas_kernels") == "Prescott") {
    CHECK(tuning.at("fp32_products").get<std::string>().rfind("oneDNN ", 0) == 0);
    CHECK(tuning.at("fp32_products").get<std::string>().find(" (avx2) ") != std::string::npos);
  } else {
    WARN("OPENBLAS_CORETYPE=Prescott ignored (OpenBLAS picked " << tuning.at("openblas_kernels") << ")");
  }
  RunOptions bad;
  bad.env = {"HEED_MAX_CPU_ISA=avx3"};
  require_clean_error(run_heed(args, bad), 1, {"HEED_MAX_CPU_ISA", "'avx3'", "avx512_core_bf16"});
}

TEST_CASE("OpenBLAS's kernels are reported, and fp32 products leave them where they miss the CPU", "[cli]") {
  // OPENBLAS_CORETYPE=Prescott makes OpenBLAS load its SSE3 kernels, as Debian 12's 0.3.21 does by
  // itself on CPUs newer than it (an Emerald Rapids Xeon, family 6 model 207).
  ScratchDir dir("bench_openblas_core");
  const std::string corpus = write_corpus(dir);
  const std::vector<std::string> args = cat({"bench", "--data", corpus, "--iters", "1"}, kModel);
  RunOptions opt;
  opt.env = {"OPENBLAS_CORETYPE=Prescott", "HEED_FP32_PRODUCTS="};
  ProcessResult r = run_heed(args, opt);
  require_ok(r);
  const json tuning = json::parse(r.out).at("tuning");
  const std::string core = tuning.at("openblas_kernels").get<std::string>();
  if (core != "Prescott") {
    WARN("this OpenBLAS ignores OPENBLAS_CORETYPE (not a DYNAMIC_ARCH build?): it runs " << core);
    return;
  }
  // SSE3 kernels on a CPU with AVX2 and FMA: oneDNN (on an AVX-512 CPU it would be anyway).
  check_fp32_kernel(tuning, "");
  // Asked for, OpenBLAS it is, whatever its kernels.
  opt.env = {"OPENBLAS_CORETYPE=Prescott", "HEED_FP32_PRODUCTS=openblas"};
  r = run_heed(args, opt);
  require_ok(r);
  CHECK(json::parse(r.out).at("tuning").at("fp32_products") == "OpenBLAS cblas_sgemm");
}

#ifdef HEED_TEST_SECCOMP
// In the child before exec: Linux refuses the AMX permission request (arch_prctl
// ARCH_REQ_XCOMP_PERM, 0x1023) with EINVAL, as kernels before 5.16 do. A seccomp filter survives
// exec; exit 125 if it cannot be installed (a sandbox without seccomp).
static void refuse_amx_permission() {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_arch_prctl, 0, 3),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x1023, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EINVAL & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog program{static_cast<unsigned short>(sizeof(filter) / sizeof(filter[0])), filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) _exit(125);
}

TEST_CASE("AMX present but refused by Linux: bf16 runs on VDPBF16PS, bench says so, and train works", "[cli]") {
  // A Sapphire Rapids under a kernel older than 5.16 has the AMX flags in CPUID but no permission
  // for the tile data: heed must not execute a tile instruction (SIGILL), only fall back.
  ScratchDir dir("bench-amx-refused");
  const std::string corpus = write_corpus(dir);
  RunOptions refused;
  refused.in_child = refuse_amx_permission;
  ProcessResult probe = run_heed({"--version"}, refused);
  if (probe.exit_code == 125) {
    WARN("seccomp filters cannot be installed here: the refusal is not simulated");
    return;
  }
  require_ok(probe);
  if (!cpu_info().amx_bf16) WARN("this CPU has no AMX: Linux is never asked, so the refusal changes nothing here");
  // fp32 runs and reports no AMX peak; bf16 runs on VDPBF16PS where the CPU has it.
  ProcessResult r = run_heed(cat({"bench", "--data", corpus, "--iters", "2"}, kModel), refused);
  require_ok(r);
  const json j = json::parse(r.out);
  CHECK(j.at("cpu").at("peak_gflops_per_core").at("bf16_amx").get<double>() == 0.0);
  const bool bf16_cpu = cpu_info().avx512_bf16 && cpu_info().avx512bw;
  CHECK(j.at("tuning").at("bf16_products") == (bf16_cpu ? "AVX512_BF16 VDPBF16PS" : "emulated on fp32 FMAs"));
  if (!bf16_cpu) return;  // --precision bf16 is refused there (the case above)
  ProcessResult b = run_heed(cat({"bench", "--data", corpus, "--iters", "2", "--precision", "bf16"}, kModel), refused);
  require_ok(b);
  CHECK(json::parse(b.out).at("precision") == "bf16");
  ProcessResult t = run_heed(cat({"train", "--data", corpus, "--out", dir / "run", "--max-iters", "3", "--eval-iters",
                                  "1", "--sample-tokens", "20", "--precision", "bf16"},
                                 kModel),
                             refused);
  require_ok(t);
  // and says why bf16 may be slower than fp32 here, where the CPU has AMX (examples/heed/precision.h)
  if (cpu_info().amx_bf16) CHECK(t.err.find("Linux did not let heed use it") != std::string::npos);
  // Without the filter, the same CPU reports what it runs on: AMX where Linux grants it.
  ProcessResult granted = run_heed(cat({"bench", "--data", corpus, "--iters", "1"}, kModel));
  require_ok(granted);
  CHECK(json::parse(granted.out).at("tuning").at("bf16_products") == bf16_product_kernel());
}
#endif
