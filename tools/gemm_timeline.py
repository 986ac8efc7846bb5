"""Where the sm_90 GEMM's time goes across back-to-back launches: a per-CTA timeline.

With diagnostic flag 16 (kTimeline, kernels/sm90/sm90_block_scaled_gemm.cuh) thread 0 of every CTA
writes the global nanosecond timer at its phase boundaries into the output tensor (which then holds
no GEMM result):

    entry -> issued (first weight units requested, next launch allowed)
          -> prev_done (griddepcontrol.wait returned: the previous kernel has finished)
          -> act_ready (activations quantized into shared memory, CTA barrier)
          -> stream_done (every warp streamed its units, CTA barrier)
          -> exchanged (partials pushed through the cluster, cluster barrier)
          -> end

The graph holds one launch per rotated weight copy (cold weights, as `bench` times them); the
records of launches 1.. (each has a predecessor) are summarised relative to the previous
launch's last CTA end, so the table shows how much of each launch overlaps the previous one and
which phase the critical path sits in. Run on the GPU machine:

    python tools/gemm_timeline.py --out DIR [--cases 5120x4096:1,8,32] [--variants default,stream_alone] [--after copy]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SLOTS = ["entry", "issued", "prev_done", "act_ready", "stream_done", "exchanged", "end"]
TIMELINE_FLAG = 16
# [k_split, warps, tiles_per_block, blocks_per_sm, flags, smem_stages] of the private configured op
VARIANTS = {
    "default": [0, 0, 0, 0, TIMELINE_FLAG],
    "register": [0, 0, 0, 0, TIMELINE_FLAG | 32],  # the register kernel where the ring kernel applies
    "register_spread": [0, 0, 0, 0, TIMELINE_FLAG | 32 | 64],
    "register_stream_alone": [0, 0, 0, 0, TIMELINE_FLAG | 32 | 7],
    "no_staging": [0, 0, 0, 0, TIMELINE_FLAG | 8],
    "stream_alone": [0, 0, 0, 0, TIMELINE_FLAG | 7],  # no MMA, no prologue (epilogue still stamped)
    "no_prologue": [0, 0, 0, 0, TIMELINE_FLAG | 2],
    "no_weight_decode": [0, 0, 0, 0, TIMELINE_FLAG | 128],  # ring kernel: MMAs on the raw e4m3 bytes
    "no_prologue_no_decode": [0, 0, 0, 0, TIMELINE_FLAG | 2 | 128],
    "mma_sync_ring": [0, 0, 0, 0, TIMELINE_FLAG | 256],  # the mma.sync ring kernel where the wgmma one applies
    "co_resident": [0, 0, 0, 0, TIMELINE_FLAG | 512],  # the wgmma ring kernel's 2-warpgroup, refilled-ring variant
    "co_resident_stream_alone": [0, 0, 0, 0, TIMELINE_FLAG | 512 | 7],
    # wgmma ring kernel: K blocks per tensor copy (the plan's default is about 32 KB per copy)
    "chunk_1": [0, 0, 0, 0, TIMELINE_FLAG, 1],
    "chunk_2": [0, 0, 0, 0, TIMELINE_FLAG, 2],
    "chunk_8": [0, 0, 0, 0, TIMELINE_FLAG, 8],
    "chunk_16": [0, 0, 0, 0, TIMELINE_FLAG, 16],
    "stream_alone_chunk_1": [0, 0, 0, 0, TIMELINE_FLAG | 7, 1],
    # wgmma ring kernel: only the first E copies before the activations are read
    "early_1": [0, 0, 1, 0, TIMELINE_FLAG],
    "early_2": [0, 0, 2, 0, TIMELINE_FLAG],
    "early_3": [0, 0, 3, 0, TIMELINE_FLAG],
    "early_all": [0, 0, 99, 0, TIMELINE_FLAG],
    "stream_alone_chunk_16": [0, 0, 0, 0, TIMELINE_FLAG | 7, 16],
    "k_split_1": [1, 0, 0, 0, TIMELINE_FLAG],
    "k_split_2": [2, 0, 0, 0, TIMELINE_FLAG],
    "k_split_4": [4, 0, 0, 0, TIMELINE_FLAG],
    "k_split_1_all_early": [1, 0, 99, 0, TIMELINE_FLAG],  # every copy at entry
    "k_split_1_co_resident": [1, 0, 0, 0, TIMELINE_FLAG | 512],  # 2 warpgroups, refilled where the share exceeds 113 KB
    # no cluster: one CTA per 4 tiles on fewer SMs than the GPU has, each with the whole shared
    # memory (the co-resident instance, refilled where its share exceeds the ring)
    "k_split_1_whole_smem": [1, 0, 0, 0, TIMELINE_FLAG | 512 | 1024],
    "k_split_1_whole_smem_stream_alone": [1, 0, 0, 0, TIMELINE_FLAG | 512 | 1024 | 7],
}


def parse_cases(text):
    cases = []
    for item in text.split(";"):
        shape, ms = item.split(":")
        n, k = (int(v) for v in shape.lower().split("x"))
        cases += [(n, k, int(m)) for m in ms.split(",")]
    return cases


def run_graph(x, weights, config, replays, shuffled=False, before=lambda: None):
    """Replay a graph of one configured launch per weight copy, each after before() (--after
    copy: a torch copy kernel that writes x, as a norm writes a projection's input in a decode
    step; it does not launch its dependents early, so the GEMM's CTAs enter once it has ended);
    return its outputs after a final replay into zeroed outputs (records a CTA did not write stay
    zero)."""
    outs = [None] * len(weights)

    def call(i):
        w, s = weights[i]
        before()
        outs[i] = torch.ops.sgl_fp8._smallm_gemm_configured(x, w, s, shuffled, None, config)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for i in range(len(weights)):
            call(i)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(len(weights)):
            call(i)
    for _ in range(replays):
        graph.replay()
    torch.cuda.synchronize()
    for o in outs:
        o.zero_()
    graph.replay()  # a replay right after the previous ones would also do; this one follows the zeroing
    torch.cuda.synchronize()
    records = [o.view(-1).view(torch.int64)[: (o.numel() * 2 // 64) * 8].view(-1, 8).cpu() for o in outs]
    del graph
    return records


def summarise(records):
    """Per-launch phase figures in microseconds, medians over launches 1.. (each follows another)."""
    launches = []
    for rec in records:
        rows = [r for r in rec.tolist() if r[0] != 0]
        for r in rows:  # a phase a diagnostic variant skips (e.g. the exchange) takes no time
            for j in range(1, 7):
                if r[j] == 0:
                    r[j] = r[j - 1]
        launches.append(rows)
    per_launch = []
    ticks = set()
    for i in range(1, len(launches)):
        prev, cur = launches[i - 1], launches[i]
        if not prev or not cur:
            continue
        prev_end = max(r[6] for r in prev)
        entry = min(r[0] for r in cur)
        end = max(r[6] for r in cur)

        def med(a, b):
            return statistics.median((r[b] - r[a]) / 1e3 for r in cur)

        def worst(a, b):
            return max((r[b] - r[a]) / 1e3 for r in cur)

        for r in cur:
            for j in range(1, 7):
                if r[j] != r[j - 1]:
                    ticks.add(abs(r[j] - r[j - 1]))
        per_launch.append({
            "ctas": len(cur),
            "sms": len({r[7] & 0xFF for r in cur}),
            "period": (end - prev_end) / 1e3,  # steady-state time per launch
            "first_entry_after_prev_end": (entry - prev_end) / 1e3,  # negative: started during the previous launch
            "last_entry_after_prev_end": (max(r[0] for r in cur) - prev_end) / 1e3,
            "wait_release_after_prev_end": statistics.median((r[2] - prev_end) / 1e3 for r in cur),
            "prologue_med": med(2, 3), "prologue_max": worst(2, 3),
            "stream_med": med(3, 4), "stream_max": worst(3, 4),
            "exchange_med": med(4, 5), "exchange_max": worst(4, 5),
            "finish_med": med(5, 6),
            "end_skew": (end - min(r[6] for r in cur)) / 1e3,
            # wgmma ring kernel only (0 elsewhere): warpgroup 0's block loop, and the share of
            # the CTA's chunks already landed when its activations were ready
            "wg0_loop_med": statistics.median(((r[7] >> 32) & 0xFFFF) / 1e3 for r in cur),
            "wg0_loop_mhz": statistics.median(16e3 * ((r[7] >> 48) & 0xFFFF) / max(1, (r[7] >> 32) & 0xFFFF)
                                              for r in cur),
            "landed_at_ready_med": statistics.median(
                ((r[7] >> 16) & 0xFF) / max(1, (r[7] >> 24) & 0xFF) for r in cur),
        })
    if not per_launch:
        return {}
    keys = per_launch[0].keys()
    summary = {k: statistics.median(p[k] for p in per_launch) for k in keys}
    summary["launches"] = len(per_launch)
    summary["timer_tick_ns_min"] = min(ticks) if ticks else None
    return summary


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--cases", default="5120x4096:1,8,32")
    parser.add_argument("--variants", default="default,stream_alone,no_prologue")
    parser.add_argument("--copies", type=int, default=24)
    parser.add_argument("--replays", type=int, default=5)
    parser.add_argument("--shuffled", action="store_true", help="read the weights as AITER-shuffled (random bytes either way: timing only)")
    parser.add_argument("--e8m0", action="store_true", help="e8m0 block scales (SPEC §3.2 activations) instead of fp32")
    parser.add_argument("--after", choices=["none", "copy"], default="none",
                        help="copy: a torch copy kernel writes the activations before every GEMM (a decode step's "
                             "order); the times then include it, the phases are the GEMM's")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to measure")
        return 0
    import sglang_fp8ext  # noqa: F401  (registers the ops)
    from sglang_fp8ext.bench import device_uuid, git_commit, make_weight, time_in_graph

    device = torch.device("cuda")
    gen = torch.Generator(device=device).manual_seed(0)
    result = {"device": torch.cuda.get_device_name(), "device_uuid": device_uuid(), "torch": torch.__version__,
              "git": git_commit(), "shuffled": args.shuffled, "scale": "e8m0" if args.e8m0 else "fp32",
              "copies": args.copies, "after": args.after, "rows": []}
    weights_for = {}
    for n, k, m in parse_cases(args.cases):
        if (n, k) not in weights_for:
            weights_for.clear()
            torch.cuda.empty_cache()
            weights_for[(n, k)] = [make_weight(n, k, args.e8m0, device, gen)[:2] for _ in range(args.copies)]
        weights = weights_for[(n, k)]
        x = torch.randn(m, k, generator=gen, device=device).to(torch.bfloat16)
        x_source = x.clone()

        def before():  # --after copy: the kernel each GEMM follows
            if args.after == "copy":
                x.copy_(x_source)

        plain_us = time_in_graph([lambda w=w, s=s: (before(), torch.ops.sgl_fp8.smallm_gemm(x, w, s, args.shuffled, None))
                                  for w, s in weights], 20)
        for name in args.variants.split(","):
            config = VARIANTS[name]
            try:
                torch.ops.sgl_fp8._smallm_gemm_configured(x, weights[0][0], weights[0][1], args.shuffled, None, config)
            except RuntimeError as e:  # a forced configuration may not fit this shape
                print(f"N={n} K={k} M={m} {name}: {str(e).splitlines()[0][:160]}", flush=True)
                continue
            timed_us = time_in_graph([lambda w=w, s=s: (before(), torch.ops.sgl_fp8._smallm_gemm_configured(
                x, w, s, args.shuffled, None, config)) for w, s in weights], 20)
            summary = summarise(run_graph(x, weights, config, args.replays, args.shuffled, before))
            row = {"N": n, "K": k, "M": m, "variant": name, "config": config, "smallm_gemm_us": plain_us,
                   "timeline_run_us": timed_us, **summary}
            result["rows"].append(row)
            print(f"N={n} K={k} M={m} {name:>13}: smallm_gemm {plain_us:.2f} us, this variant {timed_us:.2f} us | "
                  f"period {summary.get('period', float('nan')):.2f}  first entry {summary.get('first_entry_after_prev_end', float('nan')):+.2f} "
                  f"last entry {summary.get('last_entry_after_prev_end', float('nan')):+.2f}  "
                  f"wait released {summary.get('wait_release_after_prev_end', float('nan')):+.2f}  "
                  f"prologue {summary.get('prologue_med', float('nan')):.2f}/{summary.get('prologue_max', float('nan')):.2f}  "
                  f"stream {summary.get('stream_med', float('nan')):.2f}/{summary.get('stream_max', float('nan')):.2f}  "
                  f"exchange {summary.get('exchange_med', float('nan')):.2f}/{summary.get('exchange_max', float('nan')):.2f}  "
                  f"finish {summary.get('finish_med', float('nan')):.2f}  ctas {summary.get('ctas')} on {summary.get('sms')} SMs  "
                  f"tick {summary.get('timer_tick_ns_min')} ns  wg0 loop {summary.get('wg0_loop_med', 0):.2f}  "
                  f"landed at ready {summary.get('landed_at_ready_med', 0):.2f}  SM clock {summary.get('wg0_loop_mhz', 0):.0f} MHz", flush=True)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "gemm_timeline.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
