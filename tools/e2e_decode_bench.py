"""Per-decode-step time of a Qwen3-style model (transformers) with bf16 vs FP8 projections, each
decode step captured once as a CUDA graph and replayed. Run it on a CUDA GPU after a change that
may move the decode step, and to refresh the decode-step table of docs/benchmarks.md
(tools/device_run.sh's e2e step runs it):

    python tools/e2e_decode_bench.py --out e2e_decode.json [--batches 1,8,32] [--replays 50]

Model (``--config bench``, tests/qwen3_decode.py BENCH): hidden 4096, intermediate 12288, 32 query
heads x 128, 8 KV heads, 4 layers, vocabulary 32000, tied embeddings (lm_head stays bf16, as in
FP8 checkpoints); random weights from a fixed seed. ``--config small`` is the CI test's model.

Variants, per batch size:
  bf16_us         the bf16 model
  fp8_us          quantize_model_ copy, default dispatch (fused small-M kernel)
  fp8_unfused_us  the same FP8 model with SGL_FP8_SMALLM=0 set while the step is captured
                  (fp8_block_linear picks its path when the graph is captured, not at replay)
Each time is the median over ``--replays`` (>= 20) individually timed replays (CUDA events), after
``--warmup`` untimed ones; the KV cache grows by one token per replay (prompt 16 tokens).

Writes JSON {"device", "torch", "git", "config", "rows": [{"batch", "bf16_us", "fp8_us",
"fp8_unfused_us", ...}]} to --out and prints a table. ``git`` is $SGL_FP8_GIT, else
``git rev-parse HEAD``, else "unknown". Needs a CUDA GPU (exits with a message otherwise).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))  # the decode harness shared with the e2e test
sys.path.append(REPO)  # the source tree's package when none is installed (an installed one wins)

import qwen3_decode as qd  # noqa: E402
from sglang_fp8ext.bench import git_commit  # noqa: E402

PROMPT_LEN = 16


def _batches(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated batch sizes, got {text!r}") from None
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"batch sizes must be positive, got {text!r}")
    return values


def _replays(text: str) -> int:
    n = int(text)
    if n < 20:
        raise argparse.ArgumentTypeError(f"a median needs at least 20 replays, got {n}")
    return n


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="e2e_decode.json", help="JSON output path (default: %(default)s)")
    p.add_argument("--batches", type=_batches, default=[1, 8, 32], help="comma-separated batch sizes (default: 1,8,32)")
    p.add_argument("--replays", type=_replays, default=50, help="timed replays per point, >= 20 (default: %(default)s)")
    p.add_argument("--warmup", type=int, default=5, help="untimed replays before timing (default: %(default)s)")
    p.add_argument("--config", choices=["bench", "small"], default="bench", help="model size (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)



@torch.no_grad()
def time_step(model, batch: int, replays: int, warmup: int, vocab: int, capture_env=(None, None), seed: int = 0):
    """Median microseconds of one replayed decode step, and the last replay's logits."""
    max_len = PROMPT_LEN + warmup + replays + 1
    dec = qd.Decoder(model, batch, max_len, mode="graph", capture_env=capture_env)
    g = torch.Generator().manual_seed(seed)
    device = dec.device
    prompt = torch.randint(0, vocab, (batch, PROMPT_LEN), generator=g).to(device)
    dec.prefill(prompt)
    # a fixed token per row (not the model's own argmax), so every variant sees the same contexts
    dec.static_ids.copy_(torch.randint(0, vocab, (batch, 1), generator=g).to(device))
    for _ in range(warmup):
        dec.graph.replay()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(replays)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(replays)]
    for s, e in zip(starts, ends):
        s.record()
        dec.graph.replay()
        e.record()
    torch.cuda.synchronize()
    us = statistics.median(s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends))
    out = dec.static_logits.float().clone()
    del dec
    torch.cuda.empty_cache()
    return us, out


def main(argv=None) -> int:
    args = parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("e2e_decode_bench: needs a CUDA GPU (torch.cuda.is_available() is False)")
    transformers, why = qd.import_transformers()
    if transformers is None:
        raise SystemExit(f"e2e_decode_bench: {why}")
    dims = qd.BENCH if args.config == "bench" else qd.SMALL
    model = qd.build_qwen3(dims, seed=args.seed, device="cuda", block_spread=1.0)
    fp8, report = qd.fp8_copy(model)
    print(report.summary(), flush=True)

    rows = []
    for batch in args.batches:
        common = dict(batch=batch, replays=args.replays, warmup=args.warmup, vocab=dims["vocab_size"], seed=args.seed)
        bf16_us, bf16_logits = time_step(model, **common)
        fp8_us, fp8_logits = time_step(fp8, **common)
        unfused_us, _ = time_step(fp8, capture_env=("SGL_FP8_SMALLM", "0"), **common)
        # every variant saw the same tokens; a sanity number, not a check: FP8 vs bf16 logits
        cos, rel = qd.logit_agreement(fp8_logits, bf16_logits)
        row = dict(
            batch=batch,
            bf16_us=round(bf16_us, 2),
            fp8_us=round(fp8_us, 2),
            fp8_unfused_us=round(unfused_us, 2),
            fp8_logits_min_cos=round(float(cos.min()), 5),
        )
        rows.append(row)
        print(row, flush=True)

    result = dict(
        device=torch.cuda.get_device_name(),
        torch=torch.__version__,
        git=git_commit(),
        config=dict(dims, replays=args.replays, prompt_len=PROMPT_LEN),
        rows=rows,
    )
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)

    print(f"\n{result['device']}, torch {result['torch']}, git {result['git']}: decode step, CUDA graph replay, median us")
    print(f"{'batch':>5} {'bf16':>10} {'fp8':>10} {'fp8 unfused':>12} {'bf16/fp8':>9} {'unfused/fused':>14}")
    for r in rows:
        print(
            f"{r['batch']:>5} {r['bf16_us']:>10.1f} {r['fp8_us']:>10.1f} {r['fp8_unfused_us']:>12.1f} "
            f"{r['bf16_us'] / r['fp8_us']:>9.2f} {r['fp8_unfused_us'] / r['fp8_us']:>14.2f}"
        )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
