// --precision, the one definition shared by train, bench, eval and sample: fp32, or bf16 mixed
// precision (core/autocast.h: matrix products with bf16 inputs and fp32 accumulation, everything
// else fp32, checkpoints fp32).
#pragma once

#include <cstdio>
#include <string>

#include "commands.h"
#include "core/check.h"
#include "core/cpu.h"
#include "core/ops/gemm_bf16.h"
#include "options.h"

namespace heed::cli {

/// The option's row in a subcommand's table (`role`: recipe for training, local elsewhere).
template <class T>
Option<T> precision_option(std::string T::*member, Role role) {
  return {"precision", "precision", {}, member, std::string("fp32"), {},
          "fp32, or bf16: matrix products with bf16 inputs and fp32 sums (needs a CPU with AVX512_BF16 or AMX)", role,
          false, false, /*added_later=*/true};  // runs recorded before --precision existed trained in fp32
}

/// True for "bf16", false for "fp32"; anything else is a UsageError naming the flag, and bf16 on a
/// CPU with neither AVX512_BF16 nor AMX-BF16 (bf16_kernel() would be the emulated one) a heed::Error
/// naming the CPU (the emulated kernel is several times slower than fp32: heed refuses rather than
/// run it silently).
inline bool precision_is_bf16(const std::string& precision) {
  if (precision != "fp32" && precision != "bf16") throw UsageError("--precision " + precision + ": must be fp32 or bf16");
  if (precision == "fp32") return false;
  HEED_CHECK(bf16_kernel() != Bf16Kernel::emulated, "--precision bf16 needs a CPU with AVX512_BF16 or AMX-BF16; ",
             "this one (", cpu_info().model_name,
             cpu_info().max_isa == CpuIsaCap::all
                 ? std::string()
                 : std::string(", capped by HEED_MAX_CPU_ISA=") + cpu_isa_cap_name(cpu_info().max_isa),
             ") has neither: use --precision fp32");
  // A CPU with AMX whose tiles Linux did not grant (before 5.16, or refused) runs the products on
  // VDPBF16PS, which on such a Xeon is half the fp32 FMA rate: bf16 would train more slowly than
  // fp32, so say so (once per process) rather than let it pass unnoticed.
  static bool warned = false;
  if (cpu_info().amx_bf16 && !amx_ready() && !warned) {
    warned = true;
    std::fprintf(stderr,
                 "heed: warning: this CPU has AMX but Linux did not let heed use it (Linux 5.16 or later "
                 "needed): bf16 products run on VDPBF16PS, which can be slower than --precision fp32 here\n");
  }
  return true;
}

}  // namespace heed::cli
