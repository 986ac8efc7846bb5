"""SPEC §2: bad input never crashes; it raises RuntimeError/ValueError whose message names the
offending argument. Every case runs on the real kernels (cpu, and cuda where present) and on the
'meta' device, where the fake implementations must raise the same way. Also: the fakes produce
the right shapes, dtypes and strides on 'meta'."""

from __future__ import annotations

import re

import pytest
import torch

import sglang_fp8ext as fx
from conftest import E8M0, FP8, require_gpu

BF16, FP16, F32 = torch.bfloat16, torch.float16, torch.float32
M, K, N = 3, 256, 272  # N not a multiple of 128: w_scale is [3, 2]


def T(shape, dtype, dev):
    """A tensor of `shape`/`dtype` with valid (finite, positive-scale) contents."""
    if dev == "meta":
        return torch.empty(shape, dtype=dtype, device="meta")
    if dtype == FP8:
        return (torch.randn(shape) * 8).to(FP8).to(dev)
    if dtype == E8M0:
        return torch.full(shape, 0.125).to(E8M0).to(dev)
    if dtype in (torch.uint8, torch.int32):
        return torch.ones(shape, dtype=dtype, device=dev)
    if dtype == F32 and len(shape) == 2 and shape[-1] in (1, 2, 3):
        return (torch.rand(shape) * 0.01 + 1e-3).to(dev)
    return torch.randn(shape).to(dtype).to(dev)


def noncontig_rows(shape, dtype, dev):
    """[shape] view with a row stride of 2*shape[-1] (not contiguous, last stride 1)."""
    big = T((shape[0], 2 * shape[1]), dtype, dev)
    return big[:, : shape[1]]


def transposed(shape, dtype, dev):
    """[shape] view of a transposed buffer (last stride != 1)."""
    return T((shape[1], shape[0]), dtype, dev).t()


OPS = torch.ops.sgl_fp8


def quant(d, x=None, ue8m0=False, ts=False):
    x = T((M, K), BF16, d) if x is None else x
    return lambda: OPS.per1x128_quant(x, ue8m0, ts)


def smallm(d, x=None, w=None, ws=None, bias=None, shuffled=False):
    x = T((M, K), BF16, d) if x is None else x
    w = T((N, K), FP8, d) if w is None else w
    ws = T((3, 2), F32, d) if ws is None else ws
    return lambda: OPS.smallm_gemm(x, w, ws, shuffled, bias)


def scaled(d, xq=None, xs=None, w=None, ws=None, out_dtype=None, bias=None):
    xq = T((M, K), FP8, d) if xq is None else xq
    xs = T((M, 2), F32, d) if xs is None else xs
    w = T((N, K), FP8, d) if w is None else w
    ws = T((3, 2), F32, d) if ws is None else ws
    return lambda: OPS.scaled_gemm(xq, xs, w, ws, False, out_dtype, bias)


def norm(d, x=None, weight=None, eps=1e-6):
    x = T((M, K), BF16, d) if x is None else x
    weight = T((K,), BF16, d) if weight is None else weight
    return lambda: OPS.rmsnorm_quant(x, weight, eps, False)


def addnorm(d, x=None, res=None, weight=None, eps=1e-6):
    x = T((M, K), BF16, d) if x is None else x
    res = T(tuple(x.shape), x.dtype, d) if res is None else res
    weight = T((K,), BF16, d) if weight is None else weight
    return lambda: OPS.add_rmsnorm_quant(x, res, weight, eps, False)


def linear(d, x=None, w=None, ws=None, input_scale=None, out_dtype=None):
    x = T((M, K), BF16, d) if x is None else x
    w = T((N, K), FP8, d) if w is None else w
    ws = T((3, 2), F32, d) if ws is None else ws
    return lambda: fx.fp8_block_linear(x, w, ws, input_scale, out_dtype=out_dtype)


