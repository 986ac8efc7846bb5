"""fp8_block_linear: the entry point an FP8 linear layer calls, and its dispatch policy.

Paths (SPEC §5):
  fused     one launch: ``smallm_gemm`` (quant in registers + GEMM)
  aiter     ROCm only, when AITER is installed: ``per1x128_quant`` (column-major scales) then
            AITER's ``gemm_a8w8_blockscale_bpreshuffle`` (AITER-shuffled weight, fp32 scales)
  unfused   ``per1x128_quant`` then ``scaled_gemm`` (two launches; correct for every M)
The policy picks the fused path where it applies and is fast, and the unfused one elsewhere;
``SGL_FP8_SMALLM=0`` forces the unfused path. Which path ran is logged once per (device, N, K,
path) at DEBUG level on the ``sglang_fp8ext`` logger.
"""

from __future__ import annotations

import logging
from typing import Optional

import torch

from . import ops, switches

logger = logging.getLogger("sglang_fp8ext")

# Above this many tokens the fused kernel re-streams the weight once per 32-token chunk, and a
# GEMM that tiles M (the unfused path) wins on GPUs. On the CPU both paths run the same code.
FUSED_MAX_M = 32

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


def select_path(device: torch.device, m, n: int, k: int, *, e8m0: bool = False, shuffled: bool = False) -> str:
    """The path fp8_block_linear takes for bf16/fp16 input of ``m`` tokens on ``device``."""
    fused = switches.fused_smallm_enabled() and (device.type == "cpu" or m <= FUSED_MAX_M)
    if fused:
        return "fused"
    if device.type != "cpu" and shuffled and not e8m0 and aiter_module() is not None:
        return "aiter"
    return "unfused"


def _log_path_once(device: torch.device, n: int, k: int, path: str) -> None:
    if torch.compiler.is_compiling() or not logger.isEnabledFor(logging.DEBUG):
        return
    key = (str(device), n, k, path)
    if key not in _logged_paths:
        _logged_paths.add(key)
        logger.debug("sglang_fp8ext: fp8_block_linear N=%d K=%d on %s takes the %s path", n, k, device, path)


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
    if w_shuffled is None:
        w_shuffled = bool(getattr(weight, "is_shuffled", False))
    K = x.shape[-1]
    N = weight.shape[0]
    lead = x.shape[:-1]
    x2 = x.reshape(-1, K)

    if input_scale is not None:
        if out_dtype is None:
            out_dtype = bias.dtype if bias is not None else torch.bfloat16
        xs = input_scale.reshape(-1, input_scale.shape[-1])
        out = ops.scaled_gemm(x2, xs, weight, weight_scale, w_shuffled, out_dtype, bias)
        _log_path_once(x.device, N, K, "prequantized")
        return out.reshape(*lead, N)

    if out_dtype is not None and out_dtype != x.dtype:
        raise ValueError(f"fp8_block_linear: out_dtype {out_dtype} must equal x's dtype {x.dtype} for bf16/fp16 input")
    e8m0 = weight_scale.dtype == torch.float8_e8m0fnu
    path = select_path(x.device, x2.shape[0], N, K, e8m0=e8m0, shuffled=w_shuffled)
    if path == "fused":
        out = ops.smallm_gemm(x2, weight, weight_scale, w_shuffled, bias)
    elif path == "aiter":
        # AITER's bpreshuffle GEMM reads the activation scales column-major: strides (1, M).
        q, scale = ops.per1x128_quant(x2, ue8m0=False, transpose_scale=True)
        out = aiter_module().gemm_a8w8_blockscale_bpreshuffle(q, weight, scale, weight_scale, x.dtype)
        if bias is not None:
            out = out + bias
    else:
        q, scale = ops.per1x128_quant(x2, ue8m0=e8m0)
        out = ops.scaled_gemm(q, scale, weight, weight_scale, w_shuffled, x.dtype, bias)
    _log_path_once(x.device, N, K, path)
    return out.reshape(*lead, N)
