"""One cold launch of smallm_gemm per M for Nsight Compute (`ncu`), after a warm-up that is
not profiled. Usage: python tools/ncu_probe.py N K M [M ...]"""

import sys

import torch

import sglang_fp8ext as fx

n, k = int(sys.argv[1]), int(sys.argv[2])
ms = [int(m) for m in sys.argv[3:]]
gen = torch.Generator(device="cuda").manual_seed(0)
w = (torch.randn(n, k, device="cuda", generator=gen) * 0.5).to(torch.float8_e4m3fn)
ws = torch.rand((n + 127) // 128, k // 128, device="cuda", generator=gen) * 1e-3
flush = torch.empty(256 * 1024 * 1024, dtype=torch.uint8, device="cuda")
for m in ms:
    x = torch.randn(m, k, device="cuda", generator=gen).to(torch.bfloat16)
    fx.smallm_gemm(x, w, ws)  # warm-up (module load, plan cache)
    torch.cuda.synchronize()
    flush.zero_()  # evict the weight from L2
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push(f"M={m}")
    fx.smallm_gemm(x, w, ws)
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
