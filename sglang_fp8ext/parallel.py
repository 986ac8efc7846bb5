"""Tensor-parallel sharding of FP8 block-scale linears, the way a TP engine (SGLang, vLLM) does it.

An FP8 block-scale checkpoint stores per linear layer

* ``weight``            float8_e4m3fn ``[N, K]`` (N = output features, K = input features),
* ``weight_scale_inv``  ``[ceil(N/128), K/128]``: one scale per 128x128 block of the weight
  (float32, or float8_e8m0fnu for e8m0 checkpoints); despite its name it is the dequantization
  multiplier, ``w_real[n, k] = w[n, k] * weight_scale_inv[n // 128, k // 128]`` (SPEC §3.4),
* optionally ``bias`` ``[N]``.

Shard these **raw checkpoint tensors, before ``process_weights_after_loading``**: that step may
AITER-shuffle the weight (a layout that interleaves 16 rows and 32 columns, so a row or column
range of the shuffled buffer is not a row or column range of the weight) and may convert the
scales to e8m0 per shard shape (``SGLANG_DSV4_DENSE_MXSCALE_SHAPES`` names per-rank shapes). Every
helper here refuses an already-prepared weight rather than slice a permuted buffer.

Column-parallel (shard N, the output features) -- e.g. ``qkv_proj``, ``gate_up_proj``:
    rank r keeps weight rows ``[r*N/tp, (r+1)*N/tp)``, the matching ``weight_scale_inv`` rows
    ``[r*N/tp/128, (r+1)*N/tp/128)`` and the matching bias slice; the ranks' outputs are the
    column blocks of the full output (an all-gather, or a row-parallel layer next, joins them).

    Requires ``(N/tp) % 128 == 0`` for tp > 1, else ValueError. Why, and why no workaround: the
    kernels read the scale of local row n from local scale row ``n // 128``, so every local
    128-row block must lie inside one checkpoint block. Rank r > 0 starts at row ``r*N/tp``; if
    that is not a multiple of 128, its first local block straddles two checkpoint blocks with
    two different scales, and one scale row cannot represent both. "Duplicating the block's
    scale row" is exact only for a shard that *ends* inside a block (the shared block's scale
    row goes to both ranks and each reads it only for rows it owns); it is never exact for a
    shard that *starts* inside one, and with equal shards every rank but 0 starts at a multiple
    of N/tp. Re-quantizing the straddling rows would change the model's weights. SGLang and vLLM
    reject the same shapes at load time (``Weight output_partition_size = ... is not divisible
    by weight quantization block_n``). Consequently N/tp is a multiple of 128 (and of 16, which
    the ops need), and so is N; a layer whose N is not a multiple of 128 (e.g. N = 2112) can
    only be replicated or row-parallel.

Row-parallel (shard K, the input features) -- e.g. ``o_proj``, ``down_proj``:
    rank r keeps weight columns ``[r*K/tp, (r+1)*K/tp)`` and ``weight_scale_inv`` columns
    ``[r*K/tp/128, (r+1)*K/tp/128)``; its input is the matching slice of x (the output of a
    column-parallel layer already is), its output a partial sum; an all-reduce (sum) over the
    ranks gives the full result. Requires ``(K/tp) % 128 == 0``, else ValueError: a 1x128
    activation quant group or a 128-column scale block must not straddle two ranks.

    Bias: only rank 0 keeps it (the others get None), so it is added exactly once by the
    all-reduce. This is what SGLang's RowParallelLinear does (it passes the bias to the quant
    method only on tp_rank 0, fused into the GEMM epilogue). It is chosen over "add the bias
    after the all-reduce" because it keeps the bias inside the one GEMM launch and the layer
    self-contained; the price is that rank 0's partial is rounded to the output dtype with the
    bias in it, which changes the result only within the rounding the all-reduce of bf16
    partials already has.

Numerics: with 128-aligned shards every rank quantizes exactly the activation groups the
unsharded layer would (1x128 groups never straddle ranks), so the column-parallel output equals
the unsharded output up to the kernels' accumulation order; the row-parallel result differs from
the unsharded one by the rounding of each partial sum to bf16/fp16 before the all-reduce (and of
the reduced sum), i.e. it is close but not bitwise equal.
"""

from __future__ import annotations

import operator
from typing import NamedTuple, Optional

import torch

from .module import Fp8BlockLinear

BLOCK = 128  # the weight scale block edge (128x128) and the activation quant group (1x128)

FP8 = torch.float8_e4m3fn
SCALE_DTYPES = (torch.float32, torch.float8_e8m0fnu)


class ShardedTensors(NamedTuple):
    """One rank's share of a linear layer's checkpoint tensors."""

    weight: torch.Tensor  # [N_local, K_local] float8_e4m3fn, plain row-major, contiguous
    weight_scale_inv: torch.Tensor  # [ceil(N_local/128), K_local/128], same dtype as given
    bias: Optional[torch.Tensor]  # [N_local], or None


