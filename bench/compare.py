#!/usr/bin/env python3
"""heed vs PyTorch, side by side: runs `heed bench` and the PyTorch reference
(scripts/torch_reference.py --bench) alternately (A B A B ...) for each config, and prints
per config the heed/PyTorch ratio of tokens/s (median and spread over the pairs), the peak RSS
of each program, and the model FLOP utilisation (MFU) of each against the machine's measured
2-thread SGEMM peak (OpenBLAS's cblas_sgemm on 2048 x 2048 matrices, timed here: sgemm_peak).

FLOPs per iteration (nanoGPT's estimate_mfu, PaLM appendix B), for one forward+backward:
    (6 * N + 12 * n_layer * n_embd * block_size) * block_size * batch_size
with N the parameters less the position embedding (the tied lm_head counted once).

Usage: bench/compare.sh [--pairs 3] [--configs tiny baby small] [--heed build/heed]
                        [--torch-splits 2,2 1,2] [--iters-scale 1.0]
Each pair runs heed, then PyTorch under every thread split; the ratio uses PyTorch's fastest.
Both programs run in this environment (say which OPENBLAS_CORETYPE, if any, when quoting).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
REFERENCE = os.path.join(ROOT, "scripts", "torch_reference.py")

CONFIGS = {  # n_layer, n_head, n_embd, block_size, batch_size, bench iterations
    "tiny": (2, 2, 64, 32, 8, 200),
    "baby": (4, 4, 128, 64, 12, 50),
    "small": (6, 6, 384, 256, 16, 5),
}


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


def main():
    ap = argparse.ArgumentParser(description="heed vs PyTorch tokens/s, alternating runs")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--configs", nargs="+", default=list(CONFIGS))
    ap.add_argument("--heed", default=os.path.join(ROOT, "build", "heed"))
    ap.add_argument("--torch-splits", nargs="+", default=["2,2", "1,2"],
                    help="PyTorch's --threads,--blas_threads settings; each pair runs every one "
                         "and compares heed with PyTorch's fastest")
    ap.add_argument("--iters-scale", type=float, default=1.0)
    a = ap.parse_args()
    env = dict(os.environ)
    splits = [tuple(x.split(",")) for x in a.torch_splits]
    peak = sgemm_peak(env)
    print(f"# OPENBLAS_CORETYPE={env.get('OPENBLAS_CORETYPE', '(unset)')}; "
          f"2-thread SGEMM peak (square 2048, median): {peak} GFLOP/s; "
          f"PyTorch splits (--threads,--blas_threads): {' '.join(a.torch_splits)}", flush=True)
    print("# MFU = training FLOPs per iteration / seconds per iteration / SGEMM peak, with FLOPs per "
          "iteration = (6 N + 12 n_layer n_embd block_size) * block_size * batch_size (nanoGPT's "
          "estimate_mfu; N = parameters less the position embedding)", flush=True)
    summary = []
    for name in a.configs:
        L, H, C, T, B, iters = CONFIGS[name]
        iters = max(2, int(iters * a.iters_scale))
        flags = ["--n-layer", str(L), "--n-head", str(H), "--n-embd", str(C), "--block-size", str(T),
                 "--batch-size", str(B), "--dropout", "0"]
        heed_cmd = [a.heed, "bench", *flags, "--no-bias", "--threads", "2", "--iters", str(iters)]
        torch_cmds = {f"{tt},{tb}": ["/usr/bin/python3", REFERENCE, *flags,
                                    "--threads", tt, "--blas-threads", tb, "--bench", str(iters)]
                      for tt, tb in splits}
        ratios, heed_tps, torch_tps, fl = [], [], [], None
        heed_rss, torch_rss = [], []
        for pair in range(a.pairs):
            h = run(heed_cmd, env)
            runs = {split: run(cmd, env) for split, cmd in torch_cmds.items()}
            best = max(runs, key=lambda k: runs[k]["tokens_per_s"])
            t = runs[best]
            heed_tps.append(h["tokens_per_s"])
            torch_tps.append(t["tokens_per_s"])
            ratios.append(h["tokens_per_s"] / t["tokens_per_s"])
            if h["params"] != t["params"]:
                sys.exit(f"{name}: heed has {h['params']} parameters, PyTorch {t['params']}")
            fl = t["flops_per_iter"]  # the reference's own count (formula in this file's doc)
            others = ", ".join(f"{k}: {v['ms_per_iter_median']:.2f}" for k, v in runs.items())
            print(f"  {name} pair {pair + 1}: heed {h['ms_per_iter']:.2f} ms/iter, "
                  f"torch {t['ms_per_iter_median']:.2f} ms/iter (split {best}; {others}), "
                  f"ratio {ratios[-1]:.2f}", flush=True)
            best_split = best
        heed_rss.append(child_rss(heed_cmd, env))
        torch_rss.append(child_rss(torch_cmds[best_split], env))
        mfu = lambda tps: (fl * tps / (T * B) / 1e9 / peak) if peak else None  # noqa: E731
        row = {"config": name, "ratio_median": round(statistics.median(ratios), 3),
               "ratio_min": round(min(ratios), 3), "ratio_max": round(max(ratios), 3),
               "heed_tokens_per_s": statistics.median(heed_tps),
               "torch_tokens_per_s": statistics.median(torch_tps),
               "flops_per_iter": fl,
               "heed_mfu": round(mfu(statistics.median(heed_tps)), 3) if peak else None,
               "torch_mfu": round(mfu(statistics.median(torch_tps)), 3) if peak else None,
               "heed_peak_rss_mib": heed_rss[0], "torch_peak_rss_mib": torch_rss[0]}
        summary.append(row)
        print(json.dumps(row), flush=True)
    print("\n| config | heed/PyTorch tokens/s (median, min–max) | heed MFU | PyTorch MFU | RSS heed / PyTorch (MiB) |")
    print("|---|---|---|---|---|")
    for r in summary:
        rss = (f"{r['heed_peak_rss_mib']:.0f} / {r['torch_peak_rss_mib']:.0f}"
               if r["heed_peak_rss_mib"] and r["torch_peak_rss_mib"] else "n/a")
        print(f"| {r['config']} | {r['ratio_median']:.2f}× ({r['ratio_min']:.2f}–{r['ratio_max']:.2f}) | "
              f"{r['heed_mfu']} | {r['torch_mfu']} | {rss} |")


if __name__ == "__main__":
    main()
