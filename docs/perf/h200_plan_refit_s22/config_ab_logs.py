"""Reads tools/config_ab.py --kernels logs for the session 22 fits (fit_window_weight.py,
fit_short_slice.py): each point's mean time per config, and each forced K split's plan as the
H200 launched it (from its grid), for the splits that ran the wgmma ring kernel."""
import re


def parse(path, configs, data, plans):
    """configs: the log's columns in order ("default" or a k_split). Fills data[(N, K, M)] =
    {k_split: mean us} (forced splits only) and plans[(N, K)][k_split] = (tiles a CTA, K blocks a
    CTA, tiles its 64-row windows read beyond its own)."""
    point = None
    for line in open(path):
        m = re.match(r"^\s+(\d+)\s+(\d+)\s+fp32\s+(\d+)\s+\|(.*)$", line)
        if m:
            point = tuple(int(v) for v in m.groups()[:3])
            times = {}
            for c, v in zip(configs, re.findall(r"([\d.]+) \(", m.group(4))):
                times.setdefault(c, []).append(float(v))
            data[point] = {c: sum(v) / len(v) for c, v in times.items() if c != "default"}
            continue
        k = re.match(r"^\s+\[(\d),0,0,0,0\]:.*?wgmma_ring_gemm_sm90<.*grid \[(\d+), (\d+), 1\]", line)
        if k and point:
            n, kk, _ = point
            s, groups = int(k.group(2)), int(k.group(3))
            tiles, blocks = -(-(n // 16) // groups), -(-(kk // 128) // s)
            plans.setdefault((n, kk), {})[s] = (tiles, blocks, -(-tiles // 4) * 4 - tiles)
