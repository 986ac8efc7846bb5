"""Session 33: per variant of a stream_ceiling JSON, the geometric mean of floor/us over its points and the
range at 1-16 tokens on the two K = 4096 shapes; whether every checksum matched."""
import json, math, sys
for path in sys.argv[1:]:
    r = json.load(open(path))
    rows = r["rows"]
    print(path, f"copy {r['copy_TBps']:.2f}", r["git"][:7],
          "checksums ok" if all(x.get("fold_ok") in (None, True) for x in rows) else "MISMATCH")
    for n in dict.fromkeys(x["variant"] for x in rows):
        sel = [x["floor_over_us"] for x in rows if x["variant"] == n]
        big = [x["floor_over_us"] for x in rows if x["variant"] == n and x["K"] == 4096 and x["M"] <= 16]
        print(f"  {n[:100]:<100} geo {math.exp(sum(map(math.log, sel)) / len(sel)):.3f}  large<=16 {min(big):.3f}-{max(big):.3f}")
