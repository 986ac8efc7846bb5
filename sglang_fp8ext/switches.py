"""Environment switches (SPEC §5), read at call time so a serving process can flip them without
re-importing. Documented in the README."""

from __future__ import annotations

import os

_FALSE = ("0", "false", "off", "no")


def _flag(name: str) -> str | None:
    value = os.environ.get(name)
    return None if value is None else value.strip().lower()


def fused_smallm_enabled() -> bool:
    """``SGL_FP8_SMALLM=0`` (alias ``SGLANG_ROCM_SMALLM_FP8_BS=0``) turns the fused kernel off."""
    for name in ("SGL_FP8_SMALLM", "SGLANG_ROCM_SMALLM_FP8_BS"):
        value = _flag(name)
        if value is not None and value in _FALSE:
            return False
    return True


def _parse_shapes(text: str) -> set[tuple[int, int]] | None:
    """The (N, K) set, or None for every shape ("all"). Items are "NxK" (SPEC §5) or "N:K", the
    separator SGLang's own parser of this variable takes, so one setting serves both."""
    if text.strip().lower() == "all":
        return None
    shapes = set()
    for item in text.replace(";", ",").split(","):
        item = item.strip().lower()
        if not item:
            continue
        try:
            n, k = item.replace(":", "x").split("x")
            shapes.add((int(n), int(k)))
        except ValueError:
            raise ValueError(
                f"SGLANG_DSV4_DENSE_MXSCALE_SHAPES: expected 'N1xK1,N2xK2' (or 'N1:K1,N2:K2', or 'all'), got the "
                f"item {item!r}"
            ) from None
    return shapes


def mxscale_enabled_for(n: int, k: int) -> bool:
    """``SGLANG_DSV4_DENSE_MXSCALE=1`` lets weight preparation store power-of-two block scales as
    e8m0, for the shapes in ``SGLANG_DSV4_DENSE_MXSCALE_SHAPES="N1xK1,N2xK2"`` when that is set."""
    if _flag("SGLANG_DSV4_DENSE_MXSCALE") not in ("1", "true", "on", "yes"):
        return False
    text = os.environ.get("SGLANG_DSV4_DENSE_MXSCALE_SHAPES")
    if not text or not text.strip():
        return True
    shapes = _parse_shapes(text)
    return shapes is None or (n, k) in shapes
