"""Times tools/regmma_probe.cu (session 35) beside the fused op, in one run on one GPU.

The probe is a GEMM built another way than the fused op: the weight read straight into registers by
many small CTAs (16 rows each, several an SM), decoded e4m3 -> f16 in registers and multiplied by
mma.sync (f16 in, fp32 accumulate), with no shared-memory ring, no TMA, no cluster and no K-split
exchange between CTAs. It does everything of `smallm_gemm` but quantize the activations (it reads
them already quantized, e4m3, 1 byte a value where the op reads 2) and add a bias. Each point is
checked first against a float64 model of SPEC §3.4 (per row, relative error <= 4e-3, on e4m3
activations spread over the whole e4m3 range, subnormals included), then timed as `bench` times the
fused op: a CUDA graph of one launch per rotated weight copy (cold weights), programmatic dependent
launch, median of `--replays` replays. In the same run: the copy rate (the floor), the fused op
(its own plan) and the fused op's stream and MMAs alone (flag 6, garbage output).

    python tools/regmma_probe.py --out DIR [--ms 1,4,8,16] [--replays 20]
    python tools/regmma_probe.py --compile-only    # build the probe and print its registers (needs nvcc)
"""
from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import stream_ceiling as sc  # noqa: E402  (nvcc lookup, rotated-copy count, the fused op's timing)

