"""Where the decode step's time goes, kernel by kernel: the FP8 model of tools/e2e_decode_bench.py,
one decode step captured as a CUDA graph and replayed under torch.profiler (CUPTI kernel records).
Run it on a CUDA GPU when tools/e2e_decode_bench.py shows a step time moving, to see which kernels
(the op's GEMMs or their neighbours) moved it; compare two builds with it side by side.

    python tools/e2e_kernel_profile.py --out e2e_profile.json [--batches 1,8] [--replays 30] [--models fp8,bf16]

The step is one stream, so every kernel's "marginal" time (its end minus the previous kernel's
end) adds up to the step: it is what the kernel costs the step, including the wait for its launch
and, for a kernel that entered early (programmatic dependent launch), only the part after the
previous kernel ended. "gap" is its start minus the previous kernel's end (negative: it started
early). Medians over the replays, per position in the step.

Writes JSON {"device", "torch", "git", "rows": [{"model", "batch", "step_us", "kernels": [{"name", "dur_us",
"marginal_us", "gap_us"}], "by_kind": {kind: marginal us summed}}]} and prints each batch's GEMM
kernels (sgl_fp8's, or the bf16 model's) and the sums per kind. A profiled replay may run slower than an unprofiled one:
compare builds with this tool against each other, and step times with tools/e2e_decode_bench.py.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_decode_bench as e2e  # noqa: E402  (its model, harness and argument checks)

qd = e2e.qd


def kind_of(name: str) -> str:
    if "sgl_fp8" in name:
        return "sgl_fp8 GEMM" if "gemm" in name else "sgl_fp8 other"
    if "gemm" in name.lower() or "cutlass" in name.lower() or "nvjet" in name.lower():
        return "other GEMM"
    if "attention" in name.lower() or "flash" in name.lower() or "fmha" in name.lower():
        return "attention"
    return "other"


def trace_events(trace_path: str) -> list[dict]:
    """The event list of a chrome trace file (torch.profiler's export_chrome_trace)."""
    with open(trace_path) as f:
        trace = json.load(f)
    return trace["traceEvents"] if isinstance(trace, dict) else trace


def kernel_records(events: list[dict]) -> list[tuple[float, float, str]]:
    """(start us, end us, name) of every kernel, memcpy and memset among a trace's events, by start."""
    out = [
        (float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)), e.get("name", "?"))
        for e in events
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
    ]
    return sorted(out)


def profiled_records(replay, replays: int):
    """The kernel records (kernel_records) of `replays` calls of replay() under torch.profiler,
    and the trace's event categories (for the error message when no kernel was recorded)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(replays):
            replay()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        events = trace_events(path)
    return kernel_records(events), {e.get("cat") for e in events}


def step_statistics(records: list[tuple[float, float, str]], replays: int):
    """The step's median time, every position's median duration, marginal time and gap, and the
    marginal times summed per kind of kernel, from the records of `replays` replays of one step."""
    per_step = len(records) // replays
    steps = [records[i * per_step:(i + 1) * per_step] for i in range(replays)]
    names = [name for _, _, name in steps[0]]
    if any([name for _, _, name in s] != names for s in steps):
        raise SystemExit("e2e_kernel_profile: the replays' kernel sequences differ")
    kernels = []
    for i, name in enumerate(names):
        durs = [s[i][1] - s[i][0] for s in steps]
        marginal = [s[i][1] - (s[i - 1][1] if i else s[i][0]) for s in steps]
        gap = [s[i][0] - s[i - 1][1] for s in steps] if i else [0.0]
        kernels.append(dict(name=name, dur_us=round(statistics.median(durs), 3),
                            marginal_us=round(statistics.median(marginal), 3), gap_us=round(statistics.median(gap), 3)))
    by_kind: dict[str, float] = {}
    for k in kernels:
        by_kind[kind_of(k["name"])] = round(by_kind.get(kind_of(k["name"]), 0.0) + k["marginal_us"], 2)
    step_us = statistics.median(s[-1][1] - s[0][0] for s in steps)
    return step_us, kernels, by_kind


@torch.no_grad()
def profile_step(model, model_name: str, batch: int, replays: int, warmup: int, vocab: int, seed: int) -> dict:
    max_len = e2e.PROMPT_LEN + warmup + replays + 1
    dec = qd.Decoder(model, batch, max_len, mode="graph")
    g = torch.Generator().manual_seed(seed)
    dec.prefill(torch.randint(0, vocab, (batch, e2e.PROMPT_LEN), generator=g).to(dec.device))
    dec.static_ids.copy_(torch.randint(0, vocab, (batch, 1), generator=g).to(dec.device))
    for _ in range(warmup):
        dec.graph.replay()
    torch.cuda.synchronize()
    records, categories = profiled_records(dec.graph.replay, replays)
    del dec
    torch.cuda.empty_cache()
    if not records or len(records) % replays:
        raise SystemExit(f"e2e_kernel_profile: {len(records)} kernel records for {replays} replays "
                         f"(trace categories: {sorted(categories)})")
    step_us, kernels, by_kind = step_statistics(records, replays)
    return dict(model=model_name, batch=batch, step_us=round(step_us, 2), kernels=kernels, by_kind=by_kind)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="e2e_profile.json")
    p.add_argument("--batches", type=e2e._batches, default=[1, 8])
    p.add_argument("--replays", type=e2e._replays, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--models", type=lambda t: [m for m in t.split(",") if m], default=["fp8"],
                   help="fp8 (the quantize_model_ copy, default), bf16 (the model itself), or both")
    args = p.parse_args(argv)
    if not args.models or set(args.models) - {"fp8", "bf16"}:
        p.error(f"--models: fp8 and/or bf16, got {args.models}")
    if not torch.cuda.is_available():
        raise SystemExit("e2e_kernel_profile: needs a CUDA GPU (torch.cuda.is_available() is False)")
    transformers, why = qd.import_transformers()
    if transformers is None:
        raise SystemExit(f"e2e_kernel_profile: {why}")
    model = qd.build_qwen3(qd.BENCH, seed=args.seed, device="cuda", block_spread=1.0)
    models = {"fp8": qd.fp8_copy(model)[0] if "fp8" in args.models else None, "bf16": model}
    rows = [profile_step(models[name], name, b, args.replays, args.warmup, qd.BENCH["vocab_size"], args.seed)
            for name in args.models for b in args.batches]
    result = dict(device=torch.cuda.get_device_name(), torch=torch.__version__, git=e2e.git_commit(), rows=rows)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
    for row in rows:
        print(f"{row['model']} batch {row['batch']}: step {row['step_us']:.1f} us (first kernel start to last end, profiled); "
              f"marginal by kind: {row['by_kind']}")
        for i, k in enumerate(row["kernels"]):
            if kind_of(k["name"]).endswith("GEMM"):
                print(f"  {i:>4} {k['name'][:60]:<60} dur {k['dur_us']:>7.2f} marginal {k['marginal_us']:>7.2f} "
                      f"gap {k['gap_us']:>7.2f}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
