"""``python -m sglang_fp8ext check``: what is built, which path each SPEC §6 shape takes, and
a self-test of every op on the devices present.

The self-test compares every op with ``sglang_fp8ext.reference`` (the SPEC §3 formulas in plain
torch, run on the same device): quantization bit for bit (NaN codes compared as one class),
GEMMs within 4e-3 relative per row of the float64 result (SPEC §3.4), the norm producers by the
SPEC §3.5 contract (dequantized output within 1e-2 per row, residual_out exact). Inputs are
random with outlier channels plus adversarial rows (huge and tiny magnitudes in one row, an
all-zero group inside a non-zero row, constant and alternating groups, NaN/Inf for the quant
ops), never zeros only. Exit code 1 if anything fails.
"""

from __future__ import annotations

import os
import sys
import traceback
from typing import List, Optional

import torch

from . import dispatch, linear, reference, switches
from .kernel_config import KernelConfig

FP8 = torch.float8_e4m3fn
E8M0 = torch.float8_e8m0fnu
GEMM_TOL = 4e-3  # SPEC §3.4
NORM_TOL = 1e-2  # SPEC §3.5
PATH_TABLE_MS = (1, 2, 4, 8, 16, 32)
SWITCHES = ("SGL_FP8_SMALLM", "SGL_FP8_PDL", "SGLANG_ROCM_SMALLM_FP8_BS", "SGLANG_DSV4_DENSE_MXSCALE",
            "SGLANG_DSV4_DENSE_MXSCALE_SHAPES", dispatch.CONFIG_DIR_ENV)


class Failed(AssertionError):
    pass


# ---- inputs --------------------------------------------------------------------------------------


