#!/usr/bin/env python3
"""Load a heed checkpoint into a PyTorch nanoGPT-style model; print its eval loss on a text file
(the same windows as `heed eval`) and a greedy sample (as `heed sample --temperature 0`).

  /usr/bin/python3 scripts/torch_load_heed.py runs/shakespeare/model.safetensors \
      --data data/tinyshakespeare.txt --prompt "ROMEO:" --tokens 100
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

from heed_torch import eval_loss, load_heed  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--data", help="text file to evaluate on")
    ap.add_argument("--prompt", default="\n")
    ap.add_argument("--tokens", type=int, default=100)
    a = ap.parse_args()
    torch.set_num_threads(1)
    model, chars = load_heed(a.checkpoint)
    print(f"loaded {a.checkpoint}: {sum(p.numel() for p in model.parameters())} parameters, "
          f"vocab {len(chars)}", file=sys.stderr)
    if a.data:
        with open(a.data, encoding="utf-8", newline="") as f:
            loss, tokens = eval_loss(model, chars, f.read())
        print(json.dumps({"loss": loss, "tokens": tokens}))
    if a.tokens > 0:
        stoi = {ch: i for i, ch in enumerate(chars)}
        idx = torch.tensor([[stoi[ch] for ch in a.prompt]], dtype=torch.long)
        out = model.generate_greedy(idx, a.tokens)[0].tolist()
        print("".join(chars[i] for i in out))


if __name__ == "__main__":
    main()
