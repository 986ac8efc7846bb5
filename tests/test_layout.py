"""SPEC §4: the AITER (16,16) preshuffle (against the byte-offset formula) and the exact
fp32 <-> e8m0 scale conversions."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import sglang_fp8ext as fx
import spec_model as sm
from conftest import E8M0, FP8, u8, f32


def rand_fp8(N, K, seed=0):
    rng = np.random.default_rng(seed)
    return torch.from_numpy(rng.integers(0, 256, (N, K), dtype=np.uint8)).view(FP8)


@pytest.mark.parametrize("N,K", [(16, 32), (16, 128), (32, 64), (48, 256), (272, 384), (2112, 7168)])
def test_shuffle_matches_byte_offset_formula(device, N, K):
    w = rand_fp8(N, K, N + K).to(device)
    w0 = w.clone()
    s = fx.shuffle_weight(w)
    assert s.shape == (N, K) and s.dtype == FP8 and s.is_contiguous() and s.device == w.device
    assert getattr(s, "is_shuffled", None) is True
    assert np.array_equal(u8(s), sm.shuffle_bytes(u8(w0)))
    assert torch.equal(w.view(torch.uint8), w0.view(torch.uint8)), "shuffle_weight mutated its input"
    # element (n, k) sits at byte o(n, k) of the shuffled buffer
    o = sm.shuffle_offsets(N, K)
    flat = u8(s).reshape(-1)
    assert np.array_equal(flat[o], u8(w0))
    u = fx.unshuffle_weight(s)
    assert np.array_equal(u8(u), u8(w0))
    assert getattr(u, "is_shuffled", None) is False


def test_shuffle_tile_block_is_2048_contiguous_bytes():
    """A 16-row tile's 128-wide K block is 2048 contiguous bytes."""
    N, K = 32, 512
    w = torch.zeros(N, K, dtype=torch.uint8)
    w[16:32, 256:384] = 1  # tile n0 = 1, K block 2
    s = fx.shuffle_weight(w.view(FP8)).view(torch.uint8).reshape(-1)
    nz = torch.nonzero(s).flatten()
    assert nz.numel() == 2048
    assert int(nz.min()) == 16 * K + 2 * 2048 and int(nz.max()) == 16 * K + 3 * 2048 - 1


def test_shuffle_noncontiguous_input():
    w = rand_fp8(64, 512, 3)
    view = w.view(torch.uint8)[::2].view(FP8)  # row-strided [32, 512]
    assert not view.is_contiguous()
    assert np.array_equal(u8(fx.shuffle_weight(view)), sm.shuffle_bytes(u8(view)))


def test_unshuffle_of_plain_formula():
    N, K = 48, 256
    plain = rand_fp8(N, K, 9)
    shuffled_np = sm.shuffle_bytes(u8(plain))
    shuffled = torch.from_numpy(shuffled_np).view(FP8)
    assert np.array_equal(u8(fx.unshuffle_weight(shuffled)), u8(plain))


@pytest.mark.parametrize("shape", [(24, 64), (16, 48), (16,), (2, 16, 32)])
def test_shuffle_bad_shapes(shape):
    w = torch.zeros(*shape, dtype=torch.uint8).view(FP8)
    with pytest.raises((ValueError, RuntimeError)):
        fx.shuffle_weight(w)
    with pytest.raises((ValueError, RuntimeError)):
        fx.unshuffle_weight(w)


def test_shuffle_refuses_a_shuffled_weight():
    w = rand_fp8(32, 64, 3)
    once = fx.shuffle_weight(w)
    with pytest.raises(ValueError, match="already AITER-shuffled"):
        fx.shuffle_weight(once)
    assert np.array_equal(u8(fx.unshuffle_weight(once)), u8(w))


# ---- e8m0 <-> fp32 --------------------------------------------------------------------------------


def test_scale_to_e8m0_every_power_of_two():
    exps = torch.arange(-126, 128, dtype=torch.float64)
    s = torch.exp2(exps).to(torch.float32).reshape(2, 127)
    e = fx.scale_to_e8m0(s)
    assert e.dtype == E8M0 and e.shape == s.shape
    assert np.array_equal(u8(e), sm.scale_to_e8m0(f32(s)))
    assert np.array_equal(u8(e).reshape(-1), np.arange(1, 255, dtype=np.uint8))
    back = fx.e8m0_to_scale(e)
    assert back.dtype == torch.float32 and back.shape == s.shape
    assert np.array_equal(f32(back).view(np.uint32), f32(s).view(np.uint32))


