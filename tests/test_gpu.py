"""GPU-only tests: CUDA/HIP graph capture and replay of every op (replay equals eager bitwise),
torch.compile(mode="reduce-overhead", fullgraph=True) over fp8_block_linear for several M (the
graph captured, not skipped), the GPU ops against the CPU ops, and CPU tensors handed to the GPU
path. Skipped, with the reason, where no GPU (or no GPU build) exists; the device-parametrized
tests in the other files also run their "cuda" variants there."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch._dynamo.utils import counters

import sglang_fp8ext as fx
import spec_model as sm
from sglang_fp8ext.kernel_config import Engine, KernelConfig, Toggle
from conftest import ACT, FP8, act_bits, assert_gemm_contract, dense, from_act_bits, rand_act, rand_weight, rand_wscale
from test_gemm import smallm_ref
from test_quant import CONSTRUCTIONS as ADVERSARIAL_GROUPS

pytestmark = pytest.mark.gpu

N, K = 2112, 1024


def _bits(t):
    return dense(t).view(torch.uint8)


def _same(a, b):
    a = a if isinstance(a, (tuple, list)) else (a,)
    b = b if isinstance(b, (tuple, list)) else (b,)
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.shape == y.shape and x.dtype == y.dtype and x.stride() == y.stride()
        assert torch.equal(_bits(x), _bits(y)), "replay/compiled result differs from eager"


def _graph_cases(dev, fmt):
    """name -> fn(x, r) run eagerly and captured in a graph."""
    e8 = fmt == "e8m0"
    w, ws = rand_weight(N, K, 1).to(dev), rand_wscale(N, K, e8, 1).to(dev)
    wsh = fx.shuffle_weight(w)
    g = (torch.rand(K) + 0.5).bfloat16().to(dev)
    bias = torch.randn(N).bfloat16().to(dev)

    def prequantized(x, r):
        q, s, ro = fx.add_rmsnorm_quant(x, r, g, 1e-6, e8)
        return fx.fp8_block_linear(q, w, ws, input_scale=s), ro

    return {
        "per1x128_quant": lambda x, r: fx.per1x128_quant(x, e8),
        "per1x128_quant_transposed": lambda x, r: fx.per1x128_quant(x, e8, True),
        "smallm_gemm": lambda x, r: fx.smallm_gemm(x, w, ws, False, bias),
        "smallm_gemm_shuffled": lambda x, r: fx.smallm_gemm(x, wsh, ws, True),
        "scaled_gemm": lambda x, r: fx.scaled_gemm(*fx.per1x128_quant(x, e8, True), w, ws, False, torch.float16),
        "rmsnorm_quant": lambda x, r: fx.rmsnorm_quant(x, g, 1e-6, e8),
        "add_rmsnorm_quant": lambda x, r: fx.add_rmsnorm_quant(x, r, g, 1e-6, e8),
        "fp8_block_linear": lambda x, r: fx.fp8_block_linear(x, wsh, ws, bias=bias),
        "fp8_block_linear_prequantized": prequantized,
    }


@pytest.mark.parametrize("fmt", ["fp32", "e8m0"])
@pytest.mark.parametrize("M", [1, 7, 32, 48])
def test_cuda_graph_replay_equals_eager(gpu, M, fmt):
    for name, fn in _graph_cases(gpu, fmt).items():
        static_x = rand_act((M, K), torch.bfloat16, 1).to(gpu)
        static_r = rand_act((M, K), torch.bfloat16, 2).to(gpu)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                fn(static_x, static_r)
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = fn(static_x, static_r)
        for seed in (3, 4):
            static_x.copy_(rand_act((M, K), torch.bfloat16, seed).to(gpu))
            static_r.copy_(rand_act((M, K), torch.bfloat16, seed + 10).to(gpu))
            graph.replay()
            torch.cuda.synchronize()
            eager = fn(static_x, static_r)
            try:
                _same(static_out, eager)
            except AssertionError as e:
                raise AssertionError(f"{name} (M={M}, {fmt}): {e}") from None


@pytest.mark.parametrize("fmt", ["fp32", "e8m0"])
def test_reduce_overhead_compile_linear(gpu, fmt):
    e8 = fmt == "e8m0"
    w, ws = rand_weight(N, K, 2).to(gpu), rand_wscale(N, K, e8, 2).to(gpu)
    wsh = fx.shuffle_weight(w)
    g = (torch.rand(K) + 0.5).bfloat16().to(gpu)

    def layer(x, r):
        y = fx.fp8_block_linear(x, wsh, ws)
        q, s, ro = fx.add_rmsnorm_quant(x, r, g, 1e-6, e8)
        z = fx.fp8_block_linear(q, w, ws, input_scale=s)
        return y, z, ro

    counters.clear()
    cf = torch.compile(layer, mode="reduce-overhead", fullgraph=True)
    for M in (1, 3, 8, 17, 32):
        for it in range(3):  # warm-up, record, replay
            x = rand_act((M, K), torch.bfloat16, M * 10 + it).to(gpu)
            r = rand_act((M, K), torch.bfloat16, M * 10 + it + 5).to(gpu)
            torch.compiler.cudagraph_mark_step_begin()
            got = [t.clone() for t in cf(x, r)]
            exp = layer(x, r)
            _same(got, exp)
        assert_gemm_contract(got[0], smallm_ref(x.cpu(), w.cpu(), ws.cpu()), f"reduce-overhead M={M}")
    # inductor falls back to running the graph uncaptured, with only a log warning, when something in
    # it cannot be captured (a CPU tensor in the graph, a mutated input, and so on): a silent
    # slow path for a serving engine, so the ops must never cause it
    assert counters["inductor"]["cudagraph_skips"] == 0, "reduce-overhead skipped CUDA graphs (see the cudagraphs log)"


@pytest.mark.parametrize("fmt", ["fp32", "e8m0"])
@pytest.mark.parametrize("M", [1, 5, 16, 32, 33, 64])
def test_gpu_gemm_vs_cpu(gpu, M, fmt):
    """GPU GEMMs meet the §3.4 contract and agree with the CPU op to the contract's precision."""
    e8 = fmt == "e8m0"
    for (n, k) in [(5120, 4096), (2112, 7168), (48, 256)]:
        w, ws = rand_weight(n, k, 3), rand_wscale(n, k, e8, 3)
        x = rand_act((M, k), torch.bfloat16, M)
        out = fx.smallm_gemm(x.to(gpu), w.to(gpu), ws.to(gpu))
        ref = smallm_ref(x, w, ws)
        assert_gemm_contract(out, ref, f"cuda smallm N={n} K={k} M={M}")
        cpu = fx.smallm_gemm(x, w, ws)
        assert_gemm_contract(out, cpu.double().numpy(), "cuda vs cpu op", tol=8e-3)
        q, s = fx.per1x128_quant(x.to(gpu), e8)
        qc, sc = fx.per1x128_quant(x, e8)
        assert torch.equal(_bits(q), _bits(qc)) and torch.equal(_bits(s), _bits(sc))


