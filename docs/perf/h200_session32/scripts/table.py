"""Session 32: the table in docs/benchmarks.md ("Where the time goes", session 32) from call 6's two runs on
one H200: per bench point, floor/us (us) of the chain with no arithmetic (best order and K slice), the
chain multiplied as it lands, each weight byte read once (best of the four variants) and twice, the
fused op with only its stream and MMAs (flag 6, every copy at entry) and whole; call 2's tool (A within
24 KB) at M = 1, 8, 16; and each column's geometric mean.
Run from the repository root: python3 docs/perf/h200_session32/scripts/table.py"""
import json
import math

D = "docs/perf/h200_session32/call6_tool_a_b_same_gpu/"
new = json.load(open(D + "new1/stream_ceiling.json"))["rows"]
old = json.load(open(D + "old/stream_ceiling.json"))["rows"]
points = sorted({(r["N"], r["K"], r["M"]) for r in new}, key=lambda p: (-p[0] * p[1], p[2]))


def best(rows, p, pred):
    sel = [r for r in rows if (r["N"], r["K"], r["M"]) == p and pred(r)]
    return max(sel, key=lambda r: r["floor_over_us"]) if sel else None


columns = [
    ("chain, no arithmetic", new, lambda r: r["kind"] == "chain" and not r["params"].get("mma_consume", 0)),
    ("read once as it lands", new, lambda r: r["params"].get("mma_consume", 0) == 1),
    ("read twice", new, lambda r: r["params"].get("mma_consume", 0) == 2),
    ("read once, call 2's A", old, lambda r: r["params"].get("mma_consume", 0) == 1),
    ("fused, stream and MMAs (flag 6)", new, lambda r: r["variant"].startswith("fused every copy at entry, stream")),
    ("fused", new, lambda r: r["variant"] == "fused default"),
]
print("| N x K, M | floor µs | " + " | ".join(c[0] for c in columns) + " |")
print("|---" * (len(columns) + 2) + "|")
logs = {c[0]: [] for c in columns}
for p in points:
    cells = []
    for name, rows, pred in columns:
        r = best(rows, p, pred)
        cells.append(f"{r['floor_over_us']:.3f} ({r['us']:.2f})" if r else "-")
        if r:
            logs[name].append(math.log(r["floor_over_us"]))
    floor = best(new, p, columns[0][2])["floor_us"]
    print(f"| {p[0]}x{p[1]}, {p[2]} | {floor:.2f} | " + " | ".join(cells) + " |")
print("| geometric mean | | " + " | ".join(
    f"{math.exp(sum(v) / len(v)):.3f}" + ("" if len(v) == len(points) else f" ({len(v)} points)") for v in logs.values()) + " |")
