"""Session 34: per bench point, from one device call (bench and `stream_ceiling.py --chain` on one H200),
the time each issue-3 target allows and what the measured kernels take: the floor (bench's, at the copy
rate bench measured), the fastest no-arithmetic chain variant (weight share, griddepcontrol.wait, the
activations, the output; no extra work), the fused kernel with its parts taken out (flags 7, 5, 1) and
whole. Prints a markdown table and geometric means."""
import json, math, re, sys
d = sys.argv[1]
bench = json.load(open(f"{d}/bench_gpu.json"))
rows = {(r["N"], r["K"], r["M"]): r for r in bench["rows"] if r["scale"] == "fp32"}
chain, fused = {}, {}
for line in open(f"{d}/chain.txt"):
    m = re.match(r"\[\d+/\d+\] N=(\d+) K=(\d+) M=(\d+) (.*): ([\d.]+) us", line)
    if m:
        key, name, us = (int(m[1]), int(m[2]), int(m[3])), m[4], float(m[5])
        skip = ("no activations", "neither", "activations alone", "cycles of work", "bulk")
        if not any(s in name for s in skip):
            chain.setdefault(key, {})[name] = us
        continue
    m = re.match(r"\s+N=(\d+) K=(\d+) fused (.*) M=(\d+): ([\d.]+) us", line)
    if m:
        fused.setdefault((int(m[1]), int(m[2]), int(m[4])), {})[m[3]] = float(m[5])
geo = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
print("| N x K, M | floor | 0.80 allows | 2.5x cuBLASLt allows | chain, no arithmetic (best) | copies alone (7) | + prologue (5) | + epilogue (1) | fused |")
print("|---|---|---|---|---|---|---|---|---|")
g = {k: [] for k in ("chain", "7", "5", "1", "fused", "bench")}
for key in sorted(rows, key=lambda k: (-k[0] * k[1], k[2])):
    r, f = rows[key], fused[key]
    fl = r["floor_us"]
    cub = next(v for n, v in r["peers"].items() if "scaled_mm" in n)
    best = min(chain[key].values())
    a80 = f"{fl / 0.8:.2f}" if key[1] == 4096 and key[2] <= 16 else "-"
    parts = [best, f["copies alone (flag 7)"], f["without MMAs or epilogue (flag 5)"], f["without MMAs (flag 1)"], f["default"]]
    for name, us in zip(("chain", "7", "5", "1", "fused"), parts):
        g[name].append(fl / us)
    g["bench"].append(fl / r["fused_us"])
    cells = " | ".join(f"{us:.2f} ({fl / us:.2f})" for us in parts)
    print(f"| {key[0]}x{key[1]}, {key[2]} | {fl:.2f} | {a80} | {cub / 2.5:.2f} | {cells} |")
print("geometric means of floor/us:", {k: round(geo(v), 3) for k, v in g.items()})
