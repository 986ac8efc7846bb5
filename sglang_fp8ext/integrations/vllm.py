"""vLLM entry points: block-FP8 linear kernels with vLLM's own interfaces.

vLLM 0.33 serves a block-FP8 checkpoint's dense linears with a *kernel object*: ``Fp8LinearMethod``
(``vllm/model_executor/layers/quantization/fp8.py``) builds one with ``init_fp8_linear_kernel`` from
the kernel classes listed in ``_POSSIBLE_FP8_BLOCK_KERNELS``
(``vllm/model_executor/kernels/linear/__init__.py``), all subclasses of
``Fp8BlockScaledMMLinearKernel`` (``.../kernels/linear/scaled_mm/BlockScaledMMLinearKernel.py``),
and calls ``self.fp8_linear.apply_weights(layer, x, bias)``.

* :class:`Fp8ExtBlockScaledMMKernel` has that kernel interface (``__init__(config)``,
  ``is_supported``, ``can_implement``, ``process_weights_after_loading(layer)``,
  ``apply_weights(layer, x, bias=None, **kwargs)``, ``apply_block_scaled_mm(A, B, As, Bs)``) and runs
  :func:`sglang_fp8ext.fp8_block_linear`. :func:`install` registers it (as a subclass of vLLM's base
  class) ahead of vLLM's own kernels.
* :class:`Fp8ExtW8A8BlockFp8LinearOp` has the interface of the op earlier vLLM releases used
  instead (``W8A8BlockFp8LinearOp(weight_group_shape, act_quant_group_shape, ...)`` with
  ``apply(input, weight, weight_scale, input_scale=None, bias=None)``); vLLM 0.33 no longer has it.

Only 128x128 weight blocks with 1x128 activation groups are served; anything else raises
ValueError (or, from ``can_implement``, declines so that vLLM picks another kernel). vLLM is
imported only inside :func:`vllm_kernel_class` / :func:`install`.
"""

from __future__ import annotations

from typing import Any, Optional

import torch

from ..layout import e8m0_to_scale
from ..linear import fp8_block_linear
from ..module import ENGINE_E8M0_ATTR, e8m0_scale_if_enabled, fnuz_device
from ..ops import scaled_gemm


FP8 = torch.float8_e4m3fn
E8M0 = torch.float8_e8m0fnu
WEIGHT_GROUP_SHAPE = (128, 128)
ACT_GROUP_SHAPE = (1, 128)
E8M0_ATTR = ENGINE_E8M0_ATTR  # on the layer

__all__ = ["Fp8ExtBlockScaledMMKernel", "Fp8ExtW8A8BlockFp8LinearOp", "vllm_kernel_class", "install"]


def _pair(shape):
    """(row, col) of a vLLM GroupShape (a NamedTuple), a tuple or a list; None if it is not a pair."""
    try:
        pair = tuple(int(v) for v in shape)
    except (TypeError, ValueError):
        return None
    return pair if len(pair) == 2 else None


def _block_shape_problem(weight_group_shape, act_quant_group_shape) -> Optional[str]:
    if _pair(weight_group_shape) != WEIGHT_GROUP_SHAPE:
        return (f"weight_group_shape {weight_group_shape!r} is not supported; only 128x128 weight blocks "
                f"(GroupShape(128, 128)) are")
    if act_quant_group_shape is not None and _pair(act_quant_group_shape) != ACT_GROUP_SHAPE:
        return (f"act_quant_group_shape {act_quant_group_shape!r} is not supported; only 1x128 activation "
                f"groups (GroupShape(1, 128)) are")
    return None


def _check_block_shapes(who: str, weight_group_shape, act_quant_group_shape) -> None:
    problem = _block_shape_problem(weight_group_shape, act_quant_group_shape)
    if problem is not None:
        raise ValueError(f"sglang_fp8ext {who}: {problem}. Keep vLLM's own kernel for this layer.")


def _matching_scales(weight_scale: torch.Tensor, input_scale: torch.Tensor):
    """Both in one format (fp8_block_linear's rule); e8m0 -> fp32 is exact."""
    if weight_scale.dtype == input_scale.dtype:
        return weight_scale, input_scale
    if weight_scale.dtype == E8M0:
        return e8m0_to_scale(weight_scale), input_scale
    return weight_scale, e8m0_to_scale(input_scale)


