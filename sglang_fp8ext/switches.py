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


def _parse_shapes(text: str) -> set[tuple[int, int]]:
    shapes = set()
    for item in text.replace(";", ",").split(","):
        item = item.strip().lower()
        if not item:
            continue
        try:
            n, k = item.split("x")
            shapes.add((int(n), int(k)))
        except ValueError:
            raise ValueError(
                f"SGLANG_DSV4_DENSE_MXSCALE_SHAPES: expected 'N1xK1,N2xK2', got the item {item!r}"
            ) from None
    return shapes


def mxscale_enabled_for(n: int, k: int) -> bool:
    """``SGLANG_DSV4_DENSE_MXSCALE=1`` lets weight preparation store power-of-two block scales as
    e8m0, for the shapes in ``SGLANG_DSV4_DENSE_MXSCALE_SHAPES="N1xK1,N2xK2"`` when that is set."""
    if _flag("SGLANG_DSV4_DENSE_MXSCALE") not in ("1", "true", "on", "yes"):
        return False
    shapes = os.environ.get("SGLANG_DSV4_DENSE_MXSCALE_SHAPES")
    return not shapes or (n, k) in _parse_shapes(shapes)