GENERAL = KernelConfig(engine=Engine.GENERAL)
WGMMA = KernelConfig(engine=Engine.WGMMA)
REGISTER_FED = KernelConfig(engine=Engine.REGISTER_FED)


def configured(xd, wd, wsd, shuffled, bd, config: KernelConfig):
    """The fused op under a typed kernel config (the private op takes its op arguments)."""
    return torch.ops.sgl_fp8._smallm_gemm_configured(xd, wd, wsd, shuffled, bd, config.op_args())


def run_if_a_plan_fits(xd, wd, wsd, bd, config: KernelConfig):
    """The configured op's output for a forced sm_90 config, or None where no plan fits it (which
    must be the documented error, not another failure)."""
    try:
        return configured(xd, wd, wsd, False, bd, config)
    except RuntimeError as e:
        assert "no sm_90 GEMM plan fits" in str(e), (config.label(), str(e))
        return None


def _require_sm90():
    if torch.version.hip is not None or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("sm_90 kernel configurations: the device is not compute capability 9.0")


@pytest.mark.parametrize("fmt", ["fp32", "e8m0"])
@pytest.mark.parametrize("M", [1, 8, 13, 20, 32])
def test_sm90_engines_and_knobs(gpu, M, fmt):
    """sm_90: the wgmma engine (the default for M <= 32 where its plan holds a CTA's weight share)
    and the general engine (``engine=general``) meet the §3.4 contract with a bias; the general
    engine's staging depth does not change its bits; forcing the wgmma engine where it is the
    default (wherever its plan fits) changes nothing; forced K splits (1, 2, 4), the wgmma knobs
    (one or two K blocks per copy, one early copy) and the general engine's K split and CTAs per SM
    meet the contract where a plan fits them. A forced config that fits no plan is the documented
    error, and at least two of the forced ones must run."""
    _require_sm90()
    e8 = fmt == "e8m0"
    for (n, k) in [(5120, 4096), (4096, 2048), (272, 1024)]:
        w, ws = rand_weight(n, k, 5), rand_wscale(n, k, e8, 5)
        x = rand_act((M, k), torch.bfloat16, M + 5)
        bias = torch.randn(n).bfloat16()
        ref = smallm_ref(x, w, ws, bias)
        xd, wd, wsd, bd = x.to(gpu), w.to(gpu), ws.to(gpu), bias.to(gpu)
        out = fx.smallm_gemm(xd, wd, wsd, False, bd)
        assert_gemm_contract(out, ref, f"default N={n} K={k} M={M}")
        assert torch.equal(_bits(configured(xd, wd, wsd, False, bd, KernelConfig())), _bits(out))
        wgmma = run_if_a_plan_fits(xd, wd, wsd, bd, WGMMA)  # where its plan fits, the default takes it
        assert wgmma is not None or n == 272, (n, k, M, "the wgmma engine does not fit")
        if wgmma is not None:
            assert torch.equal(_bits(wgmma), _bits(out)), "the default is not the wgmma engine"
        general = configured(xd, wd, wsd, False, bd, GENERAL)
        assert_gemm_contract(general, ref, f"general engine N={n} K={k} M={M}")
        for config in (KernelConfig(engine=Engine.GENERAL, staging_stages=1),
                       KernelConfig(engine=Engine.GENERAL, staging_stages=2)):
            got = run_if_a_plan_fits(xd, wd, wsd, bd, config)
            if got is not None:
                assert torch.equal(_bits(got), _bits(general)), config.label()
        ran = 0
        for config in (KernelConfig(k_split=1), KernelConfig(k_split=2), KernelConfig(k_split=4),
                       KernelConfig(copy_blocks=1), KernelConfig(copy_blocks=2), KernelConfig(early_copies=1),
                       KernelConfig(engine=Engine.GENERAL, k_split=2), KernelConfig(engine=Engine.GENERAL, ctas_per_sm=2)):
            got = run_if_a_plan_fits(xd, wd, wsd, bd, config)
            if got is None:
                continue
            assert_gemm_contract(got, ref, f"{config.label()} N={n} M={M}")
            ran += 1
        assert ran >= 2, (n, k, M, ran)


