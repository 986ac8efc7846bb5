"""``python -m sglang_fp8ext bench``: the fused projection against its bandwidth floor and peers.

On a GPU (SPEC §6 Qwen3.5 TP4 shapes, M in 1..32, fp32 and e8m0 scales, one run): every
figure is the median over >= 20 CUDA-graph replays of a graph that calls the op once per
rotated weight copy (>= 24 copies, more bytes than L2: cold weights, as in decode), divided by
the number of calls. The floor is the op's bytes (weight + scales + activations + output) over
the device-to-device copy bandwidth measured in the same run, so every time is also a ratio.
Peers: our quant + torch._scaled_mm with cuBLASLt blockwise scaling, our quant + scaled_gemm
(the unfused path), bf16 F.linear of the dequantized weight, and, when ``import deep_gemm``
works and its first call returns in a child process (probe_deepgemm), our quant + DeepGEMM's
fp8_gemm_nt (PDL on; see load_deepgemm) and DeepGEMM's GEMM alone
on activations quantized before the graph (what it costs with the quant taken as free).

Two orders, in the same run: back to back (the calls one after another) and decode order (each
call after a producer kernel, x.copy_(x_src), that writes its activations, as in a decode step;
a path's time is the graph's time per (producer + call) minus the producer's alone, measured in
the same point). The fused op is also timed L2-resident: the same weight on every call, back to
back, so the difference to the cold time is the weight stream and what is left is fixed cost.

On the CPU it times the CPU ops (median of a few calls) and prints effective bandwidth.
"""

from __future__ import annotations

import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

import torch
import torch.nn.functional as F

from . import ops
from .dispatch import SPEC_SHAPES, scaled_mm_linear
from .kernel_config import Engine, KernelConfig
from .reference import relative_row_errors

QWEN_TP4_SHAPES = [(5120, 4096), (4608, 4096), (4096, 2048)]
DEFAULT_MS = [1, 4, 8, 16, 32]
SCALED_MM_PEER = "quant+scaled_mm(cuBLASLt)"
UNFUSED_PEER = "quant+scaled_gemm"
BF16_PEER = "bf16_linear"
DEEPGEMM_PEER = "deepgemm+quant"
DEEPGEMM_GEMM_PEER = "deepgemm_gemm_only"  # its GEMM on activations quantized outside the timed graph
DEEPGEMM_PEERS = (DEEPGEMM_PEER, DEEPGEMM_GEMM_PEER)
PEER_ORDER = (SCALED_MM_PEER, DEEPGEMM_PEER, DEEPGEMM_GEMM_PEER, UNFUSED_PEER, BF16_PEER)
# --diagnose: the fused op under other kernel configurations (each with a correct output), timed
# beside its own plan to see what each engine or knob costs at a point; a configuration that the
# kernels cannot plan for the shape is reported and skipped.
DIAGNOSTIC_CONFIGS = (
    KernelConfig(engine=Engine.GENERAL),
    KernelConfig(engine=Engine.GENERAL, staging_stages=2),
    KernelConfig(engine=Engine.REGISTER_FED),
    KernelConfig(k_split=1),
    KernelConfig(k_split=2),
    KernelConfig(k_split=4),
    KernelConfig(k_split=8),
)


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def git_commit() -> str:
    """The commit measured: SGL_FP8_GIT when set, else the one the library was built from, else
    the source tree's HEAD."""
    if os.environ.get("SGL_FP8_GIT"):
        return os.environ["SGL_FP8_GIT"]
    from . import BUILT_COMMIT
    if BUILT_COMMIT != "unknown":
        return BUILT_COMMIT
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10,
                             cwd=os.path.dirname(os.path.abspath(__file__)))
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def device_uuid(device=None) -> str:
    """The GPU's UUID: lent machines are different physical GPUs from run to run, and cluster-heavy
    kernels time differently on them (docs/benchmarks.md), so results name the GPU they ran on."""
    try:
        return str(torch.cuda.get_device_properties(device if device is not None else torch.cuda.current_device()).uuid)
    except (AttributeError, RuntimeError, AssertionError):
        return "unknown"