def _linear(who: str, x: torch.Tensor, weight: torch.Tensor, weight_scale: torch.Tensor,
            input_scale: Optional[torch.Tensor], bias: Optional[torch.Tensor], out_dtype: Optional[torch.dtype]):
    if input_scale is None:
        out = fp8_block_linear(x, weight, weight_scale, None,
                               None if bias is None else bias.to(x.dtype))
        return out if out_dtype is None or out.dtype == out_dtype else out.to(out_dtype)
    if x.dtype != FP8:
        raise ValueError(
            f"sglang_fp8ext {who}: input_scale given with {x.dtype} input; block-FP8 layers take dynamic "
            f"activation scales (input_scale=None) or FP8 input with its [..., K/128] group scales"
        )
    ws, xs = _matching_scales(weight_scale, input_scale)
    out_dtype = out_dtype if out_dtype in (torch.bfloat16, torch.float16) else torch.bfloat16
    return fp8_block_linear(x, weight, ws, xs, None if bias is None else bias.to(out_dtype), out_dtype=out_dtype)


class Fp8ExtW8A8BlockFp8LinearOp:
    """The interface of vLLM's former ``W8A8BlockFp8LinearOp`` (``quantization/utils/fp8_utils.py``
    before the kernel classes replaced it), running :func:`sglang_fp8ext.fp8_block_linear`.

    ``weight_group_shape`` must be (128, 128) and ``act_quant_group_shape`` (1, 128) (vLLM's
    ``GroupShape`` or any pair). The two backend flags are accepted and ignored."""

    def __init__(
        self,
        weight_group_shape,
        act_quant_group_shape,
        cutlass_block_fp8_supported: bool = False,
        use_aiter_and_is_supported: bool = False,
    ):
        _check_block_shapes("W8A8BlockFp8LinearOp", weight_group_shape, act_quant_group_shape)
        self.weight_group_shape = weight_group_shape
        self.act_quant_group_shape = act_quant_group_shape

    def apply(
        self,
        input: torch.Tensor,
        weight: torch.Tensor,
        weight_scale: torch.Tensor,
        input_scale: Optional[torch.Tensor] = None,
        bias: Optional[torch.Tensor] = None,
    ) -> torch.Tensor:
        """input ``[..., K]`` bf16/fp16 (``input_scale=None``: vLLM's block quantization is dynamic),
        or float8_e4m3fn with ``input_scale`` ``[..., K/128]``; weight ``[N, K]`` float8_e4m3fn;
        weight_scale ``[ceil(N/128), K/128]`` float32 or float8_e8m0fnu. Returns ``[..., N]`` in
        input's dtype (bf16 for FP8 input)."""
        return _linear("W8A8BlockFp8LinearOp.apply", input, weight, weight_scale, input_scale, bias, None)