@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("fmt", ["fp32", "e8m0"])
@pytest.mark.parametrize("M", [1, 2, 7, 16, 17, 32, 33, 64])
def test_sm90_shuffled_weights_take_the_general_engine(gpu, M, fmt, dt):
    """sm_90: an AITER-shuffled weight runs the general engine at every M (the wgmma engine reads
    plain weights only): its bits are those of the plain weight under ``engine=general`` (the K
    permutation cancels in each 128-block), with bf16 and fp16 activations, a bias and both scale
    formats, and meet the §3.4 contract; ``engine=wgmma`` with a shuffled weight is the plan error."""
    _require_sm90()
    e8 = fmt == "e8m0"
    for n, k in ((2112, 7168), (4096, 1024), (48, 256)):
        w, ws = rand_weight(n, k, 23), rand_wscale(n, k, e8, 23)
        x = rand_act((M, k), dt, M + 23)
        bias = torch.randn(n).to(dt)
        ref = smallm_ref(x, w, ws, bias)
        xd, wd, wsd, bd = x.to(gpu), w.to(gpu), ws.to(gpu), bias.to(gpu)
        wsh = fx.shuffle_weight(wd)
        shuffled = fx.smallm_gemm(xd, wsh, wsd, True, bd)
        assert shuffled.dtype == dt
        assert_gemm_contract(shuffled, ref, f"shuffled N={n} K={k} M={M} {dt}")
        plain_general = configured(xd, wd, wsd, False, bd, GENERAL)
        assert torch.equal(_bits(shuffled), _bits(plain_general)), (n, k, M)
        assert torch.equal(_bits(configured(xd, wsh, wsd, True, bd, GENERAL)), _bits(shuffled))
        with pytest.raises(RuntimeError, match="no sm_90 GEMM plan fits"):
            configured(xd, wsh, wsd, True, bd, WGMMA)


