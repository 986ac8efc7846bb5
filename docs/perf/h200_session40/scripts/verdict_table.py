"""Session 40: each issue-3 target against the measured bounds, all from ONE device call (call 2: one H200, one
build of the landed head): bench (floor, fused op, quant + cuBLASLt), `stream_ceiling.py --chain` (the no-arithmetic
chain: weight share, griddepcontrol.wait, activations, output), `--chain-timed` (the TMA kernel's stream + MMAs alone:
the fused kernel with flag 6, or the read-once consumer), and `regmma_probe.py` variants 0 (the 16-row register-fed
GEMM on e4m3 activations, no quantization), 3 (its loads alone) and 8192 (the same GEMM quantizing bf16 activations).
Floors are bench's (the same machine and build); each tool's own µs.
Usage: verdict_table.py CALL_DIR   (CALL_DIR holds bench_gpu.json, chain/, timed/ and probe/)"""
import json, math, os, sys

d = sys.argv[1]
bench = json.load(open(f"{d}/bench_gpu.json"))
rows = {(r["N"], r["K"], r["M"]): r for r in bench["rows"] if r["scale"] == "fp32"}
NOT_A_CHAIN = ("no activations", "neither", "activations alone", "cycles of work", "bulk", "fused", "consumed")
chain, tma = {}, {}
for tool in ("chain", "timed"):
    path = f"{d}/{tool}/stream_ceiling.json"
    if not os.path.exists(path):
        continue
    for x in json.load(open(path))["rows"]:
        key, name, us = (x["N"], x["K"], x["M"]), x["variant"], x["us"]
        if "consumed" in name or "flag 6" in name:
            tma.setdefault(key, []).append((us, "flag 6" if "flag 6" in name else "read-once"))
        elif not any(s in name for s in NOT_A_CHAIN):
            chain.setdefault(key, []).append(us)
probe = {}
path = f"{d}/probe/regmma_probe.json"
if os.path.exists(path):
    for x in json.load(open(path))["rows"]:
        if x.get("check_ok") is False:
            raise SystemExit(f"probe point failed its SPEC check: {x}")
        probe[(x["N"], x["K"], x["M"], x["variant"])] = x["us"]
GEMM_E4M3, LOADS, QUANT, LIB = ("regmma probe", "diag: loads only",
                                "regmma probe quantizing bf16 activations", "fused register-fed")
geo = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
cell = lambda us, fl: "%.2f (%.2f)" % (us, fl / us) if us else "-"
print("| N x K, M | floor | target 2 allows | target 3 allows | chain, no arithmetic | TMA stream + MMAs alone | "
      "register-fed loads alone | register-fed GEMM, e4m3 input | register-fed GEMM quantizing | "
      "the op's register-fed kernel (flag 32768) | fused op |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
g = {"chain": [], "tma": [], "fused": []}
for key in sorted(rows, key=lambda k: (-k[0] * k[1], k[2])):
    r = rows[key]
    fl = r["floor_us"]
    t3 = next(v for n, v in r["peers"].items() if "scaled_mm" in n) / 2.5
    t2 = fl / 0.8 if key[1] == 4096 and key[2] <= 16 else None
    c = min(chain[key]) if key in chain else None
    m, who = min(tma[key]) if key in tma else (None, "")
    pr = [probe.get(key + (v,)) for v in (LOADS, GEMM_E4M3, QUANT, LIB)]
    if c:
        g["chain"].append(fl / c)
    if m:
        g["tma"].append(fl / m)
    g["fused"].append(fl / r["fused_us"])
    print("| %dx%d, %d | %.2f | %s | %.2f | %s | %s | %s | %s | %s | %s | %s |" % (
        key[0], key[1], key[2], fl, "%.2f" % t2 if t2 else "-", t3, cell(c, fl),
        cell(m, fl) + ("; " + who if who else ""), cell(pr[0], fl), cell(pr[1], fl), cell(pr[2], fl), cell(pr[3], fl),
        cell(r["fused_us"], fl)))
print()
for name, xs in g.items():
    if len(xs) == len(rows):
        print("geometric mean floor/us over the 15 points, %s: %.3f" % (name, geo(xs)))

# Per point, the faster of the two GEMMs that do less than the op (the TMA design's stream + MMAs alone; the
# register-fed GEMM on e4m3 input, 1-16 tokens): a complete GEMM of either design takes at least as long.
best = {}
for key, r in rows.items():
    cands = [us for us, _ in tma.get(key, [])]
    if key + (GEMM_E4M3,) in probe:
        cands.append(probe[key + (GEMM_E4M3,)])
    best[key] = r["floor_us"] / min(cands)
if len(best) == len(rows):
    print("geometric mean over the 15 points of the faster GEMM doing less than the op, point by point: %.3f" %
          geo(list(best.values())))
    t2 = {k: v for k, v in best.items() if k[1] == 4096 and k[2] <= 16}
    print("target 2 points where even that is below 0.80: %s" % sorted("%dx%d M=%d %.3f" % (k + (v,)) for k, v in t2.items() if v < 0.8))
    over3 = []
    for key, r in rows.items():
        t3 = next(v for n, v in r["peers"].items() if "scaled_mm" in n) / 2.5
        lo = r["floor_us"] / best[key]
        if lo > t3 or r["fused_us"] > t3:
            over3.append("%dx%d M=%d allows %.2f, faster GEMM doing less %.2f (left %.2f)" % (key + (t3, lo, t3 - lo)))
    print("target 3 points not met:\n  " + "\n  ".join(over3))
