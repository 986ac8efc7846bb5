"""Session 35: one tools/regmma_probe.py run (regmma_probe.json) as a markdown table: each variant's us and
floor/us per point, beside the fused op and its stream + MMAs alone (flag 6) of the same run, then the
geometric means. Usage: regmma_table.py regmma_probe.json [variant ...] (default: every variant present)."""
import json, math, sys
d = json.load(open(sys.argv[1]))
present = []
for r in d["rows"]:
    if r["variant"] not in present:
        present.append(r["variant"])
names = sys.argv[2:] or [v for v in present if not v.startswith("fused")] + ["fused default", "fused flag 6"]
by = {}
for r in d["rows"]:
    by.setdefault((r["N"], r["K"], r["M"]), {})[r["variant"]] = r
print(f"{d['device']}, git {d['git']}, copy {d['copy_TBps']:.2f} TB/s; us (floor/us)\n")
print("| N x K, M | " + " | ".join(names) + " |")
print("|---|" + "---|" * len(names))
for key in sorted(by, key=lambda k: (-k[0] * k[1], k[2])):
    v = by[key]
    print(f"| {key[0]}x{key[1]}, {key[2]} | " + " | ".join(
        f"{v[x]['us']:.2f} ({v[x]['floor_over_us']:.2f})" if x in v else "-" for x in names) + " |")
print()
for x in names:
    vals = [r["floor_over_us"] for r in d["rows"] if r["variant"] == x]
    print(f"* {x}: geometric mean {math.exp(sum(map(math.log, vals)) / len(vals)):.3f}")
bad = [r for r in d["rows"] if r.get("check_ok") is False]
checked = [r for r in d["rows"] if r.get("check_ok") is not None]
print(f"* SPEC 3.4 check: {len(checked) - len(bad)} of {len(checked)} checked points pass; largest row error "
      f"{max(r['max_row_error'] for r in checked):.2e}" if checked else "")
