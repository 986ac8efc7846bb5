"""How session 22 chose kShortSliceBlockCost (kernels/cuda/sm90_gemm_plan.h).

Reads call7_f43fb64/splits_*.txt (forced K splits 2 / 4 / 6 / 8 of 1536x4096, 1024x4096, 2560x4096
and 2112x7168 at 1-16 tokens) and call2_d2920cd/big_*.txt (splits 2 / 3 / 4 of 5120x4096,
4608x4096, 4096x4096), takes each launch's plan from its grid (tiles and K blocks a CTA), and for a
short-slice cost P (bytes for each K block a CTA of a split above 4 lacks below 8) sums over the
points the chosen split's excess over the best measured one, in the worse of the two orders.
The cost is plan_wgmma_ring_gemm's with session 22's window weight (0.6) and cluster costs.

    python3 docs/perf/h200_plan_refit_s22/fit_short_slice.py
"""
import os

from config_ab_logs import parse

HERE = os.path.dirname(os.path.abspath(__file__))
CLUSTER_COST = {1: 0, 2: 0, 3: 80 * 1024, 4: 48 * 1024, 5: 64 * 1024, 6: 64 * 1024, 7: 64 * 1024, 8: 64 * 1024}
WINDOW_WEIGHT = 0.6


def load(order):
    data, plans = {}, {}
    parse(os.path.join(HERE, "call7_f43fb64", f"splits_{order}.txt"), ["default", 2, 4, 6, 8] * 2, data, plans)
    parse(os.path.join(HERE, "call2_d2920cd", f"big_{order}.txt"), [2, 3, 4] * 2, data, plans)
    return data, plans


def choose(plans, n, k, m, splits, p):
    def cost(s):
        tiles, blocks, extra = plans[(n, k)][s]
        short = p * (8 - blocks) if s > 4 and blocks < 8 else 0
        return (tiles + WINDOW_WEIGHT * extra) * blocks * 2048 + 2 * m * blocks * 256 + CLUSTER_COST[s] + short
    return min(splits, key=cost)


def main():
    (copy, plans), (none, _) = load("copy"), load("none")
    for p_kb in (0, 4, 6, 8, 10, 12, 16, 24):
        total = 0.0
        for point, times in copy.items():
            n, k, m = point
            splits = [s for s in times if s in plans.get((n, k), {}) and s in none[point]]
            s = choose(plans, n, k, m, splits, p_kb * 1024)
            total += max(d[point][s] / min(d[point][x] for x in splits) - 1 for d in (copy, none))
        print(f"short-slice cost {p_kb:2d} KB a block: summed worse-order excess {total:.3f} over {len(copy)} points")


if __name__ == "__main__":
    main()
