"""torch.compile(fullgraph=True, dynamic=True) over every op and over fp8_block_linear: results
equal eager bitwise, and several M values (1, 3, 8, 17, 32, ...) do not recompile.

Most tests use the aot_eager backend (it runs the fakes and AOT dispatch, the parts that matter
for graph breaks and recompiles) wrapped in a backend that counts compilations; one test per
path uses inductor. Dynamo is reset around every test (conftest).

Note on M = 1: with dynamic=True dynamo still specializes sizes 0 and 1 (torch's 0/1
specialization), so a first call with M = 1 and a later M = 3 are two graphs by design of torch,
not of this package. The M sweeps therefore either start at M > 1, or mark M unbacked
(torch._dynamo.mark_unbacked), in which case M = 1 shares the graph too.
"""

from __future__ import annotations

import pytest
import torch

import sglang_fp8ext as fx
from conftest import dense, rand_act, rand_weight, rand_wscale

# The first M differs from every weight dimension (N = 272, K = 512, w_scale [3, 4]): dynamo's
# duck sizing would otherwise unify M with an equal-sized weight dim at the first trace.
MS = [6, 3, 8, 17, 32, 5]
MS_WITH_1 = [6, 1, 3, 8, 17, 32]


class CountingBackend:
    def __init__(self, inner="aot_eager"):
        self.inner = torch._dynamo.lookup_backend(inner) if isinstance(inner, str) else inner
        self.graphs = 0

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        return self.inner(gm, example_inputs)


def same_bits(a, b):
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            same_bits(x, y)
        return
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
    if a.numel():
        assert torch.equal(dense(a).view(torch.uint8), dense(b).view(torch.uint8)), "compiled result differs from eager"


def sweep(fn, make_args, ms, backend, unbacked_dims=None, device="cpu", oblivious=False):
    """Compile fn once, call it for every M, compare with eager; returns the backend.
    ``oblivious``: torch.fx.experimental._config.backed_size_oblivious (no 0/1 specialization)."""
    if oblivious:
        with torch.fx.experimental._config.patch(backed_size_oblivious=True):
            return sweep(fn, make_args, ms, backend, unbacked_dims, device, False)
    torch._dynamo.reset()
    cf = torch.compile(fn, backend=backend, fullgraph=True, dynamic=True)
    for M in ms:
        args = make_args(M)
        args = [a.to(device) if isinstance(a, torch.Tensor) else a for a in args]
        if unbacked_dims:
            for i, d in unbacked_dims:
                torch._dynamo.decorators.mark_unbacked(args[i], d)
        got = cf(*args)
        exp = fn(*args)
        same_bits(got, exp)
    return backend


N, K = 272, 512


def weights(fmt):
    return rand_weight(N, K, 3), rand_wscale(N, K, fmt == "e8m0", 3)


# ---- every op ------------------------------------------------------------------------------------


def op_cases(fmt):
    e8 = fmt == "e8m0"
    w, ws = weights(fmt)
    wsh = fx.shuffle_weight(w)
    bias = torch.randn(N).bfloat16()
    g = (torch.rand(K) + 0.5).bfloat16()

    def quant(x):
        return fx.per1x128_quant(x, e8)

    def quant_t(x):
        q, s = fx.per1x128_quant(x, e8, True)
        return q, s

    def smallm(x):
        return fx.smallm_gemm(x, wsh, ws, True, bias)

    def scaled(xq, xs):
        return fx.scaled_gemm(xq, xs, w, ws, False, torch.float16, None)

    def norm(x):
        return fx.rmsnorm_quant(x, g, 1e-6, e8)

    def addnorm(x, r):
        return fx.add_rmsnorm_quant(x, r, g, 1e-6, e8)

    xa = lambda M: [rand_act((M, K), torch.bfloat16, M)]

    def xq_args(M):
        q, s = fx.per1x128_quant(rand_act((M, K), torch.bfloat16, M), e8)
        return [q, s]

    return {
        "per1x128_quant": (quant, xa, [(0, 0)]),
        "per1x128_quant_transposed": (quant_t, xa, [(0, 0)]),
        "smallm_gemm": (smallm, xa, [(0, 0)]),
        "scaled_gemm": (scaled, xq_args, [(0, 0), (1, 0)]),
        "rmsnorm_quant": (norm, xa, [(0, 0)]),
        "add_rmsnorm_quant": (addnorm, lambda M: [rand_act((M, K), torch.bfloat16, M), rand_act((M, K), torch.bfloat16, M + 1)], [(0, 0), (1, 0)]),
    }


