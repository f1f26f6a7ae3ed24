#!/usr/bin/env python3
"""Sampling speed, heed vs PyTorch side by side: `heed sample` (KV-cached generation) against
nanoGPT's GPT.generate (scripts/heed_torch.py, no cache) on the same checkpoint, alternating
(heed, PyTorch, heed, PyTorch, ...), and prints characters per second of each and their ratio
(median over the pairs).

heed's time is the whole `heed sample` process (start, checkpoint load, generation, output);
PyTorch's is its generate call only (model built and loaded, `import torch` done before the clock
starts), so the ratio, if anything, favours PyTorch. Each is also timed in CPU seconds (heed: the
child process's user + system time; PyTorch: the process's CPU time around the call): on a machine
shared with other work, wall times mostly measure the scheduler, and the CPU-time ratio is the
steadier figure (still favouring PyTorch, whose CPU time leaves out its start and load).

Usage: /usr/bin/python3 bench/sample_compare.py [--configs small default] [--pairs 3]
           [--heed build/heed] [--threads 2] [--torch-threads N] [--checkpoint-dir DIR]
           [--heed-precision fp32|bf16] [--torch-precision fp32|bf16]

--torch-threads (default: --threads) lets each program run at its own best setting: on a 2-vCPU
host PyTorch 1.13 is fastest at 1 thread (its OpenBLAS still spins a second one) and collapses at
2, while heed is fastest at 2. --heed-precision bf16 runs `heed sample --precision bf16`;
--torch-precision bf16 runs generate under torch.autocast("cpu", dtype=torch.bfloat16). Between
two timed runs the script sleeps a second, so that neither program's spinning threads (OpenBLAS's
wait before they sleep) run into the other's time.
Where OpenBLAS's own kernels miss this CPU's vector instructions, PyTorch runs with
OPENBLAS_CORETYPE set to ones that use them (bench/openblas_fit.py; the first line says so); heed
runs with the environment as it was.
Configs: small = 6 layers, 6 heads, 384 wide, block 256, 256 characters; default = heed train's
default model (4 layers, 4 heads, 128 wide, block 64), 2000 characters. Both start from a
one-character prompt (a newline) and sample at temperature 0.8 with top-k 200, as `heed sample`
by default. The checkpoints hold nanoGPT-initialised weights over tinyshakespeare's 65
characters (speed does not depend on what the weights learned).
"""
import argparse
import os
import statistics
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from openblas_fit import fit_openblas  # noqa: E402

# OpenBLAS reads OPENBLAS_CORETYPE when it loads (with torch, below): where its own choice misses
# this CPU, start again with the variable set (bench/openblas_fit.py).
# heed runs with the environment as it was (HEED_ENV), as a user runs it.
if "HEED_BENCH_OPENBLAS" not in os.environ:
    _env = dict(os.environ)
    _env["HEED_BENCH_OPENBLAS"] = fit_openblas(_env)
    if "OPENBLAS_CORETYPE" in _env and "OPENBLAS_CORETYPE" not in os.environ:
        _env["HEED_BENCH_UNSET"] = "OPENBLAS_CORETYPE"
    os.execve(sys.executable, [sys.executable] + sys.argv, _env)
HEED_ENV = {k: v for k, v in os.environ.items() if k != os.environ.get("HEED_BENCH_UNSET")}
import torch  # noqa: E402

from heed_torch import GPT, Config, load_heed, save_heed  # noqa: E402

CONFIGS = {  # n_layer, n_head, n_embd, block_size, characters to generate
    "small": (6, 6, 384, 256, 256),
    "default": (4, 4, 128, 64, 2000),
}
VOCAB = "\n !$&',-.3:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"  # tinyshakespeare's 65


def make_checkpoint(name, directory):
    n_layer, n_head, n_embd, block, _ = CONFIGS[name]
    path = os.path.join(directory, f"sample_{name}.safetensors")
    if not os.path.exists(path):
        torch.manual_seed(1337)
        model = GPT(Config(len(VOCAB), block, n_layer, n_head, n_embd, False)).init_nanogpt()
        save_heed(model, VOCAB, path)
    return path


def time_heed(heed, checkpoint, n, threads, seed, precision):
    cmd = [heed, "sample", "--checkpoint", checkpoint, "--tokens", str(n), "--threads", str(threads),
           "--seed", str(seed), "--precision", precision]
    def cpu():
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        return r.ru_utime + r.ru_stime

    c0, t0 = cpu(), time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, env=HEED_ENV)
    dt, dc = time.perf_counter() - t0, cpu() - c0
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr.decode()}")
    return n / dt, n / dc


def time_torch(model, chars, n, seed, precision):
    torch.manual_seed(seed)
    idx = torch.tensor([[chars.index("\n")]], dtype=torch.long)
    c0, t0 = time.process_time(), time.perf_counter()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
        out = model.generate(idx, n, temperature=0.8, top_k=200)
    dt, dc = time.perf_counter() - t0, time.process_time() - c0
    assert out.size(1) == n + 1
    return n / dt, n / dc


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--heed", default=os.path.join(ROOT, "build", "heed"))
    ap.add_argument("--threads", type=int, default=2, help="threads of each program")
    ap.add_argument("--torch-threads", type=int, default=None, help="PyTorch's threads (default: --threads)")
    ap.add_argument("--heed-precision", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--torch-precision", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--checkpoint-dir", default=None, help="where the checkpoints go (default: a temporary directory)")
    a = ap.parse_args()
    torch_threads = a.torch_threads or a.threads
    torch.set_num_threads(torch_threads)
    directory = a.checkpoint_dir or tempfile.mkdtemp(prefix="heed_sample_bench_")
    print(f"# PyTorch's OpenBLAS: {os.environ['HEED_BENCH_OPENBLAS']}")
    print(f"torch {torch.__version__}; heed {a.threads} thread(s) {a.heed_precision}, PyTorch {torch_threads} "
          f"thread(s) {a.torch_precision}; checkpoints in {directory}")
    for name in a.configs:
        checkpoint = make_checkpoint(name, directory)
        model, chars = load_heed(checkpoint)
        n = CONFIGS[name][4]
        ratios, heed_cps, torch_cps, cpu_ratios = [], [], [], []
        for pair in range(a.pairs):
            time.sleep(1)
            h, h_cpu = time_heed(a.heed, checkpoint, n, a.threads, 1337 + pair, a.heed_precision)
            time.sleep(1)
            t, t_cpu = time_torch(model, chars, n, 1337 + pair, a.torch_precision)
            heed_cps.append(h)
            torch_cps.append(t)
            ratios.append(h / t)
            cpu_ratios.append(h_cpu / t_cpu)
            print(f"  {name} pair {pair + 1}: heed {h:,.0f} chars/s, PyTorch {t:,.1f} chars/s, ratio {h / t:.1f}x; "
                  f"per CPU second heed {h_cpu:,.0f}, PyTorch {t_cpu:,.1f}, ratio {h_cpu / t_cpu:.1f}x", flush=True)
        print(f"{name}: {n} characters; heed {statistics.median(heed_cps):,.0f} chars/s, PyTorch "
              f"{statistics.median(torch_cps):,.1f} chars/s; heed/PyTorch median {statistics.median(ratios):.1f}x "
              f"(min {min(ratios):.1f}x, max {max(ratios):.1f}x over {a.pairs} pairs); per CPU second median "
              f"{statistics.median(cpu_ratios):.1f}x (min {min(cpu_ratios):.1f}x, max {max(cpu_ratios):.1f}x)", flush=True)


if __name__ == "__main__":
    main()
