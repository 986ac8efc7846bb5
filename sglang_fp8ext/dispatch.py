"""Which path fp8_block_linear takes: a per-device table measured by ``tune``, else a heuristic.

Paths (SPEC §5):
  fused      ``smallm_gemm``: quant in registers + GEMM, one launch. A table entry may name a
             configuration of the kernel (``kernel_config.KernelConfig``: its engine and named
             knobs; absent: the kernel's own plan), run through the private
             ``_smallm_gemm_configured`` op.
  scaled_mm  CUDA sm_90, fp32 scales, plain weight, N % 128 == 0, K % 512 == 0: our quant with
             column-major scales + ``torch._scaled_mm`` with cuBLASLt 1x128 x 128x128 blockwise
             scaling (``scaled_mm_linear`` below).
  aiter      ROCm with AITER installed, AITER-shuffled weight, fp32 scales: our quant + AITER's
             bpreshuffle GEMM.
  unfused    ``per1x128_quant`` + ``scaled_gemm``: two launches, correct everywhere.

Lookup order: the table file of this device (``SGL_FP8_CONFIG_DIR``, else the package's
``configs/``; file ``table_filename(device name)``), used only where it matches this build (its
"format" is ``TABLE_FORMAT``, its "kernel_interface" is ``KERNEL_INTERFACE_VERSION``, its "device"
equals the device name exactly, and its "cuda" major version, where both are known, is this
torch's; otherwise it is ignored with one warning), then the group (N, K, scale format), then the entry with the smallest tabulated M >= m.
No file, no group, m above every tabulated M, or an entry whose path cannot run this call (e.g.
scaled_mm with a shuffled weight, fused with ``SGL_FP8_SMALLM=0``): the heuristic decides.

Everything here is pure Python on sizes, so it is testable without a GPU (``select`` takes a
``DeviceInfo``). It runs per call, on concrete sizes, also under torch.compile: there
fp8_block_linear calls it inside its opaque op ``sgl_fp8::_block_linear`` (linear.py), so that no
graph depends on M.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from typing import NamedTuple, Optional, Tuple

import torch

from . import ops
from .kernel_config import KERNEL_INTERFACE_VERSION, KernelConfig

logger = logging.getLogger("sglang_fp8ext")

PATHS = ("fused", "scaled_mm", "aiter", "unfused")
SCALES = ("fp32", "e8m0")
CONFIG_DIR_ENV = "SGL_FP8_CONFIG_DIR"
TABLE_FORMAT = 2  # the layout of a table file; format 1 held configs as positional integer lists
# SPEC §6: Qwen3.5-397B TP4, then DeepSeek-V3/V4 dense linears at TP4/TP8 (N, K)
SPEC_SHAPES = ((5120, 4096), (4608, 4096), (4096, 2048), (8192, 1024), (4096, 1024), (1536, 4096), (2112, 7168))

# Heuristic bounds (docs/dispatch.md has the measurements). CUDA: the fused kernel is the
# fastest FP8 path measured on the H200 up to M = 16 on every shape (the wgmma ring kernel). From
# 17 to 32 tokens it depends on the weight's size: up to ~22 MiB the 4-warpgroup wgmma kernel
# holds a CTA's share of 32 tokens in one wave and the fused op beats quant + cuBLASLt; above it the
# kernel runs over several waves, level with cuBLASLt, which keeps those weights, and ahead of the
# unfused path, so where cuBLASLt cannot run (e8m0 scales, N or K it is not known right for) a
# plain weight takes the fused op. Above 32 tokens the fused kernel re-streams the weight once per
# 32-token chunk, so a GEMM that tiles M wins.
# cuBLASLt is only called where it is known to be right (``scaled_mm_eligible``): on the H200 it
# was wrong exactly where K/128 is not a multiple of 4 (K = 256), and within 2e-3 of the float64
# reference on every shape with K % 512 == 0 tried (N 256..8192, K 512..4096, M 1..64).
CUDA_FUSED_ONLY_MAX_M = 16
CUDA_FUSED_MAX_WEIGHT_BYTES_ABOVE_16 = 22 * 2**20  # N x K e4m3 bytes (5120x4096 is 20 MiB, 6144x4096 24 MiB)
FUSED_MAX_M = 32


class DeviceInfo(NamedTuple):
    """What the policy needs to know about a device (build one by hand to test the policy)."""

    kind: str  # "cpu" (also meta and other non-GPU devices), "cuda" or "rocm"
    name: str  # the table key: torch.cuda.get_device_name() on GPUs, the device type otherwise
    capability: Optional[Tuple[int, int]] = None  # CUDA compute capability
    has_scaled_mm: bool = False  # this torch has torch._scaled_mm
    has_aiter: bool = False  # ROCm: AITER is importable


class Choice(NamedTuple):
    path: str
    config: Optional[Tuple[int, ...]]  # fused only: KernelConfig.op_args() of a tuned config; None = the plan's
    source: str  # "table" or "heuristic"
    bucket: str  # the M range this choice covers (the log key), e.g. "M<=8", "3<=M<=4"


class TableError(ValueError):
    """A table file that cannot be used as it is (bad JSON, a missing or invalid field)."""


# ---- the policy (pure) ---------------------------------------------------------------------------


def scaled_mm_eligible(dev: DeviceInfo, n: int, k: int, *, e8m0: bool, shuffled: bool) -> bool:
    """cuBLASLt blockwise scaling is only used where it is known to apply: sm_90, fp32 scales (it
    has no e8m0 block scales), a plain weight, N a multiple of 128 (a partial last block of N, as
    in N = 2112, is not described to it) and K a multiple of 512: torch documents the 128x128
    weight scales as needing 16-byte aligned strides, i.e. K/128 a multiple of 4 fp32 (every SPEC
    §6 shape has it; other K are left to the kernels we test)."""
    return (
        dev.kind == "cuda"
        and dev.capability == (9, 0)
        and dev.has_scaled_mm
        and not e8m0
        and not shuffled
        and n % 128 == 0
        and k % 512 == 0
    )


def _runnable(path: str, dev: DeviceInfo, scaled_mm_ok: bool, fused_enabled: bool, e8m0: bool, shuffled: bool) -> bool:
    if path == "fused":
        return fused_enabled
    if path == "scaled_mm":
        return scaled_mm_ok
    if path == "aiter":
        return dev.kind == "rocm" and dev.has_aiter and shuffled and not e8m0
    return path == "unfused"


def heuristic(dev: DeviceInfo, m, *, n: int, k: int, e8m0: bool, shuffled: bool, scaled_mm_ok: bool,
              fused_enabled: bool = True) -> Tuple[str, str]:
    """(path, M bucket) for a call without a table entry, for an [n, k] weight."""
    if dev.kind == "cuda":
        if fused_enabled and m <= CUDA_FUSED_ONLY_MAX_M:
            return "fused", f"M<={CUDA_FUSED_ONLY_MAX_M}"
        fused_to_32 = n * k <= CUDA_FUSED_MAX_WEIGHT_BYTES_ABOVE_16 or (not scaled_mm_ok and not shuffled)
        if fused_enabled and m <= FUSED_MAX_M and fused_to_32:
            return "fused", f"{CUDA_FUSED_ONLY_MAX_M}<M<={FUSED_MAX_M}"
        # the same path for every larger M: one bucket
        bucket = "any M" if not fused_enabled else f"M>{FUSED_MAX_M}" if fused_to_32 else f"M>{CUDA_FUSED_ONLY_MAX_M}"
        return ("scaled_mm" if scaled_mm_ok else "unfused"), bucket
    if dev.kind == "rocm":
        if fused_enabled and m <= FUSED_MAX_M:
            return "fused", f"M<={FUSED_MAX_M}"
        bucket = f"M>{FUSED_MAX_M}" if fused_enabled else "any M"
        if shuffled and not e8m0 and dev.has_aiter:
            return "aiter", bucket
        return "unfused", bucket
    # CPU (and meta): one GEMM implementation, the fused op saves the quant round trip at any M
    return ("fused" if fused_enabled else "unfused"), "any M"


def select(dev: DeviceInfo, m, n: int, k: int, *, e8m0: bool = False, shuffled: bool = False,
           groups: tuple = (), fused_enabled: bool = True) -> Choice:
    """The path for ``m`` tokens of an [N, K] weight. ``groups`` is the device's table as
    returned by ``table_for`` (empty: heuristic only); ``fused_enabled`` is the SGL_FP8_SMALLM switch."""
    scaled_mm_ok = scaled_mm_eligible(dev, n, k, e8m0=e8m0, shuffled=shuffled)
    scale = "e8m0" if e8m0 else "fp32"
    for g_n, g_k, g_scale, entries in groups:
        if g_scale == scale and g_k == k and g_n == n:
            low = 0
            for t_m, path, config in entries:  # sorted by M
                if m <= t_m:
                    if _runnable(path, dev, scaled_mm_ok, fused_enabled, e8m0, shuffled):
                        bucket = f"M<={t_m}" if low == 0 else f"{low}<=M<={t_m}"
                        return Choice(path, config if path == "fused" else None, "table", bucket)
                    break  # this call cannot take the tabulated path: the heuristic decides
                low = t_m + 1
            break
    path, bucket = heuristic(dev, m, n=n, k=k, e8m0=e8m0, shuffled=shuffled, scaled_mm_ok=scaled_mm_ok,
                             fused_enabled=fused_enabled)
    return Choice(path, None, "heuristic", bucket)


# ---- devices -------------------------------------------------------------------------------------

_gpu_facts: dict = {}


def device_facts(device_type: str, index: Optional[int]) -> tuple:
    """(kind, name, capability, has_scaled_mm) of a device. GPU name and capability are queried
    once per device index; a query that fails (no GPU present) leaves them None."""
    has_scaled_mm = hasattr(torch, "_scaled_mm")
    if device_type != "cuda":
        return "cpu", device_type, None, has_scaled_mm
    kind = "rocm" if getattr(torch.version, "hip", None) else "cuda"
    if index not in _gpu_facts:
        try:
            i = torch.cuda.current_device() if index is None else index
            _gpu_facts[index] = (torch.cuda.get_device_name(i), tuple(torch.cuda.get_device_capability(i)))
        except (RuntimeError, AssertionError, AttributeError):  # a CUDA device object without a GPU
            _gpu_facts[index] = ("", None)
    name, capability = _gpu_facts[index]
    return kind, name, capability, has_scaled_mm


# ---- tables --------------------------------------------------------------------------------------


# computed once at import: path functions are not traceable by torch.compile
_PACKAGE_CONFIG_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "configs")


def package_config_dir() -> str:
    return _PACKAGE_CONFIG_DIR


def config_dir() -> str:
    """``SGL_FP8_CONFIG_DIR`` when set, else the package's ``configs/`` directory."""
    return os.environ.get(CONFIG_DIR_ENV) or _PACKAGE_CONFIG_DIR


