"""Tensor parallelism (sglang_fp8ext.parallel): shard helpers, and an MLP
``up (column-parallel) -> activation -> down (row-parallel) -> all_reduce`` that must give the
unsharded single-process result.

Tolerance of the TP result against the unsharded one (``assert_tp_close``): it is not bitwise,
because each rank's row-parallel partial sum is rounded to bf16 before the all-reduce and the
reduced sum is rounded again, where the unsharded layer rounds its fp32 sum once. With u = 2^-8
(bf16 unit roundoff: a rounding moves an element by at most u times its magnitude), per output
row y:

    ||y_tp - y_1|| <= u * (||y_tp|| + sum_r ||p_r|| + ||y_1||)     (+ fp32 reordering, ~1e-6)

(the partials p_r, the reduced sum, the unsharded output: three roundings). Everything before the
down projection's accumulation is identical: with 128-aligned shards every 1x128 activation group
lives on one rank, and on the CPU the column-parallel output equals the unsharded one bitwise
(checked below). On a GPU the kernel for N/tp output columns may accumulate in another order than
the one for N, which can move the up projection's output by a last bit; one more u * ||y_1|| is
allowed for that in the GPU test. For these random MLPs the bound works out to about 1.3e-2 (tp=2)
relative; the errors measured are a few times smaller, and a real sharding bug (wrong scale
block, bias added on every rank, wrong input slice) is off by O(1).
"""

from __future__ import annotations

import os
import socket
import time

import pytest
import torch

import sglang_fp8ext as fx
from conftest import gpu_skip_reason
from sglang_fp8ext import parallel
from tp_worker import (
    MlpCase,
    activation,
    checkpoint,
    global_tensors,
    inputs,
    linear_from,
    partial_forward,
    rank_main,
    sharded_layers,
    unsharded_layers,
)

FP8 = torch.float8_e4m3fn
E8M0 = torch.float8_e8m0fnu
U_BF16 = 2.0**-8
SWITCHES = ("SGL_FP8_SMALLM", "SGLANG_ROCM_SMALLM_FP8_BS", "SGLANG_DSV4_DENSE_MXSCALE", "SGLANG_DSV4_DENSE_MXSCALE_SHAPES")


@pytest.fixture(autouse=True)
def _clean_switches(monkeypatch):
    for name in SWITCHES:
        monkeypatch.delenv(name, raising=False)


def bits(t: torch.Tensor) -> torch.Tensor:
    """Bit patterns, for exact comparisons (NaN-safe, -0 != +0)."""
    t = t.detach().cpu().contiguous()
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32}[t.element_size()])


