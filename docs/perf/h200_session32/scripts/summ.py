"""Session 32: one table per run of --chain-consume's JSON: each variant's floor/us (us) at every point."""
import json, sys
for path in sys.argv[1:]:
    r = json.load(open(path))
    rows = r["rows"]
    print(f"\n{path}: {r['device']} git {r['git'][:7]} copy {r['copy_TBps']:.2f} TB/s after={r.get('after')}")
    pts = list(dict.fromkeys((x["N"], x["K"], x["M"]) for x in rows))
    names = list(dict.fromkeys(x["variant"] for x in rows))
    at = {(x["N"], x["K"], x["M"], x["variant"]): x for x in rows}
    print("variant".ljust(70) + "".join(f"{n}x{k}/{m}".rjust(16) for n, k, m in pts))
    for name in names:
        cells = [at.get(p + (name,)) for p in pts]
        print(name[:69].ljust(70) + "".join((f"{c['floor_over_us']:.3f} ({c['us']:.2f})" if c else "-").rjust(16) for c in cells)
              + ("" if all(c is None or c["fold_ok"] in (None, True) for c in cells) else "  MISMATCH"))