@pytest.mark.parametrize("fmt", ["fp32", "e8m0"])
@pytest.mark.parametrize("M", [1, 2, 3, 9, 16])
def test_sm90_register_fed_kernel(gpu, M, fmt):
    """sm_90: the register-fed engine (sm90_register_fed_gemm.cuh, ``engine=register_fed``; plain
    weights) meets the §3.4 contract with bf16 and fp16 activations (and outputs), bias, at 1 and
    2 token tiles and for every K blocks a warp the SPEC §6 shapes take (K = 1024, 2048, 4096, 7168
    and 8192: 1, 2, 4, 7 and 8), N not a multiple of 128 (2112, 48), and is bitwise reproducible. It
    is never the default (the launched kernels' names): it runs only where a config asks (the
    shipped H200 table does at some 1-2 token points). Where it cannot run (shuffled weights, K not
    a multiple of 1024, more than 16 tokens) it is the documented plan error."""
    _require_sm90()
    e8 = fmt == "e8m0"
    for n, k, dt in ((5120, 4096, torch.bfloat16), (2112, 7168, torch.float16), (4096, 2048, torch.float16),
                     (48, 1024, torch.bfloat16), (272, 8192, torch.bfloat16)):
        w, ws = rand_weight(n, k, 11), rand_wscale(n, k, e8, 11)
        x = rand_act((M, k), dt, M + 11)
        bias = torch.randn(n).to(dt)
        ref = smallm_ref(x, w, ws, bias)
        xd, wd, wsd, bd = x.to(gpu), w.to(gpu), ws.to(gpu), bias.to(gpu)
        forced, names = run_and_kernel_names(lambda: configured(xd, wd, wsd, False, bd, REGISTER_FED))
        assert any("register_fed_gemm_sm90" in name for name in names), names
        assert forced.dtype == dt
        assert_gemm_contract(forced, ref, f"register-fed N={n} K={k} M={M} {dt}")
        again = configured(xd, wd, wsd, False, bd, REGISTER_FED)
        assert torch.equal(_bits(again), _bits(forced)), "the register-fed kernel is not reproducible"
        with pytest.raises(RuntimeError, match="no sm_90 GEMM plan fits"):  # plain weights only
            configured(xd, fx.shuffle_weight(wd), wsd, True, bd, REGISTER_FED)
        _, names = run_and_kernel_names(lambda: fx.smallm_gemm(xd, wd, wsd, False, bd))
        assert not any("register_fed_gemm_sm90" in name for name in names), names
    w, ws = rand_weight(256, 1536, 3), rand_wscale(256, 1536, e8, 3)  # K % 1024 != 0
    x = rand_act((M, 1536), torch.bfloat16, 3)
    with pytest.raises(RuntimeError, match="no sm_90 GEMM plan fits"):
        configured(x.to(gpu), w.to(gpu), ws.to(gpu), False, None, REGISTER_FED)
    w, ws = rand_weight(256, 1024, 3), rand_wscale(256, 1024, e8, 3)  # 17 tokens
    x = rand_act((17, 1024), torch.bfloat16, 3)
    with pytest.raises(RuntimeError, match="no sm_90 GEMM plan fits"):
        configured(x.to(gpu), w.to(gpu), ws.to(gpu), False, None, REGISTER_FED)


def run_and_kernel_names(fn):
    """`fn()`'s result and the names of the CUDA kernels that call launched (torch.profiler)."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        out = fn()
        torch.cuda.synchronize()
    return out, [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]


def ran_paired(names):
    """Whether a paired-activations instance of the wgmma engine's kernel is among the kernel names."""
    return any("wgmma_ring_gemm_sm90" in name and ", true>" in name for name in names)


