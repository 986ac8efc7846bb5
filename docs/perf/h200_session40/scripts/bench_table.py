"""Session 40: the benchmarks.md table of one `bench` JSON, its geometric mean and e8m0 ratio, and the issue 3
target 3 ratio (quant + cuBLASLt time / fused time) per point.   Usage: bench_table.py BENCH_JSON"""
import json, math, sys
run = json.load(open(sys.argv[1]))
print(run["git"], run["device_uuid"], "copy %.2f TB/s" % run["copy_TBps"])
print("| N | K | M | scale | fused µs | floor µs | floor/fused | quant + scaled_mm (cuBLASLt) | quant + scaled_gemm | bf16 F.linear |")
print("|---|---|---|---|---|---|---|---|---|---|")
PEERS = ("quant+scaled_mm(cuBLASLt)", "quant+scaled_gemm", "bf16_linear")
for r in run["rows"]:
    f = r["fused_us"]
    cells = " | ".join("%.2f (%.2fx)" % (r["peers"][p], r["peers"][p] / f) for p in PEERS)
    print("| %d | %d | %d | %s | %.2f | %.2f | %.2f | %s |" % (r["N"], r["K"], r["M"], r["scale"], f, r["floor_us"],
                                                           r["floor_us"] / f, cells))
geo = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
fp32 = {(r["N"], r["K"], r["M"]): r for r in run["rows"] if r["scale"] == "fp32"}
e8m0 = {(r["N"], r["K"], r["M"]): r for r in run["rows"] if r["scale"] == "e8m0"}
print("fp32 geometric mean floor/fused %.3f" % geo([r["floor_us"] / r["fused_us"] for r in fp32.values()]))
q = [e8m0[k]["fused_us"] / fp32[k]["fused_us"] for k in fp32]
print("e8m0/fp32 max %.3f, geometric mean %.3f" % (max(q), geo(q)))
t2 = [(k, r["floor_us"] / r["fused_us"]) for k, r in fp32.items() if k[1] == 4096 and k[2] <= 16]
print("target 2 points >= 0.80: %d of %d (min %.3f)" % (sum(v >= 0.8 for _, v in t2), len(t2), min(v for _, v in t2)))
t3 = [(k, r["peers"]["quant+scaled_mm(cuBLASLt)"] / r["fused_us"]) for k, r in fp32.items()]
print("target 3 points >= 2.5x: %d of %d: %s" % (sum(v >= 2.5 for _, v in t3), len(t3),
                                               ["%dx%d M=%d %.2fx" % (k + (v,)) for k, v in t3 if v >= 2.5]))
