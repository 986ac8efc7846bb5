"""``Fp8BlockLinear``: an ``nn.Module`` for FP8 block-scale checkpoints, and ``quantize_model_``.

The module holds its tensors under the names FP8 checkpoints use (Qwen3-FP8, DeepSeek-V3/V4):

  ``weight``            float8_e4m3fn [N, K]                    (Parameter, requires_grad=False)
  ``weight_scale_inv``  float32 [ceil(N/128), K/128]            (Parameter, requires_grad=False;
                        float8_e8m0fnu after loading a ue8m0 checkpoint; bf16/fp16 checkpoint
                        scales load as float32, exactly)
  ``bias``              [N] in the activation dtype, optional   (Parameter, requires_grad=False)

so ``load_state_dict`` of such a checkpoint works as is. After loading (and after moving the
module to its final device) call :meth:`Fp8BlockLinear.process_weights_after_loading`, which
prepares the weight for that device (AITER shuffle on ROCm, an e8m0 copy of power-of-two scales
when ``SGLANG_DSV4_DENSE_MXSCALE`` allows it). ``forward`` calls :func:`fp8_block_linear`.

``quantize_model_`` turns an existing bf16/fp16 model into one with FP8 projections, in place:
every eligible ``nn.Linear`` is block-quantized (:meth:`Fp8BlockLinear.from_float`) and swapped.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Callable, Optional, Union

import torch
from torch import nn

from . import switches
from .layout import scale_to_e8m0, shuffle_weight, unshuffle_weight
from .linear import fp8_block_linear

logger = logging.getLogger("sglang_fp8ext")

FP8 = torch.float8_e4m3fn
E8M0 = torch.float8_e8m0fnu
FP8_MAX = 448.0
BLOCK = 128
ACTIVATION_DTYPES = (torch.bfloat16, torch.float16)
_FP8_NAN_CODE = 0x7F  # e4m3fn NaN (S.1111.111)
_E8M0_NAN_CODE = 0xFF
# checkpoint scale dtypes that load into a float32 weight_scale_inv exactly (Qwen3 FP8 checkpoints
# store bf16, some fp16)
_SCALE_DTYPES_EXACT_IN_FP32 = (torch.float32, torch.bfloat16, torch.float16)


def nan_filled(shape, dtype: torch.dtype, device) -> torch.Tensor:
    """A tensor of NaN in ``dtype`` (float8 formats by their NaN code): what a module holds before
    a checkpoint is loaded into it, so that using it early gives NaN, not plausible numbers."""
    codes = {FP8: _FP8_NAN_CODE, E8M0: _E8M0_NAN_CODE}
    if dtype in codes:
        return torch.full(shape, codes[dtype], dtype=torch.uint8, device=device).view(dtype)
    return torch.full(shape, float("nan"), dtype=dtype, device=device)


def _check_features(in_features: int, out_features: int) -> None:
    if in_features <= 0 or in_features % BLOCK:
        raise ValueError(
            f"Fp8BlockLinear: in_features (K) must be a positive multiple of {BLOCK}, got K = {in_features} "
            f"(out_features N = {out_features})"
        )
    if out_features <= 0 or out_features % 16:
        raise ValueError(
            f"Fp8BlockLinear: out_features (N) must be a positive multiple of 16, got N = {out_features} "
            f"(in_features K = {in_features})"
        )


def _round_up_to_power_of_two(scale: torch.Tensor) -> torch.Tensor:
    """Smallest positive normal power of two >= each (positive, finite) fp32 entry, done on the
    bit pattern so that it is exact: a non-zero mantissa bumps the exponent. Subnormal scales go to
    2^-126, the smallest power of two e8m0 conversion accepts (SPEC §4 wants exponents 1..254)."""
    bits = scale.view(torch.int32)
    exponent = (bits >> 23) & 0xFF
    exponent = exponent + ((bits & 0x7FFFFF) != 0).to(torch.int32)
    exponent = exponent.clamp_min(1)
    return (exponent << 23).view(torch.float32)


def quantize_weight_blocks(weight: torch.Tensor, power_of_two_scales: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Block-quantize a bf16/fp16/fp32 weight [N, K] (K % 128 == 0) into (q, scale).

    Per 128x128 block (the last block row holds N % 128 rows when N is not a multiple of 128):
    ``scale = fl32(amax|block| / 448)`` (an IEEE fp32 division), ``q = e4m3fn_rne(clamp(fl32(w /
    scale), -448, 448))`` (round to nearest even, saturating). The block's largest element maps to
    +-448 (the clamp absorbs the one-ulp overshoot ``amax / fl32(amax/448)`` can have).

    * An all-zero block gets scale 1.0 (any positive scale dequantizes its zeros exactly; 1.0 is
      also a power of two, so it never blocks the e8m0 path).
    * ``power_of_two_scales``: each scale is rounded UP to a power of two (DeepSeek-V4/ue8m0
      style), so ``|w / scale| <= 448`` still holds and the scales convert to e8m0 exactly.
    * A scale that underflows to 0 (fp32 weights below ~6e-43) is raised to the smallest fp32
      subnormal so no block divides by zero.

    Returns ``q`` float8_e4m3fn [N, K] and ``scale`` float32 [ceil(N/128), K/128], on weight's
    device. Non-finite weights raise ValueError: FP8 block scaling cannot represent them.
    """
    if weight.dim() != 2:
        raise ValueError(f"quantize_weight_blocks: expected a 2-D weight [N, K], got shape {tuple(weight.shape)}")
    if weight.dtype not in (torch.bfloat16, torch.float16, torch.float32):
        raise ValueError(f"quantize_weight_blocks: expected a bf16/fp16/fp32 weight, got {weight.dtype}")
    N, K = weight.shape
    if K % BLOCK:
        raise ValueError(f"quantize_weight_blocks: K must be a multiple of {BLOCK}, got K = {K}")
    w = weight.detach().to(torch.float32)  # exact for bf16/fp16
    if not bool(torch.isfinite(w).all()):
        bad = int((~torch.isfinite(w)).sum())
        raise ValueError(f"quantize_weight_blocks: the weight [{N}, {K}] holds {bad} non-finite values")
    NB, KB = (N + BLOCK - 1) // BLOCK, K // BLOCK
    if NB * BLOCK != N:
        # zero rows do not change a block's amax; they are cut off again below
        w = torch.cat([w, w.new_zeros(NB * BLOCK - N, K)])
    blocks = w.view(NB, BLOCK, KB, BLOCK)
    amax = blocks.abs().amax(dim=(1, 3))  # [NB, KB]
    # Divide by a full tensor, not by the Python scalar 448: torch may turn a division by a scalar
    # into a multiplication by its reciprocal, which is not fl32(amax / 448).
    scale = amax / torch.full_like(amax, FP8_MAX)
    scale = scale.clamp_min(torch.finfo(torch.float32).smallest_normal * 2.0**-23)
    scale = torch.where(amax == 0, torch.ones_like(scale), scale)
    if power_of_two_scales:
        scale = _round_up_to_power_of_two(scale)
    scaled = blocks / scale[:, None, :, None]
    # clamp first: saturation must not depend on how the fp8 cast treats out-of-range values
    q = scaled.clamp(-FP8_MAX, FP8_MAX).to(FP8).view(NB * BLOCK, K)[:N].contiguous()
    return q, scale.contiguous()