def driver_version() -> str:
    """The GPU driver's version as nvidia-smi reports it ("unknown" where it cannot be asked)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    lines = out.stdout.strip().splitlines()
    return lines[0].strip() if out.returncode == 0 and lines else "unknown"


def op_bytes(n: int, k: int, m: int, e8m0: bool, act_bytes: int = 2) -> int:
    scale_bytes = (1 if e8m0 else 4) * ((n + 127) // 128) * (k // 128)
    return n * k + scale_bytes + m * k * act_bytes + m * n * 2


def make_weight(n: int, k: int, e8m0: bool, device, generator) -> tuple:
    """A random FP8 weight and its block scales (never zeros: they time and test unrealistically).
    Returns (w, scale in the op's format, the same scale as fp32). `generator` lives on `device`."""
    w = (torch.randn(n, k, generator=generator, device=device) * 0.5).to(torch.float8_e4m3fn)
    nb, kb = (n + 127) // 128, k // 128
    if e8m0:
        exponents = torch.randint(-12, -4, (nb, kb), generator=generator, device=device)
        scale = torch.pow(2.0, exponents.float())
        return w, (exponents + 127).to(torch.uint8).view(torch.float8_e8m0fnu), scale
    scale = torch.rand(nb, kb, generator=generator, device=device) * 1e-3 + 1e-4
    return w, scale, scale


# ---- GPU -------------------------------------------------------------------------------------------


def measure_copy_bandwidth(device, gigabytes: float = 2.0, repeats: int = 20) -> float:
    """Device-to-device copy rate in TB/s, counting bytes read plus bytes written."""
    n = int(gigabytes * 1e9 / 2) // 4 * 4
    src = torch.empty(n, dtype=torch.uint8, device=device).random_(0, 255)
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e-3)
    del src, dst
    return 2 * n / statistics.median(times) / 1e12


def capture_in_graph(calls: List[Callable[[], object]]) -> "torch.cuda.CUDAGraph":
    """A CUDA graph holding all `calls` in order, warmed up on a side stream and replayed once."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            for call in calls:
                call()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for call in calls:
            call()
    graph.replay()
    torch.cuda.synchronize()
    return graph


def time_in_graph(calls: List[Callable[[], object]], replays: int) -> float:
    """Median microseconds per call over `replays` replays of a graph holding all `calls`."""
    graph = capture_in_graph(calls)
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / len(calls))
    del graph
    return statistics.median(times)


# ---- DeepGEMM (optional peer) -------------------------------------------------------------------
# What an SGLang/transformers user gets on Hopper for 128x128 block FP8: a 1x128 activation quant
# kernel, then DeepGEMM's fp8_gemm_nt. Its quant here is ours (per1x128_quant, fp32 scales), in
# the layout sm90 DeepGEMM reads without a transpose kernel of its own: MN-major fp32 scales whose
# column stride is M rounded up to 4 (16-byte TMA alignment). Quantizing activations padded with
# zero rows to that many rows gives exactly that layout (transpose_scale=True: strides (1, rows))
# in the same single quant kernel; the first M rows of q and scale are DeepGEMM's inputs.


def tma_aligned_rows(m: int) -> int:
    """Rows of the activation buffer DeepGEMM's scales are quantized from: M rounded up to a
    multiple of 4, so that the fp32 scale column stride is a multiple of 16 bytes."""
    return (m + 3) // 4 * 4


def padded_activations(m: int, k: int, generator, device) -> Tuple[torch.Tensor, torch.Tensor]:
    """(x_pad, x): x_pad [tma_aligned_rows(m), K] bf16 whose rows from m on are zero, and x its
    first m rows (a contiguous view). Every path of a point reads x; only DeepGEMM's quant reads
    x_pad, so a producer that writes x writes what every path consumes."""
    x_pad = torch.zeros(tma_aligned_rows(m), k, dtype=torch.bfloat16, device=device)
    x = x_pad[:m]
    x.copy_(torch.randn(m, k, generator=generator, device=device))
    return x_pad, x


def deepgemm_scale_layout_ok(scale: torch.Tensor, m: int, k: int) -> bool:
    """Whether sm90 DeepGEMM takes `scale` as its activation scales without copying it: fp32
    [M, K/128] with strides (1, tma_aligned_rows(M)) (deep_gemm's get_mn_major_tma_aligned_tensor
    returns such a tensor as it is and launches its transpose kernel for any other layout)."""
    return (scale.dtype == torch.float32 and tuple(scale.shape) == (m, k // 128)
            and tuple(scale.stride()) == (1, tma_aligned_rows(m)))


def deepgemm_quant(x_pad: torch.Tensor, m: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """Our per1x128_quant (fp32 scales) of the padded activations, as DeepGEMM's A operand:
    (q [M, K] row-major, scale [M, K/128] MN-major with the TMA-aligned column stride). One kernel."""
    q, scale = ops.per1x128_quant(x_pad, ue8m0=False, transpose_scale=True)
    return q[:m], scale[:m]


def deepgemm_gemm(dg, a: Tuple[torch.Tensor, torch.Tensor], w: torch.Tensor, w_scale_f32: torch.Tensor) -> torch.Tensor:
    """deep_gemm.fp8_gemm_nt (default sm90 recipe: 1x128 activation, 128x128 weight blocks, fp32
    scales) on activations `a` as deepgemm_quant gives them, bf16 output [M, N]."""
    q = a[0]
    out = torch.empty((q.shape[0], w.shape[0]), dtype=torch.bfloat16, device=q.device)
    dg.fp8_gemm_nt(a, (w, w_scale_f32), out)
    return out


def deepgemm_linear(dg, x_pad: torch.Tensor, m: int, w: torch.Tensor, w_scale_f32: torch.Tensor) -> torch.Tensor:
    """Our quant + DeepGEMM's GEMM: what a user of DeepGEMM runs per call."""
    return deepgemm_gemm(dg, deepgemm_quant(x_pad, m), w, w_scale_f32)


