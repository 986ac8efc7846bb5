"""Session 36: the tables of docs/benchmarks.md part 4 ("What the register-fed stream needs") from the raw JSON of
calls 5-8, and call 7's fused times against session 35's call 1. Run from docs/perf/h200_session36."""
import json, math

def load(path):
    return json.load(open(path))

def us_by(rows, key):
    return {(r["N"], r["K"], r[key] if key in r else None): r for r in rows}

def geo(xs):
    return math.exp(sum(map(math.log, xs)) / len(xs))

SHAPES = [(5120, 4096), (4608, 4096), (4096, 2048)]

# call 7: the same GPU ran the read-only ldg kernels (stream_ceiling --ldg-residency) and the bare 8-row reads
c7r = load("call7_verify_bench_bare_rows_7e823c8/residency/stream_ceiling.json")
c7p = load("call7_verify_bench_bare_rows_7e823c8/probe/regmma_probe.json")
print("call 7 (GPU 5b5efe77), us (floor/us, each tool's own floor), 1 token for the probe rows:\n")
ldg = ["ldg D=8 ctas/SM=5, capped at 5 an SM", "ldg D=8 ctas/SM=4", "ldg D=8 ctas/SM=4, capped at 4 an SM",
       "ldg D=16 ctas/SM=2, capped at 2 an SM", "ldg D=8 ctas/SM=2", "bulk chunk=16K ring=128K ctas/SM=1"]
bare = ["bare 8-row reads, 256 threads, linear", "bare 8-row reads, 128 threads, linear",
        "bare 8-row reads, 256 threads, strips", "bare 8-row reads, 128 threads, strips", "swapped diag: loads only"]
print("| kernel | " + " | ".join(f"{n}x{k}" for n, k in SHAPES) + " |")
print("|---|---|---|---|")
for name in ldg:
    cells = []
    for n, k in SHAPES:
        r = next((r for r in c7r["rows"] if r["N"] == n and r["K"] == k and r["variant"] == name), None)
        cells.append(f"{r['us']:.2f} ({r['floor_over_us']:.2f})" if r else "-")
    print(f"| read-only {name} | " + " | ".join(cells) + " |")
for name in bare:
    cells = []
    for n, k in SHAPES:
        r = next((r for r in c7p["rows"] if r["N"] == n and r["K"] == k and r["M"] == 1 and r["variant"] == name), None)
        cells.append(f"{r['us']:.2f} ({r['floor_over_us']:.2f})" if r else "-")
    print(f"| {name} | " + " | ".join(cells) + " |")

# call 8: the stagger
c8 = load("call8_stagger_62373e8/regmma_probe.json")
print("\ncall 8 (GPU 900cf4df), 1 token, us (floor/us):\n")
print("| kernel | " + " | ".join(f"{n}x{k}" for n, k in SHAPES) + " |")
print("|---|---|---|---|")
for name in ["bare 8-row reads, 256 threads, linear", "bare 8-row reads, 256 threads, linear, staggered by 512 B a CTA",
             "bare 8-row reads, 256 threads, strips"]:
    cells = []
    for n, k in SHAPES:
        r = next(r for r in c8["rows"] if r["N"] == n and r["K"] == k and r["variant"] == name)
        cells.append(f"{r['us']:.2f} ({r['floor_over_us']:.2f})")
    print(f"| {name} | " + " | ".join(cells) + " |")

# call 7's bench against session 35's call 1 (same kernels, another H200)
b7 = load("call7_verify_bench_bare_rows_7e823c8/bench_gpu.json")
b35 = load("../h200_session35/call1_verify_bench_chain_13d2597/bench_gpu.json")
old = {(r["N"], r["K"], r["M"], r["scale"]): r for r in b35["rows"]}
ratios = [r["fused_us"] / old[(r["N"], r["K"], r["M"], r["scale"])]["fused_us"] for r in b7["rows"] if r["scale"] == "fp32"]
fp = [r["floor_us"] / r["fused_us"] for r in b7["rows"] if r["scale"] == "fp32"]
e8 = {(r["N"], r["K"], r["M"]): r["fused_us"] for r in b7["rows"] if r["scale"] == "e8m0"}
e8r = [e8[(r["N"], r["K"], r["M"])] / r["fused_us"] for r in b7["rows"] if r["scale"] == "fp32"]
print(f"\ncall 7 bench: copy {b7['copy_TBps']:.2f} TB/s (session 35 call 1: {b35['copy_TBps']:.2f}); floor/fused "
      f"{geo(fp):.3f} as a geometric mean; fused times {min(ratios):.2f}-{max(ratios):.2f}x session 35's "
      f"({geo(ratios):.3f} geometric mean); e8m0 / fp32 max {max(e8r):.3f}, geometric mean {geo(e8r):.3f}")
