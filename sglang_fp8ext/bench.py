"""``python -m sglang_fp8ext bench``: the fused projection against its bandwidth floor and peers.

On a GPU (SPEC §6 Qwen3.5 TP4 shapes, M in 1..32, fp32 and e8m0 scales, one run): every
figure is the median over >= 20 CUDA-graph replays of a graph that calls the op once per
rotated weight copy (>= 24 copies, more bytes than L2: cold weights, as in decode), divided by
the number of calls. The floor is the op's bytes (weight + scales + activations + output) over
the device-to-device copy bandwidth measured in the same run, so every time is also a ratio.
Peers: our quant + torch._scaled_mm with cuBLASLt blockwise scaling, our quant + scaled_gemm
(the unfused path), and bf16 F.linear of the dequantized weight.

On the CPU it times the CPU ops (median of a few calls) and prints effective bandwidth.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

import torch
import torch.nn.functional as F

from . import ops
from .dispatch import scaled_mm_linear
from .kernel_config import Engine, KernelConfig

QWEN_TP4_SHAPES = [(5120, 4096), (4608, 4096), (4096, 2048)]
DEFAULT_MS = [1, 4, 8, 16, 32]
SCALED_MM_PEER = "quant+scaled_mm(cuBLASLt)"
UNFUSED_PEER = "quant+scaled_gemm"
BF16_PEER = "bf16_linear"
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
    if os.environ.get("SGL_FP8_GIT"):
        return os.environ["SGL_FP8_GIT"]
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


@dataclass
class Row:
    N: int
    K: int
    M: int
    scale: str
    fused_us: float
    floor_us: float
    peers: Dict[str, Optional[float]] = field(default_factory=dict)
    diagnostics: Dict[str, Optional[float]] = field(default_factory=dict)


def bench_gpu(shapes, ms, copies: int, replays: int, diagnose: bool, out_dir: str) -> dict:
    device = torch.device("cuda")
    generator = torch.Generator(device=device).manual_seed(0)
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
            bf16_weights = None
            for m in ms:
                done += 1
                progress(f"[{done}/{total}] N={n} K={k} M={m} scale={scale_kind}")
                x = torch.randn(m, k, generator=generator, device=device).to(torch.bfloat16)
                fused = time_in_graph([lambda w=w, s=s: ops.smallm_gemm(x, w, s) for w, s, _ in weights], replays)
                row = Row(n, k, m, scale_kind, fused, op_bytes(n, k, m, e8m0) / copy_tbps / 1e6)
                row.peers[UNFUSED_PEER] = time_in_graph(
                    [lambda w=w, s=s: ops.scaled_gemm(*ops.per1x128_quant(x, ue8m0=e8m0), w, s) for w, s, _ in weights],
                    replays,
                )
                try:
                    # the e8m0 rows give cuBLASLt the same scales as fp32 (it has no e8m0 block scales)
                    scaled_mm_linear(x, weights[0][0], weights[0][2])
                    row.peers[SCALED_MM_PEER] = time_in_graph(
                        [lambda w=w, f=f: scaled_mm_linear(x, w, f) for w, _, f in weights], replays
                    )
                except (RuntimeError, TypeError, ValueError) as e:
                    progress(f"  {SCALED_MM_PEER} unavailable: {str(e).splitlines()[0][:160]}")
                    row.peers[SCALED_MM_PEER] = None
                if bf16_weights is None:
                    bf16_weights = [_dequantize(w, f).to(torch.bfloat16) for w, _, f in weights]
                row.peers[BF16_PEER] = time_in_graph([lambda w=w: F.linear(x, w) for w in bf16_weights], replays)
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
                        row.diagnostics["no_pdl"] = time_in_graph(
                            [lambda w=w, s=s: ops.smallm_gemm(x, w, s) for w, s, _ in weights], replays)
                    finally:
                        del os.environ["SGL_FP8_PDL"]
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
        "rows": [row.__dict__ for row in rows],
    }
    return result


def _dequantize(w: torch.Tensor, scale_f32: torch.Tensor) -> torch.Tensor:
    n, k = w.shape
    full = scale_f32.repeat_interleave(128, 0)[:n].repeat_interleave(128, 1)
    return w.float() * full


def format_row(row: Row) -> str:
    peers = "  ".join(f"{name}={'n/a' if t is None else f'{t:.2f}'}" for name, t in row.peers.items())
    diag = "  ".join(f"{name}={'n/a' if t is None else f'{t:.2f}'}" for name, t in row.diagnostics.items())
    return (f"N={row.N} K={row.K} M={row.M} {row.scale}: fused {row.fused_us:.2f} us, floor {row.floor_us:.2f} us "
            f"(floor/fused {row.floor_us / row.fused_us:.2f})  {peers}  {diag}")


def print_gpu_table(result: dict) -> None:
    rows = result["rows"]
    peer_names = [SCALED_MM_PEER, UNFUSED_PEER, BF16_PEER]
    print(f"\n{result['device']}  torch {result['torch']}  git {result['git'][:12]}  "
          f"copy {result['copy_TBps']:.2f} TB/s  ({result['weight_copies']} weight copies, "
          f"median of {result['replays']} graph replays)")
    header = f"{'N':>5} {'K':>5} {'M':>3} {'scale':>5} | {'fused us':>8} {'floor us':>8} {'floor/fused':>11} |"
    for name in peer_names:
        header += f" {name[:26]:>26}"
    print(header)
    print("-" * len(header))
    for r in rows:
        line = f"{r['N']:>5} {r['K']:>5} {r['M']:>3} {r['scale']:>5} | {r['fused_us']:>8.2f} {r['floor_us']:>8.2f} " \
               f"{r['floor_us'] / r['fused_us']:>11.2f} |"
        for name in peer_names:
            t = r["peers"].get(name)
            line += f" {'n/a':>26}" if t is None else f" {t:>9.2f} us ({t / r['fused_us']:>5.2f}x)".rjust(27)
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
    shapes = sorted({(r["N"], r["K"]) for r in rows}, reverse=True)
    fig, axes = plt.subplots(1, len(shapes), figsize=(5.5 * len(shapes), 4.5), squeeze=False)
    for ax, (n, k) in zip(axes[0], shapes):
        for scale, style in (("fp32", "-"), ("e8m0", "--")):
            sel = sorted((r for r in rows if (r["N"], r["K"], r["scale"]) == (n, k, scale)), key=lambda r: r["M"])
            if not sel:
                continue
            ms = [r["M"] for r in sel]
            ax.plot(ms, [r["fused_us"] for r in sel], "o" + style, color="C0", label=f"fused smallm_gemm ({scale})")
            for i, name in enumerate([SCALED_MM_PEER, UNFUSED_PEER, BF16_PEER]):
                pts = [(r["M"], r["peers"].get(name)) for r in sel if r["peers"].get(name) is not None]
                if pts:
                    ax.plot(*zip(*pts), "s" + style, color=f"C{i + 1}", label=f"{name} ({scale})", alpha=0.8)
            if scale == "fp32":
                ax.plot(ms, [r["floor_us"] for r in sel], "k:", label="bandwidth floor")
        ax.set_title(f"N={n} K={k}  ({result['device']})")
        ax.set_xlabel("M (tokens)")
        ax.set_ylabel("us per call (graph replay, cold weights)")
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
        result = bench_gpu(shapes, ms, args.copies, args.replays, args.diagnose, out_dir)
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