CU_SOURCE = os.path.join(HERE, "regmma_probe.cu")
TOLERANCE = 4e-3  # SPEC §3.4, per output row
FLAG6 = [0, 0, 64, 0, 6]  # the fused op: every copy at entry, its stream and MMAs alone
REGISTER_FED = [0, 0, 0, 0, 32768]  # the fused op's register-fed kernel (sm90_register_fed_gemm.cuh), forced
# (code, name, checked): the probe's variants (regmma_probe.cu); the diagnostic ones give garbage outputs
VARIANTS = [
    (0, "regmma probe", True),
    (4, "regmma probe, f16 activations", True),
    (1, "diag: no decode", False),
    (2, "diag: no mma", False),
    (3, "diag: loads only", False),
    (8, "regmma probe, three blocks at entry", True),
    (11, "diag: loads only, three blocks at entry", False),
    (19, "diag: loads only, no activations", False),
    (27, "diag: loads only, no activations, three blocks at entry", False),
    (32, "swapped: 8-row CTAs", True),
    (35, "swapped diag: loads only", False),
    (51, "swapped diag: loads only, no activations", False),
    (33, "swapped diag: no decode", False),
    (40, "swapped, every block at entry", True),
    (43, "swapped diag: loads only, every block at entry", False),
    (59, "swapped diag: loads only, no activations, every block at entry", False),
    (67, "diag: loads only, contiguous", False),
    (99, "swapped diag: loads only, contiguous", False),
    (71, "diag: loads only, 4 rows x 128 bytes", False),
    (103, "swapped diag: loads only, 4 rows x 128 bytes", False),
    (72, "regmma probe, 4 x 128 loads through a shared-memory transpose", True),
    (256, "regmma probe, room for the next launch (4 an SM)", True),
    (259, "diag: loads only, room for the next launch (4 an SM)", False),
    (288, "swapped, room for the next launch (7 an SM)", True),
    (291, "swapped diag: loads only, room for the next launch (7 an SM)", False),
    (323, "swapped diag: loads only, contiguous, room for the next launch (7 an SM)", False),
    (400, "swapped diag: bare loads (nothing else)", False),
    (401, "swapped diag: bare loads, every block at entry", False),
    (402, "swapped diag: bare loads, every block at entry, contiguous", False),
    (403, "swapped diag: bare loads, every block at entry, room for the next launch (7 an SM)", False),
    (410, "bare 8-row reads, 128 threads, linear", False),
    (411, "bare 8-row reads, 128 threads, strips", False),
    (412, "bare 8-row reads, 256 threads, linear", False),
    (413, "bare 8-row reads, 256 threads, strips", False),
    (414, "bare 8-row reads, 256 threads, linear, staggered by 512 B a CTA", False),
    (415, "bare 8-row reads, 256 threads, strips, staggered by 512 B a CTA", False),
    (416, "bare 8-row reads, 256 threads, linear, rotated by 128 B a CTA mod 4 KB", False),
    (417, "bare 8-row reads, 128 threads, strips, staggered by 512 B a CTA", False),
    (418, "bare 8-row reads, 128 threads, strips, rotated in rows by 128 B a CTA (547's addresses)", False),
    (419, "bare 8-row reads, 128 threads, strips, rotated in rows by 512 B a CTA", False),
    (420, "bare 8-row reads, 256 threads, strips, rotated in rows by 128 B a CTA", False),
    (421, "bare 8-row reads, 256 threads, strips, rotated in rows by 512 B a CTA", False),
    (512, "regmma probe, K blocks rotated by CTA", True),
    (515, "diag: loads only, K blocks rotated by CTA", False),
    (544, "swapped, K blocks rotated by CTA", True),
    (547, "swapped diag: loads only, K blocks rotated by CTA", False),
    (548, "swapped diag: bare loads, K blocks rotated by CTA", False),
    (555, "swapped diag: loads only, every block at entry, K blocks rotated by CTA", False),
    (556, "swapped diag: bare loads, every block at entry, K blocks rotated by CTA", False),
    (1536, "regmma probe, K rotated by 4 blocks a CTA", True),
    (1539, "diag: loads only, K rotated by 4 blocks a CTA", False),
    (1568, "swapped, K rotated by 4 blocks a CTA", True),
    (1571, "swapped diag: loads only, K rotated by 4 blocks a CTA", False),
    (1572, "swapped diag: bare loads, K rotated by 4 blocks a CTA", False),
    (422, "bare 8-row reads, 128 threads, strips, rotated in rows by 128 B a CTA, no 5-an-SM cap", False),
    (8192, "regmma probe quantizing bf16 activations", True),
    (8195, "diag: loads only, quantizing bf16 activations", False),
    (8193, "diag: no decode, quantizing bf16 activations (not yet run on a GPU)", False),
    (8194, "diag: no mma, quantizing bf16 activations (not yet run on a GPU)", False),
    (8200, "regmma probe quantizing, three blocks at entry", True),
    (8704, "regmma probe quantizing, K blocks rotated by CTA", True),
    (24576, "regmma probe quantizing, 8 lanes a group, loads a pass ahead", True),
    (24579, "diag: loads only, quantizing, 8 lanes a group, loads a pass ahead", False),
    (40960, "regmma probe quantizing, shared by clusters of 8 CTAs (not yet run on a GPU)", True),
    (40963, "diag: loads only, quantizing, shared by clusters of 8 CTAs (not yet run on a GPU)", False),
    (4096, "regmma probe, plain wait (above the loads, as before session 37)", True),
    (4099, "diag: loads only, plain wait", False),
    (4128, "swapped, plain wait (above the loads, as before session 37)", True),
    (4131, "swapped diag: loads only, plain wait", False),
    (2048, "regmma probe, shared memory capped", True),
    (2051, "diag: loads only, shared memory capped", False),
    (2560, "regmma probe, K blocks rotated by CTA, shared memory capped", True),
    (2563, "diag: loads only, K blocks rotated by CTA, shared memory capped", False),
    (2080, "swapped, shared memory capped", True),
    (2083, "swapped diag: loads only, shared memory capped", False),
    (2592, "swapped, K blocks rotated by CTA, shared memory capped", True),
    (2595, "swapped diag: loads only, K blocks rotated by CTA, shared memory capped", False),
    (2596, "swapped diag: bare loads, K blocks rotated by CTA, shared memory capped", False),
]


class Probe:
    def __init__(self, out_dir: str):
        lib = ctypes.CDLL(sc.compile_shared_library(CU_SOURCE, out_dir))
        p, i = ctypes.c_void_p, ctypes.c_int
        lib.regmma_probe.argtypes = [p, p, p, p, p, i, i, i, i, i, p]
        lib.regmma_probe.restype = i
        lib.regmma_describe.argtypes = [i, i, i, ctypes.POINTER(i), ctypes.POINTER(i), ctypes.POINTER(i)]
        lib.regmma_describe.restype = i
        lib.regmma_error_string.argtypes = [i]
        lib.regmma_error_string.restype = ctypes.c_char_p
        self.lib = lib

    def check(self, code: int, what: str) -> None:
        if code != 0:
            raise RuntimeError(f"{what}: {self.lib.regmma_error_string(code).decode()}")

    def describe(self, k: int, m: int, variant: int) -> dict:
        regs, spill, ctas = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        self.check(self.lib.regmma_describe(k, m, variant, ctypes.byref(regs), ctypes.byref(spill),
                                            ctypes.byref(ctas)), f"describe k={k} m={m} variant {variant}")
        return {"registers": regs.value, "spill_bytes": spill.value, "ctas_per_sm": ctas.value}

    def launch(self, w, ws, act, xs, out, n: int, k: int, m: int, variant: int) -> None:
        stream = torch.cuda.current_stream().cuda_stream
        self.check(self.lib.regmma_probe(w.data_ptr(), ws.data_ptr(), act.data_ptr(), xs.data_ptr(), out.data_ptr(),
                                         n, k, m, variant, 1, stream), f"launch n={n} k={k} m={m} variant {variant}")


