#!/usr/bin/env python3
"""heed vs PyTorch, side by side: runs `heed bench` and the PyTorch reference
(scripts/torch_reference.py --bench) alternately for each config, each pair running every heed
precision (--precision fp32 / bf16) and every PyTorch mode (fp32, and bf16 under
torch.autocast("cpu", dtype=torch.bfloat16)) in turn, and prints per config: the ratios of
tokens/s (median and spread over the pairs) of each heed precision to each PyTorch mode and of heed
bf16 to heed fp32, the peak RSS of each program, and the model FLOP utilisation (MFU) of each
against this CPU's measured per-core fp32 FMA and bf16 peaks (AMX's where it has AMX, else VDPBF16PS's) times the threads
(`heed bench` measures them: core/cpu.h). The host (CPU model, ISA, caches, peaks) and the load
(uptime) before and after are printed too, and at the end each speed target (TARGETS) the run
measured, with its median and whether it held; with each pair the fp32 FMA rate heed measured as each of
its runs started: on a busy VM that rate drops at times (on one, from 172 to 101-130 GFLOP/s a
core, presumably other guests on the same physical cores), and it says in which state the pair
ran. MFU is against the highest rate of the whole run. The 2-thread OpenBLAS SGEMM rate (cblas_sgemm on
2048 x 2048, timed here: sgemm_peak) is printed beside them as the practical fp32 ceiling.

FLOPs per iteration (nanoGPT's estimate_mfu, PaLM appendix B), for one forward+backward:
    (6 * N + 12 * n_layer * n_embd * block_size) * block_size * batch_size
with N the parameters less the position embedding (the tied lm_head counted once).

Usage: bench/compare.sh [--pairs 3] [--configs tiny baby small] [--heed build/heed]
                        [--precisions fp32 bf16] [--torch-precisions fp32 bf16]
                        [--threads 2] [--torch-splits 2,2 1,2] [--iters-scale 1.0]
Each PyTorch mode runs under every thread split in every pair; the ratios use, for each mode, the
split with the higher median over the pairs (the faster of the two runs pair by pair, which favours
PyTorch by the host's noise, is printed beside it).
Both programs run in this environment (say which OPENBLAS_CORETYPE, if any, when quoting), except
that where OpenBLAS's own choice of kernels misses this CPU's vector instructions the reference (and
the SGEMM probe) get OPENBLAS_CORETYPE set to ones that use them (bench/openblas_fit.py; the first
lines say so); heed runs as a user would.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

from openblas_fit import fit_openblas

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
REFERENCE = os.path.join(ROOT, "scripts", "torch_reference.py")

# The speed heed is held to (issue 16), as medians of the pairs: (config, ratio) -> at least this.
# The bf16 ones apply on a CPU with AVX512_BF16 or AMX, where `heed bench --precision bf16` runs.
TARGETS = {
    ("tiny", "heed fp32 / torch fp32"): 3.0,
    ("baby", "heed fp32 / torch fp32"): 2.0,
    ("small", "heed fp32 / torch fp32"): 1.5,
    ("small", "heed bf16 / torch fp32"): 2.2,
    ("small", "heed bf16 / torch bf16"): 1.2,
    ("tiny", "heed bf16 / heed fp32"): 1.0,
    ("baby", "heed bf16 / heed fp32"): 1.0,
}

CONFIGS = {  # n_layer, n_head, n_embd, block_size, batch_size, bench iterations
    "tiny": (2, 2, 64, 32, 8, 200),
    "baby": (4, 4, 128, 64, 12, 50),
    "small": (6, 6, 384, 256, 16, 5),
}



def bf16_peak(peaks):
    """The per-core peak of what heed's bf16 products run on: AMX where the CPU has it, else VDPBF16PS."""
    return peaks.get("bf16_amx") or peaks["bf16_dot"]

def run(cmd, env):
    """Runs cmd, returns the last JSON line of its stdout."""
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr}")
    line = [l for l in p.stdout.splitlines() if l.startswith("{")][-1]
    return json.loads(line)