def test_scale_to_e8m0_typical_block_scales():
    g = torch.Generator().manual_seed(1)
    s = torch.exp2(torch.randint(-20, 5, (17, 56), generator=g).float())
    e = fx.scale_to_e8m0(s)
    assert np.array_equal(u8(e), sm.scale_to_e8m0(f32(s)))
    assert torch.equal(fx.e8m0_to_scale(e), s)
    # the byte is bits >> 23
    assert np.array_equal(u8(e), (f32(s).view(np.uint32) >> 23).astype(np.uint8))


BAD = [
    ("non_power", 3.0),
    ("non_power_close", 1.0000001),
    ("zero", 0.0),
    ("neg_zero", -0.0),
    ("negative", -0.5),
    ("negative_non_power", -3.0),
    ("subnormal", 2.0 ** -127),
    ("min_subnormal", 2.0 ** -149),
    ("inf", math.inf),
    ("neg_inf", -math.inf),
    ("nan", math.nan),
]


@pytest.mark.parametrize("name,value", BAD, ids=[b[0] for b in BAD])
def test_scale_to_e8m0_rejects(name, value):
    s = torch.full((3, 4), 0.25)
    s[1, 2] = value
    s[2, 0] = 7.0  # a later offender must not be the one named
    with pytest.raises(ValueError) as ei:
        fx.scale_to_e8m0(s)
    msg = str(ei.value)
    assert "(1, 2)" in msg, msg
    v = float(torch.tensor(value, dtype=torch.float32))
    if math.isnan(v):
        assert "nan" in msg.lower(), msg
    else:
        assert repr(v) in msg or str(v) in msg, msg
    # the model agrees about which block is first
    with pytest.raises(sm.E8M0ConversionError) as em:
        sm.scale_to_e8m0(f32(s))
    assert em.value.index == (1, 2)


def test_scale_to_e8m0_first_offender_row_major_and_1d():
    s = torch.full((4, 3), 2.0)
    s[3, 0] = 5.0
    s[2, 2] = 6.0
    with pytest.raises(ValueError, match=r"\(2, 2\)"):
        fx.scale_to_e8m0(s)
    s1 = torch.full((10,), 0.5)
    s1[7] = 0.3
    with pytest.raises(ValueError, match=r"\(7,\)|\b7\b"):
        fx.scale_to_e8m0(s1)


def test_scale_to_e8m0_noncontiguous():
    s = torch.exp2(torch.randint(-8, 8, (6, 5)).float())
    t = s.t()
    e = fx.scale_to_e8m0(t)
    assert e.shape == t.shape
    assert torch.equal(fx.e8m0_to_scale(e), t)
    bad = s.clone()
    bad[4, 1] = 3.0
    with pytest.raises(ValueError, match=r"\(1, 4\)"):  # (1, 4) in the transposed view
        fx.scale_to_e8m0(bad.t())


def test_scale_to_e8m0_wrong_dtype():
    with pytest.raises(ValueError):
        fx.scale_to_e8m0(torch.ones(2, 2, dtype=torch.bfloat16))


def test_e8m0_to_scale_all_bytes():
    b = torch.arange(256, dtype=torch.uint8).reshape(16, 16)
    v = fx.e8m0_to_scale(b.view(E8M0))
    assert v.dtype == torch.float32 and v.shape == (16, 16)
    ours = sm.e8m0_decode(b.numpy())
    got = f32(v)
    assert np.isnan(got.reshape(-1)[255]) and np.isnan(ours.reshape(-1)[255])
    assert np.array_equal(got.reshape(-1)[:255].view(np.uint32), ours.reshape(-1)[:255].view(np.uint32))
    # bytes 1..254 are exactly byte << 23
    bb = np.arange(1, 255, dtype=np.uint32)
    assert np.array_equal(got.reshape(-1)[1:255].view(np.uint32), bb << 23)
    # torch's own conversion agrees everywhere (0 -> 2^-127, 0xFF -> NaN)
    t = b.view(E8M0).to(torch.float32)
    assert torch.equal(t.nan_to_num(7.0), v.nan_to_num(7.0))


def test_e8m0_to_scale_noncontiguous_and_wrong_dtype():
    b = torch.randint(1, 255, (5, 7), dtype=torch.uint8).view(E8M0)
    assert torch.equal(fx.e8m0_to_scale(b.t()), fx.e8m0_to_scale(b).t())
    with pytest.raises(ValueError):
        fx.e8m0_to_scale(torch.ones(2, 2))
