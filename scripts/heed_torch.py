"""heed's PyTorch side: nanoGPT's character-level GPT (model.py's structure, state_dict names,
dropout placement and init), used by the reference trainer (scripts/torch_reference.py) and the
interop scripts, and safetensors reading/writing in heed's checkpoint layout
(docs/checkpoint-format.md), with a small built-in reader/writer (Debian 12 does not package the
`safetensors` package).

Needs PyTorch (Debian: apt-get install python3-torch; run with /usr/bin/python3).
"""

import json
import math
import struct

import torch
import torch.nn as nn
import torch.nn.functional as F

DTYPES = {"F32": (torch.float32, 4), "F64": (torch.float64, 8), "F16": (torch.float16, 2),
          "BF16": (torch.bfloat16, 2)}


# ------------------------------------------------------------------------------------------
# safetensors

def read_safetensors(path):
    """Returns ({name: tensor}, {metadata key: str})."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    tensors = {}
    for name, info in header.items():
        dtype, size = DTYPES[info["dtype"]]
        begin, end = info["data_offsets"]
        buf = bytearray(raw[base + begin:base + end])
        t = torch.frombuffer(buf, dtype=dtype) if end > begin else torch.empty(0, dtype=dtype)
        tensors[name] = t.reshape(info["shape"]).clone()
    return tensors, meta


def write_safetensors(path, tensors, metadata):
    """Float32 tensors (contiguous copies) and string metadata, laid out as the safetensors library
    does: the header's keys sorted with __metadata__ first, data in name order, the header padded
    with spaces to a multiple of 8."""
    names = sorted(tensors)
    header, blobs, offset = {"__metadata__": dict(metadata)}, [], 0
    for name in names:
        t = tensors[name].detach().to(torch.float32).contiguous()
        data = t.numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


# ------------------------------------------------------------------------------------------
# nanoGPT's model (model.py), CPU path with the attention written out (q @ k^T / sqrt(hd), the
# causal -inf mask, softmax, @ v), as nanoGPT's non-flash path does. Building it draws random
# numbers in nanoGPT's order (each nn.Linear and nn.Embedding's default init, module by module),
# so init_nanogpt() after the same torch.manual_seed gives nanoGPT's very weights.

class Config:
    def __init__(self, vocab_size, block_size, n_layer, n_head, n_embd, bias, dropout=0.0):
        self.vocab_size, self.block_size = vocab_size, block_size
        self.n_layer, self.n_head, self.n_embd = n_layer, n_head, n_embd
        self.bias, self.dropout = bias, dropout


class LayerNorm(nn.Module):
    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.n_head = c.n_head
        self.c_attn = nn.Linear(c.n_embd, 3 * c.n_embd, bias=c.bias)  # q, k, v in one product
        self.c_proj = nn.Linear(c.n_embd, c.n_embd, bias=c.bias)
        self.attn_dropout = nn.Dropout(c.dropout)
        self.resid_dropout = nn.Dropout(c.dropout)
        mask = torch.tril(torch.ones(c.block_size, c.block_size, dtype=torch.bool))
        self.register_buffer("mask", mask.view(1, 1, c.block_size, c.block_size), persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        # (B, n_head, T, head_dim) each
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = F.softmax(att.masked_fill(~self.mask[:, :, :T, :T], float("-inf")), dim=-1)
        att = self.attn_dropout(att)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)  # the heads side by side again
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc = nn.Linear(c.n_embd, 4 * c.n_embd, bias=c.bias)
        self.gelu = nn.GELU()  # exact (erf) GELU, as nanoGPT
        self.c_proj = nn.Linear(4 * c.n_embd, c.n_embd, bias=c.bias)
        self.dropout = nn.Dropout(c.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln_1, self.attn = LayerNorm(c.n_embd, c.bias), CausalSelfAttention(c)
        self.ln_2, self.mlp = LayerNorm(c.n_embd, c.bias), MLP(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """nanoGPT's GPT. `c` needs vocab_size, block_size, n_layer, n_head, n_embd, bias and dropout
    (a Config, or any object with those attributes)."""

    def __init__(self, c):
        super().__init__()
        self.config = c
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(c.vocab_size, c.n_embd), wpe=nn.Embedding(c.block_size, c.n_embd),
            drop=nn.Dropout(c.dropout),
            h=nn.ModuleList([Block(c) for _ in range(c.n_layer)]), ln_f=LayerNorm(c.n_embd, c.bias)))
        self.lm_head = nn.Linear(c.n_embd, c.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # tied, as nanoGPT

    def init_nanogpt(self):
        """nanoGPT's init, drawing in its order: normal(0, 0.02) for every Linear and Embedding
        weight (module by module, children first), zero biases, then the residual projections
        (c_proj) again with std 0.02 / sqrt(2 n_layer) (the GPT-2 paper)."""
        def init(module):
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)
        self.apply(init)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * self.config.n_layer))
        return self

    def forward(self, idx, targets=None):
        """Logits (B, T, vocab) of token ids (B, T); given targets (B, T), the mean next-token
        cross-entropy instead (nanoGPT's forward returns both)."""
        T = idx.size(1)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(torch.arange(T)))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        if targets is None:
            return logits
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    def loss(self, idx, targets):
        """Mean next-token cross-entropy."""
        return self(idx, targets)

    def num_params(self, non_embedding=True):
        """Parameters counted once (the tied wte/lm_head matrix once); nanoGPT's non-embedding
        count also leaves out the position embedding."""
        n = sum(p.numel() for p in self.parameters())
        return n - self.transformer.wpe.weight.numel() if non_embedding else n

    def flops_per_iter(self, batch_size):
        """nanoGPT's estimate_mfu count (PaLM appendix B) for one forward and backward: 6 N per
        token for the weights' products and 12 n_layer n_embd T for attention's two products over
        the whole T x T square (which written-out attention computes)."""
        c = self.config
        per_token = 6 * self.num_params() + 12 * c.n_layer * c.n_embd * c.block_size
        return per_token * c.block_size * batch_size

    @torch.no_grad()
    def generate_greedy(self, idx, n):
        for _ in range(n):
            logits = self(idx[:, -self.config.block_size:])[:, -1, :]
            idx = torch.cat((idx, logits.argmax(dim=-1, keepdim=True)), dim=1)
        return idx