DEEPGEMM_API = ("fp8_gemm_nt", "set_pdl", "get_pdl", "get_mn_major_tma_aligned_tensor")


# DeepGEMM's first call, in a child process: a host extension that crashes there (one linked with
# a static libstdc++ dies of SIGSEGV in its first fp8_gemm_nt, CONTRIBUTING.md) would otherwise take
# the whole bench down. Zero operands in the layouts deepgemm_ready checks; argv: the directory
# deep_gemm was imported from, N, K, M, tma_aligned_rows(M), the device. Its JIT output lands in
# DeepGEMM's cache.
DEEPGEMM_PROBE = """
import sys
sys.path.insert(0, sys.argv[1])
import torch
import deep_gemm as dg
n, k, m, rows = (int(v) for v in sys.argv[2:6])
device = torch.device(sys.argv[6])
q = torch.zeros(m, k, dtype=torch.float8_e4m3fn, device=device)
scale = torch.ones(k // 128, rows, dtype=torch.float32, device=device).t()[:m]
w = torch.zeros(n, k, dtype=torch.float8_e4m3fn, device=device)
w_scale = torch.ones((n + 127) // 128, k // 128, dtype=torch.float32, device=device)
out = torch.empty(m, n, dtype=torch.bfloat16, device=device)
dg.set_pdl(True)
dg.fp8_gemm_nt((q, scale), (w, w_scale), out)
if device.type == "cuda":
    torch.cuda.synchronize(device)
"""
DEEPGEMM_PROBE_TIMEOUT_S = 300  # its JIT compiles one kernel


def probe_deepgemm(dg, n: int, k: int, m: int, device: torch.device) -> Optional[str]:
    """None when DeepGEMM's first fp8_gemm_nt (N x K weight, M tokens) returns in a child process,
    else why not: a crash there is a reason to run without the peer, not the end of the bench."""
    found_in = os.path.dirname(os.path.dirname(os.path.abspath(dg.__file__)))
    operands = (n, k, m, tma_aligned_rows(m), device)
    argv = [sys.executable, "-c", DEEPGEMM_PROBE, found_in, *map(str, operands)]
    where = f"(probe process, N={n} K={k} M={m}; CONTRIBUTING.md says how to build it)"
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=DEEPGEMM_PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"its first call did not return within {DEEPGEMM_PROBE_TIMEOUT_S} s {where}"
    if done.returncode == 0:
        return None
    if done.returncode < 0:
        try:
            how = f"was killed by {signal.Signals(-done.returncode).name}"
        except ValueError:
            how = f"was killed by signal {-done.returncode}"
    else:
        how = f"exited with code {done.returncode}"
    last = (done.stderr.strip().splitlines() or [""])[-1].strip()[:200]
    return f"its first call {how} {where}" + (f": {last}" if last else "")


