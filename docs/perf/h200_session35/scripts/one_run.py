"""Session 35: every issue-3 target against the measured parts, all from ONE device call (one H200, one
build): bench (floor, fused op, quant + cuBLASLt), `stream_ceiling.py --chain` and `--chain-timed`.
Per bench point (fp32 scales): what targets 2 and 3 allow, the fastest no-arithmetic chain (weight share,
griddepcontrol.wait, activations, output; no other work), the fastest kernel that does the stream and the
MMAs and nothing else of a GEMM (the fused kernel with flag 6, or the read-once consumer), and the fused op.
Usage: one_run.py CALL_DIR   (CALL_DIR holds bench_gpu.json, chain/ and timed/stream_ceiling.json)"""
import json, math, sys
d = sys.argv[1]
bench = json.load(open(f"{d}/bench_gpu.json"))
rows = {(r["N"], r["K"], r["M"]): r for r in bench["rows"] if r["scale"] == "fp32"}
NOT_A_CHAIN = ("no activations", "neither", "activations alone", "cycles of work", "bulk", "fused", "consumed")
chain, mma = {}, {}
for tool in ("chain", "timed"):
    for x in json.load(open(f"{d}/{tool}/stream_ceiling.json"))["rows"]:
        key, name, us = (x["N"], x["K"], x["M"]), x["variant"], x["us"]
        if "consumed" in name or "flag 6" in name:
            mma.setdefault(key, []).append((us, "flag 6" if "flag 6" in name else "read-once"))
        elif not any(s in name for s in NOT_A_CHAIN):
            chain.setdefault(key, []).append(us)
geo = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
print("| N x K, M | floor | target 2 allows | target 3 allows | chain, no arithmetic (best) | stream + MMAs alone (best) "
      "| left for the rest of a GEMM (target 2 / 3) | fused op |")
print("|---|---|---|---|---|---|---|---|")
g = {"chain": [], "mma": [], "fused": []}
verdict = {2: [], 3: []}
for key in sorted(rows, key=lambda k: (-k[0] * k[1], k[2])):
    r = rows[key]
    fl = r["floor_us"]
    t3 = next(v for n, v in r["peers"].items() if "scaled_mm" in n) / 2.5
    t2 = fl / 0.8 if key[1] == 4096 and key[2] <= 16 else None
    c = min(chain[key])
    m, who = min(mma[key])
    g["chain"].append(fl / c); g["mma"].append(fl / m); g["fused"].append(fl / r["fused_us"])
    left2 = t2 - m if t2 else None
    left3 = t3 - m
    if t2:
        verdict[2].append((key, left2))
    verdict[3].append((key, left3, r["fused_us"] <= t3))
    print("| %dx%d, %d | %.2f | %s | %.2f | %.2f (%.2f) | %.2f (%.2f; %s) | %s / %.2f | %.2f (%.2f) |" % (
        key[0], key[1], key[2], fl, "%.2f" % t2 if t2 else "-", t3, c, fl / c, m, fl / m, who,
        "%.2f" % left2 if t2 else "-", left3, r["fused_us"], fl / r["fused_us"]))
print()
print("geometric means of floor/us over the 15 points: chain %.3f, stream + MMAs alone %.3f, fused op %.3f" % (
    geo(g["chain"]), geo(g["mma"]), geo(g["fused"])))
print("target 1 (0.70): the best stream + MMAs alone reach %.3f" % geo(g["mma"]))
print("target 2 (0.80 at M <= 16, large shapes): %d of %d points leave a negative time for the rest of a GEMM" % (
    sum(v < 0 for _, v in verdict[2]), len(verdict[2])))
met = [k for k, _, ok in verdict[3] if ok]
out = [k for k, v, ok in verdict[3] if not ok and v <= 0]
print("target 3 (2.5x quant + cuBLASLt): met by the fused op at %d points %s; the stream + MMAs alone already "
      "slower than allowed at %d: %s" % (len(met), met, len(out), out))
print("  left for quantization, block scales and epilogue where positive and not met: %s" % [
    ("%dx%d M=%d" % k, round(v, 2)) for k, v, ok in verdict[3] if not ok and v > 0])
