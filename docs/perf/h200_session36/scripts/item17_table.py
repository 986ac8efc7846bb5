"""Session 36, call 1 (docs/sm90.md Next steps, item 17): the register-fed probe's load patterns and the
read-only kernels of the same call, set against target 2 (floor/us >= 0.80) point by point.

Usage: item17_table.py regmma_probe.json stream_ceiling.json
Every figure is us (floor/us). The floor and target 2's allowance (floor / 0.80) come from the probe's run
(weight + scales + activations + output over its copy rate). The read-only kernels (tools/stream_ceiling.py
--quick, run right after the probe on the same GPU) read the weight and scales only and do no GEMM work,
so their time does not depend on M; their floor/us is recomputed against the probe's floor."""
import json, math, sys

probe = json.load(open(sys.argv[1]))
ceiling = json.load(open(sys.argv[2]))
COLUMNS = [  # (header, variant name prefix in regmma_probe.json)
    ("16-row: fragment loads alone", "diag: loads only"),
    ("16-row: whole rows alone", "diag: loads only, contiguous"),
    ("16-row: 4 x 128 B alone", "diag: loads only, 4 rows x 128 bytes"),
    ("8-row: fragment loads alone", "swapped diag: loads only"),
    ("8-row: whole rows alone", "swapped diag: loads only, contiguous"),
    ("8-row: 4 x 128 B alone", "swapped diag: loads only, 4 rows x 128 bytes"),
    ("16-row GEMM", "regmma probe"),
    ("16-row GEMM on 4 x 128 B (transpose)", "regmma probe, 4 x 128 loads through"),
    ("fused, stream + MMAs (flag 6)", "fused flag 6"),
    ("fused op", "fused default"),
]


def variant_of(name):
    # Exact match first (labels may carry a trailing note such as "(not yet run on a GPU)").
    for header, prefix in COLUMNS:
        if name == prefix:
            return header
    for header, prefix in sorted(COLUMNS, key=lambda c: -len(c[1])):
        if name.startswith(prefix + " ") or name.startswith(prefix + ","):
            return header
    return None


by = {}
for r in probe["rows"]:
    col = variant_of(r["variant"])
    if col:
        by.setdefault((r["N"], r["K"], r["M"]), {})[col] = r
read_only = {}
for r in ceiling["rows"]:
    if r["pdl"] == 1:
        read_only.setdefault((r["N"], r["K"]), {})[r["kind"]] = r["us"]

print(f"{probe['device']}, git {probe['git']}, copy {probe['copy_TBps']:.2f} TB/s (probe run; the read-only "
      f"kernels' run measured {ceiling['copy_TBps']:.2f}); us (floor/us)\n")
headers = ["target 2 allows", "read-only ldg", "read-only bulk (TMA)"] + [c[0] for c in COLUMNS]
print("| N x K, M | floor | " + " | ".join(headers) + " |")
print("|---|---|" + "---|" * len(headers))
for key in sorted(by, key=lambda k: (-k[0] * k[1], k[2])):
    v = by[key]
    floor = next(iter(v.values()))["floor_us"]
    ro = read_only.get(key[:2], {})
    cells = [f"{floor / 0.8:.2f}"]
    cells += [f"{ro[k]:.2f} ({floor / ro[k]:.2f})" if k in ro else "-" for k in ("ldg", "bulk")]
    cells += [f"{v[c[0]]['us']:.2f} ({v[c[0]]['floor_over_us']:.2f})" if c[0] in v else "-" for c in COLUMNS]
    print(f"| {key[0]}x{key[1]}, {key[2]} | {floor:.2f} | " + " | ".join(cells) + " |")
print()
for header, _ in COLUMNS:
    vals = [by[k][header]["floor_over_us"] for k in by if header in by[k]]
    if vals:
        print(f"* {header}: geometric mean {math.exp(sum(map(math.log, vals)) / len(vals)):.3f} over {len(vals)} points")
checked = [r for r in probe["rows"] if r.get("check_ok") is not None]
bad = [r for r in checked if not r["check_ok"]]
print(f"* SPEC 3.4 check: {len(checked) - len(bad)} of {len(checked)} checked points pass; largest row error "
      f"{max(r['max_row_error'] for r in checked):.2e}")
