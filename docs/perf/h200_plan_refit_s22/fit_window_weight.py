"""How session 22 chose kWindowReadWeight and kWgmmaClusterCost[3] (kernels/cuda/sm90_gemm_plan.h).

Reads call2_d2920cd/*.txt (tools/config_ab.py, each forced K split twice, after a copy kernel and
back to back) and, for each candidate pair of weights, which split the wgmma plan's cost would
pick at every measured point, and how much slower that split was than the best one measured there.
The plans (tiles a CTA, K blocks a CTA, tiles the windows read beyond the CTA's own) are those the
H200 launched (read from the grids in the logs, config_ab_logs.py); the cost is plan_wgmma_ring_gemm's:
  (tiles + W * extra) * blocks * 2048 + 2 * tokens * blocks * 256 + cluster_cost[S].

    python3 docs/perf/h200_plan_refit_s22/fit_window_weight.py
"""
import os

from config_ab_logs import parse

HERE = os.path.dirname(os.path.abspath(__file__))
LOGS = {"big": [2, 3, 4, 2, 3, 4], "ds": [3, 4, 3, 4], "mid": [2, 4, 2, 4]}


def load(order):
    """Each point's mean time per K split, and the plans, of the splits that ran the wgmma kernel
    (5120x4096's split of 3 ran the register kernel)."""
    data, plans = {}, {}
    for stem, splits in LOGS.items():
        parse(os.path.join(HERE, "call2_d2920cd", f"{stem}_{order}.txt"), splits, data, plans)
    return {p: {s: t for s, t in times.items() if s in plans[p[:2]]} for p, times in data.items()}, plans


def choose(plans, n, k, tokens, weight, cluster_cost, weight_from=1):
    w = weight if tokens >= weight_from else 0.0
    cost = {s: (t + w * x) * b * 2048 + 2 * tokens * b * 256 + cluster_cost[s] for s, (t, b, x) in plans[(n, k)].items()}
    return min(cost, key=cost.get)


def excess(data, pick):
    return {key: times[pick(*key)] / min(times.values()) - 1 for key, times in data.items()}


def main():
    (copy, plans), (none, _) = load("copy"), load("none")
    data = {"copy": copy, "none": none}
    models = {
        "session 21 (0.2 from 9 tokens, clusters of 3 at 32 KB)": (0.2, {2: 0, 3: 32768, 4: 49152}, 9),
        "session 22 (0.6 from 1 token, clusters of 3 at 80 KB)": (0.6, {2: 0, 3: 80 * 1024, 4: 49152}, 1),
    }
    for name, (w, cc, start) in models.items():
        ex = {o: excess(data[o], lambda n, k, m: choose(plans, n, k, m, w, cc, start)) for o in data}
        print(f"{name}: summed excess {sum(ex['copy'].values()):.3f} after a copy kernel, "
              f"{sum(ex['none'].values()):.3f} back to back, "
              f"{sum(max(ex['copy'][k], ex['none'][k]) for k in ex['copy']):.3f} of the worse order")
        for key in sorted(data["copy"]):
            print(f"   {key[0]}x{key[1]} M={key[2]:2d}: split {choose(plans, *key, w, cc, start)}"
                  f"  +{ex['copy'][key]:.3f} / +{ex['none'][key]:.3f}")
    best = min(((sum(max(a, b) for a, b in zip(*(excess(data[o], lambda n, k, m: choose(plans, n, k, m, w / 20, {2: 0, 3: c * 1024, 4: 49152})).values() for o in ("copy", "none")))), w / 20, c)
                for w in range(25) for c in range(32, 129, 8)))
    print(f"grid (W 0..1.2, clusters of 3 32..128 KB): least summed max(copy, back to back) excess {best[0]:.3f} at W={best[1]:.2f}, {best[2]} KB")


if __name__ == "__main__":
    main()
