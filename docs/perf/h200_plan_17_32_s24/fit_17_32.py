"""The K split the wgmma ring kernel's plan picks at 17-32 tokens, against the best one measured.

call2_k_split_17_32/ks_{none,copy}.json: tools/config_ab.py with the splits 2, 4 and 8 forced, back
to back and after a copy kernel (a forced split the 4-warpgroup kernel cannot plan runs another
kernel, 1.3-2.4x slower). For each order, the summed excess of the chosen split's time over the
fastest split's, over the 50 points.

    python fit_17_32.py PLAN_TABLE_BINARY   # tools/sm90_plan_table.cpp, built against a tree
    python fit_17_32.py --grid PARTS.txt    # parts_17_32.cpp's output: search the 17-32 cost terms

--grid evaluates the cost of sm90_gemm_plan.h at 17-32 tokens with its terms varied: the
activation byte weight a, the cluster cost's extra factor d where the candidate's inbox lies over
its activations, the window-read weight w, a per-tile epilogue cost e (x 2048 bytes) and the
short K slice's cost factor s. Session 24 landed a = 3, d = 1, w = 0.3, e = 0, s = 2 (before: a = 2,
the cluster's cost twice for every candidate, w = 0, e = 0, s = 1).
"""
import itertools
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SHAPES = "5120x4096,4608x4096,4096x2048,4096x4096,2560x4096,1536x4096,1024x4096,2112x7168,8192x1024,7168x2048"
MS = "17,20,24,28,32"
CLUSTER = [0, 0, 0, 80 * 1024, 48 * 1024, 64 * 1024, 64 * 1024, 64 * 1024, 64 * 1024]  # kWgmmaClusterCost


def load_times():
    times = {}
    for order in ("none", "copy"):
        with open(os.path.join(HERE, "call2_k_split_17_32", f"ks_{order}.json")) as f:
            for r in json.load(f)["rows"]:
                forced = {int(name[1]): us for name, us in r["us"].items() if name != "default"}
                times.setdefault((r["N"], r["K"], r["M"]), {})[order] = forced
    return times


def excess(choice, times, verbose=True):
    total, unmeasured = {"none": 0.0, "copy": 0.0}, 0
    for key, split in sorted(choice.items()):
        for order in total:
            t = times[key][order]
            if split not in t:
                unmeasured += 1
                if verbose:
                    print(f"  {key[0]}x{key[1]} M={key[2]} {order}: split {split} not measured")
                continue
            e = t[split] / min(t.values()) - 1
            total[order] += e
            if verbose and e > 0.02:
                print(f"  {key[0]}x{key[1]} M={key[2]} {order}: split {split} +{e:.3f} (best {min(t, key=t.get)})")
    return total, unmeasured


def plan_choice(binary):
    out = subprocess.run([binary, SHAPES, MS], capture_output=True, text=True, check=True).stdout
    choice = {}
    for line in out.splitlines():
        m = re.match(r"(\d+)x(\d+) M=(\d+): k_split (\d+)", line)
        if m:
            choice[(int(m[1]), int(m[2]), int(m[3]))] = int(m[4])
    return choice


def grid(parts_path, times):
    parts = {}
    with open(parts_path) as f:
        for line in f:
            n, k, m, split, _, tiles, blocks, over = map(int, line.split())
            parts.setdefault((n, k, m), {})[split] = (tiles, blocks, over)

    def cost(tiles, blocks, over, split, m, a, d, w, e, s):
        read = -(-tiles // 4) * 4
        c = tiles * blocks * 2048 + w * (read - tiles) * blocks * 2048 + a * m * blocks * 256
        c += CLUSTER[split] * (1 + d * over) + e * tiles * 2048
        if split > 4 and blocks < 8:
            c += s * 8192 * (8 - blocks)
        return c

    rows = []
    for p in itertools.product([2, 3, 4, 5], [0, 0.5, 1, 1.5, 2], [0, 0.3, 0.6], [0, 2, 4], [1, 1.5, 2, 3]):
        choice = {key: min(opts, key=lambda k: cost(*opts[k], k, key[2], *p)) for key, opts in parts.items()}
        total, unmeasured = excess(choice, times, verbose=False)
        rows.append((max(total.values()) + 0.05 * unmeasured, total["none"], total["copy"], unmeasured, p))
    rows.sort()
    print("worse order's summed excess (+0.05 per unmeasured pick), back to back, after a copy, unmeasured, "
          "(a, d, w, e, s)")
    for r in rows[:12]:
        print(f"  {r[0]:.3f}  {r[1]:.3f}  {r[2]:.3f}  {r[3]}  {r[4]}")


def main():
    times = load_times()
    if sys.argv[1] == "--grid":
        grid(sys.argv[2], times)
        return
    total, unmeasured = excess(plan_choice(sys.argv[1]), times)
    print(f"summed excess: back to back {total['none']:.3f}, after a copy kernel {total['copy']:.3f}; "
          f"unmeasured picks {unmeasured}")


if __name__ == "__main__":
    main()
