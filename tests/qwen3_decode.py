"""A transformers Qwen3 decoder with random weights, quantized with ``quantize_model_``, decoded
with a static KV cache three ways: eagerly, as one CUDA graph replayed per step, and under
``torch.compile(mode="reduce-overhead")``.

Shared by tests/test_e2e_decode.py (a small model, correctness) and tools/e2e_decode_bench.py (a
larger one, per-step time). Nothing is downloaded: the model is built from a ``Qwen3Config`` and
random weights drawn from a fixed seed.

How transformers 5.17 decodes with a static cache (read from its source, not assumed):
  * ``StaticCache(config=, max_cache_len=)`` allocates its K/V tensors lazily at the first
    ``update``; ``early_initialization(batch, kv_heads, head_dim, dtype, device)`` allocates them
    now, so a graph captured afterwards sees their final addresses.
  * Each ``StaticLayer`` keeps the number of cached tokens as a device tensor
    (``cumulative_length``) and advances it in place inside ``update``. ``Qwen3Model`` derives
    ``position_ids`` (``get_seq_length()``) and the causal mask (``get_query_offset()``) from it,
    so a captured decode step reads its position from device memory and advances it itself on
    every replay: no host-side ``cache_position`` needs feeding.
  * A warm-up step therefore advances the cache too: ``Cache.reset()`` zeroes K/V and the length
    in place (addresses kept), so warm-up and capture happen first and the real prefill after.
  * With a compileable cache and one query token the mask is always materialized (never SDPA's
    ``is_causal`` shortcut), so eager and replayed steps run the same attention kernels.
  * On CUDA (H200, torch 2.11) a replayed graph gives logits bitwise equal to eager;
    ``torch.compile(mode="reduce-overhead", fullgraph=True)`` does too, but only with
    ``torch._inductor.config.emulate_precision_casts=True`` (otherwise inductor's fused bf16
    intermediates round differently, and the FP8 activation quantization amplifies that).
"""

from __future__ import annotations

import contextlib
import copy
import os
from typing import Callable, Optional

import torch
from torch import nn

import sglang_fp8ext as fx

#: The small model of the CI test: every projection is eligible for FP8 (K % 128 == 0, N % 16 == 0):
#: q_proj 256->256, k/v_proj 256->128, o_proj 256->256, gate/up 256->512, down 512->256.
SMALL = dict(
    vocab_size=512,
    hidden_size=256,
    intermediate_size=512,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=64,
)

#: The benchmark model: Qwen3-8B-like layers (hidden 4096, 32 x 128 query heads, 8 KV heads,
#: intermediate 12288), 4 of them, 32k vocabulary; about 0.9 B parameters (1.8 GB in bf16).
BENCH = dict(
    vocab_size=32000,
    hidden_size=4096,
    intermediate_size=12288,
    num_hidden_layers=4,
    num_attention_heads=32,
    num_key_value_heads=8,
    head_dim=128,
)


def import_transformers():
    """(transformers, None), or (None, why it cannot be used)."""
    try:
        import transformers  # noqa: PLC0415

        transformers.Qwen3Config, transformers.Qwen3ForCausalLM, transformers.StaticCache  # noqa: B018
    except (ImportError, AttributeError) as err:
        return None, f"transformers with Qwen3 and StaticCache is not importable ({err}): end-to-end decode not run"
    return transformers, None


