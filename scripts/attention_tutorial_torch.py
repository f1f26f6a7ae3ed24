#!/usr/bin/env python3
"""The PyTorch side of examples/attention_tutorial: the attention chapter of "Build a Large
Language Model (From Scratch)" (self-attention, causal attention with a mask and dropout,
multi-head attention, a few training steps), with weights set by a formula instead of drawn, so
that heed's port computes the same numbers. Prints the values tests/nn/test_attention_tutorial.cpp
checks.

  /usr/bin/python3 scripts/attention_tutorial_torch.py      (torch 1.13, CPU)
"""
import math

import torch

torch.set_printoptions(precision=8)
inputs = torch.tensor([[0.43, 0.15, 0.89], [0.55, 0.87, 0.66], [0.57, 0.85, 0.64],
                       [0.22, 0.58, 0.33], [0.77, 0.25, 0.10], [0.05, 0.80, 0.55]])


def wave(rows, cols, offset):
    """The weights both sides use: 0.5 sin(0.37 (k + 1) + offset) for flat index k."""
    k = torch.arange(rows * cols, dtype=torch.float64)
    return (0.5 * torch.sin(0.37 * (k + 1) + offset)).reshape(rows, cols).float()


class CausalAttention(torch.nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.W_query = torch.nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = torch.nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = torch.nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = torch.nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        b, num_tokens, d_in = x.shape
        queries, keys, values = self.W_query(x), self.W_key(x), self.W_value(x)
        attn_scores = queries @ keys.transpose(1, 2)
        attn_scores.masked_fill_(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)
        return attn_weights @ values


class MultiHeadAttention(torch.nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.d_out, self.num_heads, self.head_dim = d_out, num_heads, d_out // num_heads
        self.W_query = torch.nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = torch.nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = torch.nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = torch.nn.Linear(d_out, d_out)
        self.dropout = torch.nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        b, num_tokens, d_in = x.shape
        keys = self.W_key(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        queries = self.W_query(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        values = self.W_value(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        attn_scores = queries @ keys.transpose(2, 3)
        mask_bool = self.mask.bool()[:num_tokens, :num_tokens]
        attn_scores.masked_fill_(mask_bool, -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)
        context = (attn_weights @ values).transpose(1, 2).contiguous().view(b, num_tokens, self.d_out)
        return self.out_proj(context)


def set_weights(m, offset):
    with torch.no_grad():
        for i, (name, p) in enumerate(m.named_parameters()):
            p.copy_(wave(p.shape[0], p.shape[-1] if p.dim() > 1 else 1, offset + i).reshape(p.shape))


def show(name, t):
    print(name, " ".join(f"{v:.8f}" for v in t.detach().flatten().tolist()))


# 1. Simplified self-attention (no weights).
attn_weights = torch.softmax(inputs @ inputs.T, dim=-1)
show("simple_context", attn_weights @ inputs)
# 2. Causal attention on a batch of two copies.
batch = torch.stack((inputs, inputs), dim=0)
ca = CausalAttention(3, 2, 6, 0.0)
set_weights(ca, 0.0)
show("causal_context", ca(batch))
# 3. Multi-head attention.
mha = MultiHeadAttention(3, 4, 6, 0.0, num_heads=2)
set_weights(mha, 1.0)
show("mha_context", mha(batch))
# 4. A few SGD steps pulling the multi-head output towards 0.25.
opt = torch.optim.SGD(mha.parameters(), lr=0.5)
losses = []
for step in range(5):
    opt.zero_grad()
    loss = ((mha(batch) - 0.25) ** 2).mean()
    loss.backward()
    opt.step()
    losses.append(loss)
show("losses", torch.stack(losses))
