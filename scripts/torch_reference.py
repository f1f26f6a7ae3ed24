#!/usr/bin/env python3
"""heed's PyTorch reference: nanoGPT's character-level GPT trained with nanoGPT's recipe on CPU.

What heed's quality bar and speed ratios are measured against (docs/results.md,
docs/performance.md, bench/compare.py). It reproduces nanoGPT's own train.py run
(config/train_shakespeare_char.py with the CPU overrides of its README) draw for draw: the same
vocabulary (the sorted set of the text's characters), 90/10 split, torch.randint batches (the first
drawn before the loop, each next one between forward and backward), model and init
(scripts/heed_torch.py), AdamW with weight decay on 2-D tensors only, linear warm-up then cosine
decay (lr_at), clipping by the global norm, and the evaluation of nanoGPT's estimate_loss. With the
defaults it prints a final val loss of 1.9189 at seed 1337 (torch 1.13.1, Debian 12).

  /usr/bin/python3 scripts/torch_reference.py --threads 2          # the default run: one JSON
                                                                   # line per evaluation, then a summary
  /usr/bin/python3 scripts/torch_reference.py --threads 2 --bench 50
                                    # throughput: 3 warm-up steps, then the median of 50 timed ones
  /usr/bin/python3 scripts/torch_reference.py --n-layer 6 --n-head 6 --n-embd 384 --block-size 256 \\
      --batch-size 16 --bench 5     # the small config

Flags take heed's spelling (--n-layer) or nanoGPT's (--n_layer, --learning_rate). --precision bf16
runs the forward pass and the loss under torch.autocast("cpu", torch.bfloat16) (PyTorch then does
the products in bf16 through oneDNN; layer norms and the loss stay float32): the reference for a
heed bf16 mode.

Threads: --threads sets PyTorch's intra-op threads and (unless --blas-threads says otherwise)
OpenBLAS's, which does the products in Debian's build and which torch.set_num_threads does not
reach; both are read when the libraries load, so they are set before torch is imported. Idle
OpenMP threads spinning beside OpenBLAS's cost a 2-core machine half its speed, so OMP_WAIT_POLICY
is PASSIVE unless the environment sets it (or GOMP_SPINCOUNT).
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DATA = os.path.normpath(os.path.join(HERE, "..", "data", "tinyshakespeare.txt"))
WARMUP_STEPS = 3  # --bench: steps run before timing (allocations, OpenBLAS buffers)

# (heed's flag, type, default, nanoGPT's other name or None, help): nanoGPT's CPU recipe.
OPTIONS = [
    ("data", str, DEFAULT_DATA, None, "UTF-8 text file (default: the bundled tiny shakespeare)"),
    ("n-layer", int, 4, None, "Transformer blocks"),
    ("n-head", int, 4, None, "attention heads"),
    ("n-embd", int, 128, None, "embedding width"),
    ("block-size", int, 64, None, "context length"),
    ("batch-size", int, 12, None, "sequences per batch"),
    ("dropout", float, 0.0, None, "dropout probability"),
    ("max-iters", int, 2000, None, "training steps"),
    ("lr", float, 1e-3, "learning_rate", "peak learning rate"),
    ("min-lr", float, 1e-4, None, "learning rate at the end of the cosine decay"),
    ("warmup-iters", int, 100, None, "linear warm-up steps"),
    ("lr-decay-iters", int, 2000, None, "step at which the decay reaches --min-lr"),
    ("weight-decay", float, 0.1, None, "AdamW weight decay on 2-D tensors"),
    ("beta1", float, 0.9, None, "AdamW beta1"),
    ("beta2", float, 0.99, None, "AdamW beta2"),
    ("grad-clip", float, 1.0, None, "global gradient norm limit (0: off)"),
    ("eval-interval", int, 250, None, "evaluate every N steps (and after the last)"),
    ("eval-iters", int, 200, None, "batches per split in an evaluation"),
    ("seed", int, 1337, None, "torch.manual_seed"),
    ("threads", int, len(os.sched_getaffinity(0)), None, "PyTorch threads (default: every CPU)"),
    ("blas-threads", int, 0, None, "OpenBLAS threads (0: --threads)"),
    ("bench", int, 0, None, f"time N steps after {WARMUP_STEPS} warm-up ones, print one JSON line, exit"),
]


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for flag, kind, default, alias, help_text in OPTIONS:
        names = ["--" + flag, "--" + flag.replace("-", "_")]  # heed's and nanoGPT's spellings
        if alias:
            names.append("--" + alias)
        p.add_argument(*dict.fromkeys(names), dest=flag.replace("-", "_"), type=kind, default=default,
                       help=f"{help_text} (default: {default})")
    p.add_argument("--bias", action=argparse.BooleanOptionalAction, default=False,
                   help="biases in Linear and LayerNorm layers (default: off, as nanoGPT's run)")
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                   help="bf16: forward and loss under torch.autocast('cpu', torch.bfloat16)")
    a = p.parse_args(argv)
    wrong = [f"--{f} must be at least 1" for f in ("n-layer", "n-head", "n-embd", "block-size", "batch-size",
                                                    "threads", "eval-interval", "eval-iters")
             if getattr(a, f.replace("-", "_")) < 1]
    if a.n_embd % max(a.n_head, 1):
        wrong.append(f"--n-embd {a.n_embd} is not divisible by --n-head {a.n_head}")
    if not 0 <= a.dropout < 1:
        wrong.append("--dropout must be in [0, 1)")
    if min(a.max_iters, a.warmup_iters, a.bench, a.blas_threads) < 0:
        wrong.append("--max-iters, --warmup-iters, --bench and --blas-threads must not be negative")
    if a.lr_decay_iters <= a.warmup_iters:
        wrong.append("--lr-decay-iters must be greater than --warmup-iters")
    if wrong:
        p.error("; ".join(wrong))
    a.blas_threads = a.blas_threads or a.threads
    return a


def lr_at(it, a):
    """nanoGPT's get_lr: linear warm-up to lr, cosine decay to min_lr at lr_decay_iters, then flat."""
    if it < a.warmup_iters:
        return a.lr * (it + 1) / (a.warmup_iters + 1)
    if it > a.lr_decay_iters:
        return a.min_lr
    progress = (it - a.warmup_iters) / (a.lr_decay_iters - a.warmup_iters)
    return a.min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (a.lr - a.min_lr)


