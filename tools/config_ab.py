"""Time GEMM configs against each other in one run: an A/B tool for kernel experiments.

Every config runs through the private configured op on the same activations and the same cold,
rotated weight copies (CUDA-graph replay, as `bench` and `tune` time them), after its output was
checked against the unfused path (SPEC §3.4 row tolerance). Medians in microseconds, and each
config's ratio to the first one. Run on the GPU machine:

    python tools/config_ab.py --shapes 5120x4096 --ms 1,8 --configs "[0,0,0,0,512];[0,0,0,0,1536]" [--out DIR]

A config is the configured op's list [k_split, warps, tiles_per_block, blocks_per_sm, flags,
smem_stages]; "default" is the fused op's own plan.

`--after copy` puts a plain torch copy kernel, which writes the activations, before every GEMM in
the graph: then the GEMM follows a kernel that does not launch its dependents early, as in a
model's decode step (a norm, then the projection), and its CTAs cannot enter before that kernel
has ended. The times are then those of the pair (the same copy for every config).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sglang_fp8ext import linear, tune  # noqa: E402
from sglang_fp8ext.bench import device_uuid, git_commit, make_weight, parse_shapes, time_in_graph  # noqa: E402


def parse_configs(text):
    """[(name, config)]; a config listed twice (to see whether the order of measurement matters)
    gets a suffix, so that both measurements are kept."""
    out, seen = [], {}
    for item in text.split(";"):
        item = item.strip()
        seen[item] = seen.get(item, 0) + 1
        name = item if seen[item] == 1 else f"{item}#{seen[item]}"
        out.append((name, None if item == "default" else json.loads(item)))
    return out


def launched_kernels(fn):
    """The CUDA kernels one eager call of `fn` launches: [{name, grid, smem}] from the profiler's trace."""
    import tempfile
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        with open(f.name) as trace_file:
            trace = json.load(trace_file)
    return [{"name": e["name"], "grid": e.get("args", {}).get("grid"),
             "smem": e.get("args", {}).get("dynamic shared memory", e.get("args", {}).get("shared memory"))}
            for e in trace.get("traceEvents", []) if e.get("cat") == "kernel"]