class Fp8ExtBlockScaledMMKernel:
    """vLLM 0.33's ``Fp8BlockScaledMMLinearKernel`` interface, running fp8_block_linear.

    ``config`` is vLLM's ``FP8ScaledMMLinearLayerConfig`` (read: ``weight_quant_key.scale.group_shape``,
    ``activation_quant_key.scale.{group_shape, static}``, ``out_dtype``). Use it inside vLLM through
    :func:`vllm_kernel_class` / :func:`install`; on its own it works on any object with those fields.
    The layer holds ``weight`` [N, K] float8_e4m3fn and ``weight_scale_inv`` (what ``Fp8LinearMethod``
    registers; ``weight_scale`` where compressed-tensors registers that) [ceil(N/128), K/128] float32
    or float8_e8m0fnu."""

    # bf16/fp16 activations go straight in; the 1x128 quant happens inside fp8_block_linear
    apply_input_quant = False

    def __init__(self, config) -> None:
        self.config = config
        problem = self.can_implement(config)[1]
        if problem is not None:
            raise ValueError(f"sglang_fp8ext Fp8ExtBlockScaledMMKernel: {problem}")
        self.weight_group_shape = config.weight_quant_key.scale.group_shape

    @classmethod
    def is_supported(cls, compute_capability: int | None = None) -> tuple[bool, str | None]:
        if fnuz_device():
            return False, "sglang_fp8ext serves OCP float8_e4m3fn only (gfx94x uses e4m3fnuz)."
        return True, None

    @classmethod
    def can_implement(cls, config) -> tuple[bool, str | None]:
        act = config.activation_quant_key.scale
        if getattr(act, "static", False):
            return False, "only dynamic per-1x128-group activation quantization is supported"
        problem = _block_shape_problem(config.weight_quant_key.scale.group_shape, act.group_shape)
        if problem is not None:
            return False, problem
        shape = getattr(config, "weight_shape", None)  # (N, K) of the layer's weight, this rank's
        if shape is not None:
            n, k = (int(v) for v in shape)
            if k % 128 or n % 16:
                # vLLM accepts such partitions (K at TP1, a merged layer's last part); its own
                # kernels serve them, where the op would raise at the first forward
                return False, f"weight [N, K] = [{n}, {k}]: needs K a multiple of 128 and N a multiple of 16"
        out_dtype = getattr(config, "out_dtype", None)
        if out_dtype not in (None, torch.bfloat16, torch.float16, torch.float32):
            return False, f"out_dtype {out_dtype} is not supported (bfloat16, float16 or float32)"
        return True, None

    @staticmethod
    def _scale_name(layer: torch.nn.Module) -> str:
        return "weight_scale_inv" if getattr(layer, "weight_scale_inv", None) is not None else "weight_scale"

    def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
        """Under ``SGLANG_DSV4_DENSE_MXSCALE`` keep an e8m0 copy of power-of-two fp32 block scales (in
        ``layer._sglang_fp8ext_scale_e8m0``). The weight keeps vLLM's name and its plain layout, also
        on ROCm: vLLM code outside the kernel reads ``layer.weight`` as row-major (MLA attention
        dequantizes ``kv_b_proj``'s weight itself), and an in-place AITER shuffle would hand it
        permuted bytes. Idempotent."""
        n, k = layer.weight.shape
        # derived from the scales as they are now: a weight reload replaces them in place
        setattr(layer, E8M0_ATTR, e8m0_scale_if_enabled(getattr(layer, self._scale_name(layer)), n, k, "vLLM layer"))

    def apply_weights(
        self,
        layer: torch.nn.Module,
        x: torch.Tensor,
        bias: torch.Tensor | None = None,
        **kwargs: Any,
    ) -> torch.Tensor:
        """``x [..., K]`` -> ``[..., N]`` in ``config.out_dtype`` (x's dtype if the config has none)."""
        scale = getattr(layer, E8M0_ATTR, None)
        if scale is None:
            scale = getattr(layer, self._scale_name(layer))
        return _linear("Fp8ExtBlockScaledMMKernel.apply_weights", x, layer.weight, scale,
                       None, bias, getattr(self.config, "out_dtype", None))

    def apply_block_scaled_mm(self, A: torch.Tensor, B: torch.Tensor, As: torch.Tensor, Bs: torch.Tensor) -> torch.Tensor:
        """Pre-quantized GEMM: ``A`` [M, K] float8_e4m3fn with 1x128 group scales ``As`` [M, K/128]
        (any strides), ``B`` [N, K] float8_e4m3fn with ``Bs`` [ceil(N/128), K/128]. Output in
        ``config.out_dtype`` if bf16/fp16, else bf16."""
        out_dtype = getattr(self.config, "out_dtype", None)
        out_dtype = out_dtype if out_dtype in (torch.bfloat16, torch.float16) else torch.bfloat16
        Bs, As = _matching_scales(Bs, As)
        return scaled_gemm(A, As, B, Bs, bool(getattr(B, "is_shuffled", False)), out_dtype, None)


def vllm_kernel_class():
    """Fp8ExtBlockScaledMMKernel as a subclass of vLLM's ``Fp8BlockScaledMMLinearKernel`` (what
    ``init_fp8_linear_kernel`` instantiates). Imports vLLM."""
    from vllm.model_executor.kernels.linear.scaled_mm.BlockScaledMMLinearKernel import (  # noqa: PLC0415
        Fp8BlockScaledMMLinearKernel,
    )

    global _VLLM_KERNEL_CLASS
    if _VLLM_KERNEL_CLASS is None:
        _VLLM_KERNEL_CLASS = type("SglFp8ExtBlockScaledMMKernel",
                                  (Fp8ExtBlockScaledMMKernel, Fp8BlockScaledMMLinearKernel),
                                  {"__module__": __name__})
    return _VLLM_KERNEL_CLASS


_VLLM_KERNEL_CLASS = None


def install() -> None:
    """Put the kernel first in vLLM's block-FP8 kernel list for the current platform, so that
    ``init_fp8_linear_kernel`` picks it for every 128x128 block-FP8 linear (other block shapes fail
    ``can_implement`` and fall through to vLLM's kernels). Call it in every process that builds the
    model, before the model is loaded (vLLM's workers are separate processes: use a
    ``sitecustomize.py``, docs/integration.md). ``VLLM_DISABLED_KERNELS=SglFp8ExtBlockScaledMMKernel``
    turns it off again. Idempotent."""
    import vllm.model_executor.kernels.linear as vllm_linear  # noqa: PLC0415
    from vllm.platforms import current_platform  # noqa: PLC0415

    kernel = vllm_kernel_class()
    kernels = vllm_linear._POSSIBLE_FP8_BLOCK_KERNELS.setdefault(current_platform._enum, [])
    if kernel not in kernels:
        kernels.insert(0, kernel)