# ------------------------------------------------------------------------------------------
# heed checkpoints

def load_heed(path):
    """Returns (GPT, vocabulary string) from a heed model.safetensors."""
    tensors, meta = read_safetensors(path)
    cfg = json.loads(meta["config"])
    chars = json.loads(meta["vocab"])
    model = GPT(Config(cfg["vocab_size"], cfg["block_size"], cfg["n_layer"], cfg["n_head"],
                       cfg["n_embd"], cfg["bias"]))
    state = {k.removeprefix("_orig_mod."): v for k, v in tensors.items()}
    if "lm_head.weight" not in state:
        state["lm_head.weight"] = state["transformer.wte.weight"]
    if "transformer.wte.weight" not in state:
        state["transformer.wte.weight"] = state["lm_head.weight"]
    model.load_state_dict(state, strict=True)
    model.eval()
    return model, chars


def save_heed(model, chars, path):
    """Writes a nanoGPT-style GPT in heed's checkpoint layout (lm_head.weight left out: tied)."""
    c = model.config
    state = {k.removeprefix("_orig_mod."): v for k, v in model.state_dict().items()}
    state.pop("lm_head.weight", None)
    config = {"n_layer": c.n_layer, "n_head": c.n_head, "n_embd": c.n_embd,
              "block_size": c.block_size, "vocab_size": c.vocab_size, "bias": bool(c.bias)}
    write_safetensors(path, state, {"config": json.dumps(config), "vocab": json.dumps(chars),
                                    "format": "pt"})


def eval_loss(model, chars, text):
    """heed eval's number: mean cross-entropy over consecutive non-overlapping windows."""
    stoi = {ch: i for i, ch in enumerate(chars)}
    ids = torch.tensor([stoi[ch] for ch in text], dtype=torch.long)
    B = model.config.block_size
    windows = (len(ids) - 1) // B
    total = 0.0
    with torch.no_grad():
        for w0 in range(0, windows, 64):
            rows = min(64, windows - w0)
            s = torch.arange(w0, w0 + rows) * B
            x = ids[s.unsqueeze(1) + torch.arange(B)]
            y = ids[s.unsqueeze(1) + torch.arange(B) + 1]
            logits = model(x)
            total += F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1),
                                     reduction="sum").item()
    return total / (windows * B), windows * B
