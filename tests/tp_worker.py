"""Per-rank side of tests/test_tensor_parallel.py (spawned processes import this module, not the
test module, so they do not need pytest).

Every rank rebuilds the same global checkpoint tensors from a seed (CPU generators are
deterministic), keeps its shard (sglang_fp8ext.parallel), prepares it
(process_weights_after_loading), runs the MLP ``up (column-parallel) -> activation -> down
(row-parallel) -> all_reduce`` and saves what it computed. The parent process computes the
unsharded reference itself and compares; with ``cuda_graph`` each rank also checks that CUDA-graph
replay equals eager execution bitwise.
"""

from __future__ import annotations

import faulthandler
import functools
import os
import sys
from dataclasses import dataclass

import torch
import torch.nn.functional as F

FP8 = torch.float8_e4m3fn


@dataclass(frozen=True)
class MlpCase:
    """A column-parallel up projection [I, H] feeding a row-parallel down projection [H, I].

    ``I`` and ``H`` are the global (unsharded) sizes. ``I = 0`` means no up projection: the
    row-parallel layer alone, each rank taking its slice of a full input x [M, H_in]."""

    name: str
    H: int  # hidden size: K of up, N of down
    I: int  # intermediate size: N of up, K of down (sharded)
    M: int  # tokens per batch
    act: str = "silu"
    up_bias: bool = False
    down_bias: bool = False
    pow2: bool = False  # power-of-two block scales (e8m0-convertible)
    env: tuple = ()  # (name, value) switches set while preparing the weights
    K_in: int = 0  # I = 0 only: K of the row-parallel layer
    batches: int = 3
    seed: int = 0


def activation(name: str, h: torch.Tensor) -> torch.Tensor:
    return F.silu(h) if name == "silu" else F.gelu(h, approximate="tanh")


def checkpoint(N: int, K: int, seed: int, *, pow2: bool, bias: bool, dtype=torch.bfloat16):
    """Random global checkpoint tensors (weight, weight_scale_inv, bias) on the CPU."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + N * 31 + K)
    w = (torch.randn(N, K, generator=g) * 64).clamp(-448, 448).to(FP8)
    shape = ((N + 127) // 128, K // 128)
    if pow2:
        s = torch.exp2(torch.randint(-13, -8, shape, generator=g).to(torch.float32))
    else:
        s = torch.rand(shape, generator=g) * 2e-4 + 5e-5
    b = (torch.randn(N, generator=g) * 0.5).to(dtype) if bias else None
    return w, s, b


def inputs(case: MlpCase, dtype=torch.bfloat16):
    g = torch.Generator().manual_seed(case.seed + 99)
    k = case.H if case.I else case.K_in
    return [torch.randn(case.M, k, generator=g).to(dtype) for _ in range(case.batches)]


@functools.lru_cache(maxsize=2)
def global_tensors(case: MlpCase):
    """(up tensors or None, down tensors) of the unsharded model (cached: the in-process tests
    shard one model for every rank; callers copy, never modify)."""
    if case.I:
        up = checkpoint(case.I, case.H, case.seed, pow2=case.pow2, bias=case.up_bias)
        down = checkpoint(case.H, case.I, case.seed + 1, pow2=case.pow2, bias=case.down_bias)
    else:
        up = None
        down = checkpoint(case.H, case.K_in, case.seed + 1, pow2=case.pow2, bias=case.down_bias)
    return up, down


def linear_from(tensors, device, dtype=torch.bfloat16):
    """An Fp8BlockLinear holding (weight, weight_scale_inv, bias), not yet prepared."""
    from sglang_fp8ext import Fp8BlockLinear

    w, s, b = tensors
    layer = Fp8BlockLinear(w.shape[1], w.shape[0], bias=b is not None, device=device, dtype=dtype)
    with torch.no_grad():
        layer.weight.copy_(w)
        layer.weight_scale_inv.copy_(s)
        if b is not None:
            layer.bias.copy_(b)
    return layer


class set_env:
    """Set environment switches for a block (the switches are read at call time)."""

    def __init__(self, pairs):
        self.pairs = dict(pairs)
        self.saved = {}

    def __enter__(self):
        for k, v in self.pairs.items():
            self.saved[k] = os.environ.get(k)
            os.environ[k] = v

    def __exit__(self, *exc):
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def sharded_layers(case: MlpCase, tp_size: int, tp_rank: int, device):
    """This rank's prepared (up or None, down) layers: shard first, then prepare."""
    from sglang_fp8ext import parallel

    up_t, down_t = global_tensors(case)
    with set_env(case.env):
        up = None
        if up_t is not None:
            up = linear_from(parallel.shard_column_parallel_tensors(*up_t, tp_size=tp_size, tp_rank=tp_rank), device)
            up.process_weights_after_loading()
        down = linear_from(parallel.shard_row_parallel_tensors(*down_t, tp_size=tp_size, tp_rank=tp_rank), device)
        down.process_weights_after_loading()
    return up, down