def read_corpus(path):
    """(characters, train ids, val ids): nanoGPT's shakespeare_char prepare.py."""
    import torch
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        sys.exit(f"error: --data {path}: {e}")
    chars = sorted(set(text))
    index = {ch: i for i, ch in enumerate(chars)}
    ids = torch.tensor([index[ch] for ch in text], dtype=torch.long)
    cut = int(len(ids) * 0.9)
    return chars, ids[:cut], ids[cut:]


def batch_sampler(splits, block_size, batch_size):
    """get_batch(split): batch_size random windows, one torch.randint draw, as nanoGPT."""
    import torch
    for name, ids in splits.items():
        if len(ids) <= block_size + 1:
            sys.exit(f"error: the {name} split has {len(ids)} characters, too few for --block-size {block_size}")
    offsets = torch.arange(block_size)

    def get_batch(split):
        ids = splits[split]
        starts = torch.randint(len(ids) - block_size, (batch_size,)).unsqueeze(1)
        return ids[starts + offsets], ids[starts + offsets + 1]
    return get_batch


def openblas_info():
    """OpenBLAS's thread count and kernel family, as loaded in this process (None if absent)."""
    import ctypes
    try:
        lib = ctypes.CDLL("libopenblas.so.0")
        lib.openblas_get_corename.restype = ctypes.c_char_p
        return {"threads": lib.openblas_get_num_threads(), "core": lib.openblas_get_corename().decode()}
    except (OSError, AttributeError):
        return None


