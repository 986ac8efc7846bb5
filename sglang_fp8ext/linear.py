"""fp8_block_linear: the entry point an FP8 linear layer calls.

Which path runs (fused kernel, cuBLASLt ``scaled_mm``, AITER, or quant + ``scaled_gemm``) and
which instance of the fused kernel is decided in ``dispatch.py``: the device's table measured by
``python -m sglang_fp8ext tune``, else a heuristic (docs/dispatch.md). ``SGL_FP8_SMALLM=0`` turns
the fused kernel off. Which path ran is logged once per (device, N, K, M bucket, path, config) at
DEBUG level on the ``sglang_fp8ext`` logger, saying whether the table or the heuristic chose it.

The path depends on M, so under torch.compile bf16/fp16 input goes through one opaque op,
``sgl_fp8::_block_linear``, that chooses at run time: a graph traced once serves every M, whether M
is dynamic, unbacked, or its guards are dropped (vLLM runs one graph for every batch size), and
the switches and the table are read per call as in eager. Eager calls choose directly, without the
op's dispatch overhead.
"""

from __future__ import annotations

import logging
from typing import Optional

import torch

from . import dispatch, ops, switches
from .kernel_config import KernelConfig
from .dispatch import Choice, DeviceInfo

logger = logging.getLogger("sglang_fp8ext")

_logged_paths: set = set()
_aiter_module = None
_aiter_checked = False


def aiter_module():
    """AITER, imported only on a ROCm build of torch and only if it is installed; else None.

    AITER is optional: an AMD machine without it runs the unfused path instead."""
    global _aiter_module, _aiter_checked
    if not _aiter_checked:
        _aiter_checked = True
        if getattr(torch.version, "hip", None):
            try:
                import aiter  # noqa: PLC0415  (optional dependency, ROCm only)

                _aiter_module = aiter
            except ImportError:
                _aiter_module = None
    return _aiter_module


def device_info(device: torch.device) -> DeviceInfo:
    kind, name, capability, has_scaled_mm = dispatch.device_facts(device.type, device.index)
    # AITER is looked for on ROCm only (importing it elsewhere is pointless and slow)
    has_aiter = kind == "rocm" and aiter_module() is not None
    return DeviceInfo(kind, name, capability, has_scaled_mm, has_aiter)


def choose(device: torch.device, m, n: int, k: int, *, e8m0: bool = False, shuffled: bool = False) -> Choice:
    """Path (+ fused config, + whether the table or the heuristic chose it) for bf16/fp16 input
    of ``m`` tokens on ``device``; the switches and the table are read at call time."""
    dev = device_info(device)
    _, _, groups = dispatch.table_for(dispatch.config_dir(), dev.name)
    return dispatch.select(dev, m, n, k, e8m0=e8m0, shuffled=shuffled, groups=groups,
                           fused_enabled=switches.fused_smallm_enabled())


def select_path(device: torch.device, m, n: int, k: int, *, e8m0: bool = False, shuffled: bool = False) -> str:
    """The path fp8_block_linear takes for bf16/fp16 input of ``m`` tokens on ``device``."""
    return choose(device, m, n, k, e8m0=e8m0, shuffled=shuffled).path


def run_path(path: str, config, x2: torch.Tensor, weight: torch.Tensor, weight_scale: torch.Tensor,
             w_shuffled: bool, bias: Optional[torch.Tensor]) -> torch.Tensor:
    """Run one path on 2-D ``x2`` (also used by ``tune`` and ``check`` to time and test each path)."""
    if path == "fused":
        if config is None:
            return ops.smallm_gemm(x2, weight, weight_scale, w_shuffled, bias)
        return torch.ops.sgl_fp8._smallm_gemm_configured(x2, weight, weight_scale, w_shuffled, bias, list(config))
    if path == "scaled_mm":
        return dispatch.scaled_mm_linear(x2, weight, weight_scale, bias)
    if path == "aiter":
        # AITER's bpreshuffle GEMM reads the activation scales column-major: strides (1, M).
        q, scale = ops.per1x128_quant(x2, ue8m0=False, transpose_scale=True)
        out = aiter_module().gemm_a8w8_blockscale_bpreshuffle(q, weight, scale, weight_scale, x2.dtype)
        return out if bias is None else out + bias
    if path == "unfused":
        q, scale = ops.per1x128_quant(x2, ue8m0=weight_scale.dtype == torch.float8_e8m0fnu)
        return ops.scaled_gemm(q, scale, weight, weight_scale, w_shuffled, x2.dtype, bias)
    raise ValueError(f"fp8_block_linear: unknown path {path!r}")


def _log_path_once(device: torch.device, n: int, k: int, path: str, config=None, source: str = "caller",
                   bucket: str = "any M") -> None:
    # Runs where the path is chosen: eagerly, or inside sgl_fp8::_block_linear at run time. Not
    # while torch.compile traces (a logging call breaks the graph): the pre-quantized path, which
    # does not depend on M, is traced into the graph and logs only in eager calls.
    if torch.compiler.is_compiling() or not logger.isEnabledFor(logging.DEBUG):
        return
    key = (str(device), n, k, bucket, path, config)
    if key not in _logged_paths:
        _logged_paths.add(key)
        instance = "" if config is None else f" ({KernelConfig.from_op_args(config).label()})"
        logger.debug("sglang_fp8ext: fp8_block_linear N=%d K=%d %s on %s takes the %s path%s, chosen by the %s",
                     n, k, bucket, device, path, instance, source)