OP_NAMES = list(op_cases("fp32"))


@pytest.mark.parametrize("fmt", ["fp32", "e8m0"])
@pytest.mark.parametrize("name", OP_NAMES)
def test_compile_op_no_recompile(name, fmt):
    fn, make, _ = op_cases(fmt)[name]
    be = sweep(fn, make, MS, CountingBackend())
    assert be.graphs == 1, f"{name}: {be.graphs} graphs for M in {MS}"


@pytest.mark.parametrize("name", OP_NAMES)
def test_compile_op_m1_no_recompile(name):
    """M = 1 included, with backed_size_oblivious (no 0/1 specialization of backed sizes)."""
    fn, make, _ = op_cases("fp32")[name]
    be = sweep(fn, make, MS_WITH_1, CountingBackend(), oblivious=True)
    assert be.graphs == 1, f"{name}: {be.graphs} graphs for M in {MS_WITH_1}"


def _single_input_cases():
    """Every op reached from one M-carrying input x (as in a model, where the second M-carrying
    tensor is produced in the graph)."""
    w, ws = weights("fp32")
    g = (torch.rand(K) + 0.5).bfloat16()
    return {
        "per1x128_quant": lambda x: fx.per1x128_quant(x, True),
        "smallm_gemm": lambda x: fx.smallm_gemm(x, w, ws),
        "scaled_gemm": lambda x: fx.scaled_gemm(*fx.per1x128_quant(x, False, True), w, ws),
        "rmsnorm_quant": lambda x: fx.rmsnorm_quant(x, g, 1e-6),
        "add_rmsnorm_quant": lambda x: fx.add_rmsnorm_quant(x, x * 2, g, 1e-6, True),
        "fp8_block_linear": lambda x: fx.fp8_block_linear(x, w, ws),
        "fp8_block_linear_prequantized": lambda x: fx.fp8_block_linear(*fx.rmsnorm_quant(x, g, 1e-6)[:1], w, ws, input_scale=fx.rmsnorm_quant(x, g, 1e-6)[1]),
    }


@pytest.mark.parametrize("name", list(_single_input_cases()))
def test_compile_unbacked_m_includes_1(name):
    """M marked unbacked (torch._dynamo.mark_unbacked): M = 1 shares the graph with the rest."""
    fn = _single_input_cases()[name]
    be = sweep(fn, lambda M: [rand_act((M, K), torch.bfloat16, M)], MS_WITH_1, CountingBackend(), unbacked_dims=[(0, 0)])
    assert be.graphs == 1


@pytest.mark.parametrize("name", ["scaled_gemm", "add_rmsnorm_quant"])
def test_compile_independent_unbacked_inputs(name):
    """Two independently unbacked M's (xq/x_scale, x/residual) trace: the fakes check each
    dimension with its own torch._check instead of guarding on tuple equality."""
    fn, make, dims = op_cases("fp32")[name]
    be = sweep(fn, make, MS_WITH_1, CountingBackend(), unbacked_dims=dims)
    assert be.graphs == 1


def test_compile_error_on_recompile():
    fn, make, _ = op_cases("fp32")["smallm_gemm"]
    cf = torch.compile(fn, backend="aot_eager", fullgraph=True, dynamic=True)
    cf(*make(6))
    with torch._dynamo.config.patch(error_on_recompile=True):
        for M in (9, 16, 31, 2):
            same_bits(cf(*make(M)), fn(*make(M)))


