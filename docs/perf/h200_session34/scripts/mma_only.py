"""Session 34: the best floor/us any kernel that does the stream and the MMAs (and nothing else of a GEMM:
no quantization, block scales or K-split exchange) reached at each bench point, over every back-to-back
run of sessions 32-33 (`stream_ceiling.py --chain-consume` / `--chain-timed`: the fused kernel with flag 6,
and the read-once consumers) and session 31's `config_ab.py --diagnostic` (flag 6); session 32 call 6's
`old` run and calls 1-2 are left out (their consumers' two warpgroups read the same A addresses: half the
distinct bytes, not a GEMM).
Then, against one run's floors (session 34 call 1), what each target allows for the rest of a GEMM."""
import glob, json, math, sys
best = {}
def short(path):  # docs/perf/h200_session32/call7_.../x.json -> "s32 call 7"
    parts = path.split("/")
    return "s%s call %s" % (parts[2][-2:], parts[3][4:].split("_")[0])
def take(key, ratio, where):
    if ratio > best.get(key, (0, ""))[0]:
        best[key] = (ratio, where)
for f in glob.glob("docs/perf/h200_session3[23]/**/stream_ceiling.json", recursive=True):
    if any(s in f for s in ("call6_tool_a_b_same_gpu/old", "session32/call1_", "session32/call2_")):
        continue
    d = json.load(open(f))
    if d.get("after") not in (None, "none"):
        continue
    for x in d["rows"]:
        if "consum" in x["variant"] or "flag 6" in x["variant"]:
            take((x["N"], x["K"], x["M"]), x["floor_over_us"], short(f))
ab = json.load(open("docs/perf/h200_session31/call2_free_activations_5f4a19f/config_ab.json"))
floors = json.load(open("docs/perf/h200_session31/call2_free_activations_5f4a19f/floors.json"))["floor_us"]
for r in ab["rows"]:
    if r["scale"] == "fp32":
        key = (r["N"], r["K"], r["M"])
        take(key, floors["%dx%dx%d" % key] / r["us"]["[0,0,64,0,6]"], "s31 call 2")
# what the fused kernel's quantization, block scales and epilogue cost it: fused - flag 6, same run
rest = {}
for f in glob.glob("docs/perf/h200_session33/call3_*/b2b*/stream_ceiling.json"):
    us = {}
    for x in json.load(open(f))["rows"]:
        if x["kind"] == "fused":
            us.setdefault((x["N"], x["K"], x["M"]), {})["6" if "flag 6" in x["variant"] else "d"] = x["us"]
    for key, u in us.items():
        rest.setdefault(key, []).append(u["d"] - u["6"])
run = json.load(open(sys.argv[1]))
print("| N x K, M | floor | target 2 allows | target 3 allows | best stream + MMAs alone (any run) | left for the rest of a GEMM (target 2 / 3) | the fused kernel's rest (fused - flag 6) |")
print("|---|---|---|---|---|---|---|")
for r in sorted((r for r in run["rows"] if r["scale"] == "fp32"), key=lambda r: (-r["N"] * r["K"], r["M"])):
    key = (r["N"], r["K"], r["M"])
    fl = r["floor_us"]
    cub = next(v for n, v in r["peers"].items() if "scaled_mm" in n) / 2.5
    a80 = fl / 0.8 if key[1] == 4096 and key[2] <= 16 else None
    ratio, where = best[key]
    mma = fl / ratio
    left = ("%.2f" % (a80 - mma) if a80 else "-") + " / %.2f" % (cub - mma)
    print("| %dx%d, %d | %.2f | %s | %.2f | %.2f (%.3f; %s) | %s | %.2f-%.2f |" % (
        key[0], key[1], key[2], fl, "%.2f" % a80 if a80 else "-", cub, mma, ratio, where, left,
        min(rest[key]), max(rest[key])))
print("geometric mean of the best stream + MMAs alone over the 15 points: %.3f" % math.exp(
    sum(math.log(v[0]) for v in best.values()) / len(best)))