def run(a):
    import torch
    from heed_torch import GPT, Config

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    chars, train_ids, val_ids = read_corpus(a.data)
    get_batch = batch_sampler({"train": train_ids, "val": val_ids}, a.block_size, a.batch_size)
    model = GPT(Config(len(chars), a.block_size, a.n_layer, a.n_head, a.n_embd, a.bias, a.dropout)).init_nanogpt()
    model.train()
    decayed = [p for p in model.parameters() if p.dim() >= 2]
    others = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decayed, "weight_decay": a.weight_decay},
                                   {"params": others, "weight_decay": 0.0}], lr=a.lr, betas=(a.beta1, a.beta2))
    autocast = dict(device_type="cpu", dtype=torch.bfloat16, enabled=a.precision == "bf16")

    @torch.no_grad()
    def evaluate():
        model.eval()
        means = {}
        for split in ("train", "val"):
            total = torch.zeros(a.eval_iters)
            for k in range(a.eval_iters):
                with torch.autocast(**autocast):
                    total[k] = model.loss(*get_batch(split)).float().item()
            means[split] = total.mean().item()
        model.train()
        return means

    batch = get_batch("train")  # nanoGPT draws the first batch before its loop

    def step(it):
        nonlocal batch
        for group in optimizer.param_groups:
            group["lr"] = lr_at(it, a)
        with torch.autocast(**autocast):
            loss = model.loss(*batch)
        batch = get_batch("train")  # the next batch, drawn between forward and backward as nanoGPT
        loss.backward()
        if a.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.item()

    tokens_per_iter = a.batch_size * a.block_size
    summary = {
        "torch": torch.__version__, "threads": torch.get_num_threads(),
        "omp_env": {k: os.environ[k] for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT") if k in os.environ},
        "openblas_coretype_env": os.environ.get("OPENBLAS_CORETYPE"), "openblas": openblas_info(),
        "config": {k: v for k, v in vars(a).items() if k != "bench"}, "vocab_size": len(chars),
        "params": model.num_params(non_embedding=False), "params_non_embedding": model.num_params(),
        "tokens_per_iter": tokens_per_iter, "flops_per_iter": model.flops_per_iter(a.batch_size),
    }
    if a.bench:
        times = []
        for it in range(WARMUP_STEPS + a.bench):
            t0 = time.perf_counter()
            step(it)
            if it >= WARMUP_STEPS:
                times.append(time.perf_counter() - t0)
        median = statistics.median(times)
        summary.update({"bench_iters": a.bench, "ms_per_iter_median": round(median * 1e3, 3),
                        "ms_per_iter_min": round(min(times) * 1e3, 3), "ms_per_iter_max": round(max(times) * 1e3, 3),
                        "tokens_per_s": round(tokens_per_iter / median, 1),
                        "gflops_per_s": round(summary["flops_per_iter"] / median / 1e9, 3)})
        print(json.dumps(summary), flush=True)
        return

    start, train_s, last = time.perf_counter(), 0.0, None
    for it in range(a.max_iters + 1):
        if it % a.eval_interval == 0 or it == a.max_iters:
            means = evaluate()
            last = {"iter": it, "train_loss": round(means["train"], 4), "val_loss": round(means["val"], 4),
                    "elapsed_s": round(time.perf_counter() - start, 2), "train_s": round(train_s, 2)}
            print(json.dumps(last), flush=True)
        if it == a.max_iters:
            break
        t0 = time.perf_counter()
        step(it)
        train_s += time.perf_counter() - t0
    summary.update({"final": last, "wall_s": round(time.perf_counter() - start, 2), "train_s": round(train_s, 2),
                    "ms_per_iter_mean": round(train_s / max(a.max_iters, 1) * 1e3, 3),
                    "tokens_per_s": round(tokens_per_iter * a.max_iters / train_s, 1) if train_s else None})
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    ARGS = parse_args(sys.argv[1:])
    # Read when the libraries load, that is when torch is imported.
    os.environ["OPENBLAS_NUM_THREADS"] = str(ARGS.blas_threads)
    os.environ["OMP_NUM_THREADS"] = str(ARGS.threads)
    if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    sys.path.insert(0, HERE)
    run(ARGS)
