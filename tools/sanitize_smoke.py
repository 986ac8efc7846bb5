"""A small sweep of every CUDA op for compute-sanitizer: run it under memcheck and racecheck after
changing a CUDA kernel or the plan (tools/device_run.sh's memcheck and racecheck steps do):

    compute-sanitizer --tool memcheck --error-exitcode 9 python tools/sanitize_smoke.py
    compute-sanitizer --tool racecheck --error-exitcode 9 python tools/sanitize_smoke.py --quick

It launches the kernels the dispatch picks and, through the private configured op (8-field configs,
sglang_fp8ext/kernel_config.py), the engines and variants it does not pick by default, on shapes that
stress their index math: odd N (48, 272, 2112), both weight layouts and scale formats, bias, M = 1, 13,
16, 24, 33 (1 to 4 token tiles and a second 32-token chunk), the general kernel with 3 staging stages,
the wgmma ring kernel forced to K splits 2 and 4 (its async exchange), paired activations at 13-32
tokens (K splits 1, 2 and 4; the split-free pairs are 8192x1024's default there), the register-fed
kernel (K a multiple of 1024), 4096x1024 (no K split at few tokens), 7168x2048 (no K split over 16
blocks up to 16 tokens, paired from 9; the paired split of 2 from 17), and shares too large for the
4-warpgroup kernel in one wave, where the wgmma plan takes its co-resident variant (6144x4096 and
4096x12288: a refilled ring and the direct exchange), its whole-shared-memory instance (12288x4096
and 4096x12288 at 13-16 tokens) or, at 24-32 tokens, its 4-warpgroup kernel over two or three waves;
and shares no plan holds in one wave, where the general kernel runs over several waves (1024x25600
at 33 tokens) or over chunks of fewer tokens (1024x40960 at 17: 16 + 1).
The quant and RMSNorm ops run on every K. --quick (racecheck is slow): 5120x4096, 272x1024 and
4096x1024 at M = 1, 16 and 24. Prints "sanitize sweep done" at the end; the sanitizer's
exit code is the verdict.
"""

import sys

import torch

import sglang_fp8ext as fx

dev = torch.device("cuda")
gen = torch.Generator().manual_seed(3)
SHAPES = ((48, 256), (2112, 7168), (5120, 4096), (272, 1024), (4096, 1024), (7168, 2048))
MS = (1, 13, 16, 24, 33)
if '--quick' in sys.argv:  # racecheck is slow: three shapes, three M
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
            # config fields: engine (0 auto, 1 wgmma, 2 general, 3 register_fed), k_split, copy_blocks,
            # early_copies, pair_activations (0 auto, 1 on, 2 off), ctas_per_sm, staging_stages, tiles_per_wave
            if m <= 16:  # the general kernel where the wgmma kernel is the default, 3 staging stages
                torch.ops.sgl_fp8._smallm_gemm_configured(x, w, ws, False, bias, [2, 0, 0, 0, 0, 0, 3, 0])
                # the register-fed kernel (1 and 2 token tiles)
                try:
                    torch.ops.sgl_fp8._smallm_gemm_configured(x, w, ws, False, bias, [3, 0, 0, 0, 0, 0, 0, 0])
                except RuntimeError as e:  # K not a multiple of 1024: the documented error
                    if "no sm_90 GEMM plan fits" not in str(e) or k % 1024 == 0:
                        raise
                # the wgmma kernel with a K split: its async exchange (st.async onto the inbox mbarrier)
                for k_split in (2, 4):
                    try:
                        config = [1, k_split, 0, 0, 0, 0, 0, 0]
                        torch.ops.sgl_fp8._smallm_gemm_configured(x, w, ws, False, bias, config)
                    except RuntimeError as e:  # a forced split with too few tiles per CTA: the documented error
                        if "no sm_90 GEMM plan fits" not in str(e):
                            raise
            if 8 < m <= 32:  # paired activations: st.async of the prologue's bytes to the pair peer
                for config in ([1, 4, 0, 0, 1, 0, 0, 0], [1, 2, 0, 0, 1, 0, 0, 0], [1, 1, 0, 0, 1, 0, 0, 0]):
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
if '--quick' not in sys.argv:  # shares one wave of the 4-warpgroup kernel cannot hold
    for n, k in ((6144, 4096), (12288, 4096), (4096, 12288)):
        w = (torch.randn(n, k, generator=gen) * 0.5).to(torch.float8_e4m3fn).to(dev)
        ws = (torch.rand(n // 128, k // 128, generator=gen) * 1e-2 + 1e-3).to(dev)
        for m in (1, 13, 16, 24, 32):
            x = torch.randn(m, k, generator=gen).to(torch.bfloat16).to(dev)
            fx.smallm_gemm(x, w, ws, False, None)
    # shares no plan holds in one wave: the general kernel over several waves, and over chunks of
    # fewer tokens where a CTA of one tile leaves a 32-token chunk's activations no room
    for n, k, m in ((1024, 25600, 33), (1024, 40960, 17)):
        w = (torch.randn(n, k, generator=gen) * 0.5).to(torch.float8_e4m3fn).to(dev)
        ws = (torch.rand(n // 128, k // 128, generator=gen) * 1e-2 + 1e-3).to(dev)
        x = torch.randn(m, k, generator=gen).to(torch.bfloat16).to(dev)
        bias = torch.randn(n, generator=gen).to(torch.bfloat16).to(dev)
        fx.smallm_gemm(x, w, ws, False, bias)
        q, s = fx.per1x128_quant(x, False)
        fx.scaled_gemm(q, s, w, ws, False, torch.bfloat16, bias)
torch.cuda.synchronize()
print("sanitize sweep done")