def fnuz_device() -> bool:
    """Whether the GPU is gfx94x (MI300), whose FP8 is e4m3fnuz: engines convert their weights to
    it there, and the ops serve OCP float8_e4m3fn only (SPEC §1), so engine adapters stand aside."""
    if not (getattr(torch.version, "hip", None) and torch.cuda.is_available()):
        return False
    return "gfx94" in getattr(torch.cuda.get_device_properties(0), "gcnArchName", "")


def wants_shuffled_weight(weight: torch.Tensor) -> bool:
    """Whether a weight on this device is best kept in AITER's (16,16) preshuffle layout: on a ROCm
    GPU, where the kernels (ours and AITER's) read it fastest; the sm_90 kernels and the CPU read
    the plain layout."""
    return bool(getattr(torch.version, "hip", None)) and weight.device.type == "cuda"


def shuffle_in_place_if_wanted(weight: torch.Tensor) -> None:
    """AITER-shuffle an engine's weight Parameter in place where ``wants_shuffled_weight`` says so
    and it is not shuffled yet (``weight.is_shuffled`` marks it, as AITER does)."""
    if wants_shuffled_weight(weight) and not getattr(weight, "is_shuffled", False):
        with torch.no_grad():
            weight.copy_(shuffle_weight(weight.data))
        weight.is_shuffled = True