@pytest.mark.parametrize("fmt", ["fp32", "e8m0"])
@pytest.mark.parametrize("M", [9, 13, 16, 17, 24, 31, 32])
def test_sm90_paired_activations(gpu, M, fmt):
    """sm_90: paired activations (``pair_activations=on``: clusters of k_split x 2 CTAs whose two
    row groups each quantize half of a K slice's tokens and send the e4m3 bytes and scales to the
    other by st.async) give the bits of the same K split without pairing (``pair_activations=off``),
    with bf16 and fp16 input and a bias; the paired instance is the kernel that ran, on every shape
    and K split where its plan fits (odd token counts split 7 / 6; K = 1152 splits 9 blocks 5 / 4).
    The default plans pair: 5120x4096's at its split of 4, 8192x1024's without a split, 7168x2048's
    without a split up to 16 tokens and at its split of 2 from 17."""
    _require_sm90()
    e8 = fmt == "e8m0"
    paired_runs = 0
    # 4096x2048: forced pairs at its split of 2 once gave other bits at 24-32 tokens. 8192x1024: its
    # default's split-free pairs only; at a split of 2 the pairs' clusters of 4 leave 60 row groups of
    # 9 tiles against 66 of 8 unpaired, and 3-window CTAs sum window-major at 17-32 tokens (other
    # bits, within the contract).
    shapes = (((5120, 4096), torch.bfloat16, (1, 2, 4)), ((2048, 2048), torch.float16, (1, 2, 4)),
              ((4096, 1152), torch.bfloat16, (1, 2, 4)), ((4096, 2048), torch.bfloat16, (1, 2, 4)),
              ((8192, 1024), torch.bfloat16, (1,)), ((7168, 2048), torch.bfloat16, (1,)))
    for (n, k), dtype, k_splits in shapes:
        w, ws = rand_weight(n, k, 17), rand_wscale(n, k, e8, 17)
        x = rand_act((M, k), dtype, M + 17)
        bias = torch.randn(n).to(dtype)
        ref = smallm_ref(x, w, ws, bias)
        xd, wd, wsd, bd = x.to(gpu), w.to(gpu), ws.to(gpu), bias.to(gpu)
        for k_split in k_splits:
            on = KernelConfig(k_split=k_split, pair_activations=Toggle.ON)
            off = KernelConfig(k_split=k_split, pair_activations=Toggle.OFF)
            paired, names = run_and_kernel_names(lambda: run_if_a_plan_fits(xd, wd, wsd, bd, on))
            if not ran_paired(names):
                continue  # no paired plan fits this split (it ran another kernel, or none)
            assert_gemm_contract(paired, ref, f"paired N={n} K={k} M={M} k_split {k_split}")
            plain, names = run_and_kernel_names(lambda: configured(xd, wd, wsd, False, bd, off))
            assert not any(", true>" in name for name in names), "pair_activations=off paired"
            assert torch.equal(_bits(paired), _bits(plain)), f"paired and plain differ: N={n} K={k} k_split {k_split}"
            paired_runs += 1
        if n in (5120, 8192, 7168):
            default, names = run_and_kernel_names(lambda: fx.smallm_gemm(xd, wd, wsd, False, bd))
            assert ran_paired(names), f"{n}x{k}'s default did not pair"
            assert_gemm_contract(default, ref, f"default N={n} K={k} M={M}")
    assert paired_runs >= 3, paired_runs  # k_split 4 (and 1-2 where the tiles allow) on the large shapes


@pytest.mark.parametrize("fmt", ["fp32", "e8m0"])
@pytest.mark.parametrize("n, k, M", [(6144, 4096, 1), (6144, 4096, 5), (6144, 4096, 16), (4096, 12288, 1),
                                     (4096, 12288, 8), (12288, 4096, 16), (4096, 12288, 16), (6144, 4096, 17),
                                     (4608, 7168, 24), (12288, 4096, 32), (4096, 12288, 32)])
def test_sm90_large_share_keeps_the_wgmma_engine(gpu, n, k, M, fmt):
    """sm_90: where a CTA's weight share does not fit the 4-warpgroup ring in one resident wave, the
    wgmma engine's plan takes its 2-warpgroup instance with a refilled ring (and, where even that
    leaves the activations no room, the one with the whole shared memory) up to 16 tokens, and from
    17 tokens the 4-warpgroup kernel over several waves (2-3 here). The default meets the §3.4
    contract, runs a wgmma kernel, and its bits are those of the engine forced by name."""
    _require_sm90()
    e8 = fmt == "e8m0"
    w, ws = rand_weight(n, k, 11), rand_wscale(n, k, e8, 11)
    x = rand_act((M, k), torch.bfloat16, M + 11)
    ref = smallm_ref(x, w, ws)
    xd, wd, wsd = x.to(gpu), w.to(gpu), ws.to(gpu)
    out, names = run_and_kernel_names(lambda: fx.smallm_gemm(xd, wd, wsd))
    assert_gemm_contract(out, ref, f"default N={n} K={k} M={M}")
    assert any("wgmma_ring_gemm_sm90" in name for name in names), names
    forced = configured(xd, wd, wsd, False, None, WGMMA)
    assert torch.equal(_bits(out), _bits(forced)), "the default is not the wgmma engine"


@pytest.mark.parametrize("fmt", ["fp32", "e8m0"])
@pytest.mark.parametrize("n, k, M", [(1024, 25600, 32), (1024, 25600, 33), (2048, 53248, 16), (1024, 26624, 40),
                                     (1024, 40960, 17)])
