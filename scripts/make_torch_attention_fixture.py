#!/usr/bin/env python3
"""Make tests/data/torch_attention_fixture.safetensors: the weights of PyTorch's own
nn.MultiheadAttention and nn.TransformerEncoderLayer under PyTorch's names (their state_dict, as
safetensors.torch.save_file writes it), with an input and PyTorch's outputs, so heed's tests check
the loading recipe of docs/pytorch.md without PyTorch.

  /usr/bin/python3 scripts/make_torch_attention_fixture.py --out tests/data

(torch 1.13, CPU; the `safetensors` package is not needed: the file is written byte by byte.)

Tensors, all float32:
  mha.in_proj_weight, mha.in_proj_bias, mha.out_proj.weight, mha.out_proj.bias
      nn.MultiheadAttention(16, 4, batch_first=True)
  mha.x (2, 5, 16)            the input (query = key = value)
  mha.y (2, 5, 16)            attn(x, x, x, need_weights=False)[0]
  mha.y_padded (2, 5, 16)     the same with key_padding_mask: row 1's keys 3 and 4 are padding
  enc.<state_dict names>      nn.TransformerEncoderLayer(16, 4, 32, dropout=0, batch_first=True)
  enc.x, enc.y (2, 5, 16)     its input and output (eval mode)
  mhakv.sd.<state_dict names> nn.MultiheadAttention(16, 4, kdim=12, vdim=8, batch_first=True)
                              without out_proj.bias (q_proj_weight, k_proj_weight, v_proj_weight,
                              in_proj_bias, out_proj.weight)
  mhakv.q (2, 5, 16), mhakv.k (2, 7, 12), mhakv.v (2, 7, 8)   its inputs
  mhakv.bool_mask (5, 7)      1 = not allowed; mhakv.pad (2, 7): 1 = padding (row 1, keys 5, 6)
  mhakv.y_bool, mhakv.w_bool  attn(q, k, v, key_padding_mask=pad, attn_mask=bool_mask): the output
                              and the head-averaged weights (2, 5, 7)
  mhakv.float_mask (8, 5, 7)  an additive mask per (batch, head)
  mhakv.y_float, mhakv.w_float   with float_mask, average_attn_weights=False: weights (2, 4, 5, 7)
  mhakv.y_causal              bool_mask | (key j > i + 2), i.e. heed's causal (bottom-right) too
  mhakv.y_unbatched, mhakv.w_unbatched   attn(q[0], k[0], v[0], attn_mask=float_mask[:4]): (5, 16), (5, 7)
  mhab.sd.<state_dict names>  nn.MultiheadAttention(16, 4, batch_first=True) without in_proj_bias
  mhab.x (2, 5, 16), mhab.mask (8, 5, 5) bool per (batch, head), 1 = not allowed
  mhab.y, mhab.w              attn(x, x, x, key_padding_mask=pad[:, :5], attn_mask=mask)
(bool tensors are stored as float 0 / 1: the writer knows only F32.)
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

from heed_torch import write_safetensors  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    a = p.parse_args()
    torch.manual_seed(13)
    tensors = {}

    mha = torch.nn.MultiheadAttention(16, 4, batch_first=True).eval()
    # Non-zero biases (PyTorch starts them at 0), so that loading them is tested.
    with torch.no_grad():
        mha.in_proj_bias.normal_(0, 0.1)
        mha.out_proj.bias.normal_(0, 0.1)
    x = torch.randn(2, 5, 16)
    pad = torch.tensor([[False] * 5, [False, False, False, True, True]])
    with torch.no_grad():
        tensors["mha.y"] = mha(x, x, x, need_weights=False)[0]
        tensors["mha.y_padded"] = mha(x, x, x, key_padding_mask=pad, need_weights=False)[0]
    tensors["mha.x"] = x
    for name, t in mha.state_dict().items():
        tensors["mha." + name] = t

    enc = torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True).eval()
    with torch.no_grad():
        for name, t in enc.named_parameters():
            if name.endswith("bias"):
                t.normal_(0, 0.1)
    xe = torch.randn(2, 5, 16)
    with torch.no_grad():
        tensors["enc.y"] = enc(xe)
    tensors["enc.x"] = xe
    for name, t in enc.state_dict().items():
        tensors["enc." + name] = t

    # kdim / vdim, q/k/v biases without an output bias, both mask kinds, unbatched input, weights.
    mkv = torch.nn.MultiheadAttention(16, 4, kdim=12, vdim=8, batch_first=True).eval()
    mkv.out_proj.bias = None
    with torch.no_grad():
        mkv.in_proj_bias.normal_(0, 0.1)
    q, k, v = torch.randn(2, 5, 16), torch.randn(2, 7, 12), torch.randn(2, 7, 8)
    bool_mask = torch.rand(5, 7) < 0.3
    bool_mask[:, 0] = False  # every query keeps a key
    pad7 = torch.zeros(2, 7, dtype=torch.bool)
    pad7[1, 5:] = True
    float_mask = torch.randn(8, 5, 7)
    causal = torch.ones(5, 7, dtype=torch.bool).tril(2).logical_not()
    with torch.no_grad():
        y, w = mkv(q, k, v, key_padding_mask=pad7, attn_mask=bool_mask)
        tensors["mhakv.y_bool"], tensors["mhakv.w_bool"] = y, w
        y, w = mkv(q, k, v, attn_mask=float_mask, average_attn_weights=False)
        tensors["mhakv.y_float"], tensors["mhakv.w_float"] = y, w
        tensors["mhakv.y_causal"] = mkv(q, k, v, attn_mask=bool_mask | causal, need_weights=False)[0]
        y, w = mkv(q[0], k[0], v[0], attn_mask=float_mask[:4])
        tensors["mhakv.y_unbatched"], tensors["mhakv.w_unbatched"] = y, w
    for name, t in {"q": q, "k": k, "v": v, "bool_mask": bool_mask, "pad": pad7, "float_mask": float_mask}.items():
        tensors["mhakv." + name] = t.float()
    for name, t in mkv.state_dict().items():
        tensors["mhakv.sd." + name] = t

    mb = torch.nn.MultiheadAttention(16, 4, batch_first=True).eval()
    mb.in_proj_bias = None
    with torch.no_grad():
        mb.out_proj.bias.normal_(0, 0.1)
    xb = torch.randn(2, 5, 16)
    head_mask = torch.rand(8, 5, 5) < 0.3
    head_mask[:, :, 0] = False
    with torch.no_grad():
        tensors["mhab.y"], tensors["mhab.w"] = mb(xb, xb, xb, key_padding_mask=pad7[:, :5], attn_mask=head_mask)
    tensors["mhab.x"], tensors["mhab.mask"] = xb, head_mask.float()
    for name, t in mb.state_dict().items():
        tensors["mhab.sd." + name] = t

    write_safetensors(os.path.join(a.out, "torch_attention_fixture.safetensors"), tensors,
                      {"made_by": "scripts/make_torch_attention_fixture.py", "torch": torch.__version__})


if __name__ == "__main__":
    main()
