"""Run smallm_gemm on one shape a few times eagerly, for a profiler to pick a launch:
    ncu -k regex:ring_gemm -s 3 -c 1 --set full python tools/profile_gemm.py 5120 4096 8"""
import sys

import torch

import sglang_fp8ext as fx
from sglang_fp8ext.bench import make_weight

n, k, m = (int(v) for v in sys.argv[1:4])
config = [int(v) for v in sys.argv[4].split(",")] if len(sys.argv) > 4 else None
dev = torch.device("cuda")
gen = torch.Generator(device=dev).manual_seed(0)
w, s, _ = make_weight(n, k, False, dev, gen)
x = torch.randn(m, k, generator=gen, device=dev).to(torch.bfloat16)
for _ in range(6):
    if config is None:
        fx.smallm_gemm(x, w, s)
    else:
        torch.ops.sgl_fp8._smallm_gemm_configured(x, w, s, False, None, config)
torch.cuda.synchronize()
print("done")
