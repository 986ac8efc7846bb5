"""transformers: run a loaded model's fine-grained FP8 linears through ``fp8_block_linear``.

transformers (5.17) represents a fine-grained FP8 checkpoint (Qwen3-FP8, DeepSeek-V3/V4, ...) with
``transformers.integrations.finegrained_fp8.FP8Linear`` modules: ``weight`` float8_e4m3fn [N, K],
``weight_scale_inv`` float32 or float8_e8m0fnu [ceil(N/128), ceil(K/128)], ``block_size``
(128, 128), ``activation_scheme`` "dynamic". Their forward calls DeepGEMM or a Triton kernel that
transformers downloads from a kernel hub at first use, so offline (or without those kernels) the
model does not run. Two entry points fix that:

``use_sglang_fp8ext(model) -> Fp8ExtReport``
    Every eligible ``FP8Linear`` (exactly that class, block 128x128, dynamic activations, FP8
    weight, K % 128 == 0, N % 16 == 0) becomes an :class:`Fp8ExtLinear` *in place*: its class is
    switched to a subclass of ``FP8Linear`` whose forward is one plain call of
    :func:`sglang_fp8ext.fp8_block_linear`. Parameters (``weight``, ``weight_scale_inv``, ``bias``),
    attributes and hooks stay where they are, so ``state_dict`` / ``save_pretrained`` /
    ``load_state_dict`` see the checkpoint names and layout, ``isinstance(m, FP8Linear)`` still
    holds for transformers' own code, and torch.compile traces straight into the custom op (no graph
    break). The weight is then prepared exactly as :class:`sglang_fp8ext.Fp8BlockLinear` prepares
    its own, by the same code (:class:`sglang_fp8ext.module.BlockFp8WeightPreparation`): AITER
    shuffle on ROCm, an e8m0 copy of power-of-two fp32 scales under ``SGLANG_DSV4_DENSE_MXSCALE``
    (/ ``_SHAPES``). Every other FP8 module is left as it is and listed in the report with the
    reason. A second call changes nothing and says so. Call it after the model is on its final
    device (the preparation is device-specific; ``model.to(device)`` afterwards stays correct,
    only the ROCm layout choice is not redone).

``load_fp8_model(path_or_id, **from_pretrained_kwargs)`` / ``keep_fp8_on_cpu()``
    On a machine without CUDA (or XPU) transformers silently dequantizes a pre-quantized FP8
    checkpoint to bf16 (``FineGrainedFP8HfQuantizer.validate_environment`` sets
    ``quantization_config.dequantize = True``), because its FP8 kernels are GPU-only. This package
    computes FP8 on the CPU too, so ``keep_fp8_on_cpu()`` suppresses exactly that fallback while
    it is active, and ``load_fp8_model`` loads with it, checks that the model really holds FP8
    weights (``RuntimeError`` if not: transformers' internals changed) and converts it.

Forward of a converted module: input [..., K] bf16/fp16 -> [..., N] in the input's dtype; the
e8m0 copy of the scales when preparation made one, else ``weight_scale_inv`` as loaded (fp32 or
e8m0); a bias in another dtype than the input is cast to it (transformers may keep biases fp32).
The FP8 weight, its scales and the bias are frozen (``requires_grad=False``): the op has no
backward, as transformers' FP8 path has none.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import types
from typing import Optional

import torch
from torch import nn

try:
    import transformers as _transformers
    from transformers.integrations import finegrained_fp8 as _hf_fp8
except ImportError as _err:  # pragma: no cover - depends on the environment
    raise ImportError(
        "sglang_fp8ext.integrations.transformers needs transformers with fine-grained FP8 support "
        f"(transformers.integrations.finegrained_fp8; written against 5.17): {_err}"
    ) from _err

from ..linear import fp8_block_linear
from ..module import BLOCK, E8M0, FP8, BlockFp8WeightPreparation

logger = logging.getLogger("sglang_fp8ext")

FP8Linear = _hf_fp8.FP8Linear

__all__ = ["Fp8ExtLinear", "Fp8ExtReport", "use_sglang_fp8ext", "keep_fp8_on_cpu", "load_fp8_model", "FP8Linear"]


class Fp8ExtLinear(BlockFp8WeightPreparation, FP8Linear):
    """transformers' ``FP8Linear`` computed by :func:`sglang_fp8ext.fp8_block_linear`.

    Made from a loaded ``FP8Linear`` by :func:`use_sglang_fp8ext` (its class is switched in
    place); constructing one directly takes ``FP8Linear``'s arguments and then needs weights and
    :meth:`process_weights_after_loading`. Same parameters as ``FP8Linear`` (``weight``,
    ``weight_scale_inv``, ``bias``) plus the non-persistent ``weight_scale_e8m0`` buffer.
    """

    def __init__(self, *args, **kwargs) -> None:
        FP8Linear.__init__(self, *args, **kwargs)
        self._init_weight_preparation()

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        w_scale = self.weight_scale_e8m0 if self.weight_scale_e8m0 is not None else self.weight_scale_inv
        bias = self.bias
        if bias is not None and bias.dtype != input.dtype:
            bias = bias.to(input.dtype)
        return fp8_block_linear(input, self.weight, w_scale, bias=bias, w_shuffled=self._shuffled)

    def _apply(self, fn, recurse=True):
        # model.to(dtype) / .half() cast every floating-point tensor, and torch counts float8 as
        # floating point: that would turn the FP8 weight into bf16 and round the fp32 scales. The
        # weight and its scales keep their formats (device moves still apply); the bias follows.
        keep = {id(t) for t in (self.weight, self.weight_scale_inv, self.weight_scale_e8m0) if t is not None}

        def keep_formats(t: torch.Tensor) -> torch.Tensor:
            out = fn(t)
            if id(t) in keep and isinstance(out, torch.Tensor) and out.dtype != t.dtype:
                out = t.to(device=out.device)
            return out

        return super()._apply(keep_formats, recurse)

    def extra_repr(self) -> str:
        scales = "e8m0 copy" if self.weight_scale_e8m0 is not None else str(self.weight_scale_inv.dtype).replace("torch.", "")
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, "
            f"block_size={tuple(self.block_size)}, scales={scales}, shuffled={self._shuffled}, via=sglang_fp8ext"
        )


@dataclasses.dataclass
class Fp8ExtReport:
    """What :func:`use_sglang_fp8ext` did. ``converted``: modules switched by this call;
    ``already_converted``: modules an earlier call switched (left as they are); ``skipped``:
    FP8 modules left on transformers' path, name -> reason."""

    converted: list = dataclasses.field(default_factory=list)
    already_converted: list = dataclasses.field(default_factory=list)
    skipped: dict = dataclasses.field(default_factory=dict)

    @property
    def changed(self) -> bool:
        return bool(self.converted)

    def summary(self) -> str:
        s = f"use_sglang_fp8ext: {len(self.converted)} FP8Linear converted"
        if self.already_converted:
            s += f", {len(self.already_converted)} already converted (unchanged)"
        if not self.converted and not self.already_converted and not self.skipped:
            s += " (the model has no FP8Linear: nothing to do)"
        return s + f", {len(self.skipped)} skipped"

    def __str__(self) -> str:
        lines = [self.summary()]
        lines += [f"  converted {name}" for name in self.converted]
        lines += [f"  skipped {name or '<root>'}: {reason}" for name, reason in self.skipped.items()]
        return "\n".join(lines)