def load_deepgemm(device: Optional[torch.device] = None, probe: Optional[Tuple[int, int, int]] = None):
    """(deep_gemm module or None, the run's "deepgemm" record). DeepGEMM is an optional peer: when
    it does not import (not installed, built for another torch or CUDA), is not the sm90 path, or
    its first call at `probe` (N, K, M) on `device` fails in a child process (probe_deepgemm), the
    record says why and the bench runs without it. PDL is switched on: its best setting."""
    try:
        import deep_gemm as dg
    except Exception as e:  # noqa: BLE001  (any import failure of an optional peer is a reason, not an error)
        return None, {"present": False, "reason": f"import deep_gemm failed: {type(e).__name__}: {str(e).strip()[:200]}"}
    missing = [name for name in DEEPGEMM_API if not hasattr(dg, name)]
    if missing:
        return None, {"present": False, "reason": "deep_gemm lacks " + ", ".join(missing)}
    if device is not None and device.type == "cuda":
        capability = torch.cuda.get_device_capability(device)
        if capability[0] != 9:
            return None, {"present": False, "reason": f"DeepGEMM's fp32-scale path is sm_90; this GPU is sm_{capability[0]}{capability[1]}"}
    if probe is not None:
        why = probe_deepgemm(dg, *probe, device)
        if why is not None:
            return None, {"present": False, "reason": "deep_gemm: " + why}
    dg.set_pdl(True)
    return dg, {
        "present": True,
        "version": str(getattr(dg, "__version__", "unknown")),
        "pdl": bool(dg.get_pdl()),
        "quant": "per1x128_quant(x padded to a multiple of 4 rows, ue8m0=False, transpose_scale=True): one kernel",
        "weight_scales": "fp32 [ceil(N/128), K/128]; e8m0 rows: the same power-of-two values as fp32",
        # every point checks that DeepGEMM takes our scales as they are (no transpose kernel of its own)
        "scale_layout_copy_free": True,
        "failures": [],
    }


# ---- GPU measurements ----------------------------------------------------------------------------

# A peer's output is checked against our scaled_gemm on the same quantized inputs before it is
# timed: both are held to SPEC §3.4 (4e-3 per row against the float64 reference), so they may
# differ by twice that.
PEER_TOLERANCE = 8e-3


@dataclass
class Row:
    N: int
    K: int
    M: int
    scale: str
    fused_us: float  # cold weights, back to back
    floor_us: float
    l2_resident_us: Optional[float] = None  # the same weight every call, back to back
    peers: Dict[str, Optional[float]] = field(default_factory=dict)  # cold, back to back
    # decode order: {"producer_us": the producer alone, "fused_us": ..., "peers": {...}}, each path's
    # time being (producer + call) minus the producer alone; None when not measured
    decode: Optional[dict] = None
    diagnostics: Dict[str, Optional[float]] = field(default_factory=dict)


def in_decode_order(calls: List[Callable[[], object]], produce: Callable[[], object]) -> List[Callable[[], object]]:
    """Each call preceded by the producer of its activations, as in a decode step."""
    return [lambda call=call: (produce(), call())[1] for call in calls]


