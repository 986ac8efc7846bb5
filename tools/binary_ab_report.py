"""Report of tools/binary_ab.sh: every bench point's fused time per version, as a ratio to the
first version's in the same round (each round a full pass over the versions on one machine), and
each decode step's FP8 time over the same run's bf16 time.

    python tools/binary_ab_report.py RESULTS_DIR BASE OTHER [OTHER ...]
"""

import argparse
import glob
import json
import math
import os
import re
import statistics


def load_rounds(res, kind, version):
    """{round: parsed JSON} of one version's results of one kind (bench or e2e)."""
    out = {}
    for path in glob.glob(os.path.join(res, f"{kind}_{version}_r*.json")):
        match = re.search(r"_r(\d+)\.json$", path)
        with open(path) as f:
            out[int(match.group(1))] = json.load(f)
    return out


def bench_points(result):
    return {(r["N"], r["K"], r["M"], r["scale"]): r for r in result["rows"]}


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def report_bench(res, base, others):
    base_rounds = load_rounds(res, "bench", base)
    if not base_rounds:
        return
    print(f"bench: fused us of {base}; then each version's time / {base}'s in the same round")
    rounds = sorted(base_rounds)
    versions = [base] + others
    runs = {v: load_rounds(res, "bench", v) for v in versions}
    header = f"{'N x K':>10} {'M':>3} {'scale':>5} " + " ".join(f"{base + ' r' + str(r):>12}" for r in rounds)
    for v in others:
        header += " " + " ".join(f"{v + ' r' + str(r):>12}" for r in rounds)
    print(header)
    ratios = {v: {} for v in others}  # (scale, M bucket) -> [ratio]
    floors = {v: [] for v in versions}  # fp32 floor/fused per version, per round
    for key in sorted(bench_points(base_rounds[rounds[0]])):
        n, k, m, scale = key
        line = f"{f'{n}x{k}':>10} {m:>3} {scale:>5} "
        line += " ".join(f"{bench_points(base_rounds[r])[key]['fused_us']:>12.2f}" for r in rounds)
        for v in others:
            cells = []
            for r in rounds:
                point = bench_points(runs[v][r]).get(key) if r in runs[v] else None
                if point is None:
                    cells.append(f"{'-':>12}")
                    continue
                ratio = point["fused_us"] / bench_points(base_rounds[r])[key]["fused_us"]
                ratios[v].setdefault((scale, "M<=4" if m <= 4 else "M=8-16" if m <= 16 else "M=32"), []).append(ratio)
                cells.append(f"{ratio:>12.3f}")
            line += " " + " ".join(cells)
        print(line)
    for v in versions:
        for r in rounds:
            if r in runs[v]:
                rows = [p for p in runs[v][r]["rows"] if p["scale"] == "fp32"]
                floors[v].append(geomean([p["floor_us"] / p["fused_us"] for p in rows]))
    print("geometric mean of floor/fused (fp32), per round: " +
          "; ".join(f"{v} " + " ".join(f"{g:.3f}" for g in floors[v]) for v in versions))
    # The peers do not depend on the build: their ratios say how steady the machine was.
    for v in others:
        for r in rounds:
            if r not in runs[v]:
                continue
            mine, theirs = bench_points(runs[v][r]), bench_points(base_rounds[r])
            peer_ratios = [mine[key]["peers"][name] / theirs[key]["peers"][name]
                           for key in mine if key in theirs
                           for name in mine[key]["peers"] if "scaled_mm" in name
                           and mine[key]["peers"][name] and theirs[key]["peers"].get(name)]
            print(f"round {r}: {v} / {base} of the scaled_mm peer, geometric mean {geomean(peer_ratios):.3f}")
    for v in others:
        print(f"{v} / {base}, geometric mean of the ratios: " +
              "; ".join(f"{scale} {bucket} {geomean(rs):.3f} (min {min(rs):.3f}, max {max(rs):.3f})"
                        for (scale, bucket), rs in sorted(ratios[v].items())))


def report_e2e(res, versions):
    print("decode step (tools/e2e_decode_bench.py): fp8 us / bf16 us of the same run, per round")
    for v in versions:
        runs = load_rounds(res, "e2e", v)
        by_batch = {}
        for r in sorted(runs):
            for row in runs[r]["rows"]:
                by_batch.setdefault(row["batch"], []).append((r, row["fp8_us"], row["bf16_us"]))
        for batch, cells in sorted(by_batch.items()):
            text = ", ".join(f"r{r} {fp8:.1f}/{bf16:.1f} = {fp8 / bf16:.4f}" for r, fp8, bf16 in cells)
            mean = statistics.mean(fp8 / bf16 for _, fp8, bf16 in cells)
            print(f"  {v} batch {batch}: {text}; mean {mean:.4f}")