def _skip_reason(module: nn.Module) -> Optional[str]:
    """None when ``module`` (an FP8Linear) can run through fp8_block_linear, else why not."""
    if type(module) is not FP8Linear:
        return f"{type(module).__name__} is a subclass of FP8Linear with its own forward: left on transformers' path"
    block = module.block_size
    if block is None:
        return "per-tensor weight scale (block_size None): fp8_block_linear needs 128x128 blocks"
    if tuple(block) != (BLOCK, BLOCK):
        return f"block_size {tuple(block)}: fp8_block_linear supports 128x128 blocks only"
    if module.activation_scheme != "dynamic":
        return (
            f"activation_scheme {module.activation_scheme!r} (a calibrated activation scale): fp8_block_linear "
            "quantizes activations dynamically per 1x128 group"
        )
    if "forward" in vars(module) and not hasattr(module, "_old_forward"):
        return "its forward was replaced on the instance (not by an accelerate hook): left alone"
    w, ws = module.weight, module.weight_scale_inv
    if w.device.type == "meta":
        return "the weight is on the meta device (not loaded, or offloaded)"
    if w.device.type not in ("cpu", "cuda"):
        # transformers also runs FP8 on XPU; the sgl_fp8 ops have CPU and CUDA/ROCm kernels only
        return f"the weight is on {w.device.type}: sglang_fp8ext runs on CPU and CUDA/ROCm GPUs"
    if w.dtype != FP8:
        return f"weight dtype {w.dtype} (not FP8, e.g. not quantized on load): FP8Linear runs F.linear for it"
    N, K = w.shape
    if K % BLOCK:
        return f"in_features K = {K} is not a multiple of {BLOCK}"
    if N % 16:
        return f"out_features N = {N} is not a multiple of 16"
    if ws.dtype not in (torch.float32, E8M0):
        return f"weight_scale_inv dtype {ws.dtype}: expected float32 or float8_e8m0fnu"
    expected = ((N + BLOCK - 1) // BLOCK, K // BLOCK)
    if tuple(ws.shape) != expected:
        return f"weight_scale_inv shape {tuple(ws.shape)}, expected {expected} for a [{N}, {K}] weight"
    if ws.device != w.device:
        return f"weight on {w.device} but weight_scale_inv on {ws.device}"
    if not w.is_contiguous() or not ws.is_contiguous():
        return "weight or weight_scale_inv is not contiguous"
    return None


def _convert(module: nn.Module) -> None:
    hooked_forward = hasattr(module, "_old_forward") and "forward" in vars(module)
    module.__class__ = Fp8ExtLinear
    module._init_weight_preparation()
    if hooked_forward:
        # accelerate's add_hook_to_module keeps the original bound forward in `_old_forward` and
        # calls it from the instance-level wrapper: rebind it to ours.
        module._old_forward = types.MethodType(Fp8ExtLinear.forward, module)
    for p in (module.weight, module.weight_scale_inv, module.bias):
        if p is not None:
            p.requires_grad_(False)
    module.process_weights_after_loading()


def use_sglang_fp8ext(model: nn.Module) -> Fp8ExtReport:
    """Make every eligible block-128 ``FP8Linear`` of ``model`` run through
    :func:`sglang_fp8ext.fp8_block_linear`, in place (see the module docstring). Returns an
    :class:`Fp8ExtReport` and logs its one-line summary at INFO. Idempotent. Needs no network and
    no hub kernel. A model without FP8Linear modules is returned untouched (empty report)."""
    report = Fp8ExtReport()
    for name, mod in model.named_modules():
        if isinstance(mod, Fp8ExtLinear):
            report.already_converted.append(name)
        elif isinstance(mod, FP8Linear):
            reason = _skip_reason(mod)
            if reason is None:
                _convert(mod)
                report.converted.append(name)
            else:
                report.skipped[name] = reason
        elif isinstance(mod, _hf_fp8.FP8Experts):
            report.skipped[name] = "FP8Experts (MoE experts): not handled by this package, left on transformers' path"
    detail = "; ".join(f"{n or '<root>'}: {r}" for n, r in report.skipped.items())
    logger.info("%s%s", report.summary(), f" ({detail})" if detail else "")
    return report


# ---- loading a pre-quantized checkpoint as FP8 where transformers would dequantize it --------------


def _fp8_quantizer_class():
    """transformers' fine-grained FP8 quantizer class, after checking that from_pretrained uses it
    and that it still has the hook this module wraps (RuntimeError otherwise)."""
    try:
        from transformers.quantizers.auto import AUTO_QUANTIZER_MAPPING  # noqa: PLC0415
        from transformers.quantizers.quantizer_finegrained_fp8 import FineGrainedFP8HfQuantizer  # noqa: PLC0415
        from transformers.utils.quantization_config import FineGrainedFP8Config  # noqa: PLC0415
    except ImportError as err:
        raise RuntimeError(f"keep_fp8_on_cpu: transformers' FP8 quantizer moved ({err}); this package needs an update") from err
    if AUTO_QUANTIZER_MAPPING.get("fp8") is not FineGrainedFP8HfQuantizer:
        raise RuntimeError(
            "keep_fp8_on_cpu: transformers no longer maps quant_method 'fp8' to FineGrainedFP8HfQuantizer "
            f"(it maps to {AUTO_QUANTIZER_MAPPING.get('fp8')!r}); this package needs an update"
        )
    if "validate_environment" not in vars(FineGrainedFP8HfQuantizer):
        raise RuntimeError("keep_fp8_on_cpu: FineGrainedFP8HfQuantizer.validate_environment is gone; this package needs an update")
    if not hasattr(FineGrainedFP8Config(), "dequantize"):
        raise RuntimeError("keep_fp8_on_cpu: FineGrainedFP8Config has no `dequantize` field any more; this package needs an update")
    return FineGrainedFP8HfQuantizer


def _no_gpu_for_transformers() -> bool:
    from transformers.utils import is_torch_xpu_available  # noqa: PLC0415

    return not torch.cuda.is_available() and not is_torch_xpu_available()


@dataclasses.dataclass
class _FP8LoadRecord:
    """What keep_fp8_on_cpu saw: the fine-grained FP8 quantizers transformers validated while it
    was active, and whether this module kept one from dequantizing."""

    quantizers: list = dataclasses.field(default_factory=list)
    kept_fp8: bool = False


@contextlib.contextmanager
def keep_fp8_on_cpu():
    """While active, transformers loads a pre-quantized fine-grained FP8 checkpoint as FP8
    (``FP8Linear`` modules) on a machine without CUDA/XPU instead of dequantizing it to bf16.

    Exactly one decision changes: in ``FineGrainedFP8HfQuantizer.validate_environment``, the case
    "pre-quantized checkpoint, ``dequantize`` not requested, no CUDA and no XPU" no longer sets
    ``quantization_config.dequantize = True`` (it still requires accelerate, as the original
    does). Every other case (a GPU present, quantize-on-load, an explicit ``dequantize=True``)
    runs transformers' own check unchanged. Entering raises ``RuntimeError`` if transformers'
    quantizer is not laid out as in 5.17. Not thread-safe: it patches the class for the duration.
    Yields a record: ``record.quantizers`` (the FP8 quantizers transformers validated) and
    ``record.kept_fp8`` (whether the dequantize fallback was suppressed).

    Why it is safe: the FP8Linear modules it keeps are either converted by
    :func:`use_sglang_fp8ext` (then this package computes them, on CPU as on GPU) or, left
    unconverted, fail loudly at their first forward (transformers' FP8 kernels need CUDA), never
    silently produce numbers. :func:`load_fp8_model` converts and verifies.
    """
    quantizer = _fp8_quantizer_class()
    original = vars(quantizer)["validate_environment"]
    record = _FP8LoadRecord()

    def validate_environment(self, *args, **kwargs):
        record.quantizers.append(self)
        if self.pre_quantized and not self.quantization_config.dequantize and _no_gpu_for_transformers():
            from transformers.utils import is_accelerate_available  # noqa: PLC0415

            if not is_accelerate_available():
                raise ImportError("Loading an FP8 quantized model requires accelerate (`pip install accelerate`)")
            logger.info("sglang_fp8ext: keeping the FP8 checkpoint FP8 on a machine without CUDA (no dequantization)")
            record.kept_fp8 = True
            return None
        return original(self, *args, **kwargs)

    quantizer.validate_environment = validate_environment
    try:
        yield record
    finally:
        quantizer.validate_environment = original


def _check_loaded_as_fp8(model: nn.Module, record: _FP8LoadRecord) -> None:
    if not record.quantizers:
        raise ValueError(
            "load_fp8_model: the checkpoint is not a fine-grained FP8 checkpoint (transformers did not use its FP8 "
            "quantizer: no quantization_config with quant_method 'fp8'); load it with from_pretrained"
        )
    if any(q.quantization_config.dequantize for q in record.quantizers) or not any(
        isinstance(m, FP8Linear) and m.weight.dtype == FP8 for m in model.modules()
    ):
        raise RuntimeError(
            "load_fp8_model: transformers dequantized the FP8 checkpoint (no FP8Linear holds an FP8 weight, or "
            "quantization_config.dequantize is set). transformers does so on GPUs below compute capability 8.9, "
            "which have no FP8 (sglang_fp8ext's kernels are sm_90 and gfx950: use the bf16 model there); elsewhere, "
            "if dequantize=True was not asked for, transformers' loading internals changed since 5.17 and "
            "sglang_fp8ext needs an update"
        )


def load_fp8_model(path_or_id, *, model_class=None, convert: bool = True, **from_pretrained_kwargs) -> nn.Module:
    """``model_class.from_pretrained(path_or_id, **from_pretrained_kwargs)`` (default
    ``AutoModelForCausalLM``) for a pre-quantized fine-grained FP8 checkpoint, kept FP8 on every
    device (inside :func:`keep_fp8_on_cpu`), checked to really hold FP8Linear modules with FP8
    weights (``ValueError`` for a checkpoint that is not FP8, ``RuntimeError`` if transformers
    dequantized it anyway), and with ``convert`` (the default) passed through
    :func:`use_sglang_fp8ext` (call it again to get its report: it says what is converted).
    Offline use: pass a local directory (and ``local_files_only=True`` to be sure)."""
    if model_class is None:
        model_class = _transformers.AutoModelForCausalLM
    with keep_fp8_on_cpu() as record:
        model = model_class.from_pretrained(path_or_id, **from_pretrained_kwargs)
    _check_loaded_as_fp8(model, record)
    if convert:
        use_sglang_fp8ext(model)
    return model