def child_rss(cmd, env):
    """Peak RSS (MiB) of one run, measured with /usr/bin/time if present, else None."""
    if not os.path.exists("/usr/bin/time"):
        return None
    p = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, env=env, capture_output=True, text=True)
    try:
        return int(p.stderr.strip().splitlines()[-1]) / 1024.0
    except (ValueError, IndexError):
        return None


SGEMM_PROBE = r"""
import ctypes, statistics, sys, time
lib = ctypes.CDLL("libopenblas.so.0")  # loaded first: it reads OPENBLAS_CORETYPE now
import numpy as np
n, threads = 2048, int(sys.argv[1])
lib.openblas_set_num_threads(threads)
i, f, p = ctypes.c_int, ctypes.c_float, ctypes.c_void_p
lib.cblas_sgemm.argtypes = [i, i, i, i, i, i, f, p, i, p, i, f, p, i]
a, b = (np.random.default_rng(k).standard_normal((n, n), dtype=np.float32) for k in (0, 1))
c = np.empty((n, n), dtype=np.float32)
call = lambda: lib.cblas_sgemm(101, 111, 111, n, n, n, 1.0, a.ctypes.data, n, b.ctypes.data, n, 0.0, c.ctypes.data, n)
call()
rates = []
for _ in range(3):  # each repeat calls for at least 0.25 s
    calls, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < 0.25:
        call()
        calls += 1
    rates.append(2.0 * n ** 3 * calls / (time.perf_counter() - t0) / 1e9)
# a broken call must not pass for a fast one
assert abs(float(c[5, 7]) - float(a[5].astype(np.float64) @ b[:, 7].astype(np.float64))) < 1e-2
print(statistics.median(rates))
"""


def sgemm_peak(env, threads=2):
    """The median GFLOP/s of OpenBLAS's cblas_sgemm on 2048 x 2048 matrices, in this environment."""
    p = subprocess.run(["/usr/bin/python3", "-c", SGEMM_PROBE, str(threads)], env=env, capture_output=True, text=True)
    try:
        return round(float(p.stdout.strip().splitlines()[-1]), 1)
    except (ValueError, IndexError):
        return None


def load():
    """uptime's load averages, for the record of how busy the machine was."""
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "n/a"


