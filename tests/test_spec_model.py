"""Self-checks of the golden model (tests/spec_model.py) against independent references: torch's
own float8 / bf16 / fp16 / e8m0 conversions and the SPEC's view/permute expression. A model that
is wrong here would make every other test meaningless."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import spec_model as sm
from conftest import act_bits, from_act_bits


def test_inv448_constant():
    assert sm.INV_448 == np.float32(1.0) / np.float32(448.0)
    assert sm.INV_448.view(np.uint32) == 0x3B124925


def test_e4m3_decode_table_matches_torch():
    codes = torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn)
    t = codes.to(torch.float64).numpy()
    ours = sm.E4M3_VALUES
    assert np.array_equal(np.isnan(t), np.isnan(ours))
    fin = ~np.isnan(t)
    assert np.array_equal(t[fin], ours[fin])
    # -0 is code 0x80
    assert np.signbit(ours[0x80]) and ours[0x80] == 0
    assert np.nanmax(ours) == 448.0 and ours[1] == 2.0 ** -9


def _torch_e4m3(v: np.ndarray) -> np.ndarray:
    return torch.from_numpy(v.astype(np.float32)).to(torch.float8_e4m3fn).view(torch.uint8).numpy()


def test_e4m3_rne_all_bf16_values_in_range():
    """Every bf16 value in [-448, 448] (all of them) rounds like torch's conversion, bit for bit."""
    bits = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    v = sm.bf16_bits_to_f32(bits)
    v = v[np.isfinite(v) & (np.abs(v) <= 448)]
    assert v.size > 30000
    assert np.array_equal(sm.e4m3fn_rne(v), _torch_e4m3(v))


def test_e4m3_rne_all_fp16_values_in_range():
    bits = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    v = bits.view(np.float16).astype(np.float32)
    v = v[np.isfinite(v) & (np.abs(v) <= 448)]
    assert np.array_equal(sm.e4m3fn_rne(v), _torch_e4m3(v))


def test_e4m3_rne_midpoints_and_neighbours():
    """Exact ties between adjacent e4m3 values (ties go to the even code) and the fp32 values one
    ulp either side of every tie."""
    pos = sm.E4M3_VALUES[:0x7F]
    mids = ((pos[:-1] + pos[1:]) / 2).astype(np.float32)
    assert np.array_equal(mids.astype(np.float64), (pos[:-1] + pos[1:]) / 2)  # exact in fp32
    up = np.nextafter(mids, np.float32(np.inf))
    dn = np.nextafter(mids, np.float32(0))
    v = np.concatenate([mids, up, dn, pos.astype(np.float32)])
    v = np.concatenate([v, -v, np.float32([0.0, -0.0, 2.0 ** -10, 2.0 ** -11, 448.0, -448.0])])
    got = sm.e4m3fn_rne(v)
    assert np.array_equal(got, _torch_e4m3(v))
    # spot checks written by hand: 2^-10 is the tie between 0 and 2^-9 -> 0 (even);
    # 3*2^-10 ties 2^-9 (code 1) and 2^-8 (code 2) -> code 2; 432 ties 416 (0x7D) and 448 (0x7E)
    assert sm.e4m3fn_rne(np.float32([2.0 ** -10]))[0] == 0x00
    assert sm.e4m3fn_rne(np.float32([3 * 2.0 ** -10]))[0] == 0x02
    assert sm.e4m3fn_rne(np.float32([432.0]))[0] == 0x7E
    assert sm.e4m3fn_rne(np.float32([-432.0]))[0] == 0xFE
    assert sm.e4m3fn_rne(np.float32([17.0]))[0] == sm.e4m3fn_rne(np.float32([16.0]))[0]  # 17 ties 16/18 -> 16 (even)


def test_e4m3_rne_random_fp32():
    rng = np.random.default_rng(0)
    v = (rng.standard_normal(200000) * np.exp2(rng.integers(-14, 9, 200000))).astype(np.float32)
    v = np.clip(v, -448, 448)
    assert np.array_equal(sm.e4m3fn_rne(v), _torch_e4m3(v))


def test_e4m3_nan():
    assert sm.e4m3_is_nan(sm.e4m3fn_rne(np.float32([np.nan])))[0]


def test_e8m0_decode_matches_torch():
    b = torch.arange(256, dtype=torch.uint8)
    t = b.view(torch.float8_e8m0fnu).to(torch.float32).numpy()
    ours = sm.e8m0_decode(b.numpy())
    assert np.array_equal(np.isnan(t), np.isnan(ours))
    assert np.array_equal(t[:255], ours[:255])
    assert ours[0] == np.float32(2.0 ** -127) and ours[127] == 1.0 and np.isnan(ours[255])
    for byte in (1, 100, 127, 128, 254):
        assert ours[byte] == np.float32(2.0 ** (byte - 127))


def test_bf16_fp16_casts_match_torch():
    rng = np.random.default_rng(1)
    with np.errstate(over="ignore"):
        v = (rng.standard_normal(100000) * np.exp2(rng.integers(-140, 130, 100000))).astype(np.float32)
    v = np.concatenate([v, np.float32([0.0, -0.0, np.inf, -np.inf, 65504, 65520, 65519, 3.4e38])])
    t = torch.from_numpy(v)
    assert np.array_equal(sm.f32_to_bf16_bits(v), act_bits(t.to(torch.bfloat16)))
    assert np.array_equal(sm.f32_to_fp16_bits(v), act_bits(t.to(torch.float16)))
    bits = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    assert np.array_equal(
        sm.bf16_bits_to_f32(bits).view(np.uint32), from_act_bits(bits, torch.bfloat16).float().numpy().view(np.uint32)
    )


