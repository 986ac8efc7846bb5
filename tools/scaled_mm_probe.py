"""Which shapes torch._scaled_mm with cuBLASLt 1x128 x 128x128 blockwise scaling gets right on
this GPU (dispatch.scaled_mm_linear against the float64 SPEC §3.4 reference). Diagnostic for
docs/dispatch.md: the dispatch only takes this path where `tune` verified it."""

import torch

import sglang_fp8ext as fx
from sglang_fp8ext import dispatch, reference

gen = torch.Generator().manual_seed(0)
for n, k in ((256, 256), (256, 512), (512, 256), (512, 512), (1024, 1024), (256, 4096), (4096, 512), (4096, 4096),
             (5120, 4096), (4096, 2048), (8192, 1024), (1536, 4096)):
    w = (torch.randn(n, k, generator=gen) * 0.5).to(torch.float8_e4m3fn)
    ws = torch.rand(n // 128, k // 128, generator=gen) * 1e-2 + 1e-3
    errs = []
    for m in (1, 4, 16, 64):
        x = torch.randn(m, k, generator=gen).to(torch.bfloat16)
        q, xs = reference.per1x128_quant(x, ue8m0=False)
        ref = reference.block_scaled_gemm(q, xs, w, ws, False, None, torch.float64)
        try:
            out = dispatch.scaled_mm_linear(x.cuda(), w.cuda(), ws.cuda()).double().cpu()
            err = ((out - ref).norm(dim=1) / ref.norm(dim=1)).max().item()
            errs.append(f"M={m}: {err:.1e}")
        except RuntimeError as e:
            errs.append(f"M={m}: error {str(e).splitlines()[0][:60]}")
    print(f"N={n:5d} K={k:5d}  " + "  ".join(errs), flush=True)