def measure_point(n: int, k: int, m: int, e8m0: bool, weights: list, bf16_weights: list, generator,
                  replays: int, copy_tbps: float, dg=None, dg_info: Optional[dict] = None,
                  decode: bool = True, diagnose: bool = False) -> Row:
    """One (N, K, M, scale) point: every path over the rotated `weights` (w, scale in the op's
    format, fp32 scale), back to back and, with `decode`, each call after the producer
    x.copy_(x_src) that writes its activations; the fused op also with weights[0] on every call
    (L2-resident). Timing goes through the module's time_in_graph (the tests replace it)."""
    device = weights[0][0].device
    copies = len(weights)
    x_pad, x = padded_activations(m, k, generator, device)
    x_src = x.clone()

    def produce():
        return x.copy_(x_src)

    paths: Dict[str, List[Callable[[], object]]] = {
        "fused": [lambda w=w, s=s: ops.smallm_gemm(x, w, s) for w, s, _ in weights],
        UNFUSED_PEER: [lambda w=w, s=s: ops.scaled_gemm(*ops.per1x128_quant(x, ue8m0=e8m0), w, s) for w, s, _ in weights],
    }
    try:
        # the e8m0 rows give cuBLASLt the same scales as fp32 (it has no e8m0 block scales)
        scaled_mm_linear(x, weights[0][0], weights[0][2])
        paths[SCALED_MM_PEER] = [lambda w=w, f=f: scaled_mm_linear(x, w, f) for w, _, f in weights]
    except (RuntimeError, TypeError, ValueError) as e:
        progress(f"  {SCALED_MM_PEER} unavailable: {str(e).splitlines()[0][:160]}")
    if dg is not None and deepgemm_ready(dg, dg_info, x_pad, m, weights[0], (n, k, m, e8m0)):
        paths[DEEPGEMM_PEER] = [lambda w=w, f=f: deepgemm_linear(dg, x_pad, m, w, f) for w, _, f in weights]
        x_quantized = deepgemm_quant(x_pad, m)  # once, before any graph: the GEMM alone is timed
        paths[DEEPGEMM_GEMM_PEER] = [lambda w=w, f=f: deepgemm_gemm(dg, x_quantized, w, f) for w, _, f in weights]
    paths[BF16_PEER] = [lambda w=w: F.linear(x, w) for w in bf16_weights]

    def timed(name: str, calls) -> Optional[float]:
        try:
            return time_in_graph(calls, replays)
        except RuntimeError as e:
            if name not in DEEPGEMM_PEERS:
                raise
            # an optional peer that cannot be captured or replayed is recorded, not fatal
            why = f"N={n} K={k} M={m} {'e8m0' if e8m0 else 'fp32'}: {name} not timed: {str(e).strip().splitlines()[0][:160]}"
            progress(f"  {why}")
            dg_info["failures"].append(why)
            return None

    row = Row(n, k, m, "e8m0" if e8m0 else "fp32", timed("fused", paths["fused"]), op_bytes(n, k, m, e8m0) / copy_tbps / 1e6)
    w0, s0, _ = weights[0]
    row.l2_resident_us = time_in_graph([lambda: ops.smallm_gemm(x, w0, s0)] * copies, replays)
    for name in PEER_ORDER:
        row.peers[name] = timed(name, paths[name]) if name in paths else None
    if dg_info is None or not dg_info.get("present"):
        for name in DEEPGEMM_PEERS:  # absent from the run, said once at its top level
            del row.peers[name]
    if decode:
        producer = time_in_graph([produce] * copies, replays)

        def after_producer(name: str) -> Optional[float]:
            t = timed(name, in_decode_order(paths[name], produce)) if name in paths else None
            return None if t is None else t - producer

        row.decode = {"producer_us": producer, "fused_us": after_producer("fused"),
                      "peers": {name: after_producer(name) for name in row.peers}}
    if diagnose:
        def configured(config):
            return time_in_graph(
                [lambda w=w, s=s: torch.ops.sgl_fp8._smallm_gemm_configured(x, w, s, False, None, config)
                 for w, s, _ in weights], replays)
        for config in DIAGNOSTIC_CONFIGS:
            name = config.label()
            try:
                row.diagnostics[name] = configured(config.op_args())
            except RuntimeError as e:  # a forced configuration may not fit this shape
                progress(f"  {name}: {str(e).splitlines()[0][:120]}")
                row.diagnostics[name] = None
        os.environ["SGL_FP8_PDL"] = "0"
        try:
            row.diagnostics["no_pdl"] = time_in_graph(paths["fused"], replays)
        finally:
            del os.environ["SGL_FP8_PDL"]
    return row


