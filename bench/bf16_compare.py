#!/usr/bin/env python3
"""bf16 products side by side: runs build/heed_bench_bf16 (bench/bf16_gemm.cpp) once per product,
thread count and implementation, each in its own process (oneDNN's OpenMP threads and heed's pool
then never spin against each other), the implementations of one product back to back in an order
that rotates every round, for several rounds. Prints, per config, a markdown table of GFLOP/s and
percent of the measured bf16 peak (threads x the per-core peak of core/cpu.h), best of the rounds,
and the total over the products of a layer.

On a shared machine the best of several alternating rounds is the figure least disturbed by other
work; quote it with the load averages printed here, and only compare figures from one run.

Usage: bench/bf16_compare.py [--bench build/heed_bench_bf16] [--rounds 3] [--configs small baby tiny]
                             [--groups linear attention] [--threads 1 2] [--impls heed dnnl dnnl+cvt sgemm]
"""
import argparse
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

LINEAR = [f"{layer}/{p}" for layer in ("c_attn", "attn_c_proj", "c_fc", "mlp_c_proj") for p in ("fwd", "dx", "dw")]
ATTENTION = ["scores", "pv", "dp", "dq", "dk", "dv"]


def run_one(bench, name, min_time):
    """(seconds per iteration, flops per iteration, context) of one benchmark, in its own process."""
    p = subprocess.run([bench, f"--benchmark_filter=^{re.escape(name)}/real_time$", f"--benchmark_min_time={min_time}",
                        "--benchmark_format=json"], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"failed: {name}\n{p.stderr}")
    out = json.loads(p.stdout)
    if not out["benchmarks"]:
        return None  # not built in (oneDNN absent)
    b = out["benchmarks"][0]
    secs = b["real_time"] * {"ms": 1e-3, "us": 1e-6, "ns": 1e-9}[b["time_unit"]]
    return secs, b["GFLOP/s"] * secs, out["context"]


def main():
    ap = argparse.ArgumentParser(description="bf16 products: heed vs oneDNN vs OpenBLAS sgemm, alternating")
    ap.add_argument("--bench", default=os.path.join(ROOT, "build", "heed_bench_bf16"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--configs", nargs="+", default=["small", "baby", "tiny"])
    ap.add_argument("--groups", nargs="+", default=["linear", "attention"])
    ap.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--impls", nargs="+", default=["heed", "dnnl", "dnnl+cvt", "sgemm"])
    ap.add_argument("--min-time", type=float, default=0.2)
    a = ap.parse_args()

    best = {}  # (group, config, product, threads, impl) -> (secs, flops)
    peak, cpu, loads = 0.0, None, []
    for rnd in range(a.rounds):
        loads.append(os.getloadavg())
        order = a.impls[rnd % len(a.impls):] + a.impls[:rnd % len(a.impls)]
        for cfg in a.configs:
            for group in a.groups:
                for prod in (LINEAR if group == "linear" else ATTENTION):
                    for th in a.threads:
                        for impl in order:
                            key = (group, cfg, prod, th, impl)
                            r = run_one(a.bench, f"{group}/{cfg}/{prod}/{impl}/threads:{th}", a.min_time)
                            if r is None:
                                continue
                            secs, flops, ctx = r
                            cpu = json.loads(ctx["heed_cpu"])
                            pk = cpu["peak_gflops_per_core"]
                            peak = max(peak, pk.get("bf16_amx") or pk["bf16_dot"])
                            if key not in best or secs < best[key][0]:
                                best[key] = (secs, flops)
        print(f"# round {rnd + 1} done, load average at its start {loads[-1]}", file=sys.stderr, flush=True)
    print(f"# {json.dumps(cpu)}")
    print(f"# load averages at the start of each round: {[tuple(round(x, 2) for x in l) for l in loads]}")
    print(f"# best of {a.rounds} alternating rounds; bf16 peak {peak} GFLOP/s per core")
    for group in a.groups:
        for cfg in a.configs:
            for th in a.threads:
                impls = [i for i in a.impls if any(k[4] == i for k in best)]
                print(f"\n{group}, {cfg}, {th} thread{'s' if th > 1 else ''}: GFLOP/s (% of {th} x {peak})\n")
                print("| product | " + " | ".join(impls) + " |")
                print("|---" * (len(impls) + 1) + "|")
                total = {i: [0.0, 0.0] for i in impls}
                for prod in (LINEAR if group == "linear" else ATTENTION):
                    cells = []
                    for i in impls:
                        secs, flops = best[(group, cfg, prod, th, i)]
                        total[i][0] += secs
                        total[i][1] += flops
                        g = flops / secs / 1e9
                        cells.append(f"{g:.1f} ({100 * g / (peak * th):.0f} %)")
                    print(f"| {prod} | " + " | ".join(cells) + " |")
                cells = [f"**{total[i][1] / total[i][0] / 1e9:.1f}** ({100 * total[i][1] / total[i][0] / 1e9 / (peak * th):.0f} %), "
                         f"{total[i][0] * 1e3:.2f} ms" for i in impls]
                print("| all, per layer | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
