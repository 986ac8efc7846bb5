"""Small sweep of every CUDA op for compute-sanitizer (memcheck, racecheck): odd shapes, both
layouts and scale formats, bias, every token-tile instance (M = 1, 13, 24, 33: 1, 2, 3 and 4 + 1
tiles; up to 32 tokens the wgmma ring kernel for plain weights (M = 24: its 32-token instance,
whose partials and inbox share shared memory with its ring and activations, and on 5120x4096 its
late copies, requested after the prologue), below 17 tokens the
mma.sync ring kernel for shuffled ones (and plain (48, 256), whose CTAs have too few tiles for
wgmma), the register kernel above and through flag 32), M beyond one 32-token chunk, and the
register kernel with a 3-stage shared-memory staging ring, and (M <= 16) the wgmma ring kernel's
co-resident variant (flag 512) and its whole-shared-memory instance (flags 512 + 1024, also with
k_split 1) and the 4-warpgroup kernel forced to k_split 2 and 4 (its async exchange), (M = 13-24)
paired activations (flag 8192) at k_split 4 and at k_split 2 with the barrier exchange, and a
weight share too large for the 4-warpgroup kernel (12288x4096, whose default is
the refilled ring, and at M = 16 its whole-shared-memory instance); 4096x1024, whose default takes no
K split up to 8 tokens (session 27); the register-fed kernel (flag 32768, M <= 16, every K that is a
multiple of 1024). --quick (racecheck): 5120x4096, 272x1024 and 4096x1024 at
M = 1, 16 and 24."""

import torch

import sglang_fp8ext as fx

dev = torch.device("cuda")
gen = torch.Generator().manual_seed(3)
import sys
SHAPES = ((48, 256), (2112, 7168), (5120, 4096), (272, 1024), (4096, 1024))
MS = (1, 13, 16, 24, 33)
if '--quick' in sys.argv:  # racecheck is slow: one clustered shape, three M
    SHAPES, MS = ((5120, 4096), (272, 1024), (4096, 1024)), (1, 16, 24)
for n, k in SHAPES:
    for m in MS:
        for e8m0 in (False, True):
            w = (torch.randn(n, k, generator=gen) * 0.5).to(torch.float8_e4m3fn).to(dev)
            nb, kb = (n + 127) // 128, k // 128
            if e8m0:
                ws = (torch.randint(-10, -3, (nb, kb), generator=gen) + 127).to(torch.uint8).view(torch.float8_e8m0fnu)
            else:
                ws = torch.rand(nb, kb, generator=gen) * 1e-2 + 1e-3
            ws = ws.to(dev)
            x = torch.randn(m, k, generator=gen).to(torch.bfloat16).to(dev)
            bias = torch.randn(n, generator=gen).to(torch.bfloat16).to(dev)
            fx.smallm_gemm(x, w, ws, False, bias)
            fx.smallm_gemm(x, fx.shuffle_weight(w), ws, True, None)
            if m <= 16:  # the register kernel where the ring kernel is the default, 3 staging stages
                torch.ops.sgl_fp8._smallm_gemm_configured(x, w, ws, False, bias, [0, 0, 0, 0, 32, 3])
                # the register-fed kernel (config flag 32768; 1 and 2 token tiles)
                try:
                    torch.ops.sgl_fp8._smallm_gemm_configured(x, w, ws, False, bias, [0, 0, 0, 0, 32768])
                except RuntimeError as e:  # K not a multiple of 1024: the documented error
                    if "no sm_90 GEMM plan fits" not in str(e) or k % 1024 == 0:
                        raise
                # the wgmma ring kernel's co-resident variant (a refilled ring for 5120x4096)
                torch.ops.sgl_fp8._smallm_gemm_configured(x, w, ws, False, bias, [0, 0, 0, 0, 512])
                # its whole-shared-memory instance, with the plan's k_split and with k_split 1
                torch.ops.sgl_fp8._smallm_gemm_configured(x, w, ws, False, bias, [0, 0, 0, 0, 1536])
                torch.ops.sgl_fp8._smallm_gemm_configured(x, w, ws, False, bias, [1, 0, 0, 0, 1536])
                # the 4-warpgroup kernel with a K split: its async exchange (st.async onto the inbox mbarrier)
                for k_split in (2, 4):
                    try:
                        torch.ops.sgl_fp8._smallm_gemm_configured(x, w, ws, False, bias, [k_split, 0, 0, 0, 0])
                    except RuntimeError as e:  # a forced split with too few tiles per CTA: the documented error
                        if "no sm_90 GEMM plan fits" not in str(e):
                            raise
            if 8 < m <= 32:  # paired activations (flag 8192): st.async of the prologue's bytes to the pair peer
                for config in ([4, 0, 0, 0, 8192], [2, 0, 0, 0, 8192 | 2048]):
                    try:
                        torch.ops.sgl_fp8._smallm_gemm_configured(x, w, ws, False, bias, config)
                    except RuntimeError as e:
                        if "no sm_90 GEMM plan fits" not in str(e):
                            raise
            q, s = fx.per1x128_quant(x, e8m0)
            fx.scaled_gemm(q, s, w, ws, False, torch.bfloat16, bias)
            qt, st = fx.per1x128_quant(x, e8m0, transpose_scale=True)
            fx.scaled_gemm(qt, st, w, ws)
    r = torch.randn(5, k, generator=gen).to(torch.bfloat16).to(dev)
    g = (torch.rand(k, generator=gen) + 0.5).to(torch.bfloat16).to(dev)
    fx.rmsnorm_quant(r, g, 1e-6, False)
    fx.add_rmsnorm_quant(r, r, g, 1e-6, True)
if '--quick' not in sys.argv:  # a share the 4-warpgroup kernel cannot hold: the default refills its ring
    n, k = 12288, 4096
    w = (torch.randn(n, k, generator=gen) * 0.5).to(torch.float8_e4m3fn).to(dev)
    ws = (torch.rand(n // 128, k // 128, generator=gen) * 1e-2 + 1e-3).to(dev)
    for m in (1, 16):
        x = torch.randn(m, k, generator=gen).to(torch.bfloat16).to(dev)
        fx.smallm_gemm(x, w, ws, False, None)
torch.cuda.synchronize()
print("sanitize sweep done")