def rand_checkpoint(N, K, *, scale_dtype=torch.float32, bias=True, seed=0, device="cpu"):
    """Arbitrary bytes: sharding must move every byte, whatever it encodes (NaN codes included)."""
    g = torch.Generator().manual_seed(seed)
    w = torch.randint(0, 256, (N, K), dtype=torch.uint8, generator=g).view(FP8)
    s = torch.rand((N + 127) // 128, K // 128, generator=g)
    if scale_dtype == E8M0:
        s = torch.randint(1, 255, s.shape, dtype=torch.uint8, generator=g).view(E8M0)
    b = torch.randn(N, generator=g).to(torch.bfloat16) if bias else None
    return w.to(device), s.to(device), None if b is None else b.to(device)


def assert_tp_close(y_tp, y_1, partials, what, extra_u=0.0):
    """The bound of the module docstring, per row (rows are tokens)."""
    y_tp, y_1 = y_tp.double(), y_1.double()
    err = (y_tp - y_1).norm(dim=-1)
    psum = sum(p.double().norm(dim=-1) for p in partials)
    bound = U_BF16 * (y_tp.norm(dim=-1) + psum + (1.0 + extra_u) * y_1.norm(dim=-1)) + 1e-6 * psum
    rel = err / y_1.norm(dim=-1)
    assert bool(torch.isfinite(y_tp).all()), f"{what}: non-finite TP output"
    worst = int(torch.argmax(err / bound))
    assert bool((err <= bound).all()), (
        f"{what}: row {worst} differs from the unsharded result by {err[worst]:.4g} "
        f"(relative {rel[worst]:.3e}) > bound {bound[worst]:.4g}"
    )
    return float(rel.max())


# ---- shard helpers: tensors -----------------------------------------------------------------------


@pytest.mark.parametrize("scale_dtype", [torch.float32, E8M0])
@pytest.mark.parametrize("N,K,tp", [(256, 384, 2), (1024, 256, 4), (1024, 128, 8), (272, 256, 1)])
def test_column_shards_concatenate_to_original(N, K, tp, scale_dtype):
    w, s, b = rand_checkpoint(N, K, scale_dtype=scale_dtype)
    shards = [parallel.shard_column_parallel_tensors(w, s, b, tp_size=tp, tp_rank=r) for r in range(tp)]
    for r, sh in enumerate(shards):
        assert sh.weight.shape == (N // tp, K) and sh.weight.is_contiguous() and sh.weight.dtype == FP8
        assert sh.weight_scale_inv.shape == ((N // tp + 127) // 128, K // 128) and sh.weight_scale_inv.dtype == scale_dtype
        assert sh.weight_scale_inv.is_contiguous() and sh.bias.shape == (N // tp,)
        # copies: a shard must not keep the whole checkpoint tensor alive
        assert sh.weight.untyped_storage().data_ptr() != w.untyped_storage().data_ptr()
    assert torch.equal(bits(torch.cat([sh.weight for sh in shards])), bits(w))
    assert torch.equal(bits(torch.cat([sh.weight_scale_inv for sh in shards])), bits(s))
    assert torch.equal(bits(torch.cat([sh.bias for sh in shards])), bits(b))


@pytest.mark.parametrize("scale_dtype", [torch.float32, E8M0])
@pytest.mark.parametrize("N,K,tp", [(272, 256, 2), (128, 1024, 4), (2112, 1024, 8), (144, 384, 3), (48, 128, 1)])
def test_row_shards_concatenate_to_original(N, K, tp, scale_dtype):
    w, s, b = rand_checkpoint(N, K, scale_dtype=scale_dtype)
    shards = [parallel.shard_row_parallel_tensors(w, s, b, tp_size=tp, tp_rank=r) for r in range(tp)]
    for r, sh in enumerate(shards):
        assert sh.weight.shape == (N, K // tp) and sh.weight.is_contiguous()
        assert sh.weight_scale_inv.shape == ((N + 127) // 128, K // tp // 128) and sh.weight_scale_inv.is_contiguous()
        # the bias is added once: by rank 0's GEMM epilogue, then summed by the all-reduce
        if r == 0:
            assert torch.equal(bits(sh.bias), bits(b))
        else:
            assert sh.bias is None
    assert torch.equal(bits(torch.cat([sh.weight for sh in shards], dim=1)), bits(w))
    assert torch.equal(bits(torch.cat([sh.weight_scale_inv for sh in shards], dim=1)), bits(s))


def test_shards_without_bias():
    w, s, _ = rand_checkpoint(256, 256, bias=False)
    assert parallel.shard_column_parallel_tensors(w, s, None, tp_size=2, tp_rank=1).bias is None
    assert parallel.shard_row_parallel_tensors(w, s, None, tp_size=2, tp_rank=0).bias is None


# SPEC §6 shapes. The Qwen3.5 ones are per rank at TP4, so the global shapes are 4x the sharded
# dim; the DeepSeek ones are taken as whole matrices. Expected: column-parallel over tp needs
# N % (128 * tp) == 0, row-parallel needs K % (128 * tp) == 0 (tp = 1: no split).
SPEC_GLOBAL = {
    "qwen35_in_proj_qkvz": ("column", 4 * 5120, 4096),
    "qwen35_qkv_proj": ("column", 4 * 4608, 4096),
    "qwen35_o_proj": ("row", 4096, 4 * 2048),
    "dsv_8192x1024": (None, 8192, 1024),
    "dsv_4096x1024": (None, 4096, 1024),
    "dsv_1536x4096": (None, 1536, 4096),
    "dsv_2112x7168": (None, 2112, 7168),
}


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
@pytest.mark.parametrize("name", list(SPEC_GLOBAL))
def test_spec_shapes_shardability(name, tp):
    """Which SPEC §6 shapes shard at which tp (the table of docs/integration.md); meta tensors."""
    kind, N, K = SPEC_GLOBAL[name]
    w = torch.empty(N, K, dtype=FP8, device="meta")
    s = torch.empty((N + 127) // 128, K // 128, device="meta")
    for mode in ("column", "row") if kind is None else (kind,):
        ok = (tp == 1 or N % (128 * tp) == 0) if mode == "column" else K % (128 * tp) == 0
        fn = parallel.shard_column_parallel_tensors if mode == "column" else parallel.shard_row_parallel_tensors
        if ok:
            for r in range(tp):
                sh = fn(w, s, None, tp_size=tp, tp_rank=r)
                assert sh.weight.shape == ((N // tp, K) if mode == "column" else (N, K // tp))
        else:
            with pytest.raises(ValueError, match="not a multiple of 128"):
                fn(w, s, None, tp_size=tp, tp_rank=0)
    if name == "qwen35_o_proj" and tp == 4:
        assert parallel.shard_row_parallel_tensors(w, s, tp_size=4, tp_rank=3).weight.shape == (4096, 2048)


@pytest.mark.parametrize(
    "mode,N,K,tp,rank,message",
    [
        # N/tp not a multiple of 128: rank 1 would start inside a 128-row scale block
        ("column", 384, 256, 2, 0, r"N/tp = 384/2 = 192 rows per rank is not a multiple of 128"),
        ("column", 2112, 256, 2, 1, r"N/tp = 2112/2 = 1056 rows per rank"),
        ("column", 640, 256, 3, 0, r"N = 640 is not divisible by tp_size = 3"),
        # K/tp not a multiple of 128: a quant group / scale column would straddle ranks
        ("row", 256, 1024, 16, 0, r"K/tp = 1024/16 = 64 input features per rank is not a multiple of 128"),
        ("row", 256, 384, 2, 1, r"K/tp = 384/2 = 192"),
        ("row", 256, 640, 3, 0, r"K = 640 is not divisible by tp_size = 3"),
        ("row", 256, 256, 2, 2, r"tp_rank must be an int in \[0, 2\), got 2"),
        ("column", 256, 256, 0, 0, r"tp_size must be a positive int, got 0"),
        ("column", 256, 256, 2, -1, r"tp_rank must be an int in \[0, 2\), got -1"),
    ],
)
def test_shard_errors(mode, N, K, tp, rank, message):
    w, s, b = rand_checkpoint(N, K)
    fn = parallel.shard_column_parallel_tensors if mode == "column" else parallel.shard_row_parallel_tensors
    with pytest.raises(ValueError, match=message):
        fn(w, s, b, tp_size=tp, tp_rank=rank)


def test_rank_and_size_take_any_integer_type():
    """An engine may hold its rank as a numpy integer or a 0-d tensor; bools and floats are not ranks."""
    np = pytest.importorskip("numpy")
    w, s, b = rand_checkpoint(256, 256)
    ref = parallel.shard_column_parallel_tensors(w, s, b, tp_size=2, tp_rank=1)
    for size, rank in ((np.int64(2), np.int32(1)), (torch.tensor(2), torch.tensor(1))):
        got = parallel.shard_column_parallel_tensors(w, s, b, tp_size=size, tp_rank=rank)
        assert all(torch.equal(x.view(torch.uint8) if x.dtype == FP8 else x, y.view(torch.uint8) if y.dtype == FP8 else y)
                   for x, y in zip(got, ref))
    for size, rank, message in ((True, 0, "tp_size must be a positive int, got True"),
                                (2, False, r"tp_rank must be an int in \[0, 2\), got False"),
                                (2.0, 0, "tp_size must be a positive int, got 2.0")):
        with pytest.raises(ValueError, match=message):
            parallel.shard_row_parallel_tensors(w, s, b, tp_size=size, tp_rank=rank)
    assert parallel.column_shard_size(512, np.int64(2)) == 256 and parallel.row_shard_size(512, 4) == 128
    for fn in (parallel.column_shard_size, parallel.row_shard_size):
        for size in (0, -2):
            with pytest.raises(ValueError, match=f"tp_size must be a positive int, got {size}"):
                fn(512, size)


@pytest.mark.parametrize("mode", ["column", "row"])
def test_module_shards_keep_e8m0_scales(mode):
    """A layer that loaded a ue8m0 checkpoint shards into layers holding the same e8m0 bytes."""
    N, K = 512, 512
    w, s, _ = rand_checkpoint(N, K, scale_dtype=E8M0, bias=False)
    layer = fx.Fp8BlockLinear(K, N)
    layer.load_state_dict({"weight": w, "weight_scale_inv": s})
    shard_fn = parallel.shard_column_parallel if mode == "column" else parallel.shard_row_parallel
    tensors_fn = parallel.shard_column_parallel_tensors if mode == "column" else parallel.shard_row_parallel_tensors
    for rank in range(2):
        shard = shard_fn(layer, tp_size=2, tp_rank=rank)
        expected = tensors_fn(w, s, None, tp_size=2, tp_rank=rank)
        assert shard.weight_scale_inv.dtype == E8M0
        assert torch.equal(shard.weight_scale_inv.view(torch.uint8), expected.weight_scale_inv.view(torch.uint8))
        assert torch.equal(shard.weight.view(torch.uint8), expected.weight.view(torch.uint8))


def test_shard_input_errors():
    w, s, b = rand_checkpoint(256, 256)
    col = parallel.shard_column_parallel_tensors
    with pytest.raises(ValueError, match=r"weight_scale_inv of shape \[ceil\(N/128\), K/128\] = \[2, 2\].*got \[2, 1\]"):
        col(w, s[:, :1], b, tp_size=2, tp_rank=0)
    with pytest.raises(ValueError, match=r"expected bias of shape \[N\] = \[256\], got \[128\]"):
        col(w, s, b[:128], tp_size=2, tp_rank=0)
    with pytest.raises(ValueError, match=r"2-D float8_e4m3fn \[N, K\] tensor, got torch.bfloat16"):
        col(w.to(torch.bfloat16), s, b, tp_size=2, tp_rank=0)
    with pytest.raises(ValueError, match=r"float32 or float8_e8m0fnu, got torch.float16"):
        col(w, s.half(), b, tp_size=2, tp_rank=0)
    with pytest.raises(ValueError, match=r"K = weight.size\(1\) to be a multiple of 128, got K = 200"):
        col(w[:, :200], s, b, tp_size=2, tp_rank=0)
    # a shuffled weight interleaves rows and columns: refuse rather than slice a permuted buffer
    for fn in (col, parallel.shard_row_parallel_tensors):
        with pytest.raises(ValueError, match="AITER-shuffled.*before process_weights_after_loading"):
            fn(fx.shuffle_weight(w), s, b, tp_size=2, tp_rank=0)


# ---- shard helpers: Fp8BlockLinear ----------------------------------------------------------------


def test_module_shards_match_tensor_shards():
    w, s, b = checkpoint(512, 512, 3, pow2=False, bias=True, dtype=torch.float16)
    layer = linear_from((w, s, b), "cpu", dtype=torch.float16)
    for r in range(2):
        col = parallel.shard_column_parallel(layer, tp_size=2, tp_rank=r)
        ref = parallel.shard_column_parallel_tensors(w, s, b, tp_size=2, tp_rank=r)
        assert isinstance(col, fx.Fp8BlockLinear) and col.dtype == torch.float16
        assert (col.in_features, col.out_features) == (512, 256)
        assert torch.equal(bits(col.weight), bits(ref.weight)) and torch.equal(bits(col.weight_scale_inv), bits(ref.weight_scale_inv))
        assert torch.equal(bits(col.bias), bits(ref.bias))
        row = parallel.shard_row_parallel(layer, tp_size=2, tp_rank=r)
        assert (row.in_features, row.out_features) == (256, 512)
        assert torch.equal(bits(row.weight), bits(w[:, r * 256:(r + 1) * 256]))
        assert (row.bias is None) == (r == 1)


def test_module_processed_before_sharding_is_refused(monkeypatch):
    lin = torch.nn.Linear(256, 256, bias=False).to(torch.bfloat16)
    layer = fx.Fp8BlockLinear.from_float(lin, power_of_two_scales=True)
    monkeypatch.setenv("SGLANG_DSV4_DENSE_MXSCALE", "1")
    layer.process_weights_after_loading()
    assert layer.weight_scale_e8m0 is not None
    for fn in (parallel.shard_column_parallel, parallel.shard_row_parallel):
        with pytest.raises(ValueError, match="already prepared by process_weights_after_loading"):
            fn(layer, tp_size=2, tp_rank=0)


# ---- TP in one process: every rank's shard run here, outputs combined as the collectives would ----


def simulate(case: MlpCase, tp: int):
    """(TP outputs, per-batch partials) with all ranks in this process; the all-reduce is a float32
    sum of the bf16 partials rounded to bf16 (what a 2-rank bf16 all-reduce computes)."""
    ranks = [sharded_layers(case, tp, r, "cpu") for r in range(tp)]
    outs, parts = [], []
    for x in inputs(case):
        partials = [partial_forward(case, up, down, x, tp, r) for r, (up, down) in enumerate(ranks)]
        outs.append(torch.stack([p.float() for p in partials]).sum(0).to(x.dtype))
        parts.append(partials)
    return ranks, outs, parts


def reference(case: MlpCase):
    up, down = unsharded_layers(case, "cpu")
    return [down(activation(case.act, up(x)) if up is not None else x) for x in inputs(case)], up


SIM_CASES = [
    # Qwen3.5 at TP4: o_proj/out_proj per rank (4096, 2048) fed by a column-parallel (2048, 4096)
    (MlpCase("qwen35_o_proj_tp4", H=4096, I=8192, M=4, up_bias=True, down_bias=True), 4),
    # DeepSeek dense (1536, 4096) per rank, column-parallel, and its row-parallel partner, TP2
    (MlpCase("dsv_1536x4096_tp2", H=4096, I=3072, M=33, act="gelu", down_bias=True, seed=1), 2),
    # TP8, scaled down: 128 features per rank
    (MlpCase("small_tp8", H=256, I=1024, M=5, up_bias=True, down_bias=True, seed=2), 8),
    # DeepSeek (2112, 7168) per rank: N % 128 != 0, so row-parallel only (TP2: K = 14336)
    (MlpCase("dsv_2112x7168_row_tp2", H=2112, I=0, K_in=14336, M=3, down_bias=True, seed=3), 2),
]


@pytest.mark.parametrize("case,tp", SIM_CASES, ids=[c.name for c, _ in SIM_CASES])
def test_tp_mlp_simulated(case, tp):
    ranks, outs, parts = simulate(case, tp)
    refs, up_ref = reference(case)
    for b, (x, y_tp, y_1, partials) in enumerate(zip(inputs(case), outs, refs, parts)):
        if up_ref is not None:
            # column-parallel: on the CPU every output element is computed by the same code from the
            # same bytes whatever N is, so the concatenated shards equal the unsharded output bitwise
            cols = torch.cat([up(x) for up, _ in ranks], dim=-1)
            assert torch.equal(bits(cols), bits(up_ref(x))), f"{case.name}: column-parallel output differs"
        assert_tp_close(y_tp, y_1, partials, f"{case.name} batch {b}")
        if case.down_bias:
            # negative control: a bias added by every rank is caught by the tolerance
            _, down_t = global_tensors(case)
            wrong = (y_tp.float() + (tp - 1) * down_t[2].float()).to(y_tp.dtype)
            with pytest.raises(AssertionError, match="differs from the unsharded result"):
                assert_tp_close(wrong, y_1, partials, "bias on every rank")


def test_shard_then_process_e8m0(monkeypatch):
    """Shard first, then process_weights_after_loading: with SGLANG_DSV4_DENSE_MXSCALE=1 and
    power-of-two scales each shard gets e8m0 scales for its own (per-rank) shape."""
    H, I, tp = 512, 1024, 2
    g = torch.Generator().manual_seed(5)
    up = fx.Fp8BlockLinear.from_float(torch.nn.Linear(H, I, bias=True).to(torch.bfloat16), power_of_two_scales=True)
    down = fx.Fp8BlockLinear.from_float(torch.nn.Linear(I, H, bias=True).to(torch.bfloat16), power_of_two_scales=True)
    monkeypatch.setenv("SGLANG_DSV4_DENSE_MXSCALE", "1")
    # SGLANG_DSV4_DENSE_MXSCALE_SHAPES names the per-rank shapes the weights have when prepared
    monkeypatch.setenv("SGLANG_DSV4_DENSE_MXSCALE_SHAPES", f"{I // tp}x{H},{H}x{I // tp}")
    shards = []
    for r in range(tp):
        col = parallel.shard_column_parallel(up, tp_size=tp, tp_rank=r)
        row = parallel.shard_row_parallel(down, tp_size=tp, tp_rank=r)
        col.process_weights_after_loading()
        row.process_weights_after_loading()
        for shard, scales in (
            (col, up.weight_scale_inv[r * I // tp // 128:(r + 1) * I // tp // 128]),
            (row, down.weight_scale_inv[:, r * I // tp // 128:(r + 1) * I // tp // 128]),
        ):
            assert shard.weight_scale_e8m0 is not None, "the shard was not given e8m0 scales"
            # e8m0 byte of a power of two = its fp32 exponent field (SPEC §4)
            expected = (scales.contiguous().view(torch.int32) >> 23).to(torch.uint8)
            assert torch.equal(bits(shard.weight_scale_e8m0), expected)
        shards.append((col, row))

    # the unsharded reference, prepared with e8m0 scales too (no shape restriction)
    monkeypatch.delenv("SGLANG_DSV4_DENSE_MXSCALE_SHAPES")
    up.process_weights_after_loading()
    down.process_weights_after_loading()
    assert up.weight_scale_e8m0 is not None and down.weight_scale_e8m0 is not None
    for M in (1, 6):
        x = torch.randn(M, H, generator=g).to(torch.bfloat16)
        partials = [row(torch.nn.functional.silu(col(x))) for col, row in shards]
        y_tp = torch.stack([p.float() for p in partials]).sum(0).to(torch.bfloat16)
        y_1 = down(torch.nn.functional.silu(up(x)))
        assert_tp_close(y_tp, y_1, partials, f"e8m0 TP2 M={M}")


# ---- TP across processes ------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(backend, cases, out_dir, cuda_graph, world_size=2):
    import torch.multiprocessing as mp

    # one process per rank; spawn (not fork): CUDA and gloo threads do not survive a fork
    mp.spawn(
        rank_main,
        args=(world_size, free_port(), backend, cases, str(out_dir), cuda_graph),
        nprocs=world_size,
        join=True,
    )
    return {
        c.name: [torch.load(os.path.join(out_dir, f"{c.name}.rank{r}.pt")) for r in range(world_size)] for c in cases
    }


# Global sizes; per rank at TP2: up (I/2, H), down (H, I/2).
PROC_CASES = [
    # Qwen3.5 o_proj/out_proj per rank (4096, 2048), fed by a column-parallel (2048, 4096)
    MlpCase("qwen35_o_proj", H=4096, I=4096, M=4, up_bias=True, down_bias=True),
    # DeepSeek dense (1536, 4096) per rank, e8m0 path (power-of-two scales, switch on)
    MlpCase("dsv_1536x4096_e8m0", H=4096, I=3072, M=8, act="gelu", pow2=True, env=(("SGLANG_DSV4_DENSE_MXSCALE", "1"),), seed=1),
    # DeepSeek (2112, 7168) per rank: row-parallel only (N % 128 != 0), K = 14336
    MlpCase("dsv_2112x7168_row", H=2112, I=0, K_in=14336, M=3, down_bias=True, seed=2),
]


def check_ranks(results, device, extra_u=0.0):
    worst = {}
    for case in PROC_CASES:
        per_rank = results[case.name]
        up, down = unsharded_layers(case, device)
        for b, x in enumerate(inputs(case)):
            x = x.to(device)
            y_1 = down(activation(case.act, up(x)) if up is not None else x).cpu()
            y_tp = per_rank[0]["outputs"][b]
            for r in range(1, len(per_rank)):
                assert torch.equal(bits(per_rank[r]["outputs"][b]), bits(y_tp)), f"{case.name}: ranks disagree after all-reduce"
            partials = [res["partials"][b] for res in per_rank]
            worst[case.name] = max(worst.get(case.name, 0.0), assert_tp_close(y_tp, y_1, partials, f"{case.name} batch {b}", extra_u))
    return worst


@pytest.mark.slow
def test_tp2_gloo_cpu(tmp_path):
    """World size 2 on the CPU, gloo backend; the all-reduce is done on the bf16 outputs (gloo
    supports bfloat16 sums in torch 2.13, as engines reduce them)."""
    start = time.perf_counter()
    results = run_ranks("gloo", PROC_CASES, tmp_path, cuda_graph=False)
    worst = check_ranks(results, "cpu")
    print(f"gloo TP2: {time.perf_counter() - start:.1f} s; worst row-relative error vs unsharded: {worst}")


def nccl_skip_reason():
    reason = gpu_skip_reason()
    if reason is not None:
        return reason
    if torch.cuda.device_count() < 2:
        return f"{torch.cuda.device_count()} CUDA device(s), the NCCL TP test needs 2: not run"
    return None


@pytest.mark.gpu
def test_tp2_nccl_cuda_graph(tmp_path):
    """World size 2 on two GPUs with NCCL; each rank captures up -> act -> down -> all_reduce in one
    CUDA graph and replays it with new inputs copied into the static input (replay == eager
    bitwise, checked on each rank), and the result matches the single-GPU unsharded one."""
    reason = nccl_skip_reason()
    if reason is not None:
        pytest.skip(reason)
    results = run_ranks("nccl", PROC_CASES, tmp_path, cuda_graph=True)
    for case in PROC_CASES:
        for r, res in enumerate(results[case.name]):
            assert len(res["replays"]) == case.batches
            for replay, eager in zip(res["replays"], res["outputs"]):
                assert torch.equal(bits(replay), bits(eager)), f"{case.name} rank {r}: replay != eager"
    worst = check_ranks(results, "cuda:0", extra_u=1.0)
    print(f"NCCL TP2 + CUDA graphs: worst row-relative error vs single GPU: {worst}")
