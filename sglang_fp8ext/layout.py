"""Weight layouts and scale formats (SPEC §4): pure view/permute and bit operations."""

from __future__ import annotations

import torch

E8M0 = torch.float8_e8m0fnu


def _check_weight_2d(fn: str, w: torch.Tensor) -> tuple[int, int]:
    if w.dim() != 2:
        raise ValueError(f"{fn}: expected a 2-D weight [N, K], got shape {tuple(w.shape)}")
    N, K = w.shape
    if N % 16 or K % 32:
        raise ValueError(f"{fn}: the (16,16) preshuffle needs N % 16 == 0 and K % 32 == 0, got N = {N}, K = {K}")
    return N, K


def shuffle_weight(w: torch.Tensor) -> torch.Tensor:
    """AITER's (16,16) preshuffle of an [N, K] FP8 weight (``aiter.ops.shuffle.shuffle_weight(w,
    layout=(16, 16))``): ``w.view(N/16, 16, K/32, 2, 16).permute(0, 2, 3, 1, 4)``, contiguous.

    The result is marked ``is_shuffled = True`` as AITER marks it, which ``fp8_block_linear``
    reads when ``w_shuffled`` is not given. A weight already marked shuffled is refused: shuffling
    it again would give bytes no kernel reads correctly.
    """
    N, K = _check_weight_2d("shuffle_weight", w)
    if getattr(w, "is_shuffled", False):
        raise ValueError("shuffle_weight: the weight is already AITER-shuffled (is_shuffled = True)")
    out = w.reshape(N // 16, 16, K // 32, 2, 16).permute(0, 2, 3, 1, 4).contiguous().view(N, K)
    out.is_shuffled = True
    return out


def unshuffle_weight(w: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`shuffle_weight`: back to plain row-major [N, K]."""
    N, K = _check_weight_2d("unshuffle_weight", w)
    out = w.reshape(N // 16, K // 32, 2, 16, 16).permute(0, 3, 1, 2, 4).contiguous().view(N, K)
    out.is_shuffled = False
    return out


def scale_to_e8m0(scale: torch.Tensor) -> torch.Tensor:
    """fp32 block scales -> float8_e8m0fnu, exactly (SPEC §4).

    Every entry must be a positive normal power of two (mantissa bits zero, exponent field in
    1..254); the byte is ``bits >> 23``. Anything else raises ValueError naming the first
    offending block: e8m0 cannot represent it, and rounding it silently would change the model.
    """
    if scale.dtype != torch.float32:
        raise ValueError(f"scale_to_e8m0: expected float32 scales, got {scale.dtype}")
    bits = scale.contiguous().view(torch.int32)
    exponent = (bits >> 23) & 0xFF
    bad = (bits < 0) | ((bits & 0x7FFFFF) != 0) | (exponent == 0) | (exponent == 0xFF)
    if bool(bad.any()):
        flat_index = int(bad.flatten().nonzero()[0, 0])
        index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat_index), scale.shape))
        value = float(scale.flatten()[flat_index])
        raise ValueError(
            f"scale_to_e8m0: block {index} has scale {value!r}, which is not a positive normal power of "
            "two; e8m0 represents only 2^e exactly and this conversion never rounds"
        )
    return exponent.to(torch.uint8).view(E8M0)


def e8m0_to_scale(scale_e8m0: torch.Tensor) -> torch.Tensor:
    """float8_e8m0fnu -> fp32 (SPEC §4): ``byte << 23`` for bytes 1..254. Byte 0 is 2^-127 and
    0xFF is NaN, as in the OCP MX format (and torch's own conversion)."""
    if scale_e8m0.dtype != E8M0:
        raise ValueError(f"e8m0_to_scale: expected float8_e8m0fnu scales, got {scale_e8m0.dtype}")
    byte = scale_e8m0.contiguous().view(torch.uint8).to(torch.int32)
    out = (byte << 23).view(torch.float32).clone()
    out[byte == 0] = 2.0**-127
    out[byte == 0xFF] = float("nan")
    return out