def test_quant_model_hand_examples():
    # all-zero group -> scale 1e-10f * fl32(1/448), q = 0
    q, s = sm.quant_1x128(np.zeros((1, 128), np.float32))
    assert s[0, 0] == np.float32(np.float32(1e-10) * sm.INV_448) and not q.any()
    # single element 448 -> scale fl32(448 * c), and q of it is 448 (code 0x7E)
    a = np.zeros((1, 128), np.float32)
    a[0, 5] = 448.0
    q, s = sm.quant_1x128(a)
    assert s[0, 0] == np.float32(448.0) * sm.INV_448 and q[0, 5] == 0x7E
    # ue8m0: amax 448 * 2^3 -> s = fl32(3584 * c); 3584 * c rounds to exactly 8? then e = 130
    a[0, 5] = 3584.0
    q, s = sm.quant_1x128(a, ue8m0=True)
    sv = np.float32(3584.0) * sm.INV_448
    e = int(sv.view(np.uint32) >> 23) + (1 if sv.view(np.uint32) & 0x7FFFFF else 0)
    assert s[0, 0] == e
    # NaN in a group: scale NaN, all its q NaN; other group untouched
    a = np.ones((1, 256), np.float32)
    a[0, 3] = np.nan
    q, s = sm.quant_1x128(a)
    assert np.isnan(s[0, 0]) and sm.e4m3_is_nan(q[0, :128]).all() and np.isfinite(s[0, 1])
    q, s = sm.quant_1x128(a, ue8m0=True)
    assert s[0, 0] == 0xFF and s[0, 1] != 0xFF
    # +Inf: scale +Inf
    a[0, 3] = -np.inf
    q, s = sm.quant_1x128(a)
    assert s[0, 0] == np.inf and sm.e4m3_is_nan(q[0, 3])


def test_quant_model_matches_a_torch_formulation():
    """The model against a second formulation written with torch fp32 ops."""
    g = torch.Generator().manual_seed(3)
    x = (torch.randn(64, 512, generator=g) * torch.exp2(torch.randint(-20, 20, (64, 1), generator=g).float())).bfloat16()
    a = x.float().view(64, 4, 128)
    amax = a.abs().amax(-1).clamp_min(torch.tensor(1e-10, dtype=torch.float32))
    scale = amax * torch.tensor([0x3B124925], dtype=torch.int32).view(torch.float32)
    inv = 1.0 / scale
    q = (a * inv[..., None]).clamp(-448, 448).to(torch.float8_e4m3fn).view(64, 512)
    mq, ms = sm.quant_act_bits(act_bits(x), "bf16")
    assert np.array_equal(mq, q.view(torch.uint8).numpy())
    assert np.array_equal(ms.view(np.uint32), scale.numpy().view(np.uint32))


@pytest.mark.parametrize("N,K", [(16, 32), (32, 64), (48, 256), (128, 128)])
def test_shuffle_formula_matches_spec_expression(N, K):
    w = np.random.default_rng(N + K).integers(0, 256, (N, K), dtype=np.uint8)
    expr = w.reshape(N // 16, 16, K // 32, 2, 16).transpose(0, 2, 3, 1, 4).reshape(N, K)
    assert np.array_equal(sm.shuffle_bytes(w), expr)
    assert np.array_equal(sm.unshuffle_bytes(sm.shuffle_bytes(w)), w)
    # a 16-row tile's 128-wide K block is 2048 contiguous bytes
    o = sm.shuffle_offsets(N, K)
    if K >= 128:
        blk = o[0:16, 0:128]
        assert blk.min() == 0 and blk.max() == 2047 and len(np.unique(blk)) == 2048
    assert len(np.unique(o)) == N * K


def test_scale_to_e8m0_model():
    s = np.float32([[1.0, 0.5], [2.0 ** -126, 2.0 ** 127]])
    assert np.array_equal(sm.scale_to_e8m0(s), np.uint8([[127, 126], [1, 254]]))
    for bad in (0.0, -1.0, 3.0, 2.0 ** -127, np.inf, np.nan):
        s2 = s.copy()
        s2[1, 0] = bad
        with pytest.raises(sm.E8M0ConversionError) as ei:
            sm.scale_to_e8m0(s2)
        assert ei.value.index == (1, 0)


def test_gemm_ref_matches_dequant_matmul():
    rng = np.random.default_rng(5)
    q = rng.integers(0, 0x7E, (3, 256)).astype(np.uint8)
    w = rng.integers(0, 0x7E, (144, 256)).astype(np.uint8)
    xs = rng.random((3, 2)) + 0.5
    ws = rng.random((2, 2)) + 0.5
    ref = sm.gemm_ref(q, xs, w, ws, bias=np.arange(144.0))
    xd = sm.E4M3_VALUES[q] * np.repeat(xs, 128, axis=1)
    wd = sm.E4M3_VALUES[w] * np.repeat(np.repeat(ws, 128, axis=0)[:144], 128, axis=1)
    np.testing.assert_allclose(ref, xd @ wd.T + np.arange(144.0), rtol=1e-12)


def test_rmsnorm_ref_matches_torch():
    g = torch.Generator().manual_seed(9)
    x = torch.randn(4, 256, generator=g).bfloat16()
    r = torch.randn(4, 256, generator=g).bfloat16()
    w = torch.randn(256, generator=g).bfloat16()
    y, ro = sm.rmsnorm_ref(act_bits(x), act_bits(w), 1e-6, "bf16", act_bits(r))
    h = (x.float() + r.float()).bfloat16()
    assert np.array_equal(ro, act_bits(h))
    hd = h.double()
    yt = (hd * torch.rsqrt(hd.pow(2).mean(-1, keepdim=True) + 1e-6) * w.double()).float().bfloat16()
    assert np.array_equal(y, act_bits(yt))