def record_kernels(rows, configs, generator, device):
    """--kernels: each point's kernels per config, from one profiled eager call, after every timing.
    Graph replays timed after the profiler's first session ran ~10 % slower in the same process
    (H200, session 25: 4096x2048 M = 32 8.12 against 7.28 us), so nothing is timed after it. The
    kernel a config launches depends on the shape, M, the scale format and the config only."""
    weights = {}
    for row in rows:
        n, k, m, e8m0 = row["N"], row["K"], row["M"], row["scale"] == "e8m0"
        if (n, k, e8m0) not in weights:
            weights.clear()
            weights[(n, k, e8m0)] = make_weight(n, k, e8m0, device, generator)
        w, s, _ = weights[(n, k, e8m0)]
        x = tune.activations(m, k, generator, device)
        for name, config in configs:
            if name in row["errors"]:
                continue
            row.setdefault("kernels", {})[name] = launched_kernels(
                lambda c=config: linear.run_path("fused", c, x, w, s, False, None))
        print(f"{n:>5} {k:>5} {row['scale']:>4} {m:>3} kernels:", flush=True)
        for name, launched in row.get("kernels", {}).items():
            print(f"    {name}: " + "; ".join(f"{kk['name'][:90]} grid {kk['grid']} smem {kk['smem']}"
                                               for kk in launched), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="5120x4096,4608x4096,4096x2048")
    ap.add_argument("--ms", default="1,2,4,8,16")
    ap.add_argument("--scales", default="fp32", help="fp32, e8m0 or fp32,e8m0")
    ap.add_argument("--configs", required=True, help='";"-separated JSON lists, or "default"')
    ap.add_argument("--replays", type=int, default=25)
    ap.add_argument("--copies", type=int, default=24)
    ap.add_argument("--after", choices=["none", "copy"], default="none",
                    help="a kernel before every GEMM: none (back to back), or a torch copy into the activations")
    ap.add_argument("--out", help="directory for config_ab.json")
    ap.add_argument("--diagnostic", action="store_true",
                    help="time every config but the first without checking its output (diagnostic flags such as "
                         "1, 2, 4 or 8192 skip work and give garbage); the first config is still checked")
    ap.add_argument("--kernels", action="store_true",
                    help="also record the kernels each config launches (name, grid, shared memory), from one "
                         "profiled eager call per point, after all the timings (which a profiler session "
                         "slows): a forced config the wgmma ring kernel cannot plan runs another kernel")
    args = ap.parse_args()
    device = torch.device("cuda")
    configs = parse_configs(args.configs)
    generator = torch.Generator(device=device).manual_seed(0)
    rows = []
    names = [name for name, _ in configs]
    if args.after != "none":
        print(f"each GEMM after a {args.after} kernel: the times are the pair's")
    print(f"{'N':>5} {'K':>5} {'sc':>4} {'M':>3} | " + " | ".join(f"{n[:22]:>22}" for n in names))
    for n, k in parse_shapes(args.shapes):
        for scale in args.scales.split(","):
            e8m0 = scale == "e8m0"
            count = tune.copies_for(n, k, args.copies, device)
            weights = [make_weight(n, k, e8m0, device, generator) for _ in range(count)]
            for m in (int(v) for v in args.ms.split(",")):
                x = tune.activations(m, k, generator, device)
                x_source = x.clone()  # what the copy before each GEMM (--after copy) writes into x
                w0, s0, _ = weights[0]
                unfused = linear.run_path("unfused", None, x, w0, s0, False, None)
                row = {"N": n, "K": k, "scale": scale, "M": m, "us": {}, "errors": {}, "same_bits_as_first": {}}
                first_out = None
                for name, config in configs:
                    try:
                        out = linear.run_path("fused", config, x, w0, s0, False, None)
                        torch.cuda.synchronize()
                    except RuntimeError as e:
                        row["errors"][name] = str(e).strip().splitlines()[0][:160]
                        continue
                    # Whether the output has the first config's bits (a change meant to keep the
                    # summation order must; a different K split need not).
                    if first_out is None:
                        first_out = out
                    row["same_bits_as_first"][name] = bool(torch.equal(out, first_out))
                    problem = tune.check_rows(out, unfused, "the unfused path")
                    if args.diagnostic and name != names[0]:
                        problem = None  # a diagnostic config's output is garbage by design
                    if problem:
                        row["errors"][name] = "wrong result: " + problem
                        continue
                    def call(w, s, c=config):
                        if args.after == "copy":
                            x.copy_(x_source)
                        return linear.run_path("fused", c, x, w, s, False, None)

                    row["us"][name] = round(time_in_graph(
                        [lambda w=w, s=s: call(w, s) for w, s, _ in weights], args.replays), 3)
                base = row["us"].get(names[0])
                cells = []
                for name in names:
                    t = row["us"].get(name)
                    if t is None:
                        cells.append(f"{'ERR':>22}")
                    else:
                        ratio = f" ({t / base:.3f})" if base else ""
                        cells.append(f"{f'{t:.2f}{ratio}':>22}")
                print(f"{n:>5} {k:>5} {scale:>4} {m:>3} | " + " | ".join(cells), flush=True)
                for name, why in row["errors"].items():
                    print(f"    {name}: {why}", flush=True)
                rows.append(row)
            del weights
            torch.cuda.empty_cache()
    if args.kernels:
        record_kernels(rows, configs, generator, device)
    result = {"device": torch.cuda.get_device_name(), "device_uuid": device_uuid(), "torch": torch.__version__,
              "git": git_commit(), "after": args.after,
              "configs": names, "rows": rows}
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "config_ab.json"), "w") as f:
            json.dump(result, f, indent=1)
    bad = sum(len(r["errors"]) for r in rows)
    for name in names[1:]:
        differ = [f"{r['N']}x{r['K']} {r['scale']} M={r['M']}" for r in rows
                  if r["same_bits_as_first"].get(name) is False]
        print(f"{name}: bits equal to {names[0]}'s at {sum(1 for r in rows if r['same_bits_as_first'].get(name))}"
              f" points, different at {len(differ)}{': ' + ', '.join(differ[:8]) if differ else ''}")
    print(f"config_ab: {len(rows)} points, {bad} configs failed or errored")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