def table_filename(device_name: str) -> str:
    """File name of a device's table: "NVIDIA H200" -> "nvidia_h200.json"."""
    stem = re.sub(r"[^0-9a-z]+", "_", device_name.lower()).strip("_")
    if not stem:
        raise ValueError(f"no table file name for the device name {device_name!r}")
    return stem + ".json"


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def table_mismatch(meta: dict, device_name: str, cuda_version: Optional[str]) -> str:
    """Why a table's metadata does not match this build and device ("" when it does)."""
    if not (_is_int(meta.get("format")) and meta["format"] == TABLE_FORMAT):
        return f"its format {meta.get('format')!r} is not this build's {TABLE_FORMAT} (re-run tune)"
    if not (_is_int(meta.get("kernel_interface")) and meta["kernel_interface"] == KERNEL_INTERFACE_VERSION):
        return (f"its kernel interface {meta.get('kernel_interface')!r} is not this build's {KERNEL_INTERFACE_VERSION} "
                "(re-run tune)")
    if meta.get("device") != device_name:
        return f"its device {meta.get('device')!r} is not this device {device_name!r} (exact match needed)"
    table_cuda = meta.get("cuda")
    if table_cuda and cuda_version and str(table_cuda).split(".")[0] != str(cuda_version).split(".")[0]:
        return f"it was tuned with CUDA {table_cuda}, this torch has CUDA {cuda_version} (re-run tune)"
    return ""