def test_compile_transpose_scale_strides():
    def f(x):
        return fx.per1x128_quant(x, False, True)

    cf = torch.compile(f, backend="aot_eager", fullgraph=True, dynamic=True)
    for M in (3, 9):
        q, s = cf(rand_act((M, K), torch.bfloat16, M))
        assert s.shape == (M, K // 128) and s.stride() == (1, M)


def test_compile_3d_quant_and_norm():
    g = (torch.rand(K) + 0.5).half()

    def f(x, r):
        q, s = fx.per1x128_quant(x, True)
        q2, s2, ro = fx.add_rmsnorm_quant(x, r, g, 1e-5, False)
        return q, s, q2, s2, ro

    be = CountingBackend()
    cf = torch.compile(f, backend=be, fullgraph=True, dynamic=True)
    for B, M in [(2, 3), (2, 7), (3, 5)]:
        x, r = rand_act((B, M, K), torch.float16, M), rand_act((B, M, K), torch.float16, M + 9)
        same_bits(cf(x, r), f(x, r))
    assert be.graphs == 1


# ---- fp8_block_linear ---------------------------------------------------------------------------


def linear_fns(fmt):
    w, ws = weights(fmt)
    wsh = fx.shuffle_weight(w)
    bias = torch.randn(N).bfloat16()
    g = (torch.rand(K) + 0.5).bfloat16()
    e8 = fmt == "e8m0"

    def bf16_input(x):
        return fx.fp8_block_linear(x, wsh, ws, bias=bias)  # w_shuffled from the attribute

    def prequantized(x, r):
        q, s, ro = fx.add_rmsnorm_quant(x, r, g, 1e-6, e8)
        return fx.fp8_block_linear(q, w, ws, input_scale=s), ro

    return bf16_input, prequantized


@pytest.mark.parametrize("fmt", ["fp32", "e8m0"])
def test_compile_linear_bf16_input(fmt):
    f, _ = linear_fns(fmt)
    be = sweep(f, lambda M: [rand_act((M, K), torch.bfloat16, M)], MS, CountingBackend())
    assert be.graphs == 1
    be = sweep(f, lambda M: [rand_act((M, K), torch.bfloat16, M)], MS_WITH_1, CountingBackend(), unbacked_dims=[(0, 0)])
    assert be.graphs == 1
    be = sweep(f, lambda M: [rand_act((M, K), torch.bfloat16, M)], MS_WITH_1, CountingBackend(), oblivious=True)
    assert be.graphs == 1


@pytest.mark.parametrize("fmt", ["fp32", "e8m0"])
def test_compile_linear_prequantized(fmt):
    _, f = linear_fns(fmt)
    mk = lambda M: [rand_act((M, K), torch.bfloat16, M), rand_act((M, K), torch.bfloat16, M + 50)]
    be = sweep(f, mk, MS, CountingBackend())
    assert be.graphs == 1
    be = sweep(f, mk, MS_WITH_1, CountingBackend(), oblivious=True)
    assert be.graphs == 1


def test_compile_linear_3d_input():
    f, _ = linear_fns("fp32")
    be = sweep(f, lambda M: [rand_act((2, M, K), torch.bfloat16, M)], MS, CountingBackend())
    assert be.graphs == 1


@pytest.mark.slow
def test_compile_inductor_linear_and_ops():
    """One inductor compile of a decode-layer-like function using every op."""
    w, ws = weights("fp32")
    w8, ws8 = rand_weight(N, K, 4), rand_wscale(N, K, True, 4)
    g = (torch.rand(K) + 0.5).bfloat16()
    bias = torch.randn(N).bfloat16()

    def layer(x, r):
        q, s, ro = fx.add_rmsnorm_quant(x, r, g, 1e-6, False)
        y1 = fx.fp8_block_linear(q, w, ws, input_scale=s, bias=bias)
        q8, s8 = fx.rmsnorm_quant(ro, g, 1e-6, True)
        y2 = fx.scaled_gemm(q8, s8, w8, ws8)
        y3 = fx.fp8_block_linear(x, w, ws)
        qa, sa = fx.per1x128_quant(x, False, True)
        y4 = fx.smallm_gemm(x, fx.shuffle_weight(w8), ws8, True)
        return y1, y2, y3, y4, qa, sa, ro

    be = CountingBackend("inductor")
    cf = torch.compile(layer, backend=be, fullgraph=True, dynamic=True)
    for M in MS:
        x, r = rand_act((M, K), torch.bfloat16, M), rand_act((M, K), torch.bfloat16, M + 1)
        same_bits(cf(x, r), layer(x, r))
    assert be.graphs == 1
