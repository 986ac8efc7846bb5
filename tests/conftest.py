"""Shared fixtures and helpers of the sglang-fp8ext test suite.

Device parametrization: the ``device`` fixture runs a test on "cpu" always and on "cuda" (CUDA or
ROCm through torch's cuda namespace) where a GPU exists and the extension was built for it. Where
it does not, the cuda variant is SKIPPED with the reason, never silently passed; the skip reasons
are printed in the short test summary (``-rs`` is switched on below).
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))

import sglang_fp8ext as fx  # noqa: E402
import spec_model as sm  # noqa: E402

FP8 = torch.float8_e4m3fn
E8M0 = torch.float8_e8m0fnu
ACT = {"bf16": torch.bfloat16, "fp16": torch.float16}
ACT_NAME = {torch.bfloat16: "bf16", torch.float16: "fp16"}


def pytest_collection_modifyitems(config, items):
    """Every test that takes the `gpu` fixture is a GPU test (`pytest -m gpu` selects it), wherever
    it lives, so that a GPU-fixture test outside the gpu-marked files cannot silently drop out of
    `pytest -m gpu` (and go stale there)."""
    for item in items:
        if "gpu" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.gpu)


def pytest_configure(config):
    # print the reason of every skip (e.g. "no CUDA device: GPU test not run") in the summary
    chars = getattr(config.option, "reportchars", "") or ""
    if "s" not in chars and "a" not in chars and "A" not in chars:
        config.option.reportchars = chars + "s"


def gpu_skip_reason() -> str | None:
    """None when a GPU test can run here, else why not."""
    if not torch.cuda.is_available():
        return "no CUDA device: GPU test not run"
    if fx.BUILT_BACKEND not in ("cuda", "rocm"):
        return f"sglang_fp8ext was built for {fx.BUILT_BACKEND!r}, not for the GPU: GPU test not run"
    return None


def require_gpu() -> None:
    reason = gpu_skip_reason()
    if reason is not None:
        pytest.skip(reason)


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def device(request) -> str:
    if request.param == "cuda":
        require_gpu()
    return request.param


@pytest.fixture
def gpu() -> str:
    """For GPU-only tests: the device string, or a skip with the reason."""
    require_gpu()
    return "cuda"


@pytest.fixture(autouse=True)
def _reset_dynamo():
    """Every test starts and ends with a clean dynamo cache."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


# ---- torch <-> numpy bit patterns ----------------------------------------------------------------


def dense(t: torch.Tensor) -> torch.Tensor:
    """A CPU copy with canonical row-major strides (``.contiguous()`` keeps odd strides on size-1
    dims, which ``.view(dtype)`` rejects)."""
    t = t.detach().cpu()
    return torch.empty(t.shape, dtype=t.dtype).copy_(t)


def act_bits(t: torch.Tensor) -> np.ndarray:
    """bf16/fp16 tensor -> uint16 bit patterns."""
    assert t.dtype in (torch.bfloat16, torch.float16)
    return dense(t).view(torch.int16).numpy().view(np.uint16)


def from_act_bits(bits: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(bits, dtype=np.uint16).view(np.int16)).view(dtype)


def u8(t: torch.Tensor) -> np.ndarray:
    """fp8 / e8m0 tensor -> uint8 codes (any strides)."""
    return dense(t).view(torch.uint8).numpy()


def f32(t: torch.Tensor) -> np.ndarray:
    return dense(t).numpy().astype(np.float32)


def f32_bits(t: torch.Tensor) -> np.ndarray:
    return f32(t).view(np.uint32)


def scale_np(scale: torch.Tensor) -> np.ndarray:
    """A scale tensor as the model holds it: uint8 e8m0 bytes or float32 values."""
    return u8(scale) if scale.dtype == E8M0 else f32(scale)


def scale_vals(scale: torch.Tensor) -> np.ndarray:
    return sm.scale_values(scale_np(scale), scale.dtype == E8M0)


def canon_q(codes: np.ndarray) -> np.ndarray:
    """fp8 codes with every NaN code mapped to 0x7F (the sign of a NaN is not part of the SPEC)."""
    c = np.asarray(codes, dtype=np.uint8).copy()
    c[sm.e4m3_is_nan(c)] = 0x7F
    return c


def canon_scale_bits(bits: np.ndarray) -> np.ndarray:
    """fp32 scale bits with every NaN mapped to the canonical 0x7FC00000."""
    b = np.asarray(bits, dtype=np.uint32).copy()
    nan = ((b & 0x7F800000) == 0x7F800000) & ((b & 0x7FFFFF) != 0)
    b[nan] = 0x7FC00000
    return b


