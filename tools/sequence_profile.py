"""Per-kernel times of a repeated sequence of fused GEMMs and plain copy kernels, captured in one
CUDA graph and replayed under torch.profiler: what a GEMM costs after other kernels, as inside a
decode step (tools/e2e_kernel_profile.py), with the neighbours chosen.

    python tools/sequence_profile.py --sequences "copy,4096x4096:1;copy,4096x4096:1,copy,12288x4096:1" \\
        [--reps 20] [--replays 10] [--copies 24] [--out sequence_profile.json]

A sequence is comma-separated items: "NxK:M[/FLAGS][@SET]" (smallm_gemm with the default dispatch,
or with FLAGS the private _smallm_gemm_configured with config [0, 0, 0, 0, FLAGS]; bf16 input,
fp32 scales; the weight rotated over --copies copies so that it is cold; items of one shape share
one set of copies, each item starting its rotation elsewhere, unless @SET names a set of its own)
or "copy" (a torch copy that writes the next GEMM's input: no early launch), or "flush" (a 64 MB
device copy: whatever the GEMMs left in the 50 MB L2 is evicted, their code included). Each sequence is captured
--reps times back to back in one graph; the graph is replayed --replays times. For every position
of the sequence: the median kernel duration and marginal time (end minus the previous kernel's
end), over every repetition and replay except each replay's first.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_kernel_profile import profiled_records  # noqa: E402

import sglang_fp8ext as fx  # noqa: E402
from sglang_fp8ext.bench import make_weight  # noqa: E402


def parse_sequence(text: str):
    items = []
    for item in text.split(","):
        item = item.strip()
        if item in ("copy", "flush"):
            items.append((item,))
        else:
            item, _, weight_set = item.partition("@")
            item, _, flags = item.partition("/")
            shape, m = item.split(":")
            n, k = (int(v) for v in shape.lower().split("x"))
            items.append(("gemm", n, k, int(m), int(flags) if flags else None, weight_set))
    return items


def build(items, copies: int, gen):
    """Callables, one per item, and the kernels each launches (a GEMM: 1, a copy: 1)."""
    dev = torch.device("cuda")
    weights, users = {}, {}
    calls = []
    last_x = None
    for item in reversed(items):  # a copy writes the input of the GEMM after it
        if item[0] == "gemm":
            _, n, k, m, flags, weight_set = item
            key = (n, k, weight_set)
            if key not in weights:
                weights[key] = [make_weight(n, k, False, dev, gen)[:2] for _ in range(copies)]
            users[key] = users.get(key, 0) + 1
            x = torch.randn(m, k, generator=gen, device=dev).to(torch.bfloat16)
            state = {"i": (users[key] - 1) * (copies // 2 + 1)}  # not the copy another item just read

            def gemm(x=x, ws=weights[key], state=state, flags=flags):
                w, s = ws[state["i"] % len(ws)]
                state["i"] += 1
                if flags is None:
                    fx.smallm_gemm(x, w, s)
                else:
                    torch.ops.sgl_fp8._smallm_gemm_configured(x, w, s, False, None, [0, 0, 0, 0, flags])

            calls.append(gemm)
            last_x = x
        elif item[0] == "flush":
            big = torch.empty(2, 64 << 20, dtype=torch.uint8, device=dev)
            calls.append(lambda big=big: big[0].copy_(big[1]))
        else:
            dst = last_x if last_x is not None else torch.empty(8, 4096, device=dev, dtype=torch.bfloat16)
            src = torch.randn_like(dst)
            calls.append(lambda dst=dst, src=src: dst.copy_(src))
    return list(reversed(calls))


def profile_sequence(text: str, reps: int, replays: int, copies: int) -> dict:
    gen = torch.Generator(device="cuda").manual_seed(0)
    items = parse_sequence(text)
    calls = build(items, copies, gen)
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up before the capture: plans, module load
        for call in calls:
            call()
    torch.cuda.current_stream().wait_stream(side)
    with torch.cuda.graph(graph):
        for _ in range(reps):
            for call in calls:
                call()
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    records, _ = profiled_records(graph.replay, replays)
    per_replay = reps * len(items)
    if len(records) != replays * per_replay:
        raise SystemExit(f"sequence_profile: {len(records)} kernel records, expected {replays * per_replay} "
                         f"(one kernel per item)")
    positions = []
    for p, item in enumerate(items):
        durs, margs = [], []
        for r in range(replays):
            base = r * per_replay
            for rep in range(1, reps):  # each replay's first repetition follows the previous replay
                i = base + rep * len(items) + p
                durs.append(records[i][1] - records[i][0])
                margs.append(records[i][1] - records[i - 1][1])
        name = records[p][2]
        positions.append(dict(item=":".join(str(v) for v in item if v not in (None, "")), kernel=name[:80],
                              dur_us=round(statistics.median(durs), 3), marginal_us=round(statistics.median(margs), 3)))
    return dict(sequence=text, positions=positions)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sequences", required=True, help='";"-separated sequences (see the module docstring)')
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--replays", type=int, default=10)
    p.add_argument("--copies", type=int, default=24, help="rotated weight copies per GEMM shape")
    p.add_argument("--out", default="sequence_profile.json")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("sequence_profile: needs a CUDA GPU")
    results = [profile_sequence(s, args.reps, args.replays, args.copies) for s in args.sequences.split(";") if s]
    with open(args.out, "w") as f:
        json.dump(dict(device=torch.cuda.get_device_name(), torch=torch.__version__,
                       git=os.environ.get("SGL_FP8_GIT", "unknown"), results=results), f, indent=2)
    for r in results:
        print(r["sequence"])
        for pos in r["positions"]:
            print(f"  {pos['item']:<18} {pos['kernel'][:50]:<50} dur {pos['dur_us']:7.2f} marginal {pos['marginal_us']:7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
