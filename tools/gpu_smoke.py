"""Quick GPU correctness sweep used during development runs on the lent H200 (the full matrix
lives in tests/). Compares every CUDA op with the CPU op on the same inputs: quantization
bit-exact, GEMMs within SPEC §3.4, graph replay bitwise equal to eager. Exits non-zero on any
failure and prints one line per check."""

import sys

import torch

import sglang_fp8ext as fx

failures = []


def check(name, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {name} {detail}", flush=True)
    if not ok:
        failures.append(name)


def rel_err_rows(out, ref):
    out, ref = out.double(), ref.double()
    return ((out - ref).norm(dim=-1) / ref.norm(dim=-1).clamp_min(1e-30)).max().item()


def adversarial(m, k, dtype, gen):
    x = torch.randn(m, k, generator=gen) * torch.exp(torch.randn(m, k // 128, 1, generator=gen) * 4).repeat(1, 1, 128).view(m, k)
    x = x.to(dtype)
    if m > 2 and k >= 256:
        x[0, :128] = 0
        x[1, 128:256] = 0
        x[1, 130] = 3.0
        x[2, 5] = float("nan")
        x[2, 300 % k] = float("inf")
    return x


def main():
    dev = torch.device("cuda")
    gen = torch.Generator().manual_seed(1)
    for dtype in (torch.bfloat16, torch.float16):
        for ue8m0 in (False, True):
            for m, k in ((1, 128), (7, 512), (33, 4096), (5, 7168)):
                x = adversarial(m, k, dtype, gen)
                qc, sc = fx.per1x128_quant(x, ue8m0)
                qg, sg = fx.per1x128_quant(x.to(dev), ue8m0)
                same = torch.equal(qc.view(torch.uint8), qg.cpu().view(torch.uint8)) and torch.equal(
                    sc.view(torch.uint8), sg.cpu().view(torch.uint8))
                check(f"per1x128_quant {dtype} ue8m0={ue8m0} {m}x{k}", same)
            qt, st = fx.per1x128_quant(x.to(dev), ue8m0, transpose_scale=True)
            check("per1x128_quant transpose", st.stride() == (1, x.shape[0]) and torch.equal(
                st.cpu().contiguous().view(torch.uint8), sc.view(torch.uint8)))
    for residual in (False, True):
        for ue8m0 in (False, True):
            x = torch.randn(9, 2048, generator=gen).to(torch.bfloat16)
            r = torch.randn(9, 2048, generator=gen).to(torch.bfloat16)
            w = (torch.rand(2048, generator=gen) + 0.5).to(torch.bfloat16)
            if residual:
                qc, sc, rc = fx.add_rmsnorm_quant(x, r, w, 1e-6, ue8m0)
                qg, sg, rg = fx.add_rmsnorm_quant(x.to(dev), r.to(dev), w.to(dev), 1e-6, ue8m0)
                check(f"add_rmsnorm_quant residual_out ue8m0={ue8m0}", torch.equal(rc, rg.cpu()))
            else:
                qc, sc = fx.rmsnorm_quant(x, w, 1e-6, ue8m0)
                qg, sg = fx.rmsnorm_quant(x.to(dev), w.to(dev), 1e-6, ue8m0)
            sf = (lambda s: fx.e8m0_to_scale(s)) if ue8m0 else (lambda s: s)
            deq_c = qc.float().view(9, -1, 128) * sf(sc).unsqueeze(-1)
            deq_g = qg.cpu().float().view(9, -1, 128) * sf(sg.cpu()).unsqueeze(-1)
            err = rel_err_rows(deq_g.view(9, -1), deq_c.view(9, -1))
            check(f"rmsnorm_quant residual={residual} ue8m0={ue8m0}", err < 1e-2, f"rel {err:.2e}")

    shapes = [(16, 128), (48, 256), (2112, 7168), (5120, 4096), (4608, 4096), (4096, 2048), (1536, 4096), (8192, 1024)]
    for n, k in shapes:
        for m in (1, 3, 8, 13, 32, 33, 70):
            if n * k > 8e6 and m not in (1, 13, 32, 33):
                continue
            for e8m0 in (False, True):
                w = (torch.randn(n, k, generator=gen) * 0.5).to(torch.float8_e4m3fn)
                nb, kb = (n + 127) // 128, k // 128
                if e8m0:
                    ws = (torch.randint(-10, -3, (nb, kb), generator=gen) + 127).to(torch.uint8).view(torch.float8_e8m0fnu)
                else:
                    ws = torch.rand(nb, kb, generator=gen) * 1e-2 + 1e-3
                bias = torch.randn(n, generator=gen).to(torch.bfloat16) if m % 2 else None
                x = torch.randn(m, k, generator=gen).to(torch.bfloat16)
                ref = fx.smallm_gemm(x, w, ws, False, bias)
                wd, wsd, xd = w.to(dev), ws.to(dev), x.to(dev)
                bd = bias.to(dev) if bias is not None else None
                out = fx.smallm_gemm(xd, wd, wsd, False, bd)
                err = rel_err_rows(out.cpu(), ref)
                check(f"smallm_gemm {n}x{k} M={m} e8m0={e8m0} bias={bias is not None}", err < 4e-3, f"rel {err:.2e}")
                shuffled = fx.shuffle_weight(wd)
                out_s = fx.smallm_gemm(xd, shuffled, wsd, True, bd)
                # Shuffled weights take the kernel that flag 256 forces for plain ones (the wgmma
                # ring kernel reads plain weights only): the same bits.
                configured = torch.ops.sgl_fp8._smallm_gemm_configured
                plain_same_kernel = configured(xd, wd, wsd, False, bd, [0, 0, 0, 0, 256])
                check(f"  shuffled == plain (flag 256)", torch.equal(out_s, plain_same_kernel))
                out2 = fx.smallm_gemm(xd, wd, wsd, False, bd)
                check(f"  reproducible", torch.equal(out2, out))
                # The ring kernel (default for M <= 16 where it fits) ignores the register kernel's
                # staging flag; the register kernel (flag 32) keeps its accumulation order with or
                # without its cp.async staging, at every depth: bitwise equal outputs.
                check(f"  flag 8 (register staging off) == default",
                      torch.equal(configured(xd, wd, wsd, False, bd, [0, 0, 0, 0, 8]), out))
                out_r = configured(xd, wd, wsd, False, bd, [0, 0, 0, 0, 32])
                err_r = rel_err_rows(out_r.cpu(), ref)
                check(f"  register kernel", err_r < 4e-3, f"rel {err_r:.2e}")
                same_r = all(torch.equal(configured(xd, wd, wsd, False, bd, cfg), out_r)
                             for cfg in ([0, 0, 0, 0, 32 | 8], [0, 0, 0, 0, 32, 1], [0, 0, 0, 0, 32, 2],
                                         [0, 0, 0, 0, 32, 3]))
                check(f"  register kernel staging off / 1 / 2 / 3 stages == register default", same_r)
                # The mma.sync ring kernel (flag 256) where the wgmma ring kernel is the default.
                err_v = rel_err_rows(configured(xd, wd, wsd, False, bd, [0, 0, 0, 0, 256]).cpu(), ref)
                check(f"  mma.sync ring kernel (flag 256)", err_v < 4e-3, f"rel {err_v:.2e}")
                # Forced cluster sizes (the ring kernels take 1, 2 (and the wgmma one up to 8) where they fit) and spread
                # clusters (flag 64).
                for cfg in ([1, 0, 0, 0, 0], [2, 0, 0, 0, 64], [4, 0, 0, 0, 64 | 32], [0, 0, 0, 0, 512]):
                    if k // 128 >= cfg[0]:
                        try:
                            got = configured(xd, wd, wsd, False, bd, cfg)
                        except RuntimeError as e:  # a forced configuration may not fit this shape
                            print(f"note   config {cfg}: {str(e).splitlines()[0][:100]}")
                            continue
                        err_c = rel_err_rows(got.cpu(), ref)
                        check(f"  config {cfg}", err_c < 4e-3, f"rel {err_c:.2e}")
                q, s = fx.per1x128_quant(xd, e8m0)
                out_u = fx.scaled_gemm(q, s, wd, wsd, False, torch.bfloat16, bd)
                err_u = rel_err_rows(out_u.cpu(), ref)
                check(f"  scaled_gemm", err_u < 4e-3, f"rel {err_u:.2e}")
                if m in (1, 13) and n * k < 3e7:
                    g = torch.cuda.CUDAGraph()
                    torch.cuda.synchronize()
                    with torch.cuda.graph(g):
                        out_g = fx.smallm_gemm(xd, wd, wsd, False, bd)
                    g.replay()
                    torch.cuda.synchronize()
                    check(f"  graph replay == eager", torch.equal(out_g, out))
    print(f"\n{len(failures)} failures", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