# Where the engine adapters keep the e8m0 copy of a layer's block scales (never a checkpoint name)
ENGINE_E8M0_ATTR = "_sglang_fp8ext_scale_e8m0"


def e8m0_scale_if_enabled(weight_scale: torch.Tensor, n: int, k: int, who: str) -> Optional[torch.Tensor]:
    """The e8m0 copy of fp32 block scales that weight preparation keeps where
    ``SGLANG_DSV4_DENSE_MXSCALE`` allows it for (N, K) and every scale is an exact power of two;
    None otherwise (scales that are not powers of two are logged at INFO with the reason)."""
    if weight_scale.dtype != torch.float32 or weight_scale.is_meta or not switches.mxscale_enabled_for(n, k):
        return None  # (a meta tensor has no values to convert)
    try:
        return scale_to_e8m0(weight_scale.detach())
    except ValueError as err:
        logger.info("%s N=%d K=%d: SGLANG_DSV4_DENSE_MXSCALE is on but the block scales stay fp32: %s",
                    who, n, k, err)
        return None


class BlockFp8WeightPreparation:
    """Device preparation of an FP8 block-scale weight, shared by every module that holds one
    under the checkpoint names ``weight`` (float8_e4m3fn [N, K]) and ``weight_scale_inv``
    ([ceil(N/128), K/128], float32 or float8_e8m0fnu) and has ``out_features``/``in_features``:
    :class:`Fp8BlockLinear` and the transformers integration
    (``sglang_fp8ext.integrations.transformers``). This is the one implementation of it.

    A user calls :meth:`_init_weight_preparation` once (from ``__init__``, or after re-classing an
    existing module): it registers the non-persistent ``weight_scale_e8m0`` buffer and the
    state-dict hooks that keep checkpoints in the plain layout.
    """

    def _init_weight_preparation(self) -> None:
        self.register_buffer("weight_scale_e8m0", None, persistent=False)
        self._shuffled = False
        self._processed = False
        # load_state_dict into a prepared module first undoes the preparation (see _unprocess);
        # state_dict always exports the plain checkpoint layout.
        self.register_load_state_dict_pre_hook(BlockFp8WeightPreparation._before_load_state_dict)
        self.register_state_dict_post_hook(BlockFp8WeightPreparation._after_state_dict)

    @property
    def is_shuffled(self) -> bool:
        """Whether ``weight`` is in AITER's (16,16) preshuffle layout (ROCm, after processing)."""
        return self._shuffled

    def _should_shuffle(self) -> bool:
        return wants_shuffled_weight(self.weight)

    def process_weights_after_loading(self) -> None:
        """Prepare the loaded weight for the device it is on. Idempotent: a second call is a no-op
        (re-loading a state dict resets it, so the next call prepares the new weight).

        * ROCm GPU: the weight is AITER-shuffled in place of the plain one (``weight.is_shuffled``).
        * ``SGLANG_DSV4_DENSE_MXSCALE`` enabled for this (N, K) and every fp32 block scale an exact
          power of two: an e8m0 copy ``weight_scale_e8m0`` is stored and used by bf16/fp16
          forwards; the fp32 ``weight_scale_inv`` is kept for inputs that arrive with fp32
          scales. Scales that are not powers of two stay fp32 (logged at INFO with the reason).
          A ``weight_scale_inv`` that already is e8m0 (a ue8m0 checkpoint) is used as it is.
        * Otherwise (CPU, CUDA) nothing changes: those kernels read the plain weight.

        Call it after moving the module to its final device: the preparation is device-specific.
        """
        if self._processed:
            return
        if self._should_shuffle() and not self._shuffled:
            with torch.no_grad():
                self.weight.data = shuffle_weight(self.weight.data)
            self.weight.is_shuffled = True
            self._shuffled = True
        e8m0 = e8m0_scale_if_enabled(self.weight_scale_inv, self.out_features, self.in_features, type(self).__name__)
        if e8m0 is not None:
            self.weight_scale_e8m0 = e8m0
        self._processed = True

    def _unprocess(self) -> None:
        """Back to the checkpoint state: plain weight layout, no e8m0 copy, not processed."""
        if self._shuffled:
            with torch.no_grad():
                self.weight.data = unshuffle_weight(self.weight.data)
            self.weight.is_shuffled = False
            self._shuffled = False
        self.weight_scale_e8m0 = None
        self._processed = False

    def _adopt_checkpoint_formats(self, state_dict, prefix: str) -> None:
        """Before a checkpoint is copied in: refuse what ``copy_`` would convert silently (a weight
        that is not e4m3, e.g. its uint8 bytes or a bf16 weight: converted by value), and give
        ``weight_scale_inv`` the checkpoint's scale format, e8m0 or float32, since ``copy_`` would
        otherwise turn a ue8m0 checkpoint's scales into fp32 ones and its bf16/fp16 inputs would be
        quantized with fp32 scales instead of SPEC §3.2's power-of-two ones."""
        who = type(self).__name__
        weight = state_dict.get(prefix + "weight")
        if isinstance(weight, torch.Tensor) and weight.dtype != FP8:
            raise ValueError(
                f"{who}: checkpoint tensor {prefix}weight has dtype {weight.dtype}, expected float8_e4m3fn (raw "
                "bytes: .view(torch.float8_e4m3fn); a bf16 weight: Fp8BlockLinear.from_float or quantize_weight_blocks)"
            )
        scale = state_dict.get(prefix + "weight_scale_inv")
        if not isinstance(scale, torch.Tensor):
            return
        if scale.dtype == E8M0:
            wanted = E8M0
        elif scale.dtype in _SCALE_DTYPES_EXACT_IN_FP32:
            wanted = torch.float32
        else:
            raise ValueError(
                f"{who}: checkpoint tensor {prefix}weight_scale_inv has dtype {scale.dtype}, expected float32 "
                "(bfloat16/float16 load as float32) or float8_e8m0fnu"
            )
        current = self.weight_scale_inv
        if current.dtype != wanted:
            self.weight_scale_inv = nn.Parameter(nan_filled(current.shape, wanted, current.device), requires_grad=False)

    @staticmethod
    def _before_load_state_dict(module, state_dict, prefix, *args) -> None:
        # The checkpoint holds a plain weight: loading it into a shuffled module (or one with a
        # stale e8m0 copy) would mix layouts. Start from the checkpoint state.
        module._unprocess()
        module._adopt_checkpoint_formats(state_dict, prefix)

    @staticmethod
    def _after_state_dict(module, state_dict, prefix, local_metadata) -> None:
        # Export what a checkpoint holds: the plain layout, whatever the device preparation did.
        key = prefix + "weight"
        if module._shuffled and key in state_dict:
            state_dict[key] = unshuffle_weight(state_dict[key])