def deepgemm_ready(dg, dg_info: dict, x_pad: torch.Tensor, m: int, weight: tuple, point: tuple) -> bool:
    """Runs DeepGEMM once at this point (its JIT compiles the kernel now, before any graph
    capture), checks that it takes our scales without a copy and that its output matches our
    scaled_gemm on the same quantized inputs. A failure is recorded and the peer skipped here."""
    n, k, _, e8m0 = point
    where = f"N={n} K={k} M={m} {'e8m0' if e8m0 else 'fp32'}"
    w, _, f = weight
    try:
        q, scale = deepgemm_quant(x_pad, m)
        if not deepgemm_scale_layout_ok(scale, m, k):
            raise ValueError(f"our quant gave scales of shape {tuple(scale.shape)} strides {scale.stride()}, "
                             f"not DeepGEMM's [M, K/128] strides (1, {tma_aligned_rows(m)})")
        if dg.get_mn_major_tma_aligned_tensor(scale).data_ptr() != scale.data_ptr():
            dg_info["scale_layout_copy_free"] = False
            raise ValueError("DeepGEMM copies our scales into another layout (an extra kernel per call)")
        out = deepgemm_linear(dg, x_pad, m, w, f)
        err = relative_row_errors(out, ops.scaled_gemm(q, scale, w, f)).max().item()
    except Exception as e:  # noqa: BLE001  (the JIT compile or the first launch of an optional peer)
        why = f"{where}: {type(e).__name__}: {str(e).strip().splitlines()[0][:200] if str(e).strip() else ''}"
        progress(f"  {DEEPGEMM_PEER} unavailable at {why}")
        dg_info["failures"].append(why)
        return False
    if not err <= PEER_TOLERANCE:  # NaN fails too
        why = f"{where}: output differs from scaled_gemm by {err:.3e} per row (tolerance {PEER_TOLERANCE:g})"
        progress(f"  {DEEPGEMM_PEER} not timed at {why}")
        dg_info["failures"].append(why)
        return False
    return True


def bench_gpu(shapes, ms, copies: int, replays: int, diagnose: bool, out_dir: str,
              deepgemm: bool = True, decode: bool = True) -> dict:
    device = torch.device("cuda")
    generator = torch.Generator(device=device).manual_seed(0)
    if deepgemm:
        dg, dg_info = load_deepgemm(device, probe=(shapes[0][0], shapes[0][1], ms[0]))
    else:
        dg, dg_info = None, {"present": False, "reason": "switched off (--no-deepgemm)"}
    progress(f"DeepGEMM: version {dg_info['version']}, PDL {'on' if dg_info['pdl'] else 'off'}" if dg is not None
             else f"DeepGEMM not measured: {dg_info['reason']}")
    progress(f"measuring device-to-device copy bandwidth on {torch.cuda.get_device_name()} ...")
    copy_tbps = measure_copy_bandwidth(device)
    progress(f"copy bandwidth: {copy_tbps:.2f} TB/s")
    rows: List[Row] = []
    total = len(shapes) * 2 * len(ms)
    done = 0
    for n, k in shapes:
        for scale_kind in ("fp32", "e8m0"):
            e8m0 = scale_kind == "e8m0"
            weights = [make_weight(n, k, e8m0, device, generator) for _ in range(copies)]
            bf16_weights = [_dequantize(w, f).to(torch.bfloat16) for w, _, f in weights]
            for m in ms:
                done += 1
                progress(f"[{done}/{total}] N={n} K={k} M={m} scale={scale_kind}")
                row = measure_point(n, k, m, e8m0, weights, bf16_weights, generator, replays, copy_tbps,
                                    dg, dg_info, decode, diagnose)
                rows.append(row)
                progress("  " + format_row(row))
            del weights, bf16_weights
            torch.cuda.empty_cache()
    result = {
        "device": torch.cuda.get_device_name(),
        "device_uuid": device_uuid(),
        "driver": driver_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "git": git_commit(),
        "copy_TBps": copy_tbps,
        "weight_copies": copies,
        "replays": replays,
        # "decode": each call after x.copy_(x_src) of its activations; a time is the pair's minus the copy's alone
        "orders": ["back_to_back", "decode"] if decode else ["back_to_back"],
        "deepgemm": dg_info,
        "rows": [row.__dict__ for row in rows],
    }
    return result


def _dequantize(w: torch.Tensor, scale_f32: torch.Tensor) -> torch.Tensor:
    n, k = w.shape
    full = scale_f32.repeat_interleave(128, 0)[:n].repeat_interleave(128, 1)
    return w.float() * full


def _us(t: Optional[float]) -> str:
    return "n/a" if t is None else f"{t:.2f}"


def format_row(row: Row) -> str:
    peers = "  ".join(f"{name}={_us(t)}" for name, t in row.peers.items())
    diag = "  ".join(f"{name}={_us(t)}" for name, t in row.diagnostics.items())
    text = (f"N={row.N} K={row.K} M={row.M} {row.scale}: fused {row.fused_us:.2f} us, floor {row.floor_us:.2f} us "
            f"(floor/fused {row.floor_us / row.fused_us:.2f}), L2-resident {_us(row.l2_resident_us)} us  {peers}")
    if row.decode is not None:
        text += (f"  | decode order (producer {_us(row.decode['producer_us'])} us subtracted): fused "
                 f"{_us(row.decode['fused_us'])}  " + "  ".join(f"{name}={_us(t)}" for name, t in row.decode["peers"].items()))
    return text + (f"  {diag}" if diag else "")