def parse_table(data, source: str) -> tuple:
    """Validate a table (the parsed JSON) and index it: (meta, groups), meta being its top-level
    fields but "entries", groups ((N, K, scale, ((M, path, config or None), ... sorted by M)), ...)
    with config a ``KernelConfig.op_args()`` tuple. Raises TableError on a malformed table of
    this format; a table of another format is returned with no groups (``table_mismatch`` says so)."""

    def bad(where: str, what: str):
        raise TableError(f"sglang_fp8ext: table {source}: {where}: {what}")

    if not isinstance(data, dict):
        bad("top level", f"expected an object, got {type(data).__name__}")
    meta = {k: v for k, v in data.items() if k != "entries"}
    if not (_is_int(data.get("format")) and data["format"] == TABLE_FORMAT):
        return meta, ()
    if not _is_int(data.get("kernel_interface")):
        bad("'kernel_interface'", f"expected an integer, got {data.get('kernel_interface')!r}")
    device = data.get("device")
    if not isinstance(device, str) or not device:
        bad("'device'", f"expected the device name (torch.cuda.get_device_name()), got {device!r}")
    entries = data.get("entries")
    if not isinstance(entries, list):
        bad("'entries'", f"expected a list, got {type(entries).__name__}")
    grouped: dict = {}
    for i, e in enumerate(entries):
        where = f"entries[{i}]"
        if not isinstance(e, dict):
            bad(where, f"expected an object, got {type(e).__name__}")
        for key in ("N", "K", "M", "scale", "path"):
            if key not in e:
                bad(where, f"missing {key!r}")
        n, k, m, scale, path = e["N"], e["K"], e["M"], e["scale"], e["path"]
        if not (_is_int(n) and n > 0 and n % 16 == 0):
            bad(where, f"N must be a positive multiple of 16, got {n!r}")
        if not (_is_int(k) and k > 0 and k % 128 == 0):
            bad(where, f"K must be a positive multiple of 128, got {k!r}")
        if not (_is_int(m) and m >= 0):
            bad(where, f"M must be a non-negative integer, got {m!r}")
        if scale not in SCALES:
            bad(where, f"scale must be one of {SCALES}, got {scale!r}")
        if path not in PATHS:
            bad(where, f"path must be one of {PATHS}, got {path!r}")
        config = e.get("config")
        if config is not None:
            if path != "fused":
                bad(where, f"a config is only meaningful for the fused path, not {path!r}")
            try:
                typed = KernelConfig.from_json(config)
            except (TypeError, ValueError) as err:
                bad(where, f"config: {err}")
            config = None if typed.is_default else tuple(typed.op_args())
        if "us" in e and not (isinstance(e["us"], (int, float)) and not isinstance(e["us"], bool) and math.isfinite(e["us"])):
            bad(where, f"us must be a finite number, got {e['us']!r}")
        group = grouped.setdefault((n, k, scale), {})
        if m in group:
            bad(where, f"a second entry for N={n} K={k} scale={scale} M={m}")
        group[m] = (m, path, config)
    groups = tuple((n, k, s, tuple(v for _, v in sorted(g.items()))) for (n, k, s), g in sorted(grouped.items()))
    return meta, groups