def build_qwen3(dims: dict, *, seed: int = 0, device="cpu", dtype=torch.bfloat16, block_spread: float = 1.0) -> nn.Module:
    """A ``Qwen3ForCausalLM`` with random weights from ``seed`` (tied embeddings, SDPA attention).

    ``block_spread``: every projection weight is multiplied by ``exp(block_spread * z)``, one
    standard normal ``z`` per 128x128 block. transformers initializes all weights i.i.d., which
    gives every block nearly the same FP8 scale, so a kernel that picked the wrong block's scale
    would go unnoticed; real checkpoints have scales that differ from block to block.
    """
    import transformers  # noqa: PLC0415

    config = transformers.Qwen3Config(
        **dims,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        attn_implementation="sdpa",
    )
    torch.manual_seed(seed)
    with torch.device(device):
        model = transformers.Qwen3ForCausalLM(config)
    model = model.to(dtype).eval()
    if block_spread:
        g = torch.Generator(device="cpu").manual_seed(seed + 1)
        with torch.no_grad():
            for name, mod in model.named_modules():
                if isinstance(mod, nn.Linear) and name != "lm_head":
                    N, K = mod.weight.shape
                    z = torch.randn((N + 127) // 128, (K + 127) // 128, generator=g)
                    factor = torch.exp(block_spread * z).repeat_interleave(128, 0)[:N].repeat_interleave(128, 1)[:, :K]
                    mod.weight.mul_(factor.to(device=mod.weight.device, dtype=mod.weight.dtype))
    return model


def fp8_copy(model: nn.Module, **kwargs):
    """A deep copy of ``model`` with its projections swapped for Fp8BlockLinear (``quantize_model_``
    with ``kwargs``); returns (model, report). Tied weights stay tied in the copy, so the tied
    ``lm_head`` is left in bf16 by quantize_model_'s sharing rule."""
    fp8 = copy.deepcopy(model)
    report = fx.quantize_model_(fp8, **kwargs)
    return fp8, report


def new_static_cache(model: nn.Module, batch: int, max_cache_len: int):
    import transformers  # noqa: PLC0415

    cfg = model.config
    cache = transformers.StaticCache(config=cfg, max_cache_len=max_cache_len)
    param = next(model.parameters())
    # the embedding's dtype: an FP8 model's first parameter may be an FP8 weight
    dtype = model.get_input_embeddings().weight.dtype
    cache.early_initialization(batch, cfg.num_key_value_heads, cfg.head_dim, dtype, param.device)
    return cache


def _forward_last_logits(model: nn.Module, cache, ids: torch.Tensor) -> torch.Tensor:
    return model(input_ids=ids, past_key_values=cache, use_cache=True).logits[:, -1]


@contextlib.contextmanager
def env(name: str, value: Optional[str]):
    """Set (or, with None, leave as is) an environment variable for the duration."""
    if value is None:
        yield
        return
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            del os.environ[name]
        else:
            os.environ[name] = old


class Decoder:
    """One decode stream over a static cache. ``prefill(prompt)`` then ``step(tokens)`` per
    token; both return the last position's logits as a fresh float32 tensor [batch, vocab].

    mode "eager": plain calls. mode "graph": the step is captured once as a CUDA graph (after
    warm-up on a side stream, then a cache reset) and replayed; ``step`` copies the token into
    the graph's static input. mode "compile": the step runs through
    ``torch.compile(mode="reduce-overhead", fullgraph=True)`` (inductor + CUDA graph trees).
    ``capture_env`` (e.g. ("SGL_FP8_SMALLM", "0")) is set while the step is captured/compiled:
    fp8_block_linear picks its path when it is traced, so that is when a switch must be set.
    """

    def __init__(self, model: nn.Module, batch: int, max_cache_len: int, mode: str = "eager", capture_env=(None, None)):
        if mode not in ("eager", "graph", "compile"):
            raise ValueError(f"Decoder: unknown mode {mode!r}")
        self.model = model
        self.mode = mode
        self.batch = batch
        self.cache = new_static_cache(model, batch, max_cache_len)
        self.device = next(model.parameters()).device
        self.capture_env = capture_env
        self.graph = None
        self._compiled: Optional[Callable] = None
        if mode == "graph":
            self._capture()
        elif mode == "compile":
            step = lambda ids: _forward_last_logits(self.model, self.cache, ids)  # noqa: E731
            self._compiled = torch.compile(step, mode="reduce-overhead", fullgraph=True)

    @torch.no_grad()
    def _capture(self) -> None:
        self.static_ids = torch.zeros(self.batch, 1, dtype=torch.long, device=self.device)
        name, value = self.capture_env
        with env(name, value):
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(2):  # lazy initializations (cuBLAS handles, workspaces) before capture
                    _forward_last_logits(self.model, self.cache, self.static_ids)
            torch.cuda.current_stream().wait_stream(side)
            self.cache.reset()  # the warm-up advanced the cache; zeroed in place, addresses kept
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.static_logits = _forward_last_logits(self.model, self.cache, self.static_ids)
        torch.cuda.synchronize()

    @torch.no_grad()
    def prefill(self, prompt: torch.Tensor) -> torch.Tensor:
        """Runs the prompt [batch, P] eagerly (prefill is never captured) into the cache."""
        return _forward_last_logits(self.model, self.cache, prompt).float()

    @torch.no_grad()
    def step(self, ids: torch.Tensor) -> torch.Tensor:
        """One decode step for tokens ``ids`` [batch, 1]."""
        if self.mode == "graph":
            self.static_ids.copy_(ids)
            self.graph.replay()
            return self.static_logits.float()  # .float() copies: the next replay overwrites it
        if self.mode == "compile":
            torch.compiler.cudagraph_mark_step_begin()
            name, value = self.capture_env
            with env(name, value):
                return self._compiled(ids).float()
        return _forward_last_logits(self.model, self.cache, ids).float()


@torch.no_grad()
def greedy_tokens(model: nn.Module, prompt: torch.Tensor, steps: int, max_cache_len: int) -> torch.Tensor:
    """Greedy decode of ``steps`` tokens (eager); returns them as [batch, steps]."""
    dec = Decoder(model, prompt.shape[0], max_cache_len)
    logits = dec.prefill(prompt)
    tokens = []
    for _ in range(steps):
        tok = logits.argmax(-1, keepdim=True)
        tokens.append(tok)
        logits = dec.step(tok)
    return torch.cat(tokens, dim=1)


@torch.no_grad()
def teacher_forced_logits(decoder: Decoder, prompt: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """Prefill ``prompt``, then feed ``tokens`` [batch, S] one step at a time whatever the model
    predicts (so two models are compared on the same contexts); returns float32 logits
    [S + 1, batch, vocab]: the prefill's last position, then each step's."""
    out = [decoder.prefill(prompt)]
    for i in range(tokens.shape[1]):
        out.append(decoder.step(tokens[:, i : i + 1]))
    return torch.stack(out)


def logit_agreement(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per (step, batch row): cosine similarity and relative L2 error ||a - b|| / ||b|| of the
    logit vectors, in float64. Returns (cos, rel), each [steps, batch]."""
    a, b = a.double(), b.double()
    cos = torch.nn.functional.cosine_similarity(a, b, dim=-1)
    rel = (a - b).norm(dim=-1) / b.norm(dim=-1)
    return cos, rel