def report_config_ab(res, kind, versions):
    """tools/config_ab.py per version (kind: ab_none or ab_copy): a table per config it timed (the
    default unless SGL_FP8_AB_CONFIGS named others), each version against the first, config for config."""
    runs = {v: load_rounds(res, kind, v) for v in versions}
    base = versions[0]
    if not runs[base]:
        return
    rounds = sorted(runs[base])
    for config in runs[base][rounds[0]].get("configs", ["default"]):
        print(f"{kind} (tools/config_ab.py --after {kind[3:]}), config {config}: us of {base}; then each version's "
              f"time / {base}'s in the same round")
        points = lambda result: {(r["N"], r["K"], r["M"], r["scale"]): r["us"].get(config) for r in result["rows"]}
        for key in sorted(points(runs[base][rounds[0]])):
            n, k, m, scale = key
            line = f"{f'{n}x{k}':>10} {m:>3} {scale:>5} "
            line += " ".join(f"{points(runs[base][r]).get(key) or float('nan'):>10.2f}" for r in rounds)
            for v in versions[1:]:
                for r in rounds:
                    mine, theirs = points(runs[v].get(r, {"rows": []})).get(key), points(runs[base][r]).get(key)
                    line += f" {mine / theirs:>10.3f}" if mine and theirs else f" {'-':>10}"
            print(line)


def report_e2e_profile(res, versions):
    """tools/e2e_kernel_profile.py per version: the step's marginal time by kind of kernel, and
    each sgl_fp8 GEMM's marginal time (position in the step), averaged over the rounds."""
    runs = {v: load_rounds(res, "e2e_profile", v) for v in versions}
    if not runs[versions[0]]:
        return
    print("decode step profiled (tools/e2e_kernel_profile.py): marginal us, mean over rounds")
    mean = lambda xs: sum(xs) / len(xs)
    for batch_index, row in enumerate(next(iter(runs[versions[0]].values()))["rows"]):
        if row.get("model", "fp8") != "fp8":
            continue
        batch = row["batch"]
        rows = {v: [r["rows"][batch_index] for r in runs[v].values()] for v in versions}
        kinds = sorted({k for v in versions for r in rows[v] for k in r["by_kind"]})
        print(f"  batch {batch}: step " + ", ".join(f"{v} {mean([r['step_us'] for r in rows[v]]):.1f}" for v in versions))
        for kind in kinds:
            print(f"    {kind:<16} " + ", ".join(f"{v} {mean([r['by_kind'].get(kind, 0.0) for r in rows[v]]):8.2f}"
                                             for v in versions))
        for i, k in enumerate(row["kernels"]):
            if "sgl_fp8" not in k["name"] or "gemm" not in k["name"]:
                continue
            cells = []
            for v in versions:
                marg = [r["kernels"][i]["marginal_us"] for r in rows[v] if i < len(r["kernels"])]
                gap = [r["kernels"][i]["gap_us"] for r in rows[v] if i < len(r["kernels"])]
                cells.append(f"{v} {mean(marg):6.2f} (gap {mean(gap):6.2f})" if marg else f"{v} -")
            print(f"    {i:>4} {k['name'].split('(')[0][-34:]:<34} " + ", ".join(cells))


def report_sequences(res, versions):
    """tools/sequence_profile.py per version: each GEMM's duration, as a ratio to the first
    version's in the same round."""
    runs = {v: load_rounds(res, "seq", v) for v in versions}
    base = versions[0]
    if not runs[base]:
        return
    rounds = sorted(runs[base])
    print(f"sequences (tools/sequence_profile.py): GEMM duration us of {base} per round; then each version's / {base}'s")
    for s, seq in enumerate(runs[base][rounds[0]]["results"]):
        print(f"  {seq['sequence']}")
        for p, pos in enumerate(seq["positions"]):
            if not pos["item"].startswith("gemm"):
                continue
            line = f"    {pos['item']:<22} " + " ".join(
                f"{runs[base][r]['results'][s]['positions'][p]['dur_us']:>7.2f}" for r in rounds)
            for v in versions[1:]:
                for r in rounds:
                    if r in runs[v]:
                        mine = runs[v][r]["results"][s]["positions"][p]["dur_us"]
                        line += f" {mine / runs[base][r]['results'][s]['positions'][p]['dur_us']:>7.3f}"
            print(line)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results")
    parser.add_argument("base")
    parser.add_argument("others", nargs="*")
    args = parser.parse_args()
    report_bench(args.results, args.base, args.others)
    for kind in ("ab_none", "ab_copy"):
        report_config_ab(args.results, kind, [args.base] + args.others)
    report_e2e(args.results, [args.base] + args.others)
    report_e2e_profile(args.results, [args.base] + args.others)
    report_sequences(args.results, [args.base] + args.others)


if __name__ == "__main__":
    main()
