#!/usr/bin/env python3
"""Export a PyTorch nanoGPT model to a heed checkpoint (model.safetensors).

From nanoGPT's own files (out_dir/ckpt.pt and data/shakespeare_char/meta.pkl):
  /usr/bin/python3 scripts/torch_export_heed.py --ckpt out/ckpt.pt --meta meta.pkl --out model.safetensors
A freshly initialised model (for interop tests), vocabulary taken from a text file:
  /usr/bin/python3 scripts/torch_export_heed.py --random --vocab-from data/tinyshakespeare.txt \
      --n-layer 2 --n-head 2 --n-embd 32 --block-size 16 --out model.safetensors
"""
import argparse
import os
import pickle
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

from heed_torch import GPT, Config, save_heed  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--ckpt", help="nanoGPT ckpt.pt (holds 'model' and 'model_args')")
    ap.add_argument("--meta", help="nanoGPT meta.pkl (holds 'itos')")
    ap.add_argument("--random", action="store_true", help="export a freshly initialised model")
    ap.add_argument("--vocab-from", help="text file whose sorted characters are the vocabulary")
    ap.add_argument("--n-layer", type=int, default=2)
    ap.add_argument("--n-head", type=int, default=2)
    ap.add_argument("--n-embd", type=int, default=32)
    ap.add_argument("--block-size", type=int, default=16)
    ap.add_argument("--bias", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if a.ckpt:
        ck = torch.load(a.ckpt, map_location="cpu")
        m = ck["model_args"]
        with open(a.meta, "rb") as f:
            itos = pickle.load(f)["itos"]
        chars = "".join(itos[i] for i in range(len(itos)))
        model = GPT(Config(m["vocab_size"], m["block_size"], m["n_layer"], m["n_head"], m["n_embd"],
                           m["bias"]))
        state = {k.removeprefix("_orig_mod."): v for k, v in ck["model"].items()}
        model.load_state_dict(state, strict=True)
    elif a.random and a.vocab_from:
        with open(a.vocab_from, encoding="utf-8", newline="") as f:
            chars = "".join(sorted(set(f.read())))
        torch.manual_seed(a.seed)
        model = GPT(Config(len(chars), a.block_size, a.n_layer, a.n_head, a.n_embd, a.bias))
        with torch.no_grad():  # nanoGPT's init scale, so samples are not degenerate
            for name, p in model.named_parameters():
                if p.dim() >= 2:
                    p.normal_(0.0, 0.3)
    else:
        ap.error("give --ckpt and --meta, or --random and --vocab-from")
    save_heed(model, chars, a.out)
    print(f"wrote {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
