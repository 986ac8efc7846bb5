"""Output bits of one build (device-only helper, not committed): sha1 of every output, one line per point."""
import hashlib, sys, torch
import sglang_fp8ext  # noqa: F401
from sglang_fp8ext.bench import make_weight
from sglang_fp8ext.tune import activations
dev = torch.device("cuda")
out = []
def h(t):
    return hashlib.sha1(t.contiguous().view(torch.uint8).cpu().numpy().tobytes()).hexdigest()[:12]
cases = [(5120, 4096), (4608, 4096), (4096, 2048), (2112, 7168), (1536, 4096), (6144, 4096), (4096, 4096)]
for n, k in cases:
    for e8m0 in (False, True):
        g = torch.Generator(device=dev).manual_seed(n * 7 + k + e8m0)
        w, s, _ = make_weight(n, k, e8m0, dev, g)
        for m in (1, 3, 8, 13, 16, 20, 24, 32, 40):
            x = activations(m, k, g, dev)
            y = torch.ops.sgl_fp8.smallm_gemm(x, w, s)
            out.append(f"{n}x{k} e8m0={e8m0} M={m} default {h(y)}")
            for name, cfg in (("register", [0, 0, 0, 0, 32]), ("mma_sync", [0, 0, 0, 0, 256]),
                              ("co_resident", [0, 0, 0, 0, 512]), ("k4", [4, 0, 0, 0, 0])):
                try:
                    y = torch.ops.sgl_fp8._smallm_gemm_configured(x, w, s, False, None, cfg)
                    out.append(f"{n}x{k} e8m0={e8m0} M={m} {name} {h(y)}")
                except RuntimeError as e:
                    out.append(f"{n}x{k} e8m0={e8m0} M={m} {name} n/a")
torch.cuda.synchronize()
open(sys.argv[1], "w").write("\n".join(out) + "\n")
print(len(out), "points")
