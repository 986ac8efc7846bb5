"""Session 34: benchmarks.md's top table (every row of one bench JSON) and its geometric mean."""
import json, math, sys
r = json.load(open(sys.argv[1]))
print("| N | K | M | scale | fused µs | floor µs | floor/fused | quant + scaled_mm (cuBLASLt) | quant + scaled_gemm | bf16 F.linear |")
print("|---|---|---|---|---|---|---|---|---|---|")
for x in r["rows"]:
    p = x["peers"]
    names = [next(n for n in p if "scaled_mm" in n), next(n for n in p if "scaled_gemm" in n), next(n for n in p if "linear" in n)]
    cells = " | ".join(f"{p[n]:.2f} ({p[n] / x['fused_us']:.2f}x)" for n in names)
    print(f"| {x['N']} | {x['K']} | {x['M']} | {x['scale']} | {x['fused_us']:.2f} | {x['floor_us']:.2f} | "
          f"{x['floor_us'] / x['fused_us']:.2f} | {cells} |")
fp = [x["floor_us"] / x["fused_us"] for x in r["rows"] if x["scale"] == "fp32"]
print("geometric mean floor/fused (fp32):", round(math.exp(sum(map(math.log, fp)) / len(fp)), 3))
