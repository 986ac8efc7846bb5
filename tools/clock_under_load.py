"""The SM clock and board power while one GEMM config runs back to back (CUDA-graph replay of
rotated cold weight copies, as `bench` times it), sampled by nvidia-smi: whether a variant runs
at a lower clock than another (power or current limits), and at what time per call.

    python tools/clock_under_load.py --shape 5120x4096 --m 1 --configs "default;[0,0,0,0,1]" [--seconds 2]

A config is the configured op's list (tools/config_ab.py); "default" is the fused op's own plan;
"copy" is a plain torch copy of the weight copies' size (the bandwidth floor's kernel).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sglang_fp8ext import linear, tune  # noqa: E402
from sglang_fp8ext.bench import capture_in_graph, make_weight  # noqa: E402

QUERY = "clocks.sm,clocks.mem,power.draw,clocks_event_reasons.active,temperature.gpu"


def smi_query() -> str:
    """The query fields this driver's nvidia-smi knows (older drivers name the reasons "throttle")."""
    if subprocess.run(["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv"], capture_output=True).returncode != 0:
        return QUERY.replace("clocks_event_reasons", "clocks_throttle_reasons")
    return QUERY


def parse_samples(text: str) -> list[list[str]]:
    """nvidia-smi's csv (noheader, nounits) lines of the five QUERY fields; other lines dropped."""
    return [[v.strip() for v in line.split(",")] for line in text.strip().splitlines() if line.count(",") == 4]


def summarize(rows: list[list[str]]) -> dict:
    """The samples taken while the replays ran: the first and last fifth are dropped (nvidia-smi
    starts before and stops after the work, when the GPU idles)."""
    busy = rows[len(rows) // 5: len(rows) - len(rows) // 5] or rows
    clocks = [float(r[0]) for r in busy]
    power = [float(r[2]) for r in busy]
    return {"sm_MHz_median": statistics.median(clocks), "sm_MHz_min": min(clocks),
            "power_W_median": statistics.median(power), "event_reasons": sorted({r[3] for r in busy}),
            "mem_MHz": busy[0][1], "temperature_C": busy[-1][4], "samples": len(busy)}


def sample(query: str, run) -> tuple[list[list[str]], float]:
    """Start nvidia-smi sampling every 20 ms, call run() (which enqueues work and syncs), stop."""
    smi = subprocess.Popen(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits", "-lms", "20"],
                           stdout=subprocess.PIPE, text=True)
    time.sleep(0.3)
    us = run()
    smi.terminate()
    out, _ = smi.communicate()
    return parse_samples(out), us


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default="5120x4096")
    ap.add_argument("--m", type=int, default=1)
    ap.add_argument("--configs", default="default;[0,0,0,0,1]")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--copies", type=int, default=24)
    ap.add_argument("--out")
    args = ap.parse_args()
    device = torch.device("cuda")
    query = smi_query()
    n, k = (int(v) for v in args.shape.lower().split("x"))
    gen = torch.Generator(device=device).manual_seed(0)
    count = tune.copies_for(n, k, args.copies, device)
    weights = [make_weight(n, k, False, device, gen) for _ in range(count)]
    x = tune.activations(args.m, k, gen, device)
    results = []
    for item in args.configs.split(";"):
        item = item.strip()
        if item == "copy":
            srcs = [w for w, _, _ in weights]
            dsts = [torch.empty_like(w) for w in srcs]
            calls = [lambda s=s, d=d: d.copy_(s) for s, d in zip(srcs, dsts)]
        else:
            config = None if item == "default" else json.loads(item)
            calls = [lambda w=w, s=s, c=config: linear.run_path("fused", c, x, w, s, False, None) for w, s, _ in weights]
        graph = capture_in_graph(calls)
        # replays per second, roughly: time a few first
        t0 = time.perf_counter()
        for _ in range(20):
            graph.replay()
        torch.cuda.synchronize()
        per_replay = (time.perf_counter() - t0) / 20
        replays = max(50, int(args.seconds / per_replay))

        def run():
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(replays):
                graph.replay()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) * 1e3 / (replays * len(calls))

        rows, us = sample(query, run)
        del graph
        res = {"config": item, "us_per_call": round(us, 3), **summarize(rows)}
        results.append(res)
        print(json.dumps(res), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"shape": args.shape, "M": args.m, "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
