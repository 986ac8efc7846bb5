"""Where a GEMM kernel's output goes wrong, when it does: per shape and M, the §3.4 row error of
the default kernel and of the mma.sync ring (flag 256) against the CPU implementation, and for a
failing case the error pattern over (row % 128 // 16, token) and the worst rows. Run on the GPU:

    python tools/wgmma_probe.py [--shapes 5120x4096,4096x2048] [--ms 1,5,8,16]
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import sglang_fp8ext as fx  # noqa: E402
from sglang_fp8ext.reference import relative_row_errors  # noqa: E402


def col_errors(out, ref):
    """Relative error per (token, row): |out - ref| / ||ref[token]||."""
    o, r = out.double(), ref.double()
    return (o - r).abs() / r.norm(dim=1, keepdim=True).clamp_min(1e-30)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="5120x4096,4608x4096,4096x2048,2112x7168,272x1024,8192x1024")
    ap.add_argument("--ms", default="1,5,8,16")
    args = ap.parse_args()
    gen = torch.Generator().manual_seed(3)
    dev = torch.device("cuda")
    configured = torch.ops.sgl_fp8._smallm_gemm_configured
    bad = 0
    for shape in args.shapes.split(","):
        n, k = (int(v) for v in shape.split("x"))
        w = (torch.randn(n, k, generator=gen) * 0.5).to(torch.float8_e4m3fn)
        ws = torch.rand((n + 127) // 128, k // 128, generator=gen) * 1e-2 + 1e-3
        for m in (int(v) for v in args.ms.split(",")):
            x = torch.randn(m, k, generator=gen).to(torch.bfloat16)
            ref = fx.smallm_gemm(x, w, ws, False, None).float()
            xd, wd, wsd = x.to(dev), w.to(dev), ws.to(dev)
            out = fx.smallm_gemm(xd, wd, wsd, False, None).float().cpu()
            ring = configured(xd, wd, wsd, False, None, [0, 0, 0, 0, 256]).float().cpu()
            e_out = relative_row_errors(out, ref).max().item()
            e_ring = relative_row_errors(ring, ref).max().item()
            ok = e_out < 4e-3
            bad += not ok
            print(f"{'ok  ' if ok else 'BAD '} {n}x{k} M={m}: default {e_out:.2e}  mma.sync ring {e_ring:.2e}", flush=True)
            if not ok:
                err = col_errors(out, ref)  # [m, n]
                rows_bad = (err > 1e-3).any(dim=0)
                print(f"     rows wrong: {int(rows_bad.sum())} of {n}; tokens wrong: "
                      f"{[(t, int((err[t] > 1e-3).sum())) for t in range(m)]}")
                by_sub = [int(rows_bad.view(-1, 8, 16)[:, s, :].sum()) for s in range(8)] if n % 128 == 0 else []
                print(f"     wrong rows by 16-row tile within a 128-row block: {by_sub}")
                by_row = [int(rows_bad.view(-1, 16)[:, r].sum()) for r in range(16)]
                print(f"     wrong rows by row within a tile: {by_row}")
                first = torch.nonzero(rows_bad).flatten()[:12].tolist()
                print(f"     first wrong rows: {first}")
                for r in first[:3]:
                    print(f"       row {r}: out {out[:, r].tolist()[:4]} ref {ref[:, r].tolist()[:4]}")
    print(f"probe: {bad} bad")


if __name__ == "__main__":
    main()