def test_sm90_general_engine_beyond_one_wave(gpu, n, k, M, fmt):
    """sm_90: where no plan holds a CTA's share in one resident wave, the general engine runs over
    several waves (1024x25600 at 32-33 tokens, 2048x53248 at 16), and where even a CTA of one tile
    leaves a 32-token chunk's activations no room in shared memory, over chunks of fewer tokens
    (1024x26624 at 40: 24 + 16 tokens; 1024x40960 at 17: 16 + 1); tests/sm90_layout_check.cpp pins
    these plans. The fused op, scaled_gemm and fp8_block_linear meet the §3.4 contract there (fp16
    activations and bias too), and the fused op launches the general kernel."""
    _require_sm90()
    e8 = fmt == "e8m0"
    w, ws = rand_weight(n, k, 5), rand_wscale(n, k, e8, 5)
    wd, wsd = w.to(gpu), ws.to(gpu)
    for dt in (torch.bfloat16, torch.float16):
        x = rand_act((M, k), dt, M + 5)
        bias = torch.randn(n, generator=torch.Generator().manual_seed(M)).to(dt)
        ref = smallm_ref(x, w, ws, bias)
        xd, bd = x.to(gpu), bias.to(gpu)
        out, names = run_and_kernel_names(lambda: fx.smallm_gemm(xd, wd, wsd, False, bd))
        assert any("general_gemm_sm90" in name for name in names), names
        assert out.dtype == dt
        assert_gemm_contract(out, ref, f"fused N={n} K={k} M={M} {dt}")
        q, s = fx.per1x128_quant(xd, e8)
        assert_gemm_contract(fx.scaled_gemm(q, s, wd, wsd, False, dt, bd), ref, f"scaled_gemm N={n} K={k} M={M} {dt}")
        assert_gemm_contract(fx.fp8_block_linear(xd, wd, wsd, bias=bd), ref, f"fp8_block_linear N={n} K={k} M={M} {dt}")


def order_revealing_operands(n, k, M, seed):
    """Operands whose first 16 outputs show the order in which a kernel sums its K blocks: in
    weight rows 0-15 every K block holds the same e4m3 values, with the sign alternating from
    block to block; the activations repeat one 128-wide pattern per token, so every block's
    product P is +-the same; and the fp32 block scales of rows 0-127 come in pairs that differ by
    a few parts in 2^20. The blocks' terms then nearly cancel, and the fp32 rounding of the
    partial sums (which differ between engines and K splits, e.g. 4 warpgroups each summing blocks
    wg, wg + 4, ...) survives the bf16 output rounding. The other rows are random and dominate each output row's
    norm, so the §3.4 row contract still applies."""
    kb = k // 128
    g = torch.Generator().manual_seed(seed)
    w = rand_weight(n, k, seed).clone()
    pattern = (torch.randn(16, 1, 128, generator=g) * 64).clamp(-448, 448).to(torch.float8_e4m3fn).float()
    sign = torch.tensor([(-1.0) ** b for b in range(kb)]).view(1, kb, 1)
    w[:16] = (pattern * sign).reshape(16, k).to(torch.float8_e4m3fn)
    ws = rand_wscale(n, k, False, seed).clone()
    pairs = kb // 2
    ws[0, 1:2 * pairs:2] = ws[0, 0:2 * pairs:2] * (1 + torch.randint(1, 8, (pairs,), generator=g).float() * 2.0**-20)
    x = rand_act((M, 128), torch.bfloat16, seed).repeat(1, kb)
    return x, w, ws


@pytest.mark.parametrize("n, k, M, general", [(5120, 4096, 1, False), (4096, 2048, 2, False),
                                              (4096, 1024, 1, False), (1536, 4096, 1, False),
                                              (12288, 4096, 1, False), (12288, 4096, 32, False),
                                              (12288, 4096, 33, True)])
