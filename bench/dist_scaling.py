#!/usr/bin/env python3
"""Data-parallel scaling on one machine: one process with T threads against mpirun -np N with
T/N threads each, with and without overlapping the gradient reduction with the backward pass.

Runs build/heed_dist_train (tests/dist/train_driver.cpp) on the small config (6 layers, 384 wide,
block 256, batch 16, no dropout) in alternating rounds, so that a busy machine slows every
configuration alike, and prints each run's JSON line and the medians per configuration:
ms per step, tokens/s (all processes together), and the reducer's time per step on rank 0
(in_backward: inside the grad-ready hook; after_backward + finish: after the backward pass).

Usage: bench/dist_scaling.py [--rounds 3] [--steps 6] [--build build] [--extra '--n-layer 4']
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

SMALL = ["--n-layer", "6", "--n-head", "6", "--n-embd", "384", "--block", "256", "--batch", "16",
         "--dropout", "0", "--eval-batches", "1", "--corpus-chars", "1200000", "--check-every", "1000"]


def configs(build):
    driver = os.path.join(build, "heed_dist_train")
    mpirun = ["mpirun", "--allow-run-as-root", "--bind-to", "none", "-np", "2"]
    return {
        "1 process, 2 threads, A=1": [driver, "--threads", "2", "--accum", "1"],
        "mpirun -np 2, 1 thread, A=2, overlap": mpirun + [driver, "--threads", "1", "--accum", "2", "--overlap", "1"],
        "mpirun -np 2, 1 thread, A=2, no overlap": mpirun + [driver, "--threads", "1", "--accum", "2", "--overlap", "0"],
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--build", default="build")
    ap.add_argument("--extra", default="", help="more driver flags, e.g. '--bucket-bytes 1048576'")
    a = ap.parse_args()
    runs = {name: [] for name in configs(a.build)}
    for r in range(a.rounds):
        for name, cmd in configs(a.build).items():
            full = cmd + SMALL + ["--steps", str(a.steps), "--warmup", "1"] + a.extra.split()
            out = subprocess.run(full, capture_output=True, text=True, env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
            if out.returncode != 0:
                sys.exit(f"{name}: exit {out.returncode}\n{out.stderr}")
            j = json.loads(out.stdout.strip().splitlines()[-1])
            runs[name].append(j)
            print(f"round {r} {name}: {json.dumps(j)}", flush=True)
    print("\nmedians over rounds (each run's own value is the median of its steps):")
    base = statistics.median(j["tokens_per_s"] for j in runs["1 process, 2 threads, A=1"])
    for name, js in runs.items():
        med = lambda k: statistics.median(j[k] for j in js)
        print(f"{name:42s} {med('ms_per_step'):8.1f} ms/step {med('tokens_per_s'):8.0f} tok/s "
              f"({med('tokens_per_s') / base:.2f} of one process)  reducer: in backward {med('in_backward_ms'):6.1f} ms, "
              f"after {med('after_backward_ms') + med('finish_ms'):6.1f} ms, sent {js[0]['bytes_sent_per_step'] / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
