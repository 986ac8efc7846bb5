"""Reproducer for a CPU-op error path that crashed under torch 2.11 on the GPU machine."""

import torch

import sglang_fp8ext as fx

for k in (128, 100):
    x = torch.randn(4, k).bfloat16()
    try:
        q, s = torch.ops.sgl_fp8.per1x128_quant(x, False, False)
        print("ok", k, q.shape)
    except RuntimeError as e:
        print("raised:", str(e)[:160])
print("probe done")
