"""Fp8BlockLinear and quantize_model_ (sglang_fp8ext/module.py).

The block quantization is checked bit for bit against ``ref_block_quant`` below, written in
numpy from the formula (scale = fl32(amax / 448) per 128x128 block, 1.0 for an all-zero block,
optionally rounded up to a power of two; q = e4m3fn_rne(clamp(w / scale, +-448))), with the e4m3
rounding of the independent golden model (tests/spec_model.py). Forward outputs are checked
against the float64 GEMM of SPEC §3.4 from that reference weight and the golden model's activation
quantization, within SPEC §3.4's 4e-3 per-row tolerance. No test feeds all-zero inputs.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch
from torch import nn

import sglang_fp8ext as fx
import sglang_fp8ext.module as fx_module
import spec_model as sm
from conftest import ACT_NAME, E8M0, FP8, act_bits, assert_codes_equal, assert_gemm_contract, dense, u8

SWITCHES = ("SGL_FP8_SMALLM", "SGLANG_ROCM_SMALLM_FP8_BS", "SGLANG_DSV4_DENSE_MXSCALE", "SGLANG_DSV4_DENSE_MXSCALE_SHAPES")


@pytest.fixture(autouse=True)
def _clean_switches(monkeypatch):
    for name in SWITCHES:
        monkeypatch.delenv(name, raising=False)


# ---- independent reference -----------------------------------------------------------------------


def ref_block_quant(w: np.ndarray, pow2: bool = False):
    """The brief's formula in numpy float32: returns (e4m3 codes [N, K], fp32 scales [NB, KB])."""
    w = np.asarray(w, dtype=np.float32)
    N, K = w.shape
    NB, KB = -(-N // 128), K // 128
    codes = np.empty((N, K), dtype=np.uint8)
    scale = np.empty((NB, KB), dtype=np.float32)
    for i in range(NB):
        for j in range(KB):
            rows, cols = slice(128 * i, min(128 * (i + 1), N)), slice(128 * j, 128 * (j + 1))
            blk = w[rows, cols]
            amax = np.float32(np.abs(blk).max())
            if amax == 0:
                s = np.float32(1.0)
            else:
                s = np.float32(amax / np.float32(448.0))  # IEEE fp32 division
                if pow2:
                    m, e = np.frexp(np.float64(s))  # s = m * 2^e, m in [0.5, 1)
                    s = np.float32(np.ldexp(1.0, int(e) - 1 if m == 0.5 else int(e)))
                    s = max(s, np.float32(2.0**-126))  # documented floor: smallest normal power of two
            scale[i, j] = s
            codes[rows, cols] = sm.e4m3fn_rne(np.clip(blk / s, np.float32(-448), np.float32(448)))
    return codes, scale


def e8m0_bytes_of(scale: np.ndarray) -> np.ndarray:
    """Exponent byte of exact powers of two, via frexp (independent of the bit trick in layout.py)."""
    m, e = np.frexp(np.asarray(scale, dtype=np.float64))
    assert np.all(m == 0.5), "not powers of two"
    return (e - 1 + 127).astype(np.uint8)


def ref_forward(x: torch.Tensor, codes: np.ndarray, scale: np.ndarray, bias=None, e8m0: bool = False) -> np.ndarray:
    """float64 SPEC §3.4 GEMM: x quantized by the golden model (fp32 or ue8m0 scales), times the
    reference weight dequantized with ``scale`` (values)."""
    x2 = x.reshape(-1, x.shape[-1])
    eq, es = sm.quant_act_bits(act_bits(x2), ACT_NAME[x.dtype], e8m0)
    b = None if bias is None else dense(bias).double().numpy()
    return sm.gemm_ref(eq, sm.scale_values(es, e8m0), codes, np.asarray(scale, dtype=np.float64), b)


def act(shape, dtype=torch.bfloat16, seed=0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g)
    x[..., 7] *= 30  # an outlier channel, as in real activations
    return x.to(dtype)


def float_linear(N, K, bias=True, dtype=torch.bfloat16, seed=0, device="cpu") -> nn.Linear:
    g = torch.Generator().manual_seed(1000 + seed)
    lin = nn.Linear(K, N, bias=bias)
    with torch.no_grad():
        lin.weight.copy_(torch.randn(N, K, generator=g) * 0.05 * torch.exp(torch.randn(N, 1, generator=g)))
        if bias:
            lin.bias.copy_(torch.randn(N, generator=g))
    return lin.to(device=device, dtype=dtype)


def adversarial_weight(N=272, K=384, dtype=torch.bfloat16) -> torch.Tensor:
    """Blocks (row-block, col-block) of a [272, 384] weight (3 x 3 blocks, the last row-block 16
    rows high): a huge outlier, an all-zero block, +-amax pairs landing on +-448, e4m3 ties."""
    g = torch.Generator().manual_seed(5)
    w = torch.randn(N, K, generator=g) * 0.02
    w[3, 5] = 1.0e4  # (0, 0): one outlier -> everything else underflows to tiny codes or zero
    w[128:256, 128:256] = 0  # (1, 1): all zero -> scale 1.0
    w[256 + 3, 256 + 9] = 3.5  # (2, 2): the partial block; +-amax -> +-448
    w[256 + 10, 256 + 100] = -3.5
    # (0, 2): amax 448 gives scale exactly 1.0, and the other values sit on e4m3 midpoints:
    # 1.0625 is halfway between 1.0 and 1.125 (ties to even -> 1.0), 1.1875 between 1.125 and 1.25
    # (-> 1.25), 17 between 16 and 18 (-> 16); exact in bf16/fp16/fp32.
    w[0:128, 256:384] = torch.tensor([1.0625, -1.1875, 17.0, 0.5]).repeat(128, 32)
    w[64, 300] = 448.0
    # (1, 0): values straddling the e4m3 subnormal range after scaling
    w[128:256, 0:128] *= torch.logspace(-4, 0, 128)[None, :]
    return w.to(dtype)


def check_quantized(module: fx.Fp8BlockLinear, w: torch.Tensor, pow2: bool):
    codes, scale = ref_block_quant(dense(w).float().numpy(), pow2)
    assert module.weight.dtype == FP8 and tuple(module.weight.shape) == tuple(w.shape)
    assert module.weight_scale_inv.dtype == torch.float32
    assert tuple(module.weight_scale_inv.shape) == scale.shape
    got_scale = dense(module.weight_scale_inv).numpy()
    if not np.array_equal(got_scale.view(np.uint32), scale.view(np.uint32)):
        i = tuple(np.argwhere(got_scale.view(np.uint32) != scale.view(np.uint32))[0])
        raise AssertionError(f"scale of block {i}: got {got_scale[i]!r}, expected {scale[i]!r}")
    assert_codes_equal(u8(module.weight), codes, "from_float weight codes", dense(w).float().numpy())
    return codes, scale


# ---- construction and quantization -----------------------------------------------------------------


def test_constructor_validates_shapes():
    with pytest.raises(ValueError, match=r"K = 200"):
        fx.Fp8BlockLinear(200, 256)
    with pytest.raises(ValueError, match=r"N = 100"):
        fx.Fp8BlockLinear(256, 100)
    with pytest.raises(ValueError, match="bfloat16 or float16"):
        fx.Fp8BlockLinear(256, 256, dtype=torch.float32)


def test_fresh_module_is_nan_not_zeros():
    """Documented: __init__ fills NaN, so a module used before loading cannot look plausible."""
    m = fx.Fp8BlockLinear(256, 144, bias=True)
    assert tuple(m.weight.shape) == (144, 256) and m.weight.dtype == FP8 and not m.weight.requires_grad
    assert tuple(m.weight_scale_inv.shape) == (2, 2) and m.weight_scale_inv.dtype == torch.float32
    assert m.bias.dtype == torch.bfloat16
    assert torch.isnan(m.weight.float()).all() and torch.isnan(m.weight_scale_inv).all() and torch.isnan(m.bias).all()
    assert torch.isnan(m(act((3, 256)))).all()
    meta = fx.Fp8BlockLinear(256, 144, device="meta")
    assert meta.weight.device.type == "meta"


@pytest.mark.parametrize("pow2", [False, True], ids=["fp32scale", "pow2scale"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_from_float_adversarial(device, dtype, pow2):
    w = adversarial_weight(dtype=dtype)
    lin = nn.Linear(384, 272, bias=False).to(device=device, dtype=dtype)
    with torch.no_grad():
        lin.weight.copy_(w.to(device))
    m = fx.Fp8BlockLinear.from_float(lin, power_of_two_scales=pow2)
    assert m.weight.device.type == device
    assert m.dtype == (torch.bfloat16 if dtype == torch.float32 else dtype)
    codes, scale = check_quantized(m, w, pow2)
    # properties of the formula, stated directly
    assert scale[1, 1] == 1.0 and not codes[128:256, 128:256].any()
    vals = sm.e4m3_decode(codes)
    if not pow2:
        assert scale[0, 2] == 1.0 and vals[64, 300] == 448.0
        assert vals[0, 256] == 1.0 and vals[0, 257] == -1.25 and vals[0, 258] == 16.0  # ties to even
        assert vals[3, 5] == 448.0 and vals[256 + 3, 256 + 9] == 448.0 and vals[256 + 10, 256 + 100] == -448.0
    else:
        assert np.all(e8m0_bytes_of(scale) > 0)
        assert np.abs(vals[np.isfinite(vals)]).max() <= 448.0


def test_from_float_tiny_fp32_weights():
    """fp32 weights whose block scale is subnormal (and, rounded up to a power of two, floored at
    2^-126 so that it still converts to e8m0)."""
    g = torch.Generator().manual_seed(3)
    w = torch.randn(128, 256, generator=g)
    w[:, 128:] *= 1e-39
    lin = nn.Linear(256, 128, bias=False)
    with torch.no_grad():
        lin.weight.copy_(w)
    for pow2 in (False, True):
        m = fx.Fp8BlockLinear.from_float(lin, power_of_two_scales=pow2)
        check_quantized(m, w, pow2)


def test_from_float_rejects_non_finite():
    lin = float_linear(128, 256)
    with torch.no_grad():
        lin.weight[3, 3] = float("nan")
    with pytest.raises(ValueError, match="non-finite"):
        fx.Fp8BlockLinear.from_float(lin)


# ---- forward ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("lead", [(1,), (5,), (14,), (33,), (2, 3), (2, 7), (2, 1, 4)])
@pytest.mark.parametrize("N", [272, 256])  # a partial last block of rows, and whole blocks
def test_forward_matches_float64_reference(device, dtype, lead, N):
    K = 384
    lin = float_linear(N, K, bias=True, dtype=dtype, device=device)
    m = fx.Fp8BlockLinear.from_float(lin)
    m.process_weights_after_loading()
    codes, scale = ref_block_quant(dense(lin.weight).float().numpy())
    x = act((*lead, K), dtype, seed=len(lead)).to(device)
    out = m(x)
    assert out.shape == (*lead, N) and out.dtype == dtype and out.device.type == device
    ref = ref_forward(x.cpu(), codes, scale, bias=lin.bias)
    assert_gemm_contract(out.reshape(-1, N), ref, f"Fp8BlockLinear {lead}")
    # leading dims are only a view: the same rows as a flat [M, K] call
    assert torch.equal(out.reshape(-1, N), m(x.reshape(-1, K)))


def test_forward_rejects_wrong_dtype():
    m = fx.Fp8BlockLinear.from_float(float_linear(128, 256))
    with pytest.raises(ValueError, match="dtype"):
        m(act((2, 256), torch.float16))


@pytest.mark.parametrize("ue8m0", [False, True], ids=["fp32", "e8m0"])
def test_prequantized_tuple_from_rmsnorm_quant(device, monkeypatch, ue8m0):
    N, K = 272, 384
    if ue8m0:
        monkeypatch.setenv("SGLANG_DSV4_DENSE_MXSCALE", "1")
    lin = float_linear(N, K, bias=True, device=device)
    m = fx.Fp8BlockLinear.from_float(lin, power_of_two_scales=ue8m0)
    m.process_weights_after_loading()
    assert (m.weight_scale_e8m0 is not None) == ue8m0
    codes, scale = ref_block_quant(dense(lin.weight).float().numpy(), pow2=ue8m0)
    x = act((2, 3, K), seed=9).to(device)
    norm_w = (1 + 0.1 * torch.randn(K, generator=torch.Generator().manual_seed(2))).to(torch.bfloat16).to(device)
    q, s = fx.rmsnorm_quant(x, norm_w, 1e-6, ue8m0=ue8m0)
    assert s.dtype == (E8M0 if ue8m0 else torch.float32)
    out = m((q, s))
    assert out.shape == (2, 3, N) and out.dtype == torch.bfloat16
    xs = sm.scale_values(u8(s) if ue8m0 else dense(s).numpy(), ue8m0).reshape(-1, K // 128)
    ref = sm.gemm_ref(u8(q).reshape(-1, K), xs, codes, scale.astype(np.float64), dense(lin.bias).double().numpy())
    assert_gemm_contract(out.reshape(-1, N), ref, "Fp8BlockLinear((q, scale))")


def test_e8m0_input_without_e8m0_weight_scales_is_an_error():
    K = 256
    m = fx.Fp8BlockLinear.from_float(float_linear(128, K), power_of_two_scales=True)
    m.process_weights_after_loading()  # switch off: no e8m0 copy
    q, s = fx.rmsnorm_quant(act((2, K)), torch.ones(K, dtype=torch.bfloat16), 1e-6, ue8m0=True)
    with pytest.raises(ValueError, match="no e8m0 weight scales"):
        m((q, s))


# ---- process_weights_after_loading and the MXSCALE switch ------------------------------------------


class SpyLinear:
    """Records the weight-scale dtype every fp8_block_linear call of module.py receives."""

    def __init__(self, monkeypatch):
        self.scale_dtypes = []
        real = fx_module.fp8_block_linear

        def spy(x, weight, weight_scale, *args, **kwargs):
            self.scale_dtypes.append(weight_scale.dtype)
            return real(x, weight, weight_scale, *args, **kwargs)

        monkeypatch.setattr(fx_module, "fp8_block_linear", spy)


def test_mxscale_on_with_power_of_two_scales(device, monkeypatch):
    N, K = 272, 384
    monkeypatch.setenv("SGLANG_DSV4_DENSE_MXSCALE", "1")
    lin = float_linear(N, K, bias=False, device=device)
    m = fx.Fp8BlockLinear.from_float(lin, power_of_two_scales=True)
    scale_before = dense(m.weight_scale_inv).clone()
    m.process_weights_after_loading()
    codes, scale = ref_block_quant(dense(lin.weight).float().numpy(), pow2=True)
    assert m.weight_scale_e8m0 is not None and m.weight_scale_e8m0.dtype == E8M0
    assert np.array_equal(u8(m.weight_scale_e8m0), e8m0_bytes_of(scale))
    # the fp32 scales are kept, unchanged, for inputs with fp32 scales
    assert m.weight_scale_inv.dtype == torch.float32 and torch.equal(dense(m.weight_scale_inv), scale_before)
    assert "e8m0" in repr(m)

    spy = SpyLinear(monkeypatch)
    x = act((4, K), seed=4).to(device)
    out = m(x)
    assert spy.scale_dtypes == [E8M0]
    ref_e8m0 = ref_forward(x.cpu(), codes, scale, e8m0=True)
    assert_gemm_contract(out, ref_e8m0, "forward with e8m0 scales")
    # the check can tell the paths apart: the fp32 path misses the ue8m0 reference by far more
    out_fp32 = fx.fp8_block_linear(x, m.weight, m.weight_scale_inv)
    o = out_fp32.cpu().double().numpy()
    assert sm.row_rel_err(o, ref_e8m0).max() > 4e-3


def test_mxscale_on_with_other_scales_stays_fp32(device, monkeypatch, caplog):
    monkeypatch.setenv("SGLANG_DSV4_DENSE_MXSCALE", "1")
    m = fx.Fp8BlockLinear.from_float(float_linear(272, 384, device=device))  # amax/448: not powers of two
    spy = SpyLinear(monkeypatch)
    with caplog.at_level(logging.INFO, logger="sglang_fp8ext"):
        m.process_weights_after_loading()
    assert m.weight_scale_e8m0 is None
    assert any("stay fp32" in r.getMessage() and "not a positive normal power of two" in r.getMessage() for r in caplog.records)
    m(act((2, 384)).to(device))
    assert spy.scale_dtypes == [torch.float32]


def test_mxscale_off_and_shape_restricted(monkeypatch):
    a = fx.Fp8BlockLinear.from_float(float_linear(272, 384), power_of_two_scales=True)
    b = fx.Fp8BlockLinear.from_float(float_linear(128, 256), power_of_two_scales=True)
    a.process_weights_after_loading()  # switch unset
    assert a.weight_scale_e8m0 is None

    a = fx.Fp8BlockLinear.from_float(float_linear(272, 384), power_of_two_scales=True)
    monkeypatch.setenv("SGLANG_DSV4_DENSE_MXSCALE", "1")
    monkeypatch.setenv("SGLANG_DSV4_DENSE_MXSCALE_SHAPES", "272x384, 4096x2048")
    a.process_weights_after_loading()
    b.process_weights_after_loading()
    assert a.weight_scale_e8m0 is not None and b.weight_scale_e8m0 is None


def test_process_is_idempotent(monkeypatch):
    monkeypatch.setenv("SGLANG_DSV4_DENSE_MXSCALE", "1")
    m = fx.Fp8BlockLinear.from_float(float_linear(272, 384), power_of_two_scales=True)
    m.process_weights_after_loading()
    e8 = m.weight_scale_e8m0
    x = act((3, 384))
    out1 = m(x)
    m.process_weights_after_loading()  # no-op: the e8m0 copy is not rebuilt
    assert m.weight_scale_e8m0 is e8
    monkeypatch.delenv("SGLANG_DSV4_DENSE_MXSCALE")
    m.process_weights_after_loading()  # no-op, whatever the switch says now
    assert m.weight_scale_e8m0 is e8
    assert torch.equal(m(x), out1)


def test_rocm_shuffle_path_simulated_on_cpu(monkeypatch):
    """The ROCm preparation (AITER shuffle), forced on the CPU: shuffled once only, forward equal
    to the plain weight's, state_dict exports the plain layout, load_state_dict resets it."""
    monkeypatch.setattr(fx.Fp8BlockLinear, "_should_shuffle", lambda self: True)
    lin = float_linear(272, 384)
    plain = fx.Fp8BlockLinear.from_float(lin)
    m = fx.Fp8BlockLinear.from_float(lin)
    m.process_weights_after_loading()
    m.process_weights_after_loading()
    assert m.is_shuffled and m.weight.is_shuffled
    codes = u8(plain.weight)
    assert np.array_equal(u8(m.weight), sm.shuffle_bytes(codes))  # exactly one shuffle
    x = act((5, 384))
    assert torch.equal(m(x), plain(x))
    assert "shuffled=True" in repr(m)
    sd = m.state_dict()
    assert np.array_equal(u8(sd["weight"]), codes)
    assert m.is_shuffled  # exporting does not change the module
    m.load_state_dict(sd)
    assert not m.is_shuffled and np.array_equal(u8(m.weight), codes)
    m.process_weights_after_loading()
    assert m.is_shuffled and torch.equal(m(x), plain(x))


# ---- state dict ------------------------------------------------------------------------------------


def test_state_dict_round_trip_with_checkpoint_names(device, monkeypatch):
    monkeypatch.setenv("SGLANG_DSV4_DENSE_MXSCALE", "1")
    lin = float_linear(272, 384, bias=True, device=device)
    src = fx.Fp8BlockLinear.from_float(lin, power_of_two_scales=True)
    src.process_weights_after_loading()
    sd = src.state_dict()
    # the checkpoint names (the e8m0 copy is derived, never saved)
    assert set(sd) == {"weight", "weight_scale_inv", "bias"}
    assert sd["weight"].dtype == FP8 and sd["weight_scale_inv"].dtype == torch.float32

    dst = fx.Fp8BlockLinear(384, 272, bias=True, device=device)
    dst.load_state_dict(sd)
    dst.process_weights_after_loading()
    x = act((3, 384)).to(device)
    assert torch.equal(dst(x), src(x))

    # a hand-made "checkpoint" (from the reference quantizer), nested, loads under its prefix
    codes, scale = ref_block_quant(dense(lin.weight).float().numpy())
    ckpt = {
        "proj.weight": torch.from_numpy(codes).view(FP8).to(device),
        "proj.weight_scale_inv": torch.from_numpy(scale).to(device),
        "proj.bias": lin.bias.detach().clone(),
    }
    model = nn.Module()
    model.proj = fx.Fp8BlockLinear(384, 272, bias=True, device=device)
    model.load_state_dict(ckpt)
    model.proj.process_weights_after_loading()
    assert_gemm_contract(model.proj(x), ref_forward(x.cpu(), codes, scale, bias=lin.bias), "loaded checkpoint")


def _checkpoint(N, K, pow2, seed=0):
    lin = float_linear(N, K, bias=False, seed=seed)
    codes, scale = ref_block_quant(dense(lin.weight).float().numpy(), pow2=pow2)
    return torch.from_numpy(codes).view(FP8), torch.from_numpy(scale), codes, scale


def test_ue8m0_checkpoint_keeps_its_e8m0_scales(device):
    """A DeepSeek-V4-style checkpoint stores e8m0 weight_scale_inv: the module keeps the format, so
    bf16 input gets the ue8m0 activation scales of SPEC §3.2 (fp32 ones miss that reference)."""
    N, K = 272, 384
    w, scale, codes, scale_np = _checkpoint(N, K, pow2=True)
    e8m0 = torch.from_numpy(e8m0_bytes_of(scale_np)).view(E8M0)
    m = fx.Fp8BlockLinear(K, N, device=device)
    m.load_state_dict({"weight": w.to(device), "weight_scale_inv": e8m0.to(device)})
    m.process_weights_after_loading()  # switch off: nothing to derive
    assert m.weight_scale_inv.dtype == E8M0 and np.array_equal(u8(m.weight_scale_inv), u8(e8m0))
    assert "scales=e8m0," in repr(m)
    x = act((5, K), seed=3).to(device)
    ref_e8m0 = ref_forward(x.cpu(), codes, scale_np, e8m0=True)
    assert_gemm_contract(m(x), ref_e8m0, "ue8m0 checkpoint, bf16 input")
    assert sm.row_rel_err(ref_forward(x.cpu(), codes, scale_np).astype(np.float64), ref_e8m0).max() > 4e-3
    # pre-quantized input: e8m0 scales pair with the module's e8m0 scales; fp32 ones are refused
    q, s = fx.per1x128_quant(x, ue8m0=True)
    xs = sm.scale_values(u8(s), True)
    assert_gemm_contract(m((q, s)), sm.gemm_ref(u8(q), xs, codes, scale_np.astype(np.float64)), "ue8m0 checkpoint, (q, s)")
    with pytest.raises(ValueError, match="holds e8m0 weight scales"):
        m(fx.per1x128_quant(x, ue8m0=False))
    # state_dict exports the checkpoint's format, and an fp32 checkpoint loaded afterwards is fp32 again
    assert m.state_dict()["weight_scale_inv"].dtype == E8M0
    m.load_state_dict({"weight": w.to(device), "weight_scale_inv": scale.to(device)})
    assert m.weight_scale_inv.dtype == torch.float32
    assert_gemm_contract(m(x), ref_forward(x.cpu(), codes, scale_np), "fp32 checkpoint after a ue8m0 one")


@pytest.mark.parametrize("scale_dtype", [torch.bfloat16, torch.float16])
def test_half_precision_checkpoint_scales_load_exactly(scale_dtype):
    """Qwen3 FP8 checkpoints store weight_scale_inv in bf16 (some fp16): exact in float32."""
    N, K = 256, 256
    w, scale, codes, _ = _checkpoint(N, K, pow2=False)
    half = scale.to(scale_dtype)
    m = fx.Fp8BlockLinear(K, N)
    m.load_state_dict({"weight": w, "weight_scale_inv": half})
    assert m.weight_scale_inv.dtype == torch.float32
    assert np.array_equal(dense(m.weight_scale_inv).numpy(), half.double().numpy().astype(np.float32))
    x = act((3, K))
    assert_gemm_contract(m(x), ref_forward(x, codes, half.double().numpy()), f"{scale_dtype} scales")


@pytest.mark.parametrize("bad", ["uint8", "bf16"])
def test_checkpoint_weight_that_is_not_e4m3_is_refused(bad):
    """copy_ would convert by value: a uint8 view of the bytes, or a bf16 weight, must not load."""
    N, K = 256, 256
    w, scale, _, _ = _checkpoint(N, K, pow2=False)
    weight = w.view(torch.uint8) if bad == "uint8" else w.to(torch.bfloat16)
    m = fx.Fp8BlockLinear(K, N)
    with pytest.raises(ValueError, match=r"checkpoint tensor weight has dtype .*expected float8_e4m3fn"):
        m.load_state_dict({"weight": weight, "weight_scale_inv": scale})
    with pytest.raises(ValueError, match="weight_scale_inv has dtype torch.int32"):
        m.load_state_dict({"weight": w, "weight_scale_inv": scale.to(torch.int32)})


def test_meta_module_prepares_without_values(monkeypatch):
    """A module on the meta device (built before its weights exist) prepares without reading values."""
    monkeypatch.setenv("SGLANG_DSV4_DENSE_MXSCALE", "1")
    m = fx.Fp8BlockLinear(256, 256, device="meta")
    m.process_weights_after_loading()
    assert m.weight_scale_e8m0 is None and m.weight.is_meta


def test_tuple_input_without_a_scale_tensor_is_an_error():
    m = fx.Fp8BlockLinear.from_float(float_linear(128, 256))
    q, _ = fx.per1x128_quant(act((2, 256)))
    with pytest.raises(ValueError, match="input_scale a tensor"):
        m((q, None))


def test_to_dtype_keeps_fp8_formats():
    m = fx.Fp8BlockLinear.from_float(float_linear(128, 256, bias=True))
    w = u8(m.weight).copy()
    s = dense(m.weight_scale_inv).clone()
    m.to(torch.float16)
    assert m.weight.dtype == FP8 and np.array_equal(u8(m.weight), w)
    assert m.weight_scale_inv.dtype == torch.float32 and torch.equal(m.weight_scale_inv, s)
    assert m.bias.dtype == torch.float16 and m.dtype == torch.float16
    assert m(act((2, 256), torch.float16)).dtype == torch.float16
    m.float()  # no fp32 activations for the FP8 kernels: everything keeps its dtype
    assert m.weight.dtype == FP8 and m.bias.dtype == torch.float16 and m.dtype == torch.float16


# ---- quantize_model_ -------------------------------------------------------------------------------


class MyLinear(nn.Linear):
    pass


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.q_proj = nn.Linear(256, 384, bias=True)
        self.small = nn.Linear(256, 100)  # N % 16 != 0
        self.odd_k = nn.Linear(200, 256)  # K % 128 != 0
        self.custom = MyLinear(256, 256)
        self.mlp = nn.Sequential(nn.Linear(256, 512), nn.SiLU(), nn.Linear(512, 256))

    def forward(self, x):
        return x + self.mlp(x) + self.q_proj(x)[..., :256] + self.custom(x)


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(64, 256)
        self.blocks = nn.ModuleList([Block(), Block()])
        self.lm_head = nn.Linear(256, 64, bias=False)
        self.lm_head.weight = self.embed.weight  # tied
        self.alias = self.blocks[0].q_proj  # one linear registered under two names

    def forward(self, ids):
        h = self.embed(ids)
        for b in self.blocks:
            h = b(h)
        return self.lm_head(h)


def test_quantize_model(device, caplog):
    torch.manual_seed(0)
    model = TinyLM().to(device=device, dtype=torch.bfloat16)
    ids = torch.randint(0, 64, (2, 5), generator=torch.Generator().manual_seed(1)).to(device)
    with torch.no_grad():
        ref = model(ids).float()
    originals = {
        n: m.weight.detach().clone() for n, m in model.named_modules(remove_duplicate=False) if isinstance(m, nn.Linear)
    }
    with caplog.at_level(logging.INFO, logger="sglang_fp8ext"):
        report = fx.quantize_model_(model, skip=lambda name: name == "blocks.1.mlp.2")

    expect_swapped = ["blocks.0.q_proj", "blocks.0.mlp.0", "blocks.0.mlp.2", "blocks.1.q_proj", "blocks.1.mlp.0", "alias"]
    assert sorted(report.swapped) == sorted(expect_swapped), report
    assert set(report.skipped) == {
        "blocks.0.small", "blocks.0.odd_k", "blocks.0.custom",
        "blocks.1.small", "blocks.1.odd_k", "blocks.1.custom", "blocks.1.mlp.2", "lm_head",
    }, report  # fmt: skip
    assert "N = 100" in report.skipped["blocks.0.small"]
    assert "K = 200" in report.skipped["blocks.1.odd_k"]
    assert "subclass" in report.skipped["blocks.0.custom"]
    assert "skip predicate" in report.skipped["blocks.1.mlp.2"]
    assert "shared" in report.skipped["lm_head"] and "embed" in report.skipped["lm_head"]
    assert "lm_head" in str(report) and "6 nn.Linear swapped" in str(report)
    assert any("6 nn.Linear swapped" in r.getMessage() and r.levelno == logging.INFO for r in caplog.records)

    # the tie survives; the alias and its original name point to the same new module
    assert model.lm_head.weight is model.embed.weight and type(model.lm_head) is nn.Linear
    assert model.alias is model.blocks[0].q_proj
    for name in expect_swapped:
        mod = model.get_submodule(name)
        assert isinstance(mod, fx.Fp8BlockLinear) and mod.weight.device.type == device
        codes, scale = ref_block_quant(dense(originals[name]).float().numpy())
        assert np.array_equal(u8(mod.weight), codes) and np.array_equal(dense(mod.weight_scale_inv).numpy(), scale)
    assert type(model.blocks[1].mlp[2]) is nn.Linear and type(model.blocks[0].small) is nn.Linear

    # the quantized model still computes the same function, to FP8 accuracy: weight and
    # activation rounding (3 mantissa bits, ~3.6% rms each) compound over two blocks
    with torch.no_grad():
        out = model(ids).float()
    rel = ((out - ref).norm() / ref.norm()).item()
    assert rel < 0.08, rel


# ---- torch.compile ---------------------------------------------------------------------------------


def test_compile_fullgraph_cpu(monkeypatch):
    """A model with an fp32-scale module, an e8m0-scale module and a pre-quantized (q, scale) input
    compiles with fullgraph=True (inductor) and matches eager."""
    monkeypatch.setenv("SGLANG_DSV4_DENSE_MXSCALE", "1")
    monkeypatch.setenv("SGLANG_DSV4_DENSE_MXSCALE_SHAPES", "512x256")
    K = 256

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm_w = nn.Parameter(torch.ones(K, dtype=torch.bfloat16) * 1.1, requires_grad=False)
            self.up = fx.Fp8BlockLinear.from_float(float_linear(512, K, seed=1), power_of_two_scales=True)
            self.down = fx.Fp8BlockLinear.from_float(float_linear(K, 512, seed=2))
            self.gate = fx.Fp8BlockLinear.from_float(float_linear(256, K, seed=3))

        def forward(self, x):
            h = self.down(torch.nn.functional.silu(self.up(x)))
            return h + self.gate(fx.rmsnorm_quant(h, self.norm_w, 1e-6))

    net = Net()
    for mod in (net.up, net.down, net.gate):
        mod.process_weights_after_loading()
    assert net.up.weight_scale_e8m0 is not None and net.down.weight_scale_e8m0 is None
    x = act((3, K), seed=11)
    eager = net(x)
    compiled = torch.compile(net, fullgraph=True)
    got = compiled(x)
    assert got.shape == eager.shape and torch.isfinite(got).all()
    rel = ((got.float() - eager.float()).norm() / eager.float().norm()).item()
    # inductor may round the fused silu differently from eager bf16 by one ulp; the FP8 ops are
    # the same kernels, so anything beyond bf16 rounding noise is a real difference
    assert rel < 1e-2, rel