def present_peers(rows: List[dict]) -> List[str]:
    """The peers some row carries, in PEER_ORDER."""
    return [name for name in PEER_ORDER if any(name in r.get("peers", {}) for r in rows)]


def _peer_cell(t: Optional[float], fused: Optional[float]) -> str:
    if t is None:
        return f" {'n/a':>22}"
    ratio = "" if not fused else f" ({t / fused:>5.2f}x)"
    return f" {f'{t:.2f}{ratio}':>22}"


def print_gpu_table(result: dict) -> None:
    rows = result["rows"]
    peer_names = present_peers(rows)
    dg = result.get("deepgemm") or {}
    print(f"\n{result['device']}  torch {result['torch']}  git {result['git'][:12]}  "
          f"copy {result['copy_TBps']:.2f} TB/s  ({result['weight_copies']} weight copies, "
          f"median of {result['replays']} graph replays)")
    print(f"DeepGEMM {dg.get('version')} (PDL {'on' if dg.get('pdl') else 'off'})" if dg.get("present")
          else f"DeepGEMM not measured: {dg.get('reason', 'not recorded')}")
    for failure in dg.get("failures", []):
        print(f"  DeepGEMM: {failure}")
    orders = [("back to back, cold weights (peer us, peer/fused)", lambda r: r["fused_us"], lambda r: r["peers"])]
    if any(r.get("decode") for r in rows):
        orders.append(("decode order: after a producer kernel, its own time subtracted (peer us, peer/fused)",
                       lambda r: (r.get("decode") or {}).get("fused_us"),
                       lambda r: (r.get("decode") or {}).get("peers", {})))
    for title, fused_of, peers_of in orders:
        print(f"\n{title}")
        header = f"{'N':>5} {'K':>5} {'M':>3} {'scale':>5} | {'fused us':>8} {'L2 us':>6} {'floor us':>8} {'floor/fused':>11} |"
        for name in peer_names:
            header += f" {name[:22]:>22}"
        print(header)
        print("-" * len(header))
        for r in rows:
            fused = fused_of(r)
            fraction = "n/a" if not fused else f"{r['floor_us'] / fused:.2f}"
            line = (f"{r['N']:>5} {r['K']:>5} {r['M']:>3} {r['scale']:>5} | {_us(fused):>8} "
                    f"{_us(r.get('l2_resident_us')):>6} {r['floor_us']:>8.2f} {fraction:>11} |")
            for name in peer_names:
                line += _peer_cell(peers_of(r).get(name), fused)
            print(line)
    fp32 = [r for r in rows if r["scale"] == "fp32"]
    if fp32:
        geo = math.exp(sum(math.log(r["floor_us"] / r["fused_us"]) for r in fp32) / len(fp32))
        print(f"\nfp32 scales: geometric mean floor/fused = {geo:.3f} over {len(fp32)} points")
        pairs = [(r, next((e for e in rows if e["scale"] == "e8m0" and (e["N"], e["K"], e["M"]) == (r["N"], r["K"], r["M"])), None)) for r in fp32]
        ratios = [e["fused_us"] / r["fused_us"] for r, e in pairs if e]
        if ratios:
            print(f"e8m0 / fp32 fused time: max {max(ratios):.3f}, geometric mean "
                  f"{math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f}")


