"""SGLang entry point: ``w8a8_block_fp8_linear`` with SGLang's own signature.

SGLang's ``Fp8LinearMethod`` (``sglang/srt/layers/quantization/fp8.py``) picks one callable per
method with ``dispatch_w8a8_block_fp8_linear`` (``fp8_utils.py``) and calls it from ``apply`` as

    self.w8a8_block_fp8_linear(input=x, weight=layer.weight, block_size=self.weight_block_size,
                               weight_scale=layer.weight_scale_inv, input_scale=None | x[1],
                               bias=bias, **extra_kwargs)

:func:`w8a8_block_fp8_linear` accepts exactly that call and runs :func:`sglang_fp8ext.fp8_block_linear`.
:func:`install` makes a running SGLang dispatch its 128x128 block-FP8 linears here. SGLang is
imported only inside :func:`install` (``tests/test_integration_engines.py`` checks the signature and
the call site against the pinned SGLang release's source).
"""

from __future__ import annotations

import functools
from typing import List, Optional

import torch

from ..layout import e8m0_to_scale
from ..linear import fp8_block_linear
from ..module import ENGINE_E8M0_ATTR, e8m0_scale_if_enabled, fnuz_device, shuffle_in_place_if_wanted


FP8 = torch.float8_e4m3fn
E8M0 = torch.float8_e8m0fnu
SUPPORTED_BLOCK_SIZE = [128, 128]
# prepare_layer's e8m0 copy of the block scales, on the weight. Not SGLang's `_mxscale_w_scale`:
# that attribute also switches SGLang's DeepSeek-V4 norm producers to e8m0 scales whose bytes are
# column-major under row-major strides (rmsnorm_fp8_e8m0_quant, 0.5.23), which its AITER GEMM reads
# raw and this package, reading by index, would misread.
E8M0_ATTR = ENGINE_E8M0_ATTR

__all__ = ["w8a8_block_fp8_linear", "dispatch", "install", "prepare_layer", "SUPPORTED_BLOCK_SIZE"]


def check_block_size(block_size, who: str = "w8a8_block_fp8_linear") -> None:
    """ValueError unless ``block_size`` is [128, 128] (a list, tuple or GroupShape-like pair)."""
    try:
        pair = [int(v) for v in block_size]
    except TypeError:
        pair = None
    if pair != SUPPORTED_BLOCK_SIZE:
        raise ValueError(
            f"sglang_fp8ext {who}: block_size {block_size!r} is not supported; only 128x128 weight "
            f"blocks ([128, 128], with 1x128 activation groups) are. Keep the engine's own kernel "
            f"for this layer."
        )


def _scales(weight: torch.Tensor, weight_scale: torch.Tensor, input_scale: Optional[torch.Tensor]):
    """(weight scale, input scale) in one format, as fp8_block_linear needs them.

    bf16/fp16 input: the e8m0 copy of ``prepare_layer`` (or SGLang's ``weight._mxscale_w_scale``)
    if the weight carries one, else ``weight_scale``. Pre-quantized input: e8m0 activation scales
    pair with the e8m0 copy (or an e8m0 ``weight_scale``); every other mix is brought to fp32,
    which is exact (e8m0 -> fp32 loses nothing)."""
    if weight_scale.dtype not in (torch.float32, E8M0):
        raise ValueError(
            f"sglang_fp8ext w8a8_block_fp8_linear: weight_scale must be float32 (weight_scale_inv as "
            f"loaded) or float8_e8m0fnu [ceil(N/128), K/128], got {weight_scale.dtype} "
            f"{tuple(weight_scale.shape)} (a DeepGEMM-packed int32 scale cannot be read: skip "
            f"SGLang's DeepGEMM scale requantization for layers served here)"
        )
    mx = getattr(weight, E8M0_ATTR, None)
    if mx is None:
        mx = getattr(weight, "_mxscale_w_scale", None)  # SGLang's own copy, where it made one
    if mx is not None and mx.dtype != E8M0:
        mx = None
    if input_scale is None:
        return (mx if mx is not None else weight_scale), None
    if input_scale.dtype not in (torch.float32, E8M0):
        raise ValueError(
            f"sglang_fp8ext w8a8_block_fp8_linear: input_scale must be float32 or float8_e8m0fnu "
            f"[..., K/128] per-1x128-group scales, got {input_scale.dtype} {tuple(input_scale.shape)} "
            f"(packed UE8M0 int32 scales from DeepGEMM's quant are not supported)"
        )
    if input_scale.dtype == E8M0:
        if mx is not None:
            return mx, input_scale
        if weight_scale.dtype == E8M0:
            return weight_scale, input_scale
        return weight_scale, e8m0_to_scale(input_scale)
    # fp32 activation scales
    if weight_scale.dtype == E8M0:
        return e8m0_to_scale(weight_scale), input_scale
    return weight_scale, input_scale