def random_act(m: int, k: int, dtype, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=g)
    x[:, torch.randint(0, k, (max(1, k // 256),), generator=g)] *= 20  # outlier channels
    return x.to(dtype)


def adversarial_act(k: int, dtype, nonfinite: bool, big: float, tiny: float) -> torch.Tensor:
    """Rows that stress the quantizer (K >= 256: two groups at least); ``big`` and ``tiny`` are
    the largest and smallest magnitudes."""
    ramp = torch.linspace(-1.0, 1.0, k)
    rows = [
        torch.where(torch.arange(k) % 7 == 0, ramp * big, ramp * 1e-3),  # huge and small: subnormal / zero codes
        ramp * tiny,  # scales near the bottom of the range
        torch.cat([torch.zeros(128), ramp[128:] * 5.0]),  # an all-zero group in a non-zero row
        torch.where(torch.arange(k) % 2 == 0, 1.0, -1.0) * 448.0,  # alternating, at e4m3's max
        torch.full((k,), 0.3),  # constant groups
        ramp * 3.7 + 0.05,
    ]
    if nonfinite:
        row = ramp.clone()
        row[5], row[128 + 9], row[-1] = float("nan"), float("inf"), -float("inf")
        rows.append(row)
        rows.append(torch.where(torch.arange(k) < 128, float("nan"), ramp))
    return torch.stack(rows).to(dtype)


def acts(m: int, k: int, dtype, seed: int, nonfinite: bool = False) -> torch.Tensor:
    """m random rows, then the adversarial ones: magnitudes near the dtype's maximum and into
    its subnormals (fine for quantization, which is exact per element)."""
    bf16 = dtype == torch.bfloat16
    adv = adversarial_act(k, dtype, nonfinite, big=3.0e38 if bf16 else 6.0e4, tiny=1.0e-30 if bf16 else 6.0e-8)
    return torch.cat([random_act(m, k, dtype, seed), adv])


def gemm_acts(m: int, k: int, dtype, seed: int) -> torch.Tensor:
    """GEMM inputs: magnitudes whose products stay finite in the output dtype and above fp16's
    subnormals (a subnormal output cannot meet a relative bound after the final cast; scaled_gemm
    writes fp16 from bf16 inputs too)."""
    bf16 = dtype == torch.bfloat16
    adv = adversarial_act(k, dtype, False, big=1.0e3 if bf16 else 30.0, tiny=1.0e-2)
    return torch.cat([random_act(m, k, dtype, seed), adv])


def weight(n: int, k: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    w = (torch.randn(n, k, generator=g) * 64).clamp(-448, 448)
    # extreme rows: e4m3's max (random signs: a row of one sign would dominate its output column,
    # leaving the per-row bound to one bf16 rounding, 2^-8) and its subnormals
    w[0] = 448.0 * (torch.randint(0, 2, (k,), generator=g) * 2 - 1)
    w[1] = torch.linspace(-1, 1, k) * 2.0 ** -8
    return w.to(FP8)


def weight_scale(n: int, k: int, e8m0: bool, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    shape = ((n + 127) // 128, k // 128)
    if e8m0:
        return (torch.randint(-12, -4, shape, generator=g) + 127).to(torch.uint8).view(E8M0)
    return torch.rand(shape, generator=g) * 9e-3 + 1e-3


# ---- comparisons ---------------------------------------------------------------------------------


def _codes(q: torch.Tensor) -> torch.Tensor:
    """e4m3 codes with both NaN codes (0x7f, 0xff) as 0x7f."""
    c = q.detach().cpu().contiguous().view(torch.uint8).clone()
    c[(c & 0x7F) == 0x7F] = 0x7F
    return c


def _scale_bits(s: torch.Tensor) -> torch.Tensor:
    s = s.detach().cpu().contiguous()
    if s.dtype == E8M0:
        return s.view(torch.uint8).to(torch.int32)
    b = s.view(torch.int32).clone()
    b[torch.isnan(s)] = 0x7FC00000
    return b


def same_quant(got, exp, what: str) -> None:
    (q, s), (eq, es) = got, exp
    if q.shape != eq.shape or s.shape != es.shape or s.dtype != es.dtype:
        raise Failed(f"{what}: shapes/dtypes {tuple(q.shape)} {tuple(s.shape)} {s.dtype}, expected "
                     f"{tuple(eq.shape)} {tuple(es.shape)} {es.dtype}")
    bad = (_codes(q) != _codes(eq)).nonzero()
    if len(bad):
        i = tuple(bad[0].tolist())
        raise Failed(f"{what}: {len(bad)} fp8 codes differ, first at {i}")
    bad = (_scale_bits(s) != _scale_bits(es)).nonzero()
    if len(bad):
        i = tuple(bad[0].tolist())
        raise Failed(f"{what}: {len(bad)} scales differ, first at {i}: {s.cpu()[i]} vs {es.cpu()[i]}")


def within_rows(out: torch.Tensor, ref: torch.Tensor, tol: float, what: str) -> float:
    o, r = out.detach().double().cpu(), ref.detach().double().cpu()
    if o.shape != r.shape:
        raise Failed(f"{what}: shape {tuple(o.shape)}, expected {tuple(r.shape)}")
    o, r = o.reshape(-1, o.shape[-1]), r.reshape(-1, r.shape[-1])
    if not torch.isfinite(o).all():
        raise Failed(f"{what}: non-finite output")
    err = reference.relative_row_errors(o, r)
    worst = int(err.argmax())
    if err[worst] > tol:
        raise Failed(f"{what}: row {worst} relative error {float(err[worst]):.3e} > {tol:g}")
    return float(err.max())


def gemm_ref(x, w, ws, bias=None, shuffled=False) -> torch.Tensor:
    """SPEC §3.4 in float64 (reference quant of x with the format of ws)."""
    q, xs = reference.per1x128_quant(x, ue8m0=ws.dtype == E8M0)
    return reference.block_scaled_gemm(q, xs, w, ws, shuffled, bias, torch.float64)


def dequant(q, s) -> torch.Tensor:
    return q.double() * s.to(torch.float32).double().repeat_interleave(128, dim=-1)


# ---- the self-test -------------------------------------------------------------------------------

N, K = 272, 512  # N not a multiple of 128 (a partial last scale block), K = 4 scale blocks
MS = (1, 7, 33)  # 33: more than one 32-token chunk of the fused kernel


def op_checks(dev: str) -> List[tuple]:
    """(name, fn) pairs; fn raises Failed (or anything) on a failure, returns a detail string."""
    import sglang_fp8ext as fx  # noqa: PLC0415

    checks = []

    def quant(ue8m0: bool, transpose: bool):
        def run():
            for dt in (torch.bfloat16, torch.float16):
                x = acts(5, K, dt, 1, nonfinite=True).to(dev)
                got = fx.per1x128_quant(x, ue8m0, transpose)
                same_quant(got, reference.per1x128_quant(x, ue8m0), f"{dt}")
                if transpose and got[1].stride() != (1, x.shape[0]):
                    raise Failed(f"transpose_scale: strides {got[1].stride()}, expected (1, {x.shape[0]})")
            x3 = acts(6, K, torch.bfloat16, 2, nonfinite=True).reshape(2, -1, K).to(dev)
            if not transpose:
                same_quant(fx.per1x128_quant(x3, ue8m0), reference.per1x128_quant(x3, ue8m0), "3-D input")
            return "bitwise"
        return run

    for ue8m0 in (False, True):
        for transpose in (False, True):
            checks.append((f"per1x128_quant {'ue8m0' if ue8m0 else 'fp32'}{' transpose_scale' if transpose else ''}",
                           quant(ue8m0, transpose)))

    def smallm(e8m0: bool, shuffled: bool):
        def run():
            w, ws = weight(N, K, 3).to(dev), weight_scale(N, K, e8m0, 4).to(dev)
            wk = fx.shuffle_weight(w) if shuffled else w
            worst = 0.0
            for m in MS:
                for dt in (torch.bfloat16, torch.float16):
                    x = gemm_acts(m, K, dt, m).to(dev)
                    bias = random_act(1, N, dt, 9)[0].to(dev) if m == 7 else None
                    out = fx.smallm_gemm(x, wk, ws, shuffled, bias)
                    worst = max(worst, within_rows(out, gemm_ref(x, w, ws, bias), GEMM_TOL, f"M={m} {dt}"))
            return f"max row error {worst:.1e}"
        return run

    for e8m0 in (False, True):
        for shuffled in (False, True):
            checks.append((f"smallm_gemm {'e8m0' if e8m0 else 'fp32'} {'shuffled' if shuffled else 'plain'}",
                           smallm(e8m0, shuffled)))

    def scaled(e8m0: bool):
        def run():
            w, ws = weight(N, K, 5).to(dev), weight_scale(N, K, e8m0, 6).to(dev)
            worst = 0.0
            for m in MS:
                x = gemm_acts(m, K, torch.bfloat16, m + 100).to(dev)
                q, xs = reference.per1x128_quant(x, ue8m0=e8m0)
                ref = reference.block_scaled_gemm(q, xs, w, ws, False, None, torch.float64)
                xs_t = torch.empty_strided(xs.shape, (1, xs.shape[0]), dtype=xs.dtype, device=xs.device).copy_(xs)
                for scale, out_dtype in ((xs, None), (xs_t, torch.float16)):
                    out = fx.scaled_gemm(q, scale, w, ws, False, out_dtype)
                    worst = max(worst, within_rows(out, ref, GEMM_TOL, f"M={m} out_dtype={out_dtype}"))
                shuffled_out = fx.scaled_gemm(q, xs, fx.shuffle_weight(w), ws, True)
                worst = max(worst, within_rows(shuffled_out, ref, GEMM_TOL, f"M={m} shuffled"))
            return f"max row error {worst:.1e}"
        return run

    for e8m0 in (False, True):
        checks.append((f"scaled_gemm {'e8m0' if e8m0 else 'fp32'}", scaled(e8m0)))

    def norm(with_residual: bool):
        def run():
            worst = 0.0
            for dt in (torch.bfloat16, torch.float16):
                x = acts(4, K, dt, 11).clamp(-1e4, 1e4).to(dtype=dt).reshape(2, -1, K).to(dev)
                r = random_act(x.numel() // K, K, dt, 12).reshape(x.shape).to(dev)
                g = (torch.rand(K, generator=torch.Generator().manual_seed(13)) + 0.5).to(dt).to(dev)
                for ue8m0 in (False, True):
                    if with_residual:
                        q, s, ro = fx.add_rmsnorm_quant(x, r, g, 1e-6, ue8m0)
                        eq, es, ero = reference.add_rmsnorm_quant(x, r, g, 1e-6, ue8m0)
                        if not torch.equal(ro.cpu().view(torch.int16), ero.cpu().view(torch.int16)):
                            raise Failed(f"{dt} ue8m0={ue8m0}: residual_out is not exact")
                    else:
                        q, s = fx.rmsnorm_quant(x, g, 1e-6, ue8m0)
                        eq, es = reference.rmsnorm_quant(x, g, 1e-6, ue8m0)
                    if s.dtype != es.dtype or s.shape != es.shape:
                        raise Failed(f"{dt} ue8m0={ue8m0}: scale {s.dtype} {tuple(s.shape)}, expected {es.dtype} {tuple(es.shape)}")
                    worst = max(worst, within_rows(dequant(q, s), dequant(eq, es), NORM_TOL, f"{dt} ue8m0={ue8m0}"))
            return f"max row error {worst:.1e} (contract {NORM_TOL:g}), residual_out exact" if with_residual else \
                f"max row error {worst:.1e} (contract {NORM_TOL:g})"
        return run

    checks.append(("rmsnorm_quant", norm(False)))
    checks.append(("add_rmsnorm_quant", norm(True)))

    def block_linear():
        """fp8_block_linear as dispatched, then every path that can run here, forced."""
        device = torch.device(dev)
        info = linear.device_info(device)
        ran = set()
        worst = 0.0
        for n in (256, N):  # N = 256: cuBLASLt-eligible on sm_90; N = 272: never
            for e8m0 in (False, True):
                w, ws = weight(n, K, 7).to(dev), weight_scale(n, K, e8m0, 8).to(dev)
                for m in (1, 9, 40):
                    x = gemm_acts(m, K, torch.bfloat16, m + 200).to(dev)
                    ref = gemm_ref(x, w, ws)
                    out = fx.fp8_block_linear(x.reshape(1, -1, K), w, ws).reshape(-1, n)
                    worst = max(worst, within_rows(out, ref, GEMM_TOL, f"dispatched N={n} M={m} e8m0={e8m0}"))
                    forced = [("fused", None), ("unfused", None)]
                    if info.kind != "rocm":  # an sm_90 configuration (k_split 2) as a table may name it
                        forced.append(("fused", tuple(KernelConfig(k_split=2).op_args())))
                    if dispatch.scaled_mm_eligible(info, n, K, e8m0=e8m0, shuffled=False):
                        forced.append(("scaled_mm", None))
                    for path, config in forced:
                        out = linear.run_path(path, config, x, w, ws, False, None)
                        worst = max(worst, within_rows(out, ref, GEMM_TOL, f"{path} {config} N={n} M={m} e8m0={e8m0}"))
                        ran.add(path)
                    if info.kind == "rocm" and info.has_aiter and not e8m0:
                        out = linear.run_path("aiter", None, x, fx.shuffle_weight(w), ws, True, None)
                        worst = max(worst, within_rows(out, ref, GEMM_TOL, f"aiter N={n} M={m}"))
                        ran.add("aiter")
        return f"max row error {worst:.1e}; paths run: {', '.join(p for p in dispatch.PATHS if p in ran)}"

    checks.append(("fp8_block_linear", block_linear))
    return checks


# ---- report --------------------------------------------------------------------------------------


def gpu_usable() -> bool:
    import sglang_fp8ext as fx  # noqa: PLC0415

    return torch.cuda.is_available() and fx.BUILT_BACKEND in ("cuda", "rocm")


def describe_device() -> str:
    if not torch.cuda.is_available():
        return "CPU (no GPU visible to torch)"
    i = torch.cuda.current_device()
    major, minor = torch.cuda.get_device_capability(i)
    arch = getattr(torch.cuda.get_device_properties(i), "gcnArchName", None) if torch.version.hip else f"sm_{major}{minor}"
    return f"GPU {i}: {torch.cuda.get_device_name(i)} ({arch}, capability {major}.{minor}), {torch.cuda.device_count()} visible"


def print_switches(table_device: torch.device) -> Optional[tuple]:
    """Prints the switches and the table in use; returns the table's groups, or None when the
    table (or a switch) is unusable."""
    ok = True
    print("switches (read at call time):")
    for name in SWITCHES:
        value = os.environ.get(name)
        print(f"  {name:<34} {'(unset)' if value is None else repr(value)}")
    print(f"  -> fused kernel: {'on' if switches.fused_smallm_enabled() else 'OFF (SGL_FP8_SMALLM=0)'}")
    try:
        on = [f"{n}x{k}" for n, k in dispatch.SPEC_SHAPES if switches.mxscale_enabled_for(n, k)]
        print(f"  -> e8m0 weight preparation (mxscale) for the SPEC §6 shapes: {', '.join(on) if on else 'off'}")
    except ValueError as e:
        print(f"FAIL  switches: {e}")
        ok = False
    info = linear.device_info(table_device)
    directory = dispatch.config_dir()
    print(f"  -> table directory: {directory}")
    try:
        file, note, groups = dispatch.table_for(directory, info.name)
    except (dispatch.TableError, OSError) as e:
        print(f"FAIL  table: {e}")
        return None
    if note:
        print(f"  -> table for {info.name!r}: none used ({note}); the heuristic decides")
    else:
        count = sum(len(g[3]) for g in groups)
        print(f"  -> table for {info.name!r}: {file} ({len(groups)} (N, K, scale) groups, {count} entries)")
    return groups if ok else None


def print_path_table(device: torch.device, groups: tuple) -> None:
    info = linear.device_info(device)
    enabled = switches.fused_smallm_enabled()
    print(f"\npaths fp8_block_linear takes on {device} ({info.name}), plain weights; "
          f"T = from the table, H = heuristic:")
    rows = []
    for n, k in dispatch.SPEC_SHAPES:
        for scale in ("fp32", "e8m0"):
            cells = []
            for m in PATH_TABLE_MS:
                c = dispatch.select(info, m, n, k, e8m0=scale == "e8m0", shuffled=False, groups=groups, fused_enabled=enabled)
                label = c.path if c.config is None else KernelConfig.from_op_args(c.config).label()
                cells.append(f"{label} {c.source[0].upper()}")
            rows.append((n, k, scale, cells))
    width = max(len(cell) for *_, cells in rows for cell in cells)
    print(f"  {'N':>5} {'K':>5} {'scale':<5} " + " ".join(f"{'M=' + str(m):<{width}}" for m in PATH_TABLE_MS))
    for n, k, scale, cells in rows:
        print(f"  {n:>5} {k:>5} {scale:<5} " + " ".join(f"{cell:<{width}}" for cell in cells))
    print("  (an AITER-shuffled weight never takes scaled_mm; a table entry it cannot take goes to the heuristic)")


def run_checks(devices: List[str]) -> int:
    failures = 0
    print("\nself-test against sglang_fp8ext.reference (SPEC §3):")
    for dev in devices:
        for name, fn in op_checks(dev):
            try:
                detail = fn()
            except Exception as e:  # noqa: BLE001  (every failure is reported, none stops the others)
                failures += 1
                reason = str(e) if isinstance(e, Failed) else "".join(traceback.format_exception_only(type(e), e)).strip()
                print(f"FAIL  {name} [{dev}]: {reason}")
            else:  # only the check itself can fail it, not the print
                print(f"PASS  {name} [{dev}]: {detail}")
    return failures


def main(args=None) -> int:
    import sglang_fp8ext as fx  # noqa: PLC0415

    print(f"sglang_fp8ext {fx.__version__} (commit {fx.BUILT_COMMIT}): built backend {fx.BUILT_BACKEND!r}, "
          f"device archs {', '.join(fx.BUILT_DEVICE_ARCHS) or '(none)'}")
    gpu_versions = f", CUDA {torch.version.cuda}" if torch.version.cuda else ""
    gpu_versions += f", HIP {torch.version.hip}" if getattr(torch.version, "hip", None) else ""
    print(f"torch {torch.__version__}{gpu_versions}")
    print(f"device: {describe_device()}")
    devices = ["cpu"]
    if gpu_usable():
        devices.append("cuda")
    elif torch.cuda.is_available():
        print(f"  (the GPU is not usable by this build: it was built for {fx.BUILT_BACKEND!r})")
    main_device = torch.device(devices[-1])
    failures = 0
    groups = print_switches(main_device)
    if groups is None:
        failures += 1
        groups = ()
    print_path_table(main_device, groups)
    failures += run_checks(devices)
    print(f"\n{'all checks passed' if not failures else f'{failures} check(s) FAILED'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