def fp8_block_linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    weight_scale: torch.Tensor,
    input_scale: Optional[torch.Tensor] = None,
    bias: Optional[torch.Tensor] = None,
    *,
    w_shuffled: Optional[bool] = None,
    out_dtype: Optional[torch.dtype] = None,
) -> torch.Tensor:
    """``y = x @ dequant(weight).T (+ bias)`` for an FP8 block-scale weight.

    x: [..., K] bf16/fp16, or float8_e4m3fn with ``input_scale`` [..., K/128] (e.g. from
    ``rmsnorm_quant``). weight: [N, K] float8_e4m3fn, plain or AITER-shuffled. weight_scale:
    [ceil(N/128), K/128] float32 or float8_e8m0fnu. ``w_shuffled=None`` reads
    ``weight.is_shuffled``. Output [..., N] in x's dtype (pre-quantized input: ``out_dtype``,
    else bias's dtype, else bf16).
    """
    if x.dim() < 1:
        raise ValueError("fp8_block_linear: x must be [..., K], got a 0-d tensor")
    if weight.dim() != 2:
        raise ValueError(f"fp8_block_linear: weight must be [N, K], got shape {tuple(weight.shape)}")
    if input_scale is not None and input_scale.dim() < 1:
        raise ValueError("fp8_block_linear: input_scale must be [..., K/128], got a 0-d tensor")
    if w_shuffled is None:
        w_shuffled = bool(getattr(weight, "is_shuffled", False))
    K = x.shape[-1]
    N = weight.shape[0]
    lead = x.shape[:-1]
    x2 = x.reshape(-1, K)

    if input_scale is not None:
        if x.dtype != torch.float8_e4m3fn:
            raise ValueError(
                f"fp8_block_linear: with input_scale given, x must be the float8_e4m3fn q that came with it, got {x.dtype} "
                "(bf16/fp16 x: pass no input_scale)"
            )
        if input_scale.shape[:-1] != lead:
            # flattening both to rows would pair q's rows with another row's scales
            raise ValueError(
                f"fp8_block_linear: input_scale must be [..., K/128] with x's leading dims {tuple(lead)}, got shape "
                f"{tuple(input_scale.shape)}"
            )
        if out_dtype is None:
            out_dtype = bias.dtype if bias is not None else torch.bfloat16
            if out_dtype not in (torch.bfloat16, torch.float16):
                raise ValueError(
                    f"fp8_block_linear: pre-quantized input without out_dtype takes the bias's dtype, {out_dtype}, "
                    "but the output must be bfloat16 or float16: pass out_dtype"
                )
        xs = input_scale.reshape(-1, input_scale.shape[-1])
        out = ops.scaled_gemm(x2, xs, weight, weight_scale, w_shuffled, out_dtype, bias)
        _log_path_once(x.device, N, K, "prequantized", source="caller (input_scale given)")
        return out.reshape(*lead, N)

    if out_dtype is not None and out_dtype != x.dtype:
        raise ValueError(f"fp8_block_linear: out_dtype {out_dtype} must equal x's dtype {x.dtype} for bf16/fp16 input")
    if torch.compiler.is_compiling():
        out = torch.ops.sgl_fp8._block_linear(x2, weight, weight_scale, w_shuffled, bias)
    else:
        out = _chosen_path(x2, weight, weight_scale, w_shuffled, bias)
    return out.reshape(*lead, N)


def _chosen_path(x2: torch.Tensor, weight: torch.Tensor, weight_scale: torch.Tensor, w_shuffled: bool,
                 bias: Optional[torch.Tensor]) -> torch.Tensor:
    """bf16/fp16 ``x2`` [M, K] through the path chosen for its M (the table, else the heuristic)."""
    N, K = weight.shape[0], x2.shape[1]
    e8m0 = weight_scale.dtype == torch.float8_e8m0fnu
    choice = choose(x2.device, x2.shape[0], N, K, e8m0=e8m0, shuffled=w_shuffled)
    out = run_path(choice.path, choice.config, x2, weight, weight_scale, w_shuffled, bias)
    _log_path_once(x2.device, N, K, choice.path, choice.config, choice.source, choice.bucket)
    return out


# Defined with torch.library.Library rather than torch.library.custom_op: a compiled graph that is
# not captured in a CUDA graph calls it per forward, and custom_op's Python wrapper costs about as
# much again as the path choice itself.
_LIBRARY = torch.library.Library("sgl_fp8", "FRAGMENT")
_LIBRARY.define(
    "_block_linear(Tensor x, Tensor weight, Tensor weight_scale, bool w_shuffled, Tensor? bias) -> Tensor",
    tags=(torch.Tag.pt2_compliant_tag,),
)
_LIBRARY.impl("_block_linear", _chosen_path, "CompositeExplicitAutograd")


@torch.library.register_fake("sgl_fp8::_block_linear")
def _(x, weight, weight_scale, w_shuffled, bias):
    # Every path has smallm_gemm's contract and output ([M, N] in x's dtype, contiguous): its fake
    # checks the one and sizes the other.
    return torch.ops.sgl_fp8.smallm_gemm(x, weight, weight_scale, w_shuffled, bias)