def main():
    ap = argparse.ArgumentParser(description="heed vs PyTorch tokens/s, alternating runs")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--configs", nargs="+", default=list(CONFIGS))
    ap.add_argument("--heed", default=os.path.join(ROOT, "build", "heed"))
    ap.add_argument("--precisions", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16"],
                    help="heed's --precision values to run")
    ap.add_argument("--torch-precisions", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16"],
                    help="the reference's --precision values (bf16: torch.autocast)")
    ap.add_argument("--threads", type=int, default=2,
                    help="heed's --threads, and the thread count MFU's peak is multiplied by")
    ap.add_argument("--torch-splits", nargs="+", default=None,
                    help="PyTorch's --threads,--blas_threads settings (default with --threads 2: 2,2 and "
                         "1,2; else N,N); each pair runs every one, and heed is compared with the one of higher median "
                         "tokens/s over the pairs")
    ap.add_argument("--iters-scale", type=float, default=1.0)
    a = ap.parse_args()
    env = dict(os.environ)  # heed's: as a user runs it
    torch_env = dict(os.environ)  # the reference's: OpenBLAS's kernels fitted to the CPU (openblas_fit.py)
    if a.torch_splits is None:
        a.torch_splits = ["2,2", "1,2"] if a.threads == 2 else [f"{a.threads},{a.threads}"]
    splits = [tuple(x.split(",")) for x in a.torch_splits]
    print(f"# load before (1, 5, 15 min): {load()}", flush=True)
    print(f"# PyTorch's OpenBLAS: {fit_openblas(torch_env)}", flush=True)
    sgemm = sgemm_peak(torch_env, a.threads)
    print(f"# {a.threads}-thread SGEMM rate (square 2048, median): {sgemm} GFLOP/s; "
          f"PyTorch splits (--threads,--blas_threads): {' '.join(a.torch_splits)}", flush=True)
    print(f"# MFU = training FLOPs per iteration / seconds per iteration / ({a.threads} x the measured per-core peak), "
          "with FLOPs per iteration = (6 N + 12 n_layer n_embd block_size) * block_size * batch_size "
          "(nanoGPT's estimate_mfu; N = parameters less the position embedding)", flush=True)
    summary, host, tuning, peaks = [], None, None, None
    for name in a.configs:
        L, H, C, T, B, iters = CONFIGS[name]
        iters = max(2, int(iters * a.iters_scale))
        flags = ["--n-layer", str(L), "--n-head", str(H), "--n-embd", str(C), "--block-size", str(T),
                 "--batch-size", str(B), "--dropout", "0"]
        heed_cmds = {p: [a.heed, "bench", *flags, "--no-bias", "--threads", str(a.threads), "--iters", str(iters),
                         "--precision", p] for p in a.precisions}
        torch_cmds = {(p, f"{tt},{tb}"): ["/usr/bin/python3", REFERENCE, *flags, "--threads", tt,
                                          "--blas-threads", tb, "--bench", str(iters), "--precision", p]
                      for p in a.torch_precisions for tt, tb in splits}
        # Every run of every pair, kept: {key: [result per pair]}, key "heed fp32" or "torch fp32 (2,2)".
        results = {}
        for pair in range(a.pairs):
            probes = []  # heed's fp32 FMA probe at the start of each of its runs: the host's state then
            got = {}
            for p, cmd in heed_cmds.items():
                h = run(cmd, env)
                got[f"heed {p}"] = h
                host = host or h["cpu"]
                tuning = tuning or h.get("tuning")
                probe = h["cpu"]["peak_gflops_per_core"]
                probes.append(probe["fp32_fma"])
                # The CPU's peaks: the highest of the run's probes (a busy host lowers some of them).
                peaks = {k: max(probe.get(k, 0), (peaks or {}).get(k, 0)) for k in ("fp32_fma", "bf16_dot", "bf16_amx")}
            for (p, split), cmd in torch_cmds.items():
                got[f"torch {p} ({split})"] = run(cmd, torch_env)
            params = {v["params"] for v in got.values()}
            if len(params) != 1:
                sys.exit(f"{name}: parameter counts differ: {params}")
            for k, v in got.items():
                results.setdefault(k, []).append(v)
            times = ", ".join(f"{k} {v.get('ms_per_iter', v.get('ms_per_iter_median')):.2f} ms" for k, v in got.items())
            print(f"  {name} pair {pair + 1}: {times}; heed's fp32 FMA probe "
                  f"{', '.join(f'{x:.0f}' for x in probes)} GFLOP/s a core", flush=True)
        # PyTorch's faster split for each mode: the one with the higher median tokens/s over the
        # pairs, then every pair compared against that split's run. (Taking the faster of the two
        # runs pair by pair instead gives PyTorch the better of two samples of the host's noise
        # wherever the splits are about as fast: "per-pair fastest" below, printed for comparison.)
        tps = {f"heed {p}": [r["tokens_per_s"] for r in results[f"heed {p}"]] for p in a.precisions}
        best_split, fl = {}, None
        fastest_per_pair = {}
        for p in a.torch_precisions:
            by_split = {split: [r["tokens_per_s"] for r in results[f"torch {p} ({split})"]] for (q, split) in torch_cmds if q == p}
            best_split[p] = max(by_split, key=lambda k: statistics.median(by_split[k]))
            tps[f"torch {p}"] = by_split[best_split[p]]
            if len(by_split) > 1:
                fastest_per_pair[f"torch {p}"] = [max(x) for x in zip(*by_split.values())]
            fl = results[f"torch {p} ({best_split[p]})"][0]["flops_per_iter"]  # the reference's own count
        ratios, per_pair_fastest = {}, {}
        for num in (k for k in tps if k.startswith("heed")):
            for den in tps:
                if den == num or (den.startswith("heed") and not (num == "heed bf16" and den == "heed fp32")):
                    continue
                ratios[f"{num} / {den}"] = [x / y for x, y in zip(tps[num], tps[den])]
                if den in fastest_per_pair:
                    per_pair_fastest[f"{num} / {den}"] = [x / y for x, y in zip(tps[num], fastest_per_pair[den])]
        for k, v in ratios.items():
            print(f"  {name} {k}: " + ", ".join(f"{x:.2f}" for x in v) +
                  (f" (per-pair fastest split: " + ", ".join(f"{x:.2f}" for x in per_pair_fastest[k]) + ")"
                   if k in per_pair_fastest else ""), flush=True)
        rss = {f"heed {p}": child_rss(cmd, env) for p, cmd in heed_cmds.items()}
        rss.update({f"torch {p}": child_rss(torch_cmds[(p, best_split[p])], torch_env) for p in a.torch_precisions})

        summary.append({"config": name, "flops_per_iter": fl, "tokens": T * B,
                        "tokens_per_s": {k: statistics.median(v) for k, v in tps.items()},
                        "ratios": {k: {"median": round(statistics.median(v), 3), "min": round(min(v), 3),
                                       "max": round(max(v), 3)} for k, v in ratios.items()},
                        "ratios_per_pair_fastest_split": {k: round(statistics.median(v), 3) for k, v in per_pair_fastest.items()},
                        "peak_rss_mib": rss, "torch_best_split": best_split})
    # MFU once every config has run: against the highest probe of the whole run.
    def mfu(row, tokens_per_s, peak):
        return round(row["flops_per_iter"] * tokens_per_s / row["tokens"] / 1e9 / (a.threads * peak), 3) if peak else None
    for row in summary:
        row["mfu_fp32_peak"] = {k: mfu(row, v, peaks["fp32_fma"]) for k, v in row["tokens_per_s"].items()}
        row["mfu_bf16_peak"] = {k: mfu(row, v, bf16_peak(peaks)) for k, v in row["tokens_per_s"].items()}
        print(json.dumps(row), flush=True)
    print(f"# load after (1, 5, 15 min): {load()}")
    if host:
        print(f"# host: {host['model_name']} ({host['vendor']} family {host['family']} model {host['model']}), "
              f"isa {','.join(k for k, v in host['isa'].items() if v)}, per-core peaks (the highest of the run's "
              f"probes; MFU is against these) fp32 {peaks['fp32_fma']} / bf16 dot {peaks['bf16_dot']} / "
              f"bf16 AMX {peaks.get('bf16_amx', 0)} GFLOP/s")
        print("# cpu_json: " + json.dumps(host))
    if tuning:  # the work splits heed derived for this host (core/tuning.h)
        print("# heed tuning: " + json.dumps(tuning))
    print("\n| config | ratio (median, min–max over pairs) | | MFU vs fp32 peak | MFU vs bf16 peak |")
    print("|---|---|---|---|---|")
    for r in summary:
        for k, v in r["ratios"].items():
            num = k.split(" / ")[0]
            print(f"| {r['config']} | {k} | {v['median']:.2f}× ({v['min']:.2f}–{v['max']:.2f}) | "
                  f"{r['mfu_fp32_peak'][num]} | {r['mfu_bf16_peak'][num]} |")
        for k in r["tokens_per_s"]:
            if k.startswith("torch"):
                print(f"| {r['config']} | {k} (reference) | | {r['mfu_fp32_peak'][k]} | {r['mfu_bf16_peak'][k]} |")
    # Each target this run measured, with its median: what a session on a new CPU reports.
    checked = [(r["config"], k, target, r["ratios"][k]["median"]) for (config, k), target in TARGETS.items()
               for r in summary if r["config"] == config and k in r["ratios"]]
    if checked:
        print("\n| config | ratio | target | median | |")
        print("|---|---|---|---|---|")
        for config, k, target, median in checked:
            print(f"| {config} | {k} | ≥ {target:.1f}× | {median:.2f}× | {'held' if median >= target else 'MISSED'} |")


if __name__ == "__main__":
    main()
