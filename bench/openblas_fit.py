"""OpenBLAS's kernels for the PyTorch reference: the ones that fit this CPU.

OpenBLAS picks its kernels from a table of CPU models when it loads; Debian 12's 0.3.21 gives an
Intel CPU of family 6 and extended model 0xB or later (Raptor Lake, an Emerald Rapids Xeon: model
207) its SSE3 "Prescott" kernels (its dynamic.c falls through to the Pentium 4 case; fixed in
0.3.25), a fifth to two-fifths of the speed, and PyTorch's float32 products run on them. A ratio
against that reference would measure OpenBLAS's table, not PyTorch. So the benchmarks set
OPENBLAS_CORETYPE (read when the library loads) for the reference, when it is unset and
OpenBLAS's own choice misses the CPU's vector instructions, to kernels that use them, and say so.
This rule is stricter than heed's own (core/ops/sgemm.h, openblas_kernels_fit_cpu, which only
asks for AVX2 and FMA kernels, since heed runs float32 on oneDNN on AVX-512 CPUs anyway): here an
AVX-512 CPU gets AVX-512 kernels, as the reference would on a CPU OpenBLAS knows.
"""
import subprocess

# The OpenBLAS 0.3.21 kernels that use AVX2 and FMA (core/ops/sgemm.cpp's list), and of those the
# AVX-512 ones; compared in lower case (a build for one target names it in capitals).
FITS_AVX2 = ("haswell", "zen", "skylakex", "cooperlake", "sapphirerapids")
FITS_AVX512 = ("skylakex", "cooperlake", "sapphirerapids")


def cpu_flags():
    """This CPU's flags and vendor, from /proc/cpuinfo (empty if unreadable)."""
    flags, vendor = set(), ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags") and not flags:
                    flags = set(line.split(":", 1)[1].split())
                elif line.startswith("vendor_id") and not vendor:
                    vendor = line.split(":", 1)[1].strip()
    except OSError:
        pass
    return flags, vendor


def openblas_core(env):
    """openblas_get_corename() of a fresh process with this environment, or None."""
    code = ("import ctypes; l = ctypes.CDLL('libopenblas.so.0'); l.openblas_get_corename.restype = ctypes.c_char_p; "
            "print(l.openblas_get_corename().decode())")
    p = subprocess.run(["/usr/bin/python3", "-c", code], env=env, capture_output=True, text=True)
    return (p.stdout.strip() or None) if p.returncode == 0 else None


def fitting_core(flags, vendor):
    """The OpenBLAS kernels to ask for on a CPU with these flags, or None (nothing newer than SSE)."""
    if "avx512f" in flags and "avx512bw" in flags and "avx512vl" in flags:
        return "Cooperlake" if "avx512_bf16" in flags else "SkylakeX"
    if "avx2" in flags and "fma" in flags:
        return "Zen" if vendor == "AuthenticAMD" else "Haswell"
    return None


def fit_openblas(env):
    """Sets env["OPENBLAS_CORETYPE"] where OpenBLAS's own choice misses this CPU's vector
    instructions (and it is unset). Returns a line saying what OpenBLAS runs, for the record.
    A build of OpenBLAS for one target ignores the variable: the line then says it still runs
    the old kernels."""
    core = openblas_core(env)
    if "OPENBLAS_CORETYPE" in env:
        return f"OPENBLAS_CORETYPE={env['OPENBLAS_CORETYPE']} (given): OpenBLAS runs {core}"
    flags, vendor = cpu_flags()
    wanted = fitting_core(flags, vendor)
    fits = FITS_AVX512 if wanted and wanted.lower() in FITS_AVX512 else FITS_AVX2
    if wanted is None or core is None or core.lower() in fits:
        return f"OPENBLAS_CORETYPE unset: OpenBLAS runs {core}"
    env["OPENBLAS_CORETYPE"] = wanted
    return (f"OPENBLAS_CORETYPE={wanted} set here: OpenBLAS took this CPU for {core}, "
            f"whose kernels miss its vector instructions (now runs {openblas_core(env)})")