# ---- checks ---------------------------------------------------------------------------------------


def _integer(value) -> Optional[int]:
    # Any integral value an engine may hold a rank in (int, numpy integer, 0-d integer tensor);
    # None for everything else, bool included.
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def _tp_size(fn: str, tp_size) -> int:
    size = _integer(tp_size)
    if size is None or size < 1:
        raise ValueError(f"{fn}: tp_size must be a positive int, got {tp_size!r}")
    return size


def _check_rank(fn: str, tp_size, tp_rank) -> tuple[int, int]:
    size = _tp_size(fn, tp_size)
    rank = _integer(tp_rank)
    if rank is None or not 0 <= rank < size:
        raise ValueError(f"{fn}: tp_rank must be an int in [0, {size}), got {tp_rank!r}")
    return size, rank


def _check_tensors(fn: str, weight: torch.Tensor, weight_scale_inv: torch.Tensor, bias: Optional[torch.Tensor]):
    if weight.dim() != 2 or weight.dtype != FP8:
        raise ValueError(f"{fn}: expected weight to be a 2-D float8_e4m3fn [N, K] tensor, got {weight.dtype} of shape {tuple(weight.shape)}")
    if getattr(weight, "is_shuffled", False):
        raise ValueError(
            f"{fn}: weight is AITER-shuffled (is_shuffled = True); shard the checkpoint weight before "
            "process_weights_after_loading: the shuffle interleaves 16 rows and 32 columns, so a row or "
            "column range of the shuffled buffer is not a row or column range of the weight"
        )
    N, K = weight.shape
    if K % BLOCK:
        raise ValueError(f"{fn}: expected K = weight.size(1) to be a multiple of {BLOCK}, got K = {K}")
    expected = ((N + BLOCK - 1) // BLOCK, K // BLOCK)
    if weight_scale_inv.dtype not in SCALE_DTYPES:
        raise ValueError(f"{fn}: expected weight_scale_inv float32 or float8_e8m0fnu, got {weight_scale_inv.dtype}")
    if tuple(weight_scale_inv.shape) != expected:
        raise ValueError(
            f"{fn}: expected weight_scale_inv of shape [ceil(N/128), K/128] = {list(expected)} for weight "
            f"[{N}, {K}], got {list(weight_scale_inv.shape)}"
        )
    if bias is not None and tuple(bias.shape) != (N,):
        raise ValueError(f"{fn}: expected bias of shape [N] = [{N}], got {list(bias.shape)}")
    return N, K


def column_shard_size(n: int, tp_size: int) -> int:
    """Rows per rank when a weight with ``n`` output features is column-parallel over ``tp_size``
    ranks; ValueError (with the reason) when the split would cut a 128-row scale block."""
    tp_size = _tp_size("column_shard_size", tp_size)
    if n % tp_size:
        raise ValueError(f"column-parallel: N = {n} is not divisible by tp_size = {tp_size}")
    n_local = n // tp_size
    if tp_size > 1 and n_local % BLOCK:
        raise ValueError(
            f"column-parallel: N/tp = {n}/{tp_size} = {n_local} rows per rank is not a multiple of {BLOCK}: "
            f"rank 1 would start at row {n_local}, inside a 128-row weight_scale_inv block, so its first local "
            "block would need the scales of two checkpoint blocks; one scale row cannot hold both and "
            "re-quantizing would change the weights (N/tp must be a multiple of 128)"
        )
    return n_local


def row_shard_size(k: int, tp_size: int) -> int:
    """Input features per rank when a weight with ``k`` input features is row-parallel over
    ``tp_size`` ranks; ValueError (with the reason) unless K/tp is a multiple of 128."""
    tp_size = _tp_size("row_shard_size", tp_size)
    if k % tp_size:
        raise ValueError(f"row-parallel: K = {k} is not divisible by tp_size = {tp_size}")
    k_local = k // tp_size
    if k_local % BLOCK:
        raise ValueError(
            f"row-parallel: K/tp = {k}/{tp_size} = {k_local} input features per rank is not a multiple of {BLOCK}: "
            "a 1x128 activation quant group and a 128-column weight_scale_inv block would straddle two ranks "
            "(K/tp must be a multiple of 128)"
        )
    return k_local


def _own(t: torch.Tensor) -> torch.Tensor:
    # a contiguous copy: a view would keep the whole checkpoint tensor alive on every rank
    return t.clone(memory_format=torch.contiguous_format)


# ---- raw checkpoint tensors -----------------------------------------------------------------------


def shard_column_parallel_tensors(
    weight: torch.Tensor,
    weight_scale_inv: torch.Tensor,
    bias: Optional[torch.Tensor] = None,
    *,
    tp_size: int,
    tp_rank: int,
) -> ShardedTensors:
    """Rank ``tp_rank``'s share of a column-parallel (N-sharded) layer: weight rows
    ``[r*N/tp, (r+1)*N/tp)``, the matching weight_scale_inv rows (whole 128-row blocks) and bias
    slice. ValueError when N/tp is not a multiple of 128 (see the module docstring for why)."""
    fn = "shard_column_parallel_tensors"
    tp_size, tp_rank = _check_rank(fn, tp_size, tp_rank)
    N, _ = _check_tensors(fn, weight, weight_scale_inv, bias)
    n_local = column_shard_size(N, tp_size)
    if tp_size == 1:
        # the whole layer; N need not be a multiple of 128 here (the scale rows are ceil(N/128))
        return ShardedTensors(_own(weight), _own(weight_scale_inv), None if bias is None else _own(bias))
    rows = slice(tp_rank * n_local, (tp_rank + 1) * n_local)
    blocks = slice(tp_rank * n_local // BLOCK, (tp_rank + 1) * n_local // BLOCK)
    return ShardedTensors(
        _own(weight[rows]),
        _own(weight_scale_inv[blocks]),
        None if bias is None else _own(bias[rows]),
    )


def shard_row_parallel_tensors(
    weight: torch.Tensor,
    weight_scale_inv: torch.Tensor,
    bias: Optional[torch.Tensor] = None,
    *,
    tp_size: int,
    tp_rank: int,
) -> ShardedTensors:
    """Rank ``tp_rank``'s share of a row-parallel (K-sharded) layer: weight columns
    ``[r*K/tp, (r+1)*K/tp)`` and the matching weight_scale_inv columns; the bias on rank 0 only
    (None elsewhere) so that the all-reduce adds it once. ValueError unless K/tp % 128 == 0."""
    fn = "shard_row_parallel_tensors"
    tp_size, tp_rank = _check_rank(fn, tp_size, tp_rank)
    _, K = _check_tensors(fn, weight, weight_scale_inv, bias)
    k_local = row_shard_size(K, tp_size)
    cols = slice(tp_rank * k_local, (tp_rank + 1) * k_local)
    blocks = slice(tp_rank * k_local // BLOCK, (tp_rank + 1) * k_local // BLOCK)
    return ShardedTensors(
        _own(weight[:, cols]),
        _own(weight_scale_inv[:, blocks]),
        _own(bias) if bias is not None and tp_rank == 0 else None,
    )


# ---- Fp8BlockLinear modules -----------------------------------------------------------------------


def _module_tensors(fn: str, layer):
    # A prepared layer's weight may be AITER-shuffled (ROCm) and it may hold an e8m0 copy of
    # its scales made for its unsharded shape: slicing it would give a shard that is wrong or
    # prepared for the wrong (N, K). Shard first, prepare each shard afterwards.
    if getattr(layer, "is_shuffled", False) or getattr(layer.weight, "is_shuffled", False):
        raise ValueError(
            f"{fn}: the layer's weight is AITER-shuffled (process_weights_after_loading ran on ROCm); shard the "
            "checkpoint tensors first, then call process_weights_after_loading on each shard"
        )
    if getattr(layer, "weight_scale_e8m0", None) is not None:
        raise ValueError(
            f"{fn}: the layer was already prepared by process_weights_after_loading (it holds weight_scale_e8m0); "
            "shard the checkpoint tensors first, then call process_weights_after_loading on each shard"
        )
    return layer.weight.detach(), layer.weight_scale_inv.detach(), None if layer.bias is None else layer.bias.detach()


def _build(layer, shard: ShardedTensors):
    n_local, k_local = shard.weight.shape
    out = Fp8BlockLinear(k_local, n_local, bias=shard.bias is not None, device=shard.weight.device, dtype=layer.dtype)
    # Loaded as a checkpoint is, so that e8m0 scales stay e8m0
    state = {"weight": shard.weight, "weight_scale_inv": shard.weight_scale_inv}
    if shard.bias is not None:
        state["bias"] = shard.bias
    out.load_state_dict(state)
    out.train(layer.training)
    return out


def shard_column_parallel(layer, *, tp_size: int, tp_rank: int):
    """A new Fp8BlockLinear holding rank ``tp_rank``'s column-parallel share of ``layer`` (an
    Fp8BlockLinear not yet prepared by process_weights_after_loading); call
    process_weights_after_loading on the result."""
    fn = "shard_column_parallel"
    w, s, b = _module_tensors(fn, layer)
    return _build(layer, shard_column_parallel_tensors(w, s, b, tp_size=tp_size, tp_rank=tp_rank))


def shard_row_parallel(layer, *, tp_size: int, tp_rank: int):
    """A new Fp8BlockLinear holding rank ``tp_rank``'s row-parallel share of ``layer``; the bias
    only on rank 0. Its outputs must be summed over the ranks (all-reduce)."""
    fn = "shard_row_parallel"
    w, s, b = _module_tensors(fn, layer)
    return _build(layer, shard_row_parallel_tensors(w, s, b, tp_size=tp_size, tp_rank=tp_rank))
