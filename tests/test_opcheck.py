"""torch.library.opcheck on every sgl_fp8 op (schema, autograd registration, fake tensor,
aot_dispatch_dynamic), several sample inputs each, M = 0 included; plus the exact schemas of
SPEC §2 and the functional (no mutation) property.

opcheck's test_schema compares inputs before/after with torch.allclose, which torch does not
implement for float8 tensors on the CPU; for ops that take FP8/e8m0 inputs it is replaced by
test_exact_schemas + test_ops_do_not_mutate_inputs below (bitwise, on raw bytes)."""

from __future__ import annotations

import pytest
import torch

import sglang_fp8ext as fx
from conftest import FP8, dense

OPS = torch.ops.sgl_fp8
ALL_UTILS = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")
NO_SCHEMA = ALL_UTILS[1:]

SPEC_SCHEMAS = {
    "per1x128_quant": "sgl_fp8::per1x128_quant(Tensor x, bool ue8m0=False, bool transpose_scale=False) -> (Tensor q, Tensor scale)",
    "smallm_gemm": "sgl_fp8::smallm_gemm(Tensor x, Tensor w, Tensor w_scale, bool w_shuffled=False, Tensor? bias=None) -> Tensor",
    "scaled_gemm": "sgl_fp8::scaled_gemm(Tensor xq, Tensor x_scale, Tensor w, Tensor w_scale, bool w_shuffled=False, ScalarType? out_dtype=None, Tensor? bias=None) -> Tensor",
    "rmsnorm_quant": "sgl_fp8::rmsnorm_quant(Tensor x, Tensor weight, float eps, bool ue8m0=False) -> (Tensor q, Tensor scale)",
    "add_rmsnorm_quant": "sgl_fp8::add_rmsnorm_quant(Tensor x, Tensor residual, Tensor weight, float eps, bool ue8m0=False) -> (Tensor q, Tensor scale, Tensor residual_out)",
}


@pytest.mark.parametrize("name", list(SPEC_SCHEMAS))
def test_exact_schemas(name):
    assert str(getattr(OPS, name).default._schema) == SPEC_SCHEMAS[name]


@pytest.mark.parametrize("name", list(SPEC_SCHEMAS) + ["_smallm_gemm_configured", "_block_linear"])
def test_ops_carry_the_pt2_compliant_tag(name):
    """torch.compile trusts only tagged custom ops without its own checks (schemas.py defines them,
    linear.py _block_linear)."""
    assert torch.Tag.pt2_compliant_tag in getattr(OPS, name).default.tags


def _w(N, K, device, e8m0=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    w = (torch.randn(N, K, generator=g) * 16).to(FP8)
    shape = ((N + 127) // 128, K // 128)
    ws = fx.scale_to_e8m0(torch.exp2(torch.randint(-9, -4, shape, generator=g).float())) if e8m0 else torch.rand(shape, generator=g) * 0.01 + 1e-3
    return w.to(device), ws.to(device)


def _x(shape, dtype, device, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) * 2).to(dtype).to(device)


def quant_samples(device):
    for dt in (torch.bfloat16, torch.float16):
        for shape in [(3, 256), (0, 128), (2, 5, 384), (1, 128)]:
            for ue in (False, True):
                yield (_x(shape, dt, device), ue, False)
        for M in (0, 1, 7):
            yield (_x((M, 256), dt, device), False, True)
            yield (_x((M, 512), dt, device), True, True)


def smallm_samples(device):
    for (N, K, M) in [(48, 256, 3), (272, 128, 1), (16, 384, 0), (128, 256, 33)]:
        for e8 in (False, True):
            w, ws = _w(N, K, device, e8)
            for dt in (torch.bfloat16, torch.float16):
                yield (_x((M, K), dt, device), w, ws, False, None)
            yield (_x((M, K), torch.bfloat16, device), fx.shuffle_weight(w), ws, True, _x((N,), torch.bfloat16, device))


def scaled_samples(device):
    for (N, K, M) in [(48, 256, 3), (272, 128, 1), (16, 384, 0), (128, 256, 40)]:
        for e8 in (False, True):
            w, ws = _w(N, K, device, e8)
            x = _x((M, K), torch.bfloat16, device)
            q, s = fx.per1x128_quant(x, e8)
            yield (q, s, w, ws, False, None, None)
            yield (q, s, w, ws, False, torch.float16, _x((N,), torch.float16, device))
            qt, st = fx.per1x128_quant(x, e8, True)
            yield (qt, st, fx.shuffle_weight(w), ws, True, torch.bfloat16, None)


def norm_samples(device):
    for dt in (torch.bfloat16, torch.float16):
        for shape in [(3, 256), (0, 128), (2, 4, 512)]:
            for ue in (False, True):
                yield (_x(shape, dt, device), _x(shape[-1:], dt, device, 1), 1e-6, ue)


def addnorm_samples(device):
    for dt in (torch.bfloat16, torch.float16):
        for shape in [(3, 256), (0, 128), (2, 4, 512)]:
            for ue in (False, True):
                yield (_x(shape, dt, device), _x(shape, dt, device, 2), _x(shape[-1:], dt, device, 1), 1e-5, ue)


def configured_samples(device):
    """The private op that tables and tune drive: smallm_gemm's samples plus a typed kernel config
    (the plan's, or the general engine, which runs every M and both weight layouts on sm_90)."""
    from sglang_fp8ext.kernel_config import Engine, KernelConfig

    configs = (KernelConfig().op_args(), KernelConfig(engine=Engine.GENERAL).op_args())
    for i, args in enumerate(smallm_samples(device)):
        yield args + (configs[i % 2],)


SAMPLES = {
    "per1x128_quant": (quant_samples, ALL_UTILS),
    "smallm_gemm": (smallm_samples, NO_SCHEMA),
    "_smallm_gemm_configured": (configured_samples, NO_SCHEMA),
    # fp8_block_linear's path chosen at run time, its op under torch.compile (linear.py)
    "_block_linear": (smallm_samples, NO_SCHEMA),
    "scaled_gemm": (scaled_samples, NO_SCHEMA),
    "rmsnorm_quant": (norm_samples, ALL_UTILS),
    "add_rmsnorm_quant": (addnorm_samples, ALL_UTILS),
}


@pytest.mark.parametrize("name", list(SAMPLES))
def test_opcheck(device, name):
    gen, utils = SAMPLES[name]
    op = getattr(OPS, name).default
    n = 0
    for args in gen(device):
        torch.library.opcheck(op, args, test_utils=utils)
        n += 1
    assert n >= 4


def _snapshot(args):
    return [dense(a).view(torch.uint8).clone() if isinstance(a, torch.Tensor) and a.numel() else None for a in args]


@pytest.mark.parametrize("name", list(SAMPLES))
def test_ops_do_not_mutate_inputs(device, name):
    """All ops are functional: every input's bytes are unchanged after the call."""
    gen, _ = SAMPLES[name]
    op = getattr(OPS, name).default
    for args in gen(device):
        before = _snapshot(args)
        out = op(*args)
        after = _snapshot(args)
        for b, a in zip(before, after):
            if isinstance(b, torch.Tensor):
                assert torch.equal(b, a)
        outs = out if isinstance(out, tuple) else (out,)
        for o in outs:  # outputs never alias inputs
            for a in args:
                if isinstance(a, torch.Tensor) and a.numel() and o.numel():
                    assert o.untyped_storage().data_ptr() != a.untyped_storage().data_ptr()
