"""sgl_fp8::per1x128_quant against the golden model of SPEC §3.1-3.3, bit for bit.

Inputs are adversarial by construction (all-zero groups, single elements, e4m3 rounding ties and
their neighbours, values at +-448 after scaling, extreme magnitudes, fp16 max/subnormals,
NaN/Inf), plus property-based tests over raw bf16/fp16 bit patterns.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import sglang_fp8ext as fx
import spec_model as sm
from conftest import (
    ACT,
    E8M0,
    FP8,
    act_bits,
    assert_codes_equal,
    assert_scale_equal,
    check_quant,
    from_act_bits,
    u8,
    f32,
    f32_bits,
    dense,
)

DTYPES = ["bf16", "fp16"]
UE8M0 = [False, True]


def _to_act(v: np.ndarray, dt: str) -> torch.Tensor:
    """float32 values -> bf16/fp16 tensor (RNE, as the model casts)."""
    return from_act_bits(sm.f32_to_act_bits(np.asarray(v, np.float32), dt), ACT[dt])


def run_quant(x: torch.Tensor, device: str, ue8m0: bool, transpose_scale: bool = False):
    """Run the op on `device`; on a GPU also require bitwise equality with the CPU op."""
    xd = x.to(device)
    before = xd.clone()
    q, s = fx.per1x128_quant(xd, ue8m0=ue8m0, transpose_scale=transpose_scale)
    assert torch.equal(xd.view(torch.int16) if xd.dtype != torch.float8_e4m3fn else xd, before.view(torch.int16)), "x was mutated"
    assert q.device.type == torch.device(device).type and s.device.type == torch.device(device).type
    if device != "cpu":
        qc, sc = fx.per1x128_quant(x, ue8m0=ue8m0, transpose_scale=transpose_scale)
        assert torch.equal(q.cpu().view(torch.uint8), qc.view(torch.uint8)), "GPU q differs from the CPU op"
        assert torch.equal(dense(s).view(torch.uint8), dense(sc).view(torch.uint8)), "GPU scale differs from the CPU op"
        assert s.stride() == sc.stride()
    return q.cpu(), s.cpu()


# ---- adversarial constructions -----------------------------------------------------------------


def groups_zero_and_single(dt: str, rng) -> np.ndarray:
    """Rows of groups: all-zero, all -0.0, and a single nonzero element (both signs, many
    magnitudes) at a random position, next to ordinary groups."""
    lim = (-24, 15) if dt == "fp16" else (-100, 100)
    rows = []
    for r in range(24):
        row = np.zeros(8 * 128, np.float32)
        row[128:256] = -0.0
        row[256:384] = rng.standard_normal(128)  # ordinary group
        for g in range(3, 8):
            e = rng.integers(*lim)
            row[g * 128 + rng.integers(0, 128)] = rng.choice([-1, 1]) * rng.uniform(1, 2) * 2.0 ** e
        rows.append(row)
    return np.stack(rows)


def groups_ties(dt: str, rng, power_of_two_amax: bool) -> np.ndarray:
    """Groups whose amax is 448*2^j (so a*inv lands (almost) exactly on e4m3 values, midpoints
    between adjacent e4m3 values, and the activation-format neighbours of those midpoints), or a
    random amax with elements at midpoint*scale (values straddling rounding boundaries)."""
    pos = sm.E4M3_VALUES[:0x7F]
    mids = (pos[:-1] + pos[1:]) / 2
    cand = np.concatenate([pos, mids])
    jr = (-14, 5) if dt == "fp16" else (-60, 60)
    rows = []
    for r in range(16):
        row = np.empty(4 * 128, np.float32)
        for g in range(4):
            j = rng.integers(*jr)
            if power_of_two_amax:
                amax = np.float32(448.0 * 2.0 ** j)
                vals = rng.choice(cand, 128) * 2.0 ** j
            else:
                amax = np.float32(rng.uniform(1, 2) * 2.0 ** j * 448)
                scale = np.float32(amax * sm.INV_448)
                vals = rng.choice(mids, 128).astype(np.float64) * float(scale)
            vals = vals.astype(np.float32) * rng.choice([-1, 1], 128).astype(np.float32)
            # nudge a third of them one activation-ulp up or down
            b = sm.f32_to_act_bits(vals, dt).astype(np.int32)
            nudge = rng.integers(-1, 2, 128)
            nudge[rng.random(128) < 0.33] = 0
            nonzero = (b & 0x7FFF) != 0
            b = np.where(nonzero, b + nudge, b).astype(np.uint16)
            vals = sm.act_bits_to_f32(b, dt)
            vals = np.clip(vals, -amax, amax)
            vals[rng.integers(0, 128)] = amax * rng.choice([-1, 1])
            row[g * 128 : (g + 1) * 128] = vals
        rows.append(row)
    return np.stack(rows)


def groups_near_448(dt: str, rng) -> np.ndarray:
    """Elements within a few activation ulps of the group's amax, so a*inv is at or around +-448
    (and the 416/448 midpoint 432), where the clamp and the top rounding decide."""
    rows = []
    for r in range(16):
        row = np.empty(4 * 128, np.float32)
        for g in range(4):
            amax = np.float32(rng.uniform(1, 2) * 2.0 ** rng.integers(-10, 10))
            amax = sm.act_bits_to_f32(sm.f32_to_act_bits(np.float32([amax]), dt), dt)[0]
            ab = int(sm.f32_to_act_bits(np.float32([amax]), dt)[0])
            offs = rng.integers(0, 40, 128)
            vals = sm.act_bits_to_f32(np.uint16(ab) - offs.astype(np.uint16), dt)
            vals = vals * rng.choice([-1, 1], 128).astype(np.float32)
            vals[0] = amax
            row[g * 128 : (g + 1) * 128] = vals
        rows.append(row)
    return np.stack(rows)


def groups_extreme_magnitudes(dt: str, rng) -> np.ndarray:
    """bf16: group magnitudes from 1e-30 to 1e30 (including groups entirely below the 1e-10
    amax floor); fp16: groups near the fp16 max (65504) and of subnormals down to 2^-24."""
    rows = []
    for r in range(16):
        row = np.empty(6 * 128, np.float32)
        for g in range(6):
            base = rng.standard_normal(128) * np.exp2(rng.uniform(-6, 0, 128))
            if dt == "bf16":
                mag = 10.0 ** rng.uniform(-30, 30)
                vals = base * mag
            else:
                kind = g % 3
                if kind == 0:  # near the fp16 max
                    vals = np.clip(base * 65504 * 1.5, -65504, 65504)
                    vals[rng.integers(0, 128)] = 65504 * rng.choice([-1, 1])
                elif kind == 1:  # fp16 subnormals (2^-24 .. 2^-14)
                    vals = rng.integers(-1023, 1024, 128) * 2.0 ** -24
                else:  # smallest subnormals only
                    vals = rng.integers(-3, 4, 128) * 2.0 ** -24
            row[g * 128 : (g + 1) * 128] = vals
        rows.append(row)
    return np.stack(rows)


CONSTRUCTIONS = {
    "zero_and_single": groups_zero_and_single,
    "ties_pow2_amax": lambda dt, rng: groups_ties(dt, rng, True),
    "ties_random_amax": lambda dt, rng: groups_ties(dt, rng, False),
    "near_448": groups_near_448,
    "extreme_magnitudes": groups_extreme_magnitudes,
}


@pytest.mark.parametrize("construction", list(CONSTRUCTIONS))
@pytest.mark.parametrize("ue8m0", UE8M0)
@pytest.mark.parametrize("dt", DTYPES)
def test_quant_adversarial_bit_exact(device, dt, ue8m0, construction):
    rng = np.random.default_rng(abs(hash((dt, ue8m0, construction))) % 2**32)
    v = CONSTRUCTIONS[construction](dt, rng)
    x = _to_act(v, dt)
    assert torch.isfinite(x.float()).all()
    q, s = run_quant(x, device, ue8m0)
    check_quant(x, ue8m0, q, s, f"per1x128_quant[{dt}, ue8m0={ue8m0}, {construction}]")


@pytest.mark.parametrize("ue8m0", UE8M0)
@pytest.mark.parametrize("dt", DTYPES)
def test_quant_ties_exercised(dt, ue8m0):
    """Guard on the construction itself: the tie groups really put many a*inv exactly on e4m3
    midpoints (else the test above would not test ties)."""
    rng = np.random.default_rng(7)
    v = groups_ties(dt, rng, True)
    a = sm.act_bits_to_f32(sm.f32_to_act_bits(v, dt), dt)
    q, s = sm.quant_1x128(a, ue8m0)
    g = a.reshape(a.shape[0], -1, 128)
    if ue8m0:
        inv = np.ldexp(np.float32(1), 127 - s.astype(np.int32))
    else:
        inv = np.float32(1) / s
    prod = np.abs((g * inv[..., None]).astype(np.float32)).astype(np.float64)
    pos = sm.E4M3_VALUES[:0x7F]
    mids = (pos[:-1] + pos[1:]) / 2
    assert np.isin(prod, mids).sum() > 500


def test_quant_all_zero_group_scale():
    """§3.1: an all-zero group gives scale 1e-10f * fl32(1/448) (not 0, not 1) and q = 0; ue8m0
    gives the rounded-up exponent of that value."""
    x = torch.zeros(3, 256, dtype=torch.bfloat16)
    x[1, 128:] = torch.randn(128).bfloat16()
    q, s = fx.per1x128_quant(x)
    expect = np.float32(np.float32(1e-10) * sm.INV_448)
    assert f32(s)[0, 0].view(np.uint32) == expect.view(np.uint32)
    assert f32(s)[2, 1].view(np.uint32) == expect.view(np.uint32)
    assert not u8(q[0]).any() and not u8(q[2]).any()
    q, s = fx.per1x128_quant(x, ue8m0=True)
    eb = int(expect.view(np.uint32) >> 23) + 1  # mantissa of 2.23e-13 is non-zero -> rounds up
    assert u8(s)[0, 0] == eb and u8(s)[2, 1] == eb


@pytest.mark.parametrize("dt", DTYPES)
def test_quant_scale_uses_multiply_not_divide(dt):
    """fl32(amax * fl32(1/448)) differs from fl32(amax / 448) for about half of all amax values:
    the op must use the multiply (checked on 2048 groups whose single element has a different
    mantissa each)."""
    rng = np.random.default_rng(11)
    n = 2048
    bits = np.zeros((n, 128), np.uint16)
    if dt == "bf16":
        b = (0x3F80 + (np.arange(n) % 128)) + ((np.arange(n) // 128 % 16) << 7)
    else:
        b = (0x3C00 + (np.arange(n) % 1024)) + ((np.arange(n) // 1024) << 10)
    bits[np.arange(n), rng.integers(0, 128, n)] = b.astype(np.uint16)
    x = from_act_bits(bits, ACT[dt])
    a = sm.act_bits_to_f32(b.astype(np.uint16), dt)
    mul = (a * sm.INV_448).astype(np.float32)
    div = (a / np.float32(448)).astype(np.float32)
    assert (mul != div).sum() > n // 8  # the distinction is exercised
    q, s = fx.per1x128_quant(x)
    assert np.array_equal(f32(s)[:, 0].view(np.uint32), mul.view(np.uint32))
    check_quant(x, False, q, s)


# ---- non-finite input (§3.3) ---------------------------------------------------------------------


def _nonfinite_input(dt: str, seed: int, M=6, KB=4):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(M, KB * 128, generator=g).to(ACT[dt])
    bad = {}
    specials = [float("nan"), float("inf"), float("-inf")]
    for m in range(M):
        for kb in range(KB):
            if (m + kb) % 2 == 0:
                kinds = [specials[(m * KB + kb) % 3]]
                if (m * KB + kb) % 5 == 0:
                    kinds.append(float("nan"))
                if (m * KB + kb) % 7 == 0:
                    kinds = [float("inf"), float("-inf")]
                for kind in kinds:
                    k = kb * 128 + int(torch.randint(0, 128, (1,), generator=g))
                    x[m, k] = kind
                bad[(m, kb)] = True
    return x, bad


@pytest.mark.parametrize("ue8m0", UE8M0)
@pytest.mark.parametrize("dt", DTYPES)
def test_quant_nonfinite_groups(device, dt, ue8m0):
    """A group holding NaN/Inf: fp32 scale NaN or +Inf, e8m0 byte 0xFF; every dequantized element
    of the group is non-finite and no NaN input becomes a finite number; other groups are exact."""
    x, bad = _nonfinite_input(dt, 1 + ue8m0)
    q, s = run_quant(x, device, ue8m0)
    bits = act_bits(x)
    eq, es = sm.quant_act_bits(bits, dt, ue8m0)
    a = sm.act_bits_to_f32(bits, dt)
    qv = sm.e4m3_decode(u8(q))
    sv = sm.e8m0_decode(u8(s)).astype(np.float64) if ue8m0 else f32(s).astype(np.float64)
    M, K = x.shape
    for m in range(M):
        for kb in range(K // 128):
            sl = slice(kb * 128, (kb + 1) * 128)
            if (m, kb) in bad:
                if ue8m0:
                    assert u8(s)[m, kb] == 0xFF, f"group ({m},{kb}): e8m0 scale {u8(s)[m, kb]}, expected 0xFF"
                else:
                    sc = f32(s)[m, kb]
                    assert np.isnan(sc) or sc == np.inf, f"group ({m},{kb}): scale {sc}, expected NaN or +Inf"
                with np.errstate(invalid="ignore"):
                    deq = qv[m, sl] * sv[m, kb]
                assert not np.isfinite(deq).any(), f"group ({m},{kb}): a dequantized element is finite"
                nan_in = np.isnan(a[m, sl])
                assert np.isnan(deq[nan_in]).all(), f"group ({m},{kb}): a NaN input did not stay NaN"
            else:
                assert_codes_equal(u8(q)[m, sl], eq[m, sl], f"finite group ({m},{kb}) q")
                assert_scale_equal(s[m, kb : kb + 1], es[m, kb : kb + 1], ue8m0, f"finite group ({m},{kb})")


@pytest.mark.parametrize("ue8m0", UE8M0)
@pytest.mark.parametrize("dt", DTYPES)
def test_quant_nonfinite_groups_follow_formula(device, dt, ue8m0):
    """The §3.1/3.2 formula also fixes the q bytes of a non-finite group (fp32: inv = 1/Inf = 0 so
    finite elements give +-0 and Inf gives NaN; a NaN group is all NaN; ue8m0: inv = 2^-128)."""
    x, _ = _nonfinite_input(dt, 5 + ue8m0)
    q, s = run_quant(x, device, ue8m0)
    check_quant(x, ue8m0, q, s, f"per1x128_quant non-finite [{dt}, ue8m0={ue8m0}]")


# ---- shapes, strides, layouts --------------------------------------------------------------------


@pytest.mark.parametrize("ue8m0", UE8M0)
@pytest.mark.parametrize("dt", DTYPES)
def test_quant_3d_and_4d(device, dt, ue8m0):
    for shape in [(2, 3, 384), (2, 1, 2, 256), (1, 128)]:
        x = (torch.randn(*shape) * 3).to(ACT[dt])
        q, s = run_quant(x, device, ue8m0)
        assert q.shape == x.shape and s.shape == (*shape[:-1], shape[-1] // 128)
        check_quant(x, ue8m0, q, s)
        q2, s2 = fx.per1x128_quant(x.reshape(-1, shape[-1]), ue8m0)
        assert torch.equal(q.reshape(-1, shape[-1]).view(torch.uint8), q2.view(torch.uint8))


@pytest.mark.parametrize("ue8m0", UE8M0)
@pytest.mark.parametrize("dt", DTYPES)
def test_quant_row_strided_input(device, dt, ue8m0):
    """Non-unit row stride: a column slice of a wider tensor (also at a non-zero offset, and a
    row-strided 3-D view)."""
    wide = (torch.randn(7, 1024) * 5).to(ACT[dt])
    odd = (torch.randn(5, 1025) * 5).to(ACT[dt])  # odd row stride, element-misaligned rows
    for x in (wide[:, :512], wide[:, 128:640], wide[:, 64:320], wide[::2, :256], wide[:, 1:513], odd[:, :1024], odd[:, 3:259]):
        assert x.stride(-1) == 1 and not x.is_contiguous()
        q, s = run_quant(x, device, ue8m0)
        check_quant(x.contiguous(), ue8m0, q, s)
        assert q.is_contiguous()
    w3 = (torch.randn(2, 3, 640) * 5).to(ACT[dt])[..., :512]
    q, s = run_quant(w3, device, ue8m0)
    check_quant(w3.contiguous(), ue8m0, q, s)


@pytest.mark.parametrize("dt", DTYPES)
def test_quant_last_dim_not_unit_stride(device, dt):
    """SPEC requires last-dim stride 1; an x violating it must either be rejected with an error
    naming x or be quantized correctly, never produce garbage."""
    x = (torch.randn(256, 4) * 2).to(ACT[dt]).to(device).t()
    assert x.stride(-1) != 1
    try:
        q, s = fx.per1x128_quant(x)
    except (RuntimeError, ValueError) as e:
        assert "x" in str(e)
        return
    check_quant(x.cpu().contiguous(), False, q.cpu(), s.cpu())


@pytest.mark.parametrize("ue8m0", UE8M0)
@pytest.mark.parametrize("dt", DTYPES)
def test_quant_transpose_scale(device, dt, ue8m0):
    for M in (1, 5, 32):
        x = (torch.randn(M, 512) * 2).to(ACT[dt])
        q, s = run_quant(x, device, ue8m0, transpose_scale=True)
        assert s.shape == (M, 4) and s.stride() == (1, M), (s.shape, s.stride())
        check_quant(x, ue8m0, q, s)
        q2, s2 = fx.per1x128_quant(x, ue8m0)
        assert np.array_equal(u8(s) if ue8m0 else f32_bits(s), u8(s2) if ue8m0 else f32_bits(s2))
        # the storage really is [K/128, M] row-major
        raw = torch.as_strided(s, (4, M), (M, 1))
        assert np.array_equal(u8(raw) if ue8m0 else f32(raw), u8(s2.t()) if ue8m0 else f32(s2.t()))


@pytest.mark.parametrize("ue8m0", UE8M0)
def test_quant_m0(device, ue8m0):
    for shape in [(0, 256), (0, 3, 128), (2, 0, 384)]:
        x = torch.empty(*shape, dtype=torch.bfloat16, device=device)
        q, s = fx.per1x128_quant(x, ue8m0)
        assert q.shape == x.shape and q.dtype == FP8
        assert s.shape == (*shape[:-1], shape[-1] // 128) and s.dtype == (E8M0 if ue8m0 else torch.float32)
    x = torch.empty(0, 256, dtype=torch.float16, device=device)
    q, s = fx.per1x128_quant(x, ue8m0, True)
    assert q.shape == (0, 256) and s.shape == (0, 2)


def test_quant_large_row_count():
    x = (torch.randn(333, 1024) * 0.3).bfloat16()
    for ue8m0 in UE8M0:
        q, s = fx.per1x128_quant(x, ue8m0)
        check_quant(x, ue8m0, q, s)


# ---- property-based (hypothesis) -----------------------------------------------------------------

_shapes = st.tuples(st.integers(1, 3), st.sampled_from([128, 256, 384]))


@st.composite
def raw_bits(draw):
    """Uniformly random bit patterns: every class (normal, subnormal, zero, Inf, NaN) occurs."""
    M, K = draw(_shapes)
    return draw(hnp.arrays(np.uint16, (M, K), elements=st.integers(0, 0xFFFF)))


@st.composite
def structured_bits(draw):
    """Groups with a random base exponent and a narrow dynamic range (so most elements quantize
    to non-zero codes), sprinkled with zeros, subnormals and occasionally a NaN/Inf."""
    M, K = draw(_shapes)
    dt = draw(st.sampled_from(DTYPES))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    if dt == "bf16":
        ebits, mbits, emax = 8, 7, 254
    else:
        ebits, mbits, emax = 5, 10, 30
    G = K // 128
    base = rng.integers(1, emax + 1, (M, G, 1))
    spread = rng.integers(0, 12, (M, G, 1))
    e = np.clip(base - rng.integers(0, 1 + spread, (M, G, 128)), 0, emax)
    mant = rng.integers(0, 2**mbits, (M, G, 128))
    sign = rng.integers(0, 2, (M, G, 128))
    bits = (sign << 15) | (e << mbits) | mant
    specials = draw(st.integers(0, 3))
    allones = (2**ebits - 1) << mbits
    for _ in range(specials):
        m, g, i = rng.integers(0, M), rng.integers(0, G), rng.integers(0, 128)
        bits[m, g, i] = allones | (rng.integers(0, 2**mbits) if rng.random() < 0.5 else 0)
    if draw(st.booleans()):
        bits[rng.integers(0, M), rng.integers(0, G)] = 0
    return dt, bits.reshape(M, K).astype(np.uint16)


def _check_any(bits: np.ndarray, dt: str, ue8m0: bool):
    x = from_act_bits(bits, ACT[dt])
    q, s = fx.per1x128_quant(x, ue8m0)
    eq, es = sm.quant_act_bits(bits, dt, ue8m0)
    a = sm.act_bits_to_f32(bits, dt)
    # everything follows the §3.1/3.2 formula bit for bit (NaN codes compared as NaN)
    assert_codes_equal(u8(q), eq, f"q ({dt}, ue8m0={ue8m0})", a)
    assert_scale_equal(s, es, ue8m0, f"scale ({dt}, ue8m0={ue8m0})")
    # and the §3.3 properties, stated independently of the formula
    g = a.reshape(a.shape[0], -1, 128)
    nonfinite = ~np.isfinite(g).all(-1)
    if ue8m0:
        assert np.array_equal(u8(s) == 0xFF, nonfinite)
        sv = sm.e8m0_decode(u8(s)).astype(np.float64)
    else:
        sc = f32(s)
        assert np.array_equal(~np.isfinite(sc), nonfinite)
        assert not (sc == -np.inf).any()
        sv = sc.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        deq = sm.e4m3_decode(u8(q)).reshape(g.shape) * sv[..., None]
    assert not np.isfinite(deq[nonfinite]).any()
    assert np.isnan(deq[np.isnan(g)]).all()
    assert np.isfinite(deq[~nonfinite]).all()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bits=raw_bits(), dt=st.sampled_from(DTYPES), ue8m0=st.booleans())
def test_quant_property_raw_bits(bits, dt, ue8m0):
    _check_any(bits, dt, ue8m0)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=structured_bits(), ue8m0=st.booleans())
def test_quant_property_structured(case, ue8m0):
    dt, bits = case
    _check_any(bits, dt, ue8m0)


@settings(max_examples=40, deadline=None)
@given(case=structured_bits(), ue8m0=st.booleans())
def test_quant_property_dequant_error(case, ue8m0):
    """For finite groups, |q*scale - a| is at most half an e4m3 step (relative 2^-4) of the
    element, or of the smallest subnormal step; a basic sanity bound stated without the model."""
    dt, bits = case
    with np.errstate(invalid="ignore"):
        a = sm.act_bits_to_f32(bits, dt).astype(np.float64)
    if not np.isfinite(a).all():
        return
    x = from_act_bits(bits, ACT[dt])
    q, s = fx.per1x128_quant(x, ue8m0)
    sv = sm.e8m0_decode(u8(s)).astype(np.float64) if ue8m0 else f32(s).astype(np.float64)
    g = a.reshape(a.shape[0], -1, 128)
    deq = sm.e4m3_decode(u8(q)).reshape(g.shape) * sv[..., None]
    # the elements scale to at most 448 (ue8m0: at most 448, scale rounded up)
    step = np.maximum(np.abs(g) * 2.0 ** -4, 2.0 ** -10 * sv[..., None]) * (1 + 1e-6)
    assert (np.abs(deq - g) <= step).all()


@pytest.mark.parametrize("ue8m0", UE8M0)
def test_quant_nonuniform_leading_strides(device, ue8m0):
    """[..., K] inputs whose leading dims do not collapse to one row stride (a transposed or
    sliced 3-D view): either quantized correctly or rejected with an error naming x; never
    garbage."""
    base = (torch.randn(4, 6, 256) * 3).bfloat16()
    for x in (base.transpose(0, 1), base[:, ::2, :], base[::2].transpose(0, 1)[:, :, :128]):
        assert x.stride(-1) == 1
        try:
            q, s = fx.per1x128_quant(x.to(device) if device == "cpu" else base.to(device).as_strided(x.shape, x.stride(), x.storage_offset()), ue8m0)
        except (RuntimeError, ValueError) as e:
            assert re.search(r"\bx\b", str(e)), str(e)
            continue
        check_quant(x.contiguous(), ue8m0, q.cpu(), s.cpu())