def load_table_file(path: str) -> tuple:
    """Read and validate a table file: (meta, groups). Raises TableError."""
    try:
        with open(path) as f:
            data = json.load(f)
    except json.JSONDecodeError as e:
        raise TableError(f"sglang_fp8ext: table {path}: not valid JSON: {e}") from None
    return parse_table(data, path)


_tables: dict = {}
_warned: set = set()


def table_for(directory: str, device_name: str) -> tuple:
    """(file, note, groups) for a device: the file consulted (None if absent), a note on why it
    is not used ("" when it is), and its groups (empty when unused). Cached per (directory,
    device); ``clear_table_cache()`` forgets. A malformed file raises TableError at every call."""
    key = (directory, device_name)
    if key in _tables:
        return _tables[key]
    if not device_name:
        return None, "no device name", ()
    path = os.path.join(directory, table_filename(device_name))
    if not os.path.isfile(path):
        result = (None, f"no {table_filename(device_name)} in {directory}", ())
    else:
        meta, groups = load_table_file(path)
        why = table_mismatch(meta, device_name, getattr(torch.version, "cuda", None))
        if why:
            result = (path, why, ())
            if key not in _warned:
                _warned.add(key)
                logger.warning("sglang_fp8ext: table %s not used: %s", path, result[1])
        else:
            result = (path, "", groups)
    _tables[key] = result
    return result


def clear_table_cache() -> None:
    _tables.clear()
    _warned.clear()


# ---- the cuBLASLt path ---------------------------------------------------------------------------


def scaled_mm_linear(x: torch.Tensor, w: torch.Tensor, w_scale: torch.Tensor, bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Our 1x128 quant (fp32 scales, column-major as cuBLASLt reads them) + ``torch._scaled_mm``
    with 1x128 x 128x128 blockwise scaling (sm_90, CUDA >= 12.9). ``w`` plain [N, K],
    ``w_scale`` fp32 [N/128, K/128]. cuBLASLt wants M a multiple of 4 (at least 4): the
    activations are padded with zero rows and the output sliced back. Output in x's dtype."""
    m = x.shape[0]
    if m == 0:  # nothing to multiply (and cuBLASLt is not asked to)
        out = x.new_empty((0, w.shape[0]))
        return out if bias is None else out + bias
    pad = (m + 3) // 4 * 4 - m  # for m >= 1 the next multiple of 4 is also >= 4
    x_pad = x if pad == 0 else torch.cat([x, x.new_zeros(pad, x.shape[1])])
    q, s = ops.per1x128_quant(x_pad, ue8m0=False, transpose_scale=True)
    out = torch._scaled_mm(q, w.t(), scale_a=s, scale_b=w_scale.t(), out_dtype=x.dtype)[:m]
    if bias is not None:
        out = out + bias
    return out
