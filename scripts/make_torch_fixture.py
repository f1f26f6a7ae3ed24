#!/usr/bin/env python3
"""Make tests/data/torch_fixture*: tiny nanoGPT-style models trained and saved by PyTorch, with the
numbers PyTorch computes from them, so heed's tests can check interop without PyTorch.

  /usr/bin/python3 scripts/make_torch_fixture.py --out tests/data

(torch 1.13, CPU; the `safetensors` package is not needed: the files are written byte by byte.)

Writes, into --out:
  torch_fixture.txt                     the text (UTF-8, with 2-, 3- and 4-byte characters)
  torch_fixture_nanogpt.safetensors     model A (2 layers, biases) under nanoGPT's names in heed's
                                        layout: transformer.wte.weight, no lm_head.weight
  torch_fixture_compiled.safetensors    model B (1 layer, no biases) as safetensors.torch.save_model
                                        leaves a torch.compile'd nanoGPT: every name prefixed with
                                        "_orig_mod.", the tied matrix kept as lm_head.weight and
                                        transformer.wte.weight left out
  torch_fixture.json                    per file: PyTorch's loss and token count over the text with
                                        `heed eval`'s windows (x = text[s:s+B], y = text[s+1:s+B+1],
                                        s = 0, B, 2B, ... while s+B+1 <= len), and its greedy
                                        continuation of a prompt longer than block_size (the context
                                        cropped to the last block_size characters, as nanoGPT)
"""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from heed_torch import GPT, Config, write_safetensors  # noqa: E402

TEXT = (
    "Über den Bergen liegt Ruh; in allen Wipfeln spürest du kaum einen Hauch.\n"
    "Les élèves étudient: « déjà vu », café, naïve — garçon.\n"
    "Ο ήλιος λάμπει, η θάλασσα γαλήνια.\n"
    "Music: 𝄞 𝄢 ♪ ♫; stars ★ ☆; arrows → ←.\n"
    "The quick brown fox jumps over the lazy dog; the lazy dog sleeps.\n"
    "Über den Bergen liegt Ruh; in allen Wipfeln spürest du kaum einen Hauch.\n"
    "The quick brown fox jumps over the lazy dog; the lazy dog sleeps.\n"
    "Les élèves étudient: « déjà vu », café, naïve — garçon.\n"
)
PROMPT = "The quick brown fox jumps "  # 26 characters: longer than block_size 16
GREEDY_TOKENS = 48

MODELS = {
    "torch_fixture_nanogpt.safetensors": dict(n_layer=2, n_head=2, n_embd=16, block_size=16, bias=True,
                                             style="nanogpt", seed=1),
    "torch_fixture_compiled.safetensors": dict(n_layer=1, n_head=2, n_embd=16, block_size=16, bias=False,
                                              style="compiled", seed=2),
}


def train(model, ids, steps, seed):
    """A few hundred AdamW steps on random windows, so greedy decoding produces text, not ties."""
    g = torch.Generator().manual_seed(seed)
    B = model.config.block_size
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
    for _ in range(steps):
        ix = torch.randint(len(ids) - B, (16,), generator=g)
        x = torch.stack([ids[i:i + B] for i in ix])
        y = torch.stack([ids[i + 1:i + B + 1] for i in ix])
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return loss.item()


def window_loss(model, ids):
    """heed eval's number, in float32 as PyTorch computes it."""
    B = model.config.block_size
    windows = (len(ids) - 1) // B
    s = torch.arange(windows) * B
    x = ids[s.unsqueeze(1) + torch.arange(B)]
    y = ids[s.unsqueeze(1) + torch.arange(B) + 1]
    with torch.no_grad():
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
    return loss.item(), windows * B


def greedy(model, idx, n):
    """nanoGPT's generate with argmax; also the smallest gap between the top two logits, so a tie
    that float rounding could flip would be noticed."""
    gap = math.inf
    with torch.no_grad():
        for _ in range(n):
            logits = model(idx[:, -model.config.block_size:])[0, -1]
            top2 = torch.topk(logits, 2).values
            gap = min(gap, (top2[0] - top2[1]).item())
            idx = torch.cat((idx, logits.argmax().view(1, 1)), dim=1)
    return idx[0].tolist(), gap


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    torch.set_num_threads(1)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "torch_fixture.txt"), "w", encoding="utf-8", newline="") as f:
        f.write(TEXT)
    chars = "".join(sorted(set(TEXT)))
    stoi = {c: i for i, c in enumerate(chars)}
    ids = torch.tensor([stoi[c] for c in TEXT], dtype=torch.long)
    expected = {"text": "torch_fixture.txt", "torch": torch.__version__, "prompt": PROMPT,
                "greedy_tokens": GREEDY_TOKENS, "models": {}}
    for fname, m in MODELS.items():
        torch.manual_seed(m["seed"])
        model = GPT(Config(len(chars), m["block_size"], m["n_layer"], m["n_head"], m["n_embd"], m["bias"]))
        with torch.no_grad():  # nanoGPT's init
            for name, p in model.named_parameters():
                if name.endswith("c_proj.weight"):
                    p.normal_(0.0, 0.02 / math.sqrt(2 * m["n_layer"]))
                elif p.dim() >= 2:
                    p.normal_(0.0, 0.02)
        train_loss = train(model, ids, 300, m["seed"])
        model.eval()
        loss, tokens = window_loss(model, ids)
        out_ids, gap = greedy(model, torch.tensor([[stoi[c] for c in PROMPT]]), GREEDY_TOKENS)
        assert gap > 1e-3, f"{fname}: near-tie in the greedy decode (gap {gap})"

        state = dict(model.state_dict())
        config = {"n_layer": m["n_layer"], "n_head": m["n_head"], "n_embd": m["n_embd"],
                  "block_size": m["block_size"], "vocab_size": len(chars), "bias": m["bias"]}
        meta = {"config": json.dumps(config), "vocab": json.dumps(chars), "format": "pt"}
        if m["style"] == "nanogpt":
            state.pop("lm_head.weight")  # tied: heed's layout keeps transformer.wte.weight
        else:  # save_model on torch.compile(model): keeps lm_head.weight, drops its alias
            state.pop("transformer.wte.weight")
            state = {"_orig_mod." + k: v for k, v in state.items()}
        write_safetensors(os.path.join(a.out, fname), state, meta)
        expected["models"][fname] = {
            "config": config, "loss": loss, "tokens": tokens,
            "greedy": "".join(chars[i] for i in out_ids), "min_top2_gap": round(gap, 6),
            "last_train_batch_loss": round(train_loss, 4)}
        print(f"{fname}: loss {loss:.6f} over {tokens} tokens, min top-2 gap {gap:.4f}", file=sys.stderr)
    with open(os.path.join(a.out, "torch_fixture.json"), "w", encoding="utf-8") as f:
        json.dump(expected, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