def test_sm90_default_engine_by_share(gpu, n, k, M, general):
    """sm_90: the default is the wgmma engine up to 32 tokens wherever one of its plans holds a CTA's
    weight share, at 1-2 tokens too (12288x4096, ~380 KB a CTA: its 2-warpgroup instance up to 16
    tokens, its 4-warpgroup kernel over three waves at 32); from 33 tokens the general engine. On
    operands whose bits show the kernels' summation order, the default's bits are those of the engine
    it should take, and the kernel launched is (or is not) the wgmma engine's; both meet the §3.4
    contract.
    (fp32 scales: the choice does not depend on the scale format, and power-of-two scales cannot
    be made to show the order.)"""
    _require_sm90()
    x, w, ws = order_revealing_operands(n, k, M, 13)
    ref = smallm_ref(x, w, ws)
    xd, wd, wsd = x.to(gpu), w.to(gpu), ws.to(gpu)
    out, names = run_and_kernel_names(lambda: fx.smallm_gemm(xd, wd, wsd))
    assert any("wgmma_ring_gemm_sm90" in name for name in names) != general, names
    assert_gemm_contract(out, ref, f"default N={n} K={k} M={M}")
    forced = configured(xd, wd, wsd, False, None, GENERAL)
    assert_gemm_contract(forced, ref, f"general engine N={n} K={k} M={M}")
    if general:
        assert torch.equal(_bits(out), _bits(forced)), (n, k, M)
    else:
        assert torch.equal(_bits(out), _bits(configured(xd, wd, wsd, False, None, WGMMA))), (n, k, M)


@pytest.mark.parametrize("n, k, M, split_free", [(8192, 1024, 1, True), (4096, 1024, 8, True), (6144, 1024, 4, True),
                                                 (3072, 1024, 2, True), (6144, 768, 1, True), (4096, 1024, 16, False),
                                                 (8192, 1024, 24, True), (6144, 1024, 16, True),
                                                 (2048, 1024, 4, False), (4096, 2048, 1, False),
                                                 (7168, 2048, 1, True), (8192, 2048, 8, True), (6144, 1536, 16, True),
                                                 (7168, 3072, 1, False),
                                                 (17152, 1024, 17, True), (17152, 1024, 32, True)])
def test_sm90_default_without_a_k_split_where_the_rule_says(gpu, n, k, M, split_free):
    """sm_90: up to 8 tokens the default plan takes no K split where a 4-tile CTA holds
    a whole K row of at most 8 blocks and those CTAs cover at least 0.3 of the SMs (8192x1024,
    6144x1024, 4096x1024, 3072x1024, 6144x768); from 9 tokens it does so (with paired activations,
    the bits of no split) where such CTAs cover at least 0.7 of the SMs (8192x1024 at 24 tokens,
    6144x1024 at 16); up to 16 tokens also over up to 16 blocks where they cover 0.7 of the SMs
    (7168x2048, 8192x2048, 6144x1536); elsewhere (4096x1024 at 16 tokens: 64 CTAs; 2048x1024: 32;
    4096x2048: 64 CTAs over 16 blocks; 7168x3072: 24 blocks) it keeps its split of 2. 17152x1024
    at 17-32 tokens takes no K split with CTAs of 9 tiles, which run
    window-major (a warpgroup a window) and keep each tile's sum in the CTA: no cluster, no inbox
    barrier (the plan is pinned by tests/sm90_layout_check.cpp; its split of 2 is the general engine).
    On operands whose bits show the summation order, the default's bits are those of the forced
    split it should take and differ from the other's; all three meet the §3.4 contract. (With 4 K
    blocks, 4096x512 at one token, both splits happened to round to the same bits on the H200: such
    a case cannot show which one ran.)"""
    _require_sm90()
    x, w, ws = order_revealing_operands(n, k, M, 17)
    ref = smallm_ref(x, w, ws)
    xd, wd, wsd = x.to(gpu), w.to(gpu), ws.to(gpu)
    out = fx.smallm_gemm(xd, wd, wsd)
    whole = configured(xd, wd, wsd, False, None, KernelConfig(k_split=1))
    split = configured(xd, wd, wsd, False, None, KernelConfig(k_split=2))
    for name, y in (("default", out), ("no K split", whole), ("split of 2", split)):
        assert_gemm_contract(y, ref, f"{name} N={n} K={k} M={M}")
    taken, other = (whole, split) if split_free else (split, whole)
    assert torch.equal(_bits(out), _bits(taken)), (n, k, M, split_free)
    assert not bool((_bits(out[:, :16]) == _bits(other[:, :16])).all()), (n, k, M, "the other split summed alike")


