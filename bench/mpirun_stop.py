#!/usr/bin/env python3
"""What Ctrl-C to mpirun does to heed's ranks, and how long mpirun takes to end (docs/scaling.md).

Runs `mpirun -np 2 build/heed_dist_train` (tiny GPT, endless steps) with Open MPI's
odls_base_sigkill_timeout set to each T given, sends SIGINT to mpirun once step 3 is printed,
and reports the signal the ranks stopped on (18: SIGCONT, mpirun's first notice), whether rank 0
saved, and the seconds from SIGINT to mpirun's exit.

Usage: bench/mpirun_stop.py [--build build] [T ...]   (default T: 1 3 5)
"""
import argparse
import os
import re
import signal
import subprocess
import tempfile
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("timeouts", nargs="*", type=int, default=[1, 3, 5])
    a = ap.parse_args()
    driver = os.path.join(a.build, "heed_dist_train")
    for t in a.timeouts:
        with tempfile.TemporaryDirectory() as tmp:
            saved = os.path.join(tmp, "saved.safetensors")
            env = dict(os.environ, OMPI_MCA_odls_base_sigkill_timeout=str(t), OPENBLAS_NUM_THREADS="1")
            p = subprocess.Popen(["mpirun", "--allow-run-as-root", "-np", "2", driver, "--steps", "100000",
                                  "--out", saved], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
            out = ""
            while "step 3 " not in out:
                line = p.stdout.readline()
                if not line:
                    raise SystemExit(f"mpirun ended early:\n{out}{p.stderr.read()}")
                out += line
            t0 = time.monotonic()
            p.send_signal(signal.SIGINT)
            rest, _ = p.communicate()
            took = time.monotonic() - t0
            m = re.search(r"stopped by signal (\d+) in step (\d+)", rest)
            print(f"odls_base_sigkill_timeout {t}: mpirun ended {took:.2f} s after SIGINT (exit {p.returncode}); "
                  f"ranks stopped on signal {m.group(1) if m else '?'} in step {m.group(2) if m else '?'}; "
                  f"rank 0 saved: {os.path.exists(saved)}")


if __name__ == "__main__":
    main()