def plot_gpu(result: dict, path: str) -> Optional[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        progress("matplotlib not installed: no plot written")
        return None
    rows = result["rows"]
    # the decode order is the headline where it was measured; back to back otherwise
    decode = all(r.get("decode") for r in rows)

    def fused_of(r):
        return r["decode"]["fused_us"] if decode else r["fused_us"]

    def peer_of(r, name):
        return (r["decode"]["peers"] if decode else r["peers"]).get(name)

    shapes = sorted({(r["N"], r["K"]) for r in rows}, reverse=True)
    fig, axes = plt.subplots(1, len(shapes), figsize=(5.5 * len(shapes), 4.5), squeeze=False)
    for ax, (n, k) in zip(axes[0], shapes):
        for scale, style in (("fp32", "-"), ("e8m0", "--")):
            sel = sorted((r for r in rows if (r["N"], r["K"], r["scale"]) == (n, k, scale)), key=lambda r: r["M"])
            if not sel:
                continue
            ms = [r["M"] for r in sel]
            pts = [(r["M"], fused_of(r)) for r in sel if fused_of(r) is not None]
            if pts:
                ax.plot(*zip(*pts), "o" + style, color="C0", label=f"fused smallm_gemm ({scale})")
            for i, name in enumerate(PEER_ORDER):
                pts = [(r["M"], peer_of(r, name)) for r in sel if peer_of(r, name) is not None]
                if pts:
                    ax.plot(*zip(*pts), "s" + style, color=f"C{i + 1}", label=f"{name} ({scale})", alpha=0.8)
            if scale == "fp32":
                ax.plot(ms, [r["floor_us"] for r in sel], "k:", label="bandwidth floor")
        ax.set_title(f"N={n} K={k}  ({result['device']})")
        ax.set_xlabel("M (tokens)")
        ax.set_ylabel("us per call (graph replay, cold weights" + (", decode order)" if decode else ")"))
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"sglang-fp8ext {result['git'][:12]}, copy {result['copy_TBps']:.2f} TB/s")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


# ---- CPU -------------------------------------------------------------------------------------------


def bench_cpu(shapes, ms, repeats: int) -> dict:
    generator = torch.Generator().manual_seed(0)
    rows = []
    total = len(shapes) * len(ms)
    done = 0
    for n, k in shapes:
        w, s, _ = make_weight(n, k, False, "cpu", generator)
        for m in ms:
            done += 1
            progress(f"[{done}/{total}] N={n} K={k} M={m}")
            x = torch.randn(m, k, generator=generator).to(torch.bfloat16)
            ops.smallm_gemm(x, w, s)
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                ops.smallm_gemm(x, w, s)
                times.append(time.perf_counter() - t0)
            t = statistics.median(times) * 1e6
            rows.append({"N": n, "K": k, "M": m, "scale": "fp32", "fused_us": t,
                         "GBps": op_bytes(n, k, m, False) / t / 1e3})
    return {"device": "cpu", "threads": torch.get_num_threads(), "torch": torch.__version__, "git": git_commit(),
            "rows": rows}


def print_cpu_table(result: dict) -> None:
    print(f"\nCPU ({result['threads']} threads)  torch {result['torch']}  git {result['git'][:12]}")
    print(f"{'N':>5} {'K':>5} {'M':>3} | {'smallm_gemm ms':>14} {'effective GB/s':>14}")
    print("-" * 47)
    for r in result["rows"]:
        print(f"{r['N']:>5} {r['K']:>5} {r['M']:>3} | {r['fused_us'] / 1e3:>14.2f} {r['GBps']:>14.2f}")


def parse_shapes(text: str):
    """'NxK,NxK,...', or 'spec' for the seven SPEC §6 shapes."""
    if text.strip().lower() == "spec":
        return list(SPEC_SHAPES)
    shapes = []
    for item in text.split(","):
        n, k = item.lower().split("x")
        shapes.append((int(n), int(k)))
    return shapes


def main(args) -> int:
    shapes = parse_shapes(args.shapes) if args.shapes else QWEN_TP4_SHAPES
    ms = [int(m) for m in args.ms.split(",")] if args.ms else DEFAULT_MS
    out_dir = args.out or "."
    os.makedirs(out_dir, exist_ok=True)
    if torch.cuda.is_available() and not args.cpu:
        result = bench_gpu(shapes, ms, args.copies, args.replays, args.diagnose, out_dir,
                           deepgemm=not args.no_deepgemm, decode=not args.no_decode)
        print_gpu_table(result)
        stem = args.name or "bench_gpu"
        json_path = os.path.join(out_dir, f"{stem}.json")
        with open(json_path, "w") as f:
            json.dump(result, f, indent=1)
        png = plot_gpu(result, os.path.join(out_dir, f"{stem}.png"))
        print(f"\nwrote {json_path}" + (f" and {png}" if png else ""))
    else:
        result = bench_cpu(shapes, ms, args.repeats)
        print_cpu_table(result)
        json_path = os.path.join(out_dir, f"{args.name or 'bench_cpu'}.json")
        with open(json_path, "w") as f:
            json.dump(result, f, indent=1)
        print(f"\nwrote {json_path}")
    return 0