def activations(m: int, k: int, generator, device):
    """e4m3 activations over the whole e4m3 range (normal draws scaled by 2^-9 .. 2^8 per value, so
    subnormals, tiny and near-448 values all occur; signs mixed) and positive fp32 scales."""
    draw = torch.randn(m, k, generator=generator, device=device)
    spread = torch.pow(2.0, torch.randint(-9, 9, (m, k), generator=generator, device=device).float())
    q = (draw * spread).clamp(-448, 448).to(torch.float8_e4m3fn)
    xs = torch.rand(m, k // 128, generator=generator, device=device) * 1e-2 + 1e-4
    return q, xs


def bf16_activations(m: int, k: int, generator, device):
    """bf16 activations for the kQuantize variants (session 37), over a wide range: normal draws scaled by
    2^-9 .. 2^8 per value (signs mixed), so each 128-group's amax, and so its scale, differs."""
    draw = torch.randn(m, k, generator=generator, device=device)
    spread = torch.pow(2.0, torch.randint(-9, 9, (m, k), generator=generator, device=device).float())
    return (draw * spread).to(torch.bfloat16)


QUANTIZE_BIT = 4 * 2048  # kQuantize's bit in a variant code: `act` is bf16 x, quantized in the kernel


def reference(q, xs, w, ws):
    """SPEC §3.4 in float64: sum over 128-K blocks of xs[m, kb] ws[n / 128, kb] (q . w over the block)."""
    m, k = q.shape
    n = w.shape[0]
    kb = k // 128
    qd = q.double().view(m, kb, 128)
    wd = w.double().view(n, kb, 128)
    partial = torch.einsum("mbk,nbk->mnb", qd, wd)
    wsd = ws.double().repeat_interleave(128, dim=0)[:n]  # [n, kb]
    return (partial * xs.double()[:, None, :] * wsd[None, :, :]).sum(-1)


def row_errors(out, ref):
    diff = (out.double() - ref).norm(dim=1)
    return (diff / ref.norm(dim=1).clamp_min(1e-300)).tolist()


def run(args) -> dict:
    from sglang_fp8ext.bench import QWEN_TP4_SHAPES, git_commit, make_weight, measure_copy_bandwidth, op_bytes, time_in_graph
    from sglang_fp8ext import reference as spec  # SPEC §3.1's quantization, written independently of the kernels

    device = torch.device("cuda")
    props = torch.cuda.get_device_properties(0)
    l2 = int(getattr(props, "L2_cache_size", 0) or sc.DEFAULT_L2)
    tmp = tempfile.mkdtemp(prefix="regmma_probe_")
    probe = Probe(tmp)
    copy_tbps = measure_copy_bandwidth(device)
    sc.progress(f"copy bandwidth {copy_tbps:.2f} TB/s, {props.multi_processor_count} SMs, L2 {l2 / 1e6:.1f} MB")
    generator = torch.Generator(device=device).manual_seed(35)
    rows = []
    for n, k in QWEN_TP4_SHAPES:
        copies = sc.copies_for(sc.weight_bytes(n, k), l2)
        weights = [make_weight(n, k, False, device, generator) for _ in range(copies)]
        for m in args.ms:
            q, xs = activations(m, k, generator, device)
            act = q.view(torch.uint8).view(m, k // 64, 64).transpose(0, 1).contiguous()
            out = torch.empty(m, n, dtype=torch.bfloat16, device=device)
            w0, ws0, _ = weights[0]
            ref = reference(q, xs, w0, ws0)
            x = bf16_activations(m, k, generator, device)
            qx, xsx = spec.per1x128_quant(x)
            ref_x = reference(qx, xsx, w0, ws0)
            floor_us = op_bytes(n, k, m, False) / copy_tbps / 1e6
            for code, name, checked in (v for v in VARIANTS if args.variants is None or v[0] in args.variants):
                quantize = bool(code & QUANTIZE_BIT)
                a, want = (x, ref_x) if quantize else (act, ref)
                out.fill_(float("nan"))
                probe.launch(w0, ws0, a, xs, out, n, k, m, code)
                sc.wait_or_die(f"{name} N={n} K={k} M={m}")
                error = max(row_errors(out, want)) if checked else None
                ok = error <= TOLERANCE if checked else None
                us = time_in_graph([lambda w=w, s=s, c=code, a=a: probe.launch(w, s, a, xs, out, n, k, m, c)
                                    for w, s, _ in weights], args.replays)
                row = {"N": n, "K": k, "M": m, "variant": name, "code": code, "us": us, "floor_us": floor_us,
                       "floor_over_us": floor_us / us, "max_row_error": error, "check_ok": ok, "copies": copies,
                       **probe.describe(k, m, code)}
                rows.append(row)
                sc.progress(f"N={n} K={k} M={m} {name}: {us:.2f} us (floor/us {floor_us / us:.3f})"
                            + (f", max row error {error:.2e}{'' if ok else '  FAILED the SPEC 3.4 check'}"
                               if checked else "")
                            + f", {row['registers']} registers, {row['spill_bytes']} spill bytes, "
                              f"{row['ctas_per_sm']} CTAs an SM")
        del weights
        torch.cuda.empty_cache()
        points = [] if args.no_fused else (
            [(m, "fused default", None) for m in args.ms] + [(m, "fused flag 6", FLAG6) for m in args.ms]
            + [(m, "fused register-fed", REGISTER_FED) for m in args.ms if m <= 16 and k % 1024 == 0])
        for m, name, _config, us in sc.time_fused(n, k, points, copies, args.replays, device) if points else ():
            floor_us = op_bytes(n, k, m, False) / copy_tbps / 1e6
            rows.append({"N": n, "K": k, "M": m, "variant": name, "us": us, "floor_us": floor_us,
                         "floor_over_us": floor_us / us, "copies": copies})
    return {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "git": git_commit(),
            "copy_TBps": copy_tbps, "replays": args.replays, "rows": rows}


def print_table(result: dict) -> None:
    by = {}
    for r in result["rows"]:
        by.setdefault((r["N"], r["K"], r["M"]), {})[r["variant"]] = r
    print(f"\n{result['device']}  torch {result['torch']}  git {result['git']}  copy {result['copy_TBps']:.2f} TB/s")
    present = {r["variant"] for r in result["rows"]}
    names = [name for _, name, _ in VARIANTS if name in present] + ["fused default", "fused flag 6", "fused register-fed"]
    print("us (floor/us) per point; columns: " + " | ".join(names))
    for (n, k, m), v in sorted(by.items(), key=lambda x: (-x[0][0] * x[0][1], x[0][2])):
        cells = [f"{v[x]['us']:6.2f} ({v[x]['floor_over_us']:.3f})" if x in v else "      -        " for x in names]
        print(f"{n}x{k}, {m:2d} | " + " | ".join(cells))
    for name in names:
        values = [r["floor_over_us"] for r in result["rows"] if r["variant"] == name]
        if values:
            print(f"geometric mean of floor/us, {name}: {math.exp(sum(map(math.log, values)) / len(values)):.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help="directory for regmma_probe.json")
    parser.add_argument("--ms", default="1,4,8,16", help="token counts (1-16), comma-separated")
    parser.add_argument("--replays", type=int, default=20)
    parser.add_argument("--variants", help="comma-separated variant codes (default: all): " + ", ".join(
        f"{code} = {name}" for code, name, _ in VARIANTS))
    parser.add_argument("--compile-only", action="store_true", help="build the probe and exit (no GPU needed)")
    parser.add_argument("--no-fused", action="store_true",
                        help="leave out the fused op's rows (then the extension need not be built)")
    args = parser.parse_args()
    args.ms = [int(x) for x in args.ms.split(",")]
    args.variants = [int(x) for x in args.variants.split(",")] if args.variants else None
    if args.variants and not set(args.variants) <= {code for code, _, _ in VARIANTS}:
        parser.error("--variants: unknown code")
    if any(m < 1 or m > 16 for m in args.ms):
        parser.error("--ms: every M must be 1-16")
    if args.compile_only:
        with tempfile.TemporaryDirectory() as tmp:
            print(sc.compile_shared_library(CU_SOURCE, tmp) and "built")
        return 0
    if not args.out:
        parser.error("--out is required")
    if not torch.cuda.is_available():
        print("regmma_probe: no CUDA device; nothing measured")
        return 2
    result = run(args)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "regmma_probe.json"), "w") as f:
        json.dump(result, f, indent=1)
    print_table(result)
    return 0 if all(r.get("check_ok") is not False for r in result["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