# (id, builder(dev) -> thunk, names: at least one must appear in the message as a word)
CASES = [
    # ---- per1x128_quant
    ("quant-x-float32", lambda d: quant(d, x=T((M, K), F32, d)), ["x"]),
    ("quant-x-fp8", lambda d: quant(d, x=T((M, K), FP8, d)), ["x"]),
    ("quant-x-int32", lambda d: quant(d, x=T((M, K), torch.int32, d)), ["x"]),
    ("quant-x-0d", lambda d: quant(d, x=T((), BF16, d)), ["x"]),
    ("quant-x-K100", lambda d: quant(d, x=T((M, 100), BF16, d)), ["x"]),
    ("quant-x-K200", lambda d: quant(d, x=T((2, 3, 200), FP16, d)), ["x"]),
    ("quant-transpose-3d", lambda d: quant(d, x=T((2, M, K), BF16, d), ts=True), ["transpose_scale"]),
    ("quant-transpose-1d", lambda d: quant(d, x=T((K,), BF16, d), ts=True), ["transpose_scale"]),
    # ---- smallm_gemm
    ("smallm-x-float32", lambda d: smallm(d, x=T((M, K), F32, d)), ["x"]),
    ("smallm-x-fp8", lambda d: smallm(d, x=T((M, K), FP8, d)), ["x"]),
    ("smallm-x-1d", lambda d: smallm(d, x=T((K,), BF16, d)), ["x"]),
    ("smallm-x-3d", lambda d: smallm(d, x=T((1, M, K), BF16, d)), ["x"]),
    ("smallm-K-not-128", lambda d: smallm(d, x=T((M, 200), BF16, d), w=T((N, 200), FP8, d)), ["x", "w"]),
    ("smallm-w-bf16", lambda d: smallm(d, w=T((N, K), BF16, d)), ["w"]),
    ("smallm-w-uint8", lambda d: smallm(d, w=T((N, K), torch.uint8, d)), ["w"]),
    ("smallm-w-1d", lambda d: smallm(d, w=T((N * K,), FP8, d)), ["w"]),
    ("smallm-w-3d", lambda d: smallm(d, w=T((1, N, K), FP8, d)), ["w"]),
    ("smallm-w-K-mismatch", lambda d: smallm(d, w=T((N, 384), FP8, d), ws=T((3, 3), F32, d)), ["w"]),
    ("smallm-N-not-16", lambda d: smallm(d, w=T((264, K), FP8, d)), ["w", "N"]),
    ("smallm-N-8", lambda d: smallm(d, w=T((8, K), FP8, d), ws=T((1, 2), F32, d)), ["w", "N"]),
    ("smallm-w-noncontig", lambda d: smallm(d, w=noncontig_rows((N, K), FP8, d)), ["w"]),
    ("smallm-w-transposed", lambda d: smallm(d, w=transposed((N, K), FP8, d)), ["w"]),
    ("smallm-ws-shape-rows", lambda d: smallm(d, ws=T((2, 2), F32, d)), ["w_scale"]),
    ("smallm-ws-shape-cols", lambda d: smallm(d, ws=T((3, 3), F32, d)), ["w_scale"]),
    ("smallm-ws-1d", lambda d: smallm(d, ws=T((6,), F32, d)), ["w_scale"]),
    ("smallm-ws-bf16", lambda d: smallm(d, ws=T((3, 2), BF16, d)), ["w_scale"]),
    ("smallm-ws-fp16", lambda d: smallm(d, ws=T((3, 2), FP16, d)), ["w_scale"]),
    ("smallm-ws-noncontig", lambda d: smallm(d, ws=transposed((3, 2), F32, d)), ["w_scale"]),
    ("smallm-bias-shape", lambda d: smallm(d, bias=T((N + 16,), BF16, d)), ["bias"]),
    ("smallm-bias-2d", lambda d: smallm(d, bias=T((1, N), BF16, d)), ["bias"]),
    ("smallm-bias-f32", lambda d: smallm(d, bias=T((N,), F32, d)), ["bias"]),
    ("smallm-bias-fp16-for-bf16", lambda d: smallm(d, bias=T((N,), FP16, d)), ["bias"]),
    # ---- scaled_gemm
    ("scaled-xq-bf16", lambda d: scaled(d, xq=T((M, K), BF16, d)), ["xq"]),
    ("scaled-xq-3d", lambda d: scaled(d, xq=T((1, M, K), FP8, d)), ["xq"]),
    ("scaled-xq-K200", lambda d: scaled(d, xq=T((M, 200), FP8, d), w=T((N, 200), FP8, d)), ["xq", "w"]),
    ("scaled-xs-shape-cols", lambda d: scaled(d, xs=T((M, 3), F32, d)), ["x_scale"]),
    ("scaled-xs-shape-rows", lambda d: scaled(d, xs=T((M + 1, 2), F32, d)), ["x_scale"]),
    ("scaled-xs-1d", lambda d: scaled(d, xs=T((M * 2,), F32, d)), ["x_scale"]),
    ("scaled-xs-bf16", lambda d: scaled(d, xs=T((M, 2), BF16, d)), ["x_scale"]),
    ("scaled-xs-fp32-ws-e8m0", lambda d: scaled(d, xs=T((M, 2), F32, d), ws=T((3, 2), E8M0, d)), ["x_scale"]),
    ("scaled-xs-e8m0-ws-fp32", lambda d: scaled(d, xs=T((M, 2), E8M0, d), ws=T((3, 2), F32, d)), ["x_scale"]),
    ("scaled-out-dtype-f32", lambda d: scaled(d, out_dtype=F32), ["out_dtype"]),
    ("scaled-out-dtype-fp8", lambda d: scaled(d, out_dtype=FP8), ["out_dtype"]),
    ("scaled-w-bf16", lambda d: scaled(d, w=T((N, K), BF16, d)), ["w"]),
    ("scaled-N-not-16", lambda d: scaled(d, w=T((264, K), FP8, d)), ["w", "N"]),
    ("scaled-w-noncontig", lambda d: scaled(d, w=noncontig_rows((N, K), FP8, d)), ["w"]),
    ("scaled-ws-shape", lambda d: scaled(d, ws=T((2, 2), F32, d)), ["w_scale"]),
    ("scaled-ws-noncontig", lambda d: scaled(d, ws=transposed((3, 2), F32, d)), ["w_scale"]),
    ("scaled-bias-dtype-vs-default-out", lambda d: scaled(d, bias=T((N,), FP16, d)), ["bias"]),
    ("scaled-bias-dtype-vs-out", lambda d: scaled(d, out_dtype=FP16, bias=T((N,), BF16, d)), ["bias"]),
    ("scaled-bias-shape", lambda d: scaled(d, bias=T((N - 16,), BF16, d)), ["bias"]),
    # ---- rmsnorm_quant
    ("norm-x-float32", lambda d: norm(d, x=T((M, K), F32, d), weight=T((K,), F32, d)), ["x"]),
    ("norm-x-0d", lambda d: norm(d, x=T((), BF16, d)), ["x"]),
    ("norm-x-K100", lambda d: norm(d, x=T((M, 100), BF16, d), weight=T((100,), BF16, d)), ["x"]),
    ("norm-weight-shape", lambda d: norm(d, weight=T((K + 128,), BF16, d)), ["weight"]),
    ("norm-weight-2d", lambda d: norm(d, weight=T((1, K), BF16, d)), ["weight"]),
    ("norm-weight-f32", lambda d: norm(d, weight=T((K,), F32, d)), ["weight"]),
    ("norm-weight-fp16-for-bf16", lambda d: norm(d, weight=T((K,), FP16, d)), ["weight"]),
    # ---- add_rmsnorm_quant
    ("addnorm-x-float32", lambda d: addnorm(d, x=T((M, K), F32, d), weight=T((K,), F32, d)), ["x"]),
    ("addnorm-residual-shape", lambda d: addnorm(d, res=T((M + 1, K), BF16, d)), ["residual"]),
    ("addnorm-residual-shape-3d", lambda d: addnorm(d, x=T((2, M, K), BF16, d), res=T((M, K), BF16, d)), ["residual"]),
    ("addnorm-residual-dtype", lambda d: addnorm(d, res=T((M, K), FP16, d)), ["residual"]),
    ("addnorm-weight-shape", lambda d: addnorm(d, weight=T((K - 128,), BF16, d)), ["weight"]),
    ("addnorm-weight-dtype", lambda d: addnorm(d, weight=T((K,), F32, d)), ["weight"]),
    # ---- fp8_block_linear (Python entry point: checks ranks before it reads shapes)
    ("linear-x-0d", lambda d: linear(d, x=T((), BF16, d)), ["x"]),
    ("linear-weight-0d", lambda d: linear(d, w=T((), FP8, d)), ["weight"]),
    ("linear-weight-1d", lambda d: linear(d, w=T((N * K,), FP8, d)), ["weight"]),
    ("linear-input-scale-0d", lambda d: linear(d, x=T((M, K), FP8, d), input_scale=T((), F32, d)), ["input_scale"]),
    ("linear-out-dtype", lambda d: linear(d, out_dtype=FP16), ["out_dtype"]),
]


