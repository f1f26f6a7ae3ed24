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

    write_safetensors(os.path.join(a.out, "torch_attention_fixture.safetensors"), tensors,
                      {"made_by": "scripts/make_torch_attention_fixture.py", "torch": torch.__version__})


if __name__ == "__main__":
    main()
