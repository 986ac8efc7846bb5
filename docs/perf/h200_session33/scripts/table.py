"""Session 33: the benchmarks.md table from one --chain-timed JSON: floor/us (us) at each point for the
chosen variants, and their geometric means."""
import json, math, sys
COLS = [("weight all at entry", "chain, thread 0: all at entry"),
        ("producer warp: all at entry", "chain, producer warp: all at entry"),
        ("clocked: two at entry, the next every 1000 cycles", "chain, clocked: 2 at entry, then every 1000 cycles"),
        ("clocked: one at entry, the next every 1500 cycles", "chain, clocked: 1, then every 1500"),
        ("weight all at entry, 512 threads, consumed as it lands (16 wgmma a 32 KB chunk)", "consumer, thread 0: all at entry"),
        ("producer warp: all at entry, 512 threads, consumed as it lands (16 wgmma a 32 KB chunk)", "consumer, producer warp: all at entry"),
        ("clocked: two at entry, the next every 1000 cycles, 512 threads, consumed as it lands (16 wgmma a 32 KB chunk)",
         "consumer, clocked: 2, then every 1000"),
        ("fused every copy at entry, stream and MMAs alone (flag 6)", "fused, stream and MMAs (flag 6)"),
        ("fused default", "fused")]
r = json.load(open(sys.argv[1]))
at = {(x["N"], x["K"], x["M"], x["variant"]): x for x in r["rows"]}
pts = list(dict.fromkeys((x["N"], x["K"], x["M"]) for x in r["rows"]))
print("| N x K, M | floor µs | " + " | ".join(c[1] for c in COLS) + " |")
print("|---|---|" + "---|" * len(COLS))
for n, k, m in pts:
    floor = at[(n, k, m, COLS[0][0])]["floor_us"]
    print(f"| {n}x{k}, {m} | {floor:.2f} | " + " | ".join(
        f"{at[(n, k, m, c[0])]['floor_over_us']:.3f} ({at[(n, k, m, c[0])]['us']:.2f})" for c in COLS) + " |")
geo = lambda name: math.exp(sum(math.log(at[p + (name,)]["floor_over_us"]) for p in pts) / len(pts))  # noqa: E731
print("| geometric mean | | " + " | ".join(f"{geo(c[0]):.3f}" for c in COLS) + " |")