def _assert_names(exc: BaseException, names):
    msg = str(exc)
    pats = [re.compile(rf"(?<![A-Za-z0-9_]){re.escape(n)}(?![A-Za-z0-9_])") for n in names]
    assert any(p.search(msg) for p in pats), f"message does not name {' or '.join(names)}: {msg!r}"


@pytest.mark.parametrize("dev", ["cpu", "meta", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("case_id,build,names", CASES, ids=[c[0] for c in CASES])
def test_bad_input_raises_naming_argument(dev, case_id, build, names):
    if dev == "cuda":
        require_gpu()
    thunk = build(dev)
    with pytest.raises((RuntimeError, ValueError)) as ei:
        thunk()
    _assert_names(ei.value, names)


# ---- devices ----------------------------------------------------------------------------------------


@pytest.mark.gpu
def test_mixed_devices_raise(gpu):
    d = gpu
    cases = [
        (lambda: OPS.smallm_gemm(T((M, K), BF16, d), T((N, K), FP8, "cpu"), T((3, 2), F32, d), False, None), "w"),
        (lambda: OPS.smallm_gemm(T((M, K), BF16, "cpu"), T((N, K), FP8, d), T((3, 2), F32, d), False, None), "x|w|w_scale"),
        (lambda: OPS.per1x128_quant(T((M, K), BF16, d), False, False) and OPS.rmsnorm_quant(T((M, K), BF16, "cpu"), T((K,), BF16, d), 1e-6, False), "x|weight"),
        (lambda: OPS.smallm_gemm(T((M, K), BF16, d), T((N, K), FP8, d), T((3, 2), F32, "cpu"), False, None), "w_scale"),
        (lambda: OPS.smallm_gemm(T((M, K), BF16, d), T((N, K), FP8, d), T((3, 2), F32, d), False, T((N,), BF16, "cpu")), "bias"),
        (lambda: OPS.scaled_gemm(T((M, K), FP8, d), T((M, 2), F32, "cpu"), T((N, K), FP8, d), T((3, 2), F32, d), False, None, None), "x_scale"),
        (lambda: OPS.scaled_gemm(T((M, K), FP8, "cpu"), T((M, 2), F32, d), T((N, K), FP8, d), T((3, 2), F32, d), False, None, None), "xq|x_scale|w"),
        (lambda: OPS.rmsnorm_quant(T((M, K), BF16, d), T((K,), BF16, "cpu"), 1e-6, False), "weight"),
        (lambda: OPS.add_rmsnorm_quant(T((M, K), BF16, d), T((M, K), BF16, "cpu"), T((K,), BF16, d), 1e-6, False), "residual"),
    ]
    for thunk, name in cases:
        with pytest.raises((RuntimeError, ValueError)) as ei:
            thunk()
        msg = str(ei.value)
        assert "device" in msg.lower() or "cpu" in msg.lower() or "cuda" in msg.lower(), msg
        _assert_names(ei.value, name.split("|"))


# ---- the private configured op ---------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize(
    "config, message",
    [
        ([0, 0, 0, 0, 256], r"exactly 8 fields"),  # a format-1 positional list
        ([0] * 9, r"exactly 8 fields"),
        ([4, 0, 0, 0, 0, 0, 0, 0], r"'engine'"),
        ([0, 0, 0, 0, 3, 0, 0, 0], r"'pair_activations'"),
        ([0, -1, 0, 0, 0, 0, 0, 0], r"'k_split'"),
        ([0, 0, 1 << 16, 0, 0, 0, 0, 0], r"'copy_blocks'"),
        ([0, 0, 0, 0, 0, 0, 0, -2], r"'tiles_per_wave'"),
    ],
)
def test_configured_op_rejects_a_bad_config_naming_the_field(gpu, config, message):
    """The GPU glue reads the config as GemmConfig's 8 fields (KernelConfig.op_args()); anything
    else is an error that names the field, never a silently different kernel."""
    d = gpu
    x, w, ws = T((M, K), BF16, d), T((N, K), FP8, d), T((3, 2), F32, d)
    with pytest.raises(RuntimeError, match=message):
        OPS._smallm_gemm_configured(x, w, ws, False, None, config)


def test_configured_op_takes_a_kernel_config(device):
    """The configured op with the default KernelConfig (and with an empty list) is the op's own
    plan: the bits of smallm_gemm. On the CPU the config selects nothing (one implementation)."""
    from sglang_fp8ext.kernel_config import KernelConfig

    x, w, ws = T((M, K), BF16, device), T((N, K), FP8, device), T((3, 2), F32, device)
    ref = OPS.smallm_gemm(x, w, ws, False, None)
    for config in (KernelConfig().op_args(), []):
        out = OPS._smallm_gemm_configured(x, w, ws, False, None, config)
        assert out.shape == ref.shape and out.dtype == ref.dtype
        assert torch.equal(out.view(torch.int16), ref.view(torch.int16)), config
    meta = OPS._smallm_gemm_configured(x.to("meta"), w.to("meta"), ws.to("meta"), False, None,
                                       KernelConfig(k_split=2).op_args())
    assert meta.shape == ref.shape and meta.dtype == ref.dtype


# ---- fake implementations on 'meta' ----------------------------------------------------------------


def _real_and_meta(fn, *args):
    real = fn(*args)
    meta = fn(*[a.to("meta") if isinstance(a, torch.Tensor) else a for a in args])
    real = real if isinstance(real, tuple) else (real,)
    meta = meta if isinstance(meta, tuple) else (meta,)
    assert len(real) == len(meta)
    for r, m in zip(real, meta):
        assert m.device.type == "meta"
        assert r.shape == m.shape and r.dtype == m.dtype, (r.shape, m.shape, r.dtype, m.dtype)
        if r.numel() > 1:
            assert r.stride() == m.stride(), (r.stride(), m.stride())


@pytest.mark.parametrize("Mv", [0, 1, 5])
def test_meta_outputs_match_real(Mv):
    x = torch.randn(Mv, K).bfloat16()
    x3 = torch.randn(2, Mv, K).half()
    w = (torch.randn(N, K) * 8).to(FP8)
    ws = torch.rand(3, 2) * 0.01
    ws8 = torch.full((3, 2), 0.5).to(E8M0)
    for ue in (False, True):
        _real_and_meta(OPS.per1x128_quant, x, ue, False)
        _real_and_meta(OPS.per1x128_quant, x3, ue, False)
        _real_and_meta(OPS.per1x128_quant, x, ue, True)
    _real_and_meta(OPS.smallm_gemm, x, w, ws, False, None)
    _real_and_meta(OPS.smallm_gemm, x, w, ws8, True, torch.randn(N).bfloat16())
    q, s = fx.per1x128_quant(x, False, True)
    for od in (None, torch.float16):
        _real_and_meta(OPS.scaled_gemm, q, s, w, ws, False, od, None)
    q8, s8 = fx.per1x128_quant(x, True)
    _real_and_meta(OPS.scaled_gemm, q8, s8, w, ws8, False, None, torch.randn(N).bfloat16())
    g = torch.rand(K).half()
    _real_and_meta(OPS.rmsnorm_quant, x3, g, 1e-6, True)
    _real_and_meta(OPS.add_rmsnorm_quant, x3, x3, g, 1e-6, False)


def test_meta_transpose_scale_strides():
    x = torch.empty(7, 512, dtype=torch.bfloat16, device="meta")
    q, s = fx.per1x128_quant(x, False, True)
    assert s.shape == (7, 4) and s.stride() == (1, 7) and s.dtype == torch.float32
    q, s = fx.per1x128_quant(x, True, True)
    assert s.stride() == (1, 7) and s.dtype == E8M0


def test_fp8_block_linear_on_meta():
    x = torch.empty(2, 3, K, dtype=torch.bfloat16, device="meta")
    w = torch.empty(N, K, dtype=FP8, device="meta")
    ws = torch.empty(3, 2, dtype=torch.float32, device="meta")
    out = fx.fp8_block_linear(x, w, ws)
    assert out.shape == (2, 3, N) and out.dtype == torch.bfloat16 and out.device.type == "meta"
    q = torch.empty(2, 3, K, dtype=FP8, device="meta")
    s = torch.empty(2, 3, 2, dtype=torch.float32, device="meta")
    out = fx.fp8_block_linear(q, w, ws, input_scale=s, out_dtype=torch.float16)
    assert out.shape == (2, 3, N) and out.dtype == torch.float16
