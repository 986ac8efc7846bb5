"""Reproducer for error paths that crashed the CUDA build under torch 2.11 on the GPU machine
(an argument check formatting an integer; docs/sm90.md). Each call must raise, not crash."""

import torch

import sglang_fp8ext as fx

devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
for dev in devices:
    for k in (128, 100):
        x = torch.randn(4, k).bfloat16().to(dev)
        try:
            q, s = torch.ops.sgl_fp8.per1x128_quant(x, False, False)
            print(dev, "ok", k, tuple(q.shape))
        except RuntimeError as e:
            print(dev, "raised:", str(e)[:160])
    w = torch.randn(256, 256).to(torch.float8_e4m3fn).to(dev)
    try:
        fx.smallm_gemm(torch.randn(2, 256, dtype=torch.bfloat16, device=dev), w, torch.ones(3, 2, device=dev))
    except RuntimeError as e:
        print(dev, "raised:", str(e)[:160])
print("probe done")