def w8a8_block_fp8_linear(
    input: torch.Tensor,
    weight: torch.Tensor,
    block_size: List[int],
    weight_scale: torch.Tensor,
    input_scale: Optional[torch.Tensor] = None,
    bias: Optional[torch.Tensor] = None,
    *,
    weight_bf16: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """SGLang's block-FP8 linear, computed by :func:`sglang_fp8ext.fp8_block_linear`.

    input: ``[..., K]`` bf16/fp16, or float8_e4m3fn already quantized in 1x128 groups with
    ``input_scale`` ``[..., K/128]`` (float32 or float8_e8m0fnu, any strides; SGLang's
    fused RMSNorm/activation + quant producers pass it as ``x[1]``). weight: ``[N, K]``
    float8_e4m3fn (``layer.weight``; AITER-shuffled if ``weight.is_shuffled``). block_size: must be
    ``[128, 128]``. weight_scale: ``[ceil(N/128), K/128]`` float32 (``layer.weight_scale_inv``) or
    float8_e8m0fnu. bias: ``[N]`` or None. weight_bf16: SGLang's optional bf16 copy of the weight
    (only made for 32x32 blocks); accepted and ignored.

    Returns ``[..., N]``: bf16 for pre-quantized input, else ``input.dtype`` (as SGLang's kernels).
    """
    del weight_bf16  # a cache of the same weight; the FP8 weight is what runs here
    check_block_size(block_size)
    ws, xs = _scales(weight, weight_scale, input_scale)
    out_dtype = torch.bfloat16 if input_scale is not None else input.dtype
    if bias is not None and bias.dtype != out_dtype:
        bias = bias.to(out_dtype)  # SGLang adds the bias into the output in place (output += bias)
    if input_scale is None:
        return fp8_block_linear(input, weight, ws, None, bias)
    if input.dtype != FP8:
        raise ValueError(
            f"sglang_fp8ext w8a8_block_fp8_linear: input_scale was given, so input must be "
            f"float8_e4m3fn (pre-quantized), got {input.dtype}"
        )
    return fp8_block_linear(input, weight, ws, xs, bias, out_dtype=out_dtype)


def dispatch(weight_block_size: Optional[List[int]] = None, act_scale_ue8m0: bool = False, *, fallback=None):
    """What SGLang's ``dispatch_w8a8_block_fp8_linear(weight_block_size, act_scale_ue8m0)`` should
    return: :func:`w8a8_block_fp8_linear` for ``[128, 128]`` blocks (not on gfx94x, whose e4m3fnuz
    weights the ops do not serve), else ``fallback(...)`` (SGLang's own dispatch; without one, a
    ValueError naming the block size, or on gfx94x saying so).

    With ``act_scale_ue8m0`` (a ue8m0 checkpoint) activations are still quantized with fp32 scales
    unless the layer carries an e8m0 weight scale (``prepare_layer`` under
    SGLANG_DSV4_DENSE_MXSCALE); both are SPEC §3 quantizations."""
    # gfx94x: SGLang converts the weights to e4m3fnuz there, which the ops do not serve (SPEC §1)
    served = not fnuz_device()
    if served and weight_block_size is not None and [int(v) for v in weight_block_size] == SUPPORTED_BLOCK_SIZE:
        return w8a8_block_fp8_linear
    if fallback is not None:
        return fallback(weight_block_size=weight_block_size, act_scale_ue8m0=act_scale_ue8m0)
    if not served:
        raise ValueError("sglang_fp8ext dispatch: gfx94x runs FP8 as e4m3fnuz, which sglang_fp8ext does not serve; "
                         "keep SGLang's kernels there")
    check_block_size(weight_block_size, who="dispatch")  # raises
    raise AssertionError("unreachable")


def prepare_layer(layer: torch.nn.Module) -> None:
    """Weight preparation for a layer served by :func:`w8a8_block_fp8_linear`, to run after SGLang's
    ``process_weights_after_loading``: on a ROCm GPU the weight is AITER-(16,16)-shuffled in place
    (``weight.is_shuffled = True``, ``layer.aiter_bpreshuffled = True``) unless already shuffled or
    the layer sets ``keep_plain_weight_layout``; if ``SGLANG_DSV4_DENSE_MXSCALE`` allows
    this (N, K) and every block scale is a power of two, ``layer.weight`` gets an e8m0 copy of
    ``layer.weight_scale_inv`` (in ``E8M0_ATTR``, not SGLang's ``_mxscale_w_scale``: see there).
    Idempotent."""
    weight = layer.weight
    n, k = weight.shape
    # SGLang's own bpreshuffle step honours keep_plain_weight_layout (a weight the model reads
    # itself, e.g. DeepSeek-V4's wo_a) and records a shuffle in layer.aiter_bpreshuffled, which its
    # weight gathers, context-parallel slicing and model asserts consult: do the same.
    if not getattr(layer, "keep_plain_weight_layout", False):
        shuffle_in_place_if_wanted(weight)
    if getattr(weight, "is_shuffled", False):
        layer.aiter_bpreshuffled = True
    # derived from the scales as they are now (a weight update replaces them in place)
    setattr(weight, E8M0_ATTR, e8m0_scale_if_enabled(layer.weight_scale_inv, n, k, "SGLang layer"))


def install() -> None:
    """Route a running SGLang's 128x128 block-FP8 linears here (other block sizes keep SGLang's
    kernels). Call it in every process that builds the model, before the model is loaded: SGLang
    starts its scheduler/TP workers as spawned processes, so put the call in a ``sitecustomize.py``
    on their PYTHONPATH (docs/integration.md). Idempotent.

    It replaces ``dispatch_w8a8_block_fp8_linear`` as ``Fp8LinearMethod.__init__`` sees it (the name
    imported into ``sglang.srt.layers.quantization.fp8``) and runs :func:`prepare_layer` after
    ``Fp8LinearMethod.process_weights_after_loading`` for the layers it serves."""
    import sglang.srt.layers.quantization.fp8 as sgl_fp8  # noqa: PLC0415  (only when installing)

    if getattr(sgl_fp8, "_sglang_fp8ext_installed", False):
        return
    original_dispatch = sgl_fp8.dispatch_w8a8_block_fp8_linear
    sgl_fp8.dispatch_w8a8_block_fp8_linear = functools.partial(dispatch, fallback=original_dispatch)

    method = sgl_fp8.Fp8LinearMethod
    original_process = method.process_weights_after_loading

    @functools.wraps(original_process)
    def process_weights_after_loading(self, layer):
        ours = getattr(self, "w8a8_block_fp8_linear", None) is w8a8_block_fp8_linear
        if ours and getattr(layer.weight, "is_shuffled", False):
            # SGLang runs this after every load, also after a weight update, which writes
            # checkpoint-layout bytes into the same Parameter: its markers describe old bytes
            layer.weight.is_shuffled = False
            layer.aiter_bpreshuffled = False
        result = original_process(self, layer)
        if ours:
            prepare_layer(layer)
        return result

    method.process_weights_after_loading = process_weights_after_loading
    sgl_fp8._sglang_fp8ext_installed = True
