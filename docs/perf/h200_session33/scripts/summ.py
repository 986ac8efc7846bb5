"""Session 33: --chain-timed's JSON: floor/us (us) per variant and point, geometric means, and for each
point the stamps' medians (activation loads' latency, chunk landings from the release, release to exit)."""
import json, math, sys
for path in sys.argv[1:]:
    r = json.load(open(path))
    rows = r["rows"]
    print(f"\n{path}: {r['device']} git {r['git'][:7]} copy {r['copy_TBps']:.2f} TB/s after={r.get('after')}")
    pts = list(dict.fromkeys((x["N"], x["K"], x["M"]) for x in rows))
    names = list(dict.fromkeys(x["variant"] for x in rows))
    at = {(x["N"], x["K"], x["M"], x["variant"]): x for x in rows}
    print("variant".ljust(66) + "".join(f"{n}x{k}/{m}".rjust(15) for n, k, m in pts) + "   geo")
    for name in names:
        cells = [at.get(p + (name,)) for p in pts]
        ok = [c for c in cells if c]
        geo = math.exp(sum(math.log(c["floor_over_us"]) for c in ok) / len(ok)) if len(ok) == len(pts) else float("nan")
        print(name[:65].ljust(66) + "".join((f"{c['floor_over_us']:.3f}({c['us']:.2f})" if c else "-").rjust(15) for c in cells)
              + f"  {geo:.3f}" + ("" if all(c is None or c["fold_ok"] in (None, True) for c in cells) else "  MISMATCH"))
    print("\nstamps (medians, us from the release): loads, landed, exit; chunks landed")
    for p in pts:
        if p[2] not in (1, 8, 16):
            continue
        print(f"-- {p[0]}x{p[1]} M={p[2]}")
        for name in names:
            c = at.get(p + (name,))
            st = (c or {}).get("stamps")
            if not st:
                continue
            ch = " ".join(f"{t:.2f}" for t in st.get("chunk_landed_us", []))
            print(f"   {name[:62]:<62} {c['us']:6.2f} entry>rel {st['entry_to_release_us']:5.2f} loads {st['activation_latency_us']:5.2f}"
                  f" landed {st['release_to_landed_us']:5.2f} exit {st['release_to_exit_us']:5.2f} MHz {st['sm_clock_mhz']:5.0f} | {ch}")