def assert_codes_equal(got: np.ndarray, exp: np.ndarray, what: str, inputs: np.ndarray | None = None):
    got = canon_q(got)
    exp = canon_q(exp)
    if not np.array_equal(got, exp):
        bad = np.argwhere(got != exp)
        i = tuple(bad[0])
        extra = "" if inputs is None else f", input {inputs[i]!r}"
        raise AssertionError(
            f"{what}: {len(bad)} of {got.size} fp8 codes differ; first at {i}: got 0x{int(got[i]):02x} "
            f"({sm.E4M3_VALUES[got[i]]}), expected 0x{int(exp[i]):02x} ({sm.E4M3_VALUES[exp[i]]}){extra}"
        )


def assert_scale_equal(scale: torch.Tensor, exp: np.ndarray, ue8m0: bool, what: str):
    if ue8m0:
        assert scale.dtype == E8M0, f"{what}: scale dtype {scale.dtype}, expected float8_e8m0fnu"
        got = u8(scale)
        exp = np.asarray(exp, dtype=np.uint8)
        if not np.array_equal(got, exp):
            i = tuple(np.argwhere(got != exp)[0])
            raise AssertionError(f"{what}: e8m0 scale byte at {i}: got {int(got[i])}, expected {int(exp[i])}")
    else:
        assert scale.dtype == torch.float32, f"{what}: scale dtype {scale.dtype}, expected float32"
        got = canon_scale_bits(f32_bits(scale))
        expb = canon_scale_bits(np.asarray(exp, dtype=np.float32).view(np.uint32))
        if not np.array_equal(got, expb):
            i = tuple(np.argwhere(got != expb)[0])
            raise AssertionError(
                f"{what}: fp32 scale at {i}: got 0x{int(got[i]):08x} ({got.view(np.float32)[i]!r}), "
                f"expected 0x{int(expb[i]):08x} ({expb.view(np.float32)[i]!r})"
            )


def check_quant(x: torch.Tensor, ue8m0: bool, q: torch.Tensor, scale: torch.Tensor, what: str = "per1x128_quant"):
    """Bit-exact comparison of an op's (q, scale) with the model's quant of x."""
    bits = act_bits(x)
    eq, es = sm.quant_act_bits(bits, ACT_NAME[x.dtype], ue8m0)
    assert q.dtype == FP8 and tuple(q.shape) == tuple(x.shape), (q.dtype, q.shape, x.shape)
    assert tuple(scale.shape) == tuple(x.shape[:-1]) + (x.shape[-1] // 128,), (scale.shape, x.shape)
    assert_codes_equal(u8(q), eq, f"{what} q", sm.act_bits_to_f32(bits, ACT_NAME[x.dtype]))
    assert_scale_equal(scale, es, ue8m0, f"{what} scale")


# ---- random data ---------------------------------------------------------------------------------


def rand_act(shape, dtype, seed, scale=1.0, outliers=True) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g) * scale
    if outliers and x.numel():
        # a few large channels, as in real activations
        cols = torch.randint(0, shape[-1], (max(1, shape[-1] // 256),), generator=g)
        x[..., cols] *= 20
    return x.to(dtype)


_WEIGHT_CACHE: dict = {}


def rand_weight(N, K, seed=0) -> torch.Tensor:
    """A random finite FP8 weight [N, K] (normal values quantized to e4m3, |w| up to ~448)."""
    key = (N, K, seed)
    if key not in _WEIGHT_CACHE:
        g = torch.Generator().manual_seed(seed * 7919 + N * 31 + K)
        w = (torch.randn(N, K, generator=g) * 64).clamp(-448, 448).to(FP8)
        if len(_WEIGHT_CACHE) > 8:
            _WEIGHT_CACHE.clear()
        _WEIGHT_CACHE[key] = w
    return _WEIGHT_CACHE[key]


def rand_wscale(N, K, e8m0: bool, seed=0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed + 17)
    shape = ((N + 127) // 128, K // 128)
    if e8m0:
        exps = torch.randint(-12, -4, shape, generator=g).to(torch.float32)
        return fx.scale_to_e8m0(torch.exp2(exps))
    return (torch.rand(shape, generator=g) * 9e-3 + 1e-3).to(torch.float32)


def gemm_ref_from(q: torch.Tensor, xs: torch.Tensor, w: torch.Tensor, ws: torch.Tensor, bias=None, w_plain=None):
    """float64 model of §3.4 from torch tensors (w plain layout; pass w_plain for shuffled w)."""
    wp = w if w_plain is None else w_plain
    b = None if bias is None else bias.detach().cpu().float().numpy().astype(np.float64)
    return sm.gemm_ref(u8(q), scale_vals(xs), u8(wp), scale_vals(ws), b)


def assert_gemm_contract(out: torch.Tensor, ref: np.ndarray, what: str, tol: float = 4e-3):
    o = out.detach().cpu().float().numpy().astype(np.float64)
    assert o.shape == ref.shape, (o.shape, ref.shape)
    if o.shape[0] == 0:
        return
    assert np.isfinite(o).all(), f"{what}: non-finite output"
    err = sm.row_rel_err(o, ref)
    worst = int(np.argmax(err))
    assert err.max() <= tol, f"{what}: row {worst} relative error {err[worst]:.3e} > {tol} (all rows: max {err.max():.3e})"