def unsharded_layers(case: MlpCase, device):
    up_t, down_t = global_tensors(case)
    with set_env(case.env):
        up = None if up_t is None else linear_from(up_t, device)
        down = linear_from(down_t, device)
        if up is not None:
            up.process_weights_after_loading()
        down.process_weights_after_loading()
    return up, down


def partial_forward(case: MlpCase, up, down, x: torch.Tensor, tp_size: int, tp_rank: int) -> torch.Tensor:
    """This rank's pre-all-reduce output. Without an up projection the rank takes its K slice
    of x (what RowParallelLinear does with input_is_parallel=False)."""
    if up is not None:
        h = activation(case.act, up(x))
    else:
        k_local = x.shape[-1] // tp_size
        h = x[:, tp_rank * k_local:(tp_rank + 1) * k_local]
    return down(h)


def rank_main(rank: int, world_size: int, port: int, backend: str, cases: list, out_dir: str, cuda_graph: bool):
    import torch.distributed as dist

    faulthandler.enable()  # an abort (SIGABRT from C++) prints each thread's Python stack first
    torch.set_num_threads(1)  # two ranks share the CI machine's two cores
    if backend == "nccl":
        torch.cuda.set_device(rank)
        device = torch.device("cuda", rank)
        dist.init_process_group(
            backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size, device_id=device
        )
    else:
        device = torch.device("cpu")
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size)
    try:
        for case in cases:
            up, down = sharded_layers(case, world_size, rank, device)
            xs = [x.to(device) for x in inputs(case)]
            partials, outputs = [], []
            for x in xs:
                p = partial_forward(case, up, down, x, world_size, rank)
                partials.append(p.clone())
                # bf16 all-reduce: gloo (torch 2.13) and NCCL both reduce bfloat16 tensors
                dist.all_reduce(p)
                outputs.append(p)
            result = {"partials": [p.cpu() for p in partials], "outputs": [y.cpu() for y in outputs]}
            if cuda_graph:
                result.update(graph_replay(case, up, down, xs, outputs, world_size, rank))
            torch.save(result, os.path.join(out_dir, f"{case.name}.rank{rank}.pt"))
        # Gloo's teardown has rarely aborted a rank in CI ("terminate called without an active
        # exception"). So both ranks pass their last collective before either destroys the group
        # (only on success: after an error the peer may never reach it), and then leave without the
        # interpreter's finalization: the parent checks the saved results and the exit code, not
        # torch's teardown at exit.
        dist.barrier()
    finally:
        dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def graph_replay(case, up, down, xs, eager_outputs, tp_size, tp_rank):
    """Capture partial_forward + all_reduce in one CUDA graph, replay it with each input copied
    into the static input, and check replay == eager bitwise on this rank."""
    import torch.distributed as dist

    static_x = xs[0].clone()

    def step():
        y = partial_forward(case, up, down, static_x, tp_size, tp_rank)
        dist.all_reduce(y)
        return y

    # warm up on a side stream (lazy initialization must not happen during capture)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            step()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_y = step()
    replays = []
    for x, eager in zip(xs, eager_outputs):
        static_x.copy_(x)
        graph.replay()
        torch.cuda.synchronize()
        got = static_y.clone()
        if not torch.equal(got.view(torch.int16), eager.view(torch.int16)):
            diff = (got.float() - eager.float()).abs().max().item()
            raise AssertionError(f"{case.name} rank {tp_rank}: CUDA-graph replay differs from eager (max |diff| {diff})")
        replays.append(got.cpu())
    return {"replays": replays}