class Fp8BlockLinear(BlockFp8WeightPreparation, nn.Module):
    """``y = x @ dequant(weight).T + bias`` with an FP8 weight carrying one fp32 scale per 128x128
    block, computed by :func:`sglang_fp8ext.fp8_block_linear`.

    Args:
        in_features: K, a multiple of 128.
        out_features: N, a multiple of 16 (the last 128-row block may be partial).
        bias: whether the module has a ``bias`` [N].
        device: where the tensors are allocated (``"meta"`` works too).
        dtype: the activation and output dtype, bfloat16 or float16 (the weight is always FP8).

    Attributes (checkpoint names): ``weight`` float8_e4m3fn [N, K], ``weight_scale_inv`` float32
    [ceil(N/128), K/128] (float8_e8m0fnu once a ue8m0 checkpoint is loaded: its bf16/fp16 inputs then
    get power-of-two scales), ``bias`` [N] in ``dtype`` or None; after
    :meth:`process_weights_after_loading` possibly also ``weight_scale_e8m0`` (float8_e8m0fnu, a
    non-persistent buffer: it is never part of ``state_dict``).

    ``__init__`` fills every tensor with NaN (the e4m3 NaN code 0x7F for the weight), so that a
    module used before a checkpoint was loaded into it produces NaN everywhere instead of
    plausible-looking numbers from uninitialised memory (which may happen to be zeros).
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = False,
        *,
        device: Optional[Union[torch.device, str]] = None,
        dtype: torch.dtype = torch.bfloat16,
    ) -> None:
        super().__init__()
        _check_features(in_features, out_features)
        if dtype not in ACTIVATION_DTYPES:
            raise ValueError(f"Fp8BlockLinear: dtype (activations/output) must be bfloat16 or float16, got {dtype}")
        self.in_features = in_features
        self.out_features = out_features
        self.dtype = dtype
        nb, kb = (out_features + BLOCK - 1) // BLOCK, in_features // BLOCK
        self.weight = nn.Parameter(nan_filled((out_features, in_features), FP8, device), requires_grad=False)
        self.weight_scale_inv = nn.Parameter(nan_filled((nb, kb), torch.float32, device), requires_grad=False)
        if bias:
            self.bias = nn.Parameter(nan_filled((out_features,), dtype, device), requires_grad=False)
        else:
            self.register_parameter("bias", None)
        self._init_weight_preparation()  # weight_scale_e8m0 buffer, layout flags, state-dict hooks

    # ---- construction from a float linear ------------------------------------------------------

    @classmethod
    def from_float(
        cls, linear: nn.Linear, *, power_of_two_scales: bool = False, dtype: Optional[torch.dtype] = None
    ) -> "Fp8BlockLinear":
        """Block-quantize ``linear`` (bf16/fp16/fp32 weight) into a new Fp8BlockLinear on the same
        device; see :func:`quantize_weight_blocks` for the exact formula (all-zero blocks get scale
        1.0; ``power_of_two_scales`` rounds every scale up to a power of two, enabling the e8m0
        path). The bias is kept (cast to the activation dtype). ``dtype`` (activations/output)
        defaults to the linear's dtype, or bfloat16 for an fp32 linear, since the FP8 kernels take
        bf16/fp16 activations only. The result is not yet processed: call
        :meth:`process_weights_after_loading` (``quantize_model_`` does).
        """
        w = linear.weight
        if dtype is None:
            dtype = w.dtype if w.dtype in ACTIVATION_DTYPES else torch.bfloat16
        N, K = w.shape
        _check_features(K, N)
        q, scale = quantize_weight_blocks(w, power_of_two_scales)
        has_bias = linear.bias is not None
        module = cls(K, N, bias=has_bias, device=w.device, dtype=dtype)
        with torch.no_grad():
            module.weight.copy_(q)
            module.weight_scale_inv.copy_(scale)
            if has_bias:
                module.bias.copy_(linear.bias.detach().to(dtype))
        module.train(linear.training)
        return module

    # ---- preparation for the device: BlockFp8WeightPreparation (process_weights_after_loading) ----

    def _apply(self, fn, recurse=True):
        # Module.to(dtype) / .half() / .bfloat16() cast every floating-point tensor, and torch counts
        # float8 as floating point: that would turn the FP8 weight and its fp32 scales into bf16
        # (the scales lossily). Keep their formats; device moves still apply. The activation dtype
        # (and the bias) follow the conversion, as they would for an nn.Linear.
        keep = (FP8, E8M0, torch.float32)
        probe = fn(torch.empty(0, dtype=self.dtype, device=self.weight.device))
        if isinstance(probe, torch.Tensor) and probe.dtype != self.dtype:
            if probe.dtype in ACTIVATION_DTYPES:
                self.dtype = probe.dtype
            else:  # e.g. .float(): the kernels take bf16/fp16 only, so the bias keeps its dtype too
                keep = keep + (self.dtype,)

        def keep_formats(t: torch.Tensor) -> torch.Tensor:
            out = fn(t)
            if isinstance(out, torch.Tensor) and out.dtype != t.dtype and t.dtype in keep:
                out = t.to(device=out.device)
            return out

        return super()._apply(keep_formats, recurse)

    # ---- forward -------------------------------------------------------------------------------

    def forward(self, x: Union[torch.Tensor, tuple]) -> torch.Tensor:
        """``x``: [..., K] in the module's dtype, or a tuple ``(q, input_scale)`` as returned by
        :func:`sglang_fp8ext.rmsnorm_quant` (q float8_e4m3fn [..., K], input_scale [..., K/128]
        float32 or float8_e8m0fnu). Returns [..., N] in the module's dtype.

        bf16/fp16 input uses the e8m0 scale copy when there is one (activations then get
        power-of-two scales, SPEC §3.2). Pre-quantized input is multiplied with the weight scale of
        the same format as ``input_scale``.
        """
        if isinstance(x, (tuple, list)):
            if len(x) != 2:
                raise ValueError(f"Fp8BlockLinear: expected (q, input_scale), got a sequence of {len(x)} items")
            q, input_scale = x
            if not isinstance(input_scale, torch.Tensor):
                raise ValueError(
                    f"Fp8BlockLinear: expected (q, input_scale) with input_scale a tensor [..., K/128], got "
                    f"{type(input_scale).__name__}"
                )
            if input_scale.dtype == E8M0:
                w_scale = self.weight_scale_e8m0 if self.weight_scale_e8m0 is not None else self.weight_scale_inv
                if w_scale.dtype != E8M0:
                    raise ValueError(
                        "Fp8BlockLinear: the input has e8m0 scales but this module holds no e8m0 weight scales "
                        "(a ue8m0 checkpoint's, or a copy made by process_weights_after_loading() with "
                        "SGLANG_DSV4_DENSE_MXSCALE=1 and power-of-two weight scales); quantize the input with "
                        "ue8m0=False"
                    )
            else:
                w_scale = self.weight_scale_inv
                if w_scale.dtype == E8M0:
                    raise ValueError(
                        "Fp8BlockLinear: the input has float32 scales but this module holds e8m0 weight scales "
                        "(a ue8m0 checkpoint); quantize the input with ue8m0=True"
                    )
            return fp8_block_linear(
                q, self.weight, w_scale, input_scale, self.bias, w_shuffled=self._shuffled, out_dtype=self.dtype
            )
        if x.dtype != self.dtype:
            raise ValueError(f"Fp8BlockLinear: expected input of dtype {self.dtype} (the module's dtype), got {x.dtype}")
        w_scale = self.weight_scale_e8m0 if self.weight_scale_e8m0 is not None else self.weight_scale_inv
        return fp8_block_linear(x, self.weight, w_scale, bias=self.bias, w_shuffled=self._shuffled)

    def extra_repr(self) -> str:
        if self.weight_scale_inv.dtype == E8M0:
            scales = "e8m0"
        else:
            scales = "e8m0 (+fp32)" if self.weight_scale_e8m0 is not None else "fp32"
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, "
            f"dtype={self.dtype}, scales={scales}, shuffled={self._shuffled}"
        )


# ---- quantize_model_ ---------------------------------------------------------------------------


@dataclasses.dataclass
class QuantizeReport:
    """What :func:`quantize_model_` did: ``swapped`` module names, ``skipped`` name -> reason."""

    swapped: list = dataclasses.field(default_factory=list)
    skipped: dict = dataclasses.field(default_factory=dict)

    def summary(self) -> str:
        return f"quantize_model_: {len(self.swapped)} nn.Linear swapped for Fp8BlockLinear, {len(self.skipped)} skipped"

    def __str__(self) -> str:
        lines = [self.summary()]
        lines += [f"  swapped {name}" for name in self.swapped]
        lines += [f"  skipped {name or '<root>'}: {reason}" for name, reason in self.skipped.items()]
        return "\n".join(lines)


def _skip_reason(name: str, linear: nn.Linear, holders: dict, skip: Callable[[str], bool]) -> Optional[str]:
    if skip(name):
        return "excluded by the skip predicate"
    if not name:
        return "the root module itself cannot be replaced in place"
    if type(linear) is not nn.Linear:
        # a subclass may change forward or be read directly by its parent (e.g. MultiheadAttention)
        return f"{type(linear).__name__} is a subclass of nn.Linear, not swapped"
    w = linear.weight
    if w.device.type == "meta":
        return "the weight is on the meta device (not loaded)"
    if w.dtype not in ACTIVATION_DTYPES:
        return f"weight dtype {w.dtype}: the FP8 kernels take bf16/fp16 activations"
    N, K = w.shape
    if K % BLOCK:
        return f"in_features K = {K} is not a multiple of {BLOCK}"
    if N % 16:
        return f"out_features N = {N} is not a multiple of 16"
    held_by = holders.get(id(w), [])
    if len({id(m) for _, m in held_by}) > 1:
        others = ", ".join(sorted({n for n, m in held_by if m is not linear})) or "another module"
        return f"weight Parameter is shared with {others} (tied weights): kept unquantized"
    return None


def quantize_model_(
    model: nn.Module, *, skip: Callable[[str], bool] = lambda name: False, power_of_two_scales: bool = False
) -> QuantizeReport:
    """Swap, in place, every eligible ``nn.Linear`` of ``model`` for
    ``Fp8BlockLinear.from_float(linear)`` followed by ``process_weights_after_loading()``, on the
    linear's device. Returns a :class:`QuantizeReport` and logs its one-line summary at INFO.

    Eligible: exactly ``nn.Linear`` (not a subclass), bf16/fp16 weight, K % 128 == 0, N % 16 == 0,
    ``skip(name)`` false, and a weight Parameter no other module holds (tied embeddings /
    ``lm_head`` stay as they are: quantizing one side would silently untie them). Every other
    linear is reported in ``skipped`` with the reason. A linear registered under several names is
    replaced by one shared Fp8BlockLinear everywhere. ``power_of_two_scales`` is passed to
    ``from_float`` (with ``SGLANG_DSV4_DENSE_MXSCALE=1`` the modules then also get e8m0 scales).
    """
    # id(Parameter) -> [(module name, module)] of every module holding it directly
    holders: dict = {}
    for mod_name, mod in model.named_modules(remove_duplicate=False):
        for p in mod._parameters.values():
            if p is not None:
                holders.setdefault(id(p), []).append((mod_name, mod))

    report = QuantizeReport()
    replaced: dict = {}  # id(linear) -> its Fp8BlockLinear
    for name, mod in list(model.named_modules(remove_duplicate=False)):
        if not isinstance(mod, nn.Linear):
            continue
        new = replaced.get(id(mod))
        if new is None:
            reason = _skip_reason(name, mod, holders, skip)
            if reason is not None:
                report.skipped[name] = reason
                continue
            new = Fp8BlockLinear.from_float(mod, power_of_two_scales=power_of_two_scales)
            new.process_weights_after_loading()
            replaced[id(mod)] = new
        parent_name, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent_name), child, new)
        report.swapped.append(name)

    detail = "; ".join(f"{n or '<root>'}: {r}" for n, r in report.skipped.items())
    logger.info("%s%s", report.summary(), f" ({detail})" if detail else "")
    return report