def adversarial_groups(M, K, dt, seed):
    """Activations whose 128-groups are drawn from test_quant's adversarial constructions (zero and
    single-element groups, e4m3 ties, elements near the +-448 clamp, extreme magnitudes and
    subnormals), which stress the group amax and the scale."""
    rng = np.random.default_rng(seed)
    pool = np.concatenate([make(dt, rng).reshape(-1, 128) for make in ADVERSARIAL_GROUPS.values()])
    groups = pool[rng.integers(0, len(pool), M * (K // 128))]
    return from_act_bits(sm.f32_to_act_bits(groups.reshape(M, K), dt), ACT[dt])


@pytest.mark.parametrize("dt", ["bf16", "fp16"])
@pytest.mark.parametrize("fmt", ["fp32", "e8m0"])
def test_sm90_fused_quantization_is_bit_exact(gpu, dt, fmt):
    """sm_90: the fused op's in-kernel quantization equals the SPEC model's bit for bit, in every
    engine and at every token count that changes how the prologue splits a 128-group among lanes
    (wgmma engine: 8 lanes up to 8 tokens, 4 from 9; the register-fed engine, up to 16 tokens: 4;
    the general engine: 16). The weight is a signed
    permutation (row n holds +-1 at K position perm[n], zeros elsewhere) with unit block scales,
    so output (m, n) is exactly +-RNE(fl32(q[m, k] * xs[m, k / 128])) for k = perm[n]: each
    quantized activation byte and scale is read back through the GEMM, whatever the kernel's
    summation order (the other products are zeros; a zero output may carry either sign).
    5120 x 4096 (rows beyond K repeat the permutation) has CTAs of 5 tiles up to 16 tokens, whose
    second 64-row window overlaps the first in the wgmma engine."""
    _require_sm90()
    e8 = fmt == "e8m0"
    for n, k in ((2048, 2048), (4096, 4096), (5120, 4096)):
        rng = np.random.default_rng(n)
        perm = np.resize(rng.permutation(k), n)  # row n's +-1 sits at K position perm[n]
        sign = rng.choice([-1.0, 1.0], n).astype(np.float32)
        w = torch.zeros(n, k)
        w[torch.arange(n), torch.from_numpy(perm)] = torch.from_numpy(sign)
        w = w.to(FP8)
        ws = torch.ones(n // 128, k // 128)
        ws = fx.scale_to_e8m0(ws) if e8 else ws
        wd, wsd = w.to(gpu), ws.to(gpu)
        for M in (1, 3, 8, 9, 16, 23, 32):
            x = adversarial_groups(M, k, dt, seed=M * 7 + n)
            q, xs = sm.quant_act_bits(act_bits(x), dt, e8)
            deq = sm.dequant(q, xs, e8).astype(np.float32)  # exact in float64, one rounding to fp32
            expected = sm.f32_to_act_bits(deq[:, perm] * sign, dt)
            xd = x.to(gpu)
            for config in (KernelConfig(), GENERAL, KernelConfig(k_split=1), KernelConfig(k_split=4), REGISTER_FED):
                out = run_if_a_plan_fits(xd, wd, wsd, None, config)
                if out is None:
                    continue
                got = act_bits(out.cpu())
                # a +-0 product may come out as either zero (the other products are zeros of either sign)
                bad = (got != expected) & (((got | expected) & 0x7FFF) != 0)
                assert not bad.any(), (
                    f"N={n} K={k} M={M} {dt} {fmt} {config.label()}: {int(bad.sum())} outputs differ from the model's "
                    f"quantization; first at {np.argwhere(bad)[0].tolist()}"
                )


def test_cpu_tensor_to_gpu_path_is_an_error(gpu):
    """A CPU tensor passed to a CUDA path is an error, not a silent copy."""
    w, ws = rand_weight(N, K, 4), rand_wscale(N, K, False, 4)
    x = rand_act((4, K), torch.bfloat16, 4)
    for args, names in [
        ((x.to(gpu), w, ws.to(gpu)), ["w"]),
        ((x.to(gpu), w.to(gpu), ws), ["w_scale"]),
        ((x, w.to(gpu), ws.to(gpu)), ["x", "w", "w_scale"]),
    ]:
        with pytest.raises((RuntimeError, ValueError)) as ei:
            fx.smallm_gemm(*args)
        msg = str(ei.value)
        assert any(n in msg for n in names) and ("device" in msg.lower() or "cpu" in msg.lower()), msg
    with pytest.raises((RuntimeError, ValueError)):
        fx.fp8_block_linear(x.to(gpu), w, ws)


def test_gpu_select_path_policy(gpu):
    from sglang_fp8ext import linear

    d = torch.device(gpu)
    assert linear.select_path(d, 1, N, K) == "fused"
    assert linear.select_path(d, 32, N, K) == "fused"
    assert linear.select_path(d, 33, N, K) == "unfused"
