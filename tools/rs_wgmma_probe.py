"""Register-fed wgmma probe (tools/rs_wgmma_probe.cu): how fast does the weight stream when it goes
from 16-byte loads straight into wgmma's A registers, never through shared memory?

Session 19 found that the wgmma ring kernel's MMAs cost 1.1-1.25 us at 1-8 tokens on 5120x4096,
mostly their shared-memory reads of the weight. This probe streams each Qwen3.5 TP4 shape with the
fused kernel's partition (grid k_split x groups, 512 threads, warpgroup wg on K blocks wg, wg + 4,
...), every weight byte loaded once into registers and multiplied by e4m3 activations held in
shared memory (8 or 16 tokens), and times it exactly like `bench` (CUDA-graph replay of one launch
per rotated cold weight copy, median) in the same run as the floor and the fused op. It has no
prologue quantization, no block scales and no cross-CTA exchange: its times are a lower bound for a
kernel built this way, to be compared with the fused op's copies alone (config flag 7) and with the
same loads without the MMAs (mode 2).

Before timing, one launch per shape and token count is checked against a float32 matmul of the
same e4m3 bytes (mode 1 writes every partial sum): a wrong fragment layout or K order fails here.

    python tools/rs_wgmma_probe.py --out DIR [--replays 20]

Writes DIR/rs_wgmma_probe.json and prints one table per shape. Without a CUDA device it says so
and exits 0 (`--compile-only` builds and loads the library, which needs no GPU).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
import tempfile
from typing import List, Optional

import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CU_SOURCE = os.path.join(REPO, "tools", "rs_wgmma_probe.cu")
for path in (REPO, os.path.join(REPO, "tools")):
    if path not in sys.path:
        sys.path.insert(0, path)

from stream_ceiling import (COPIES_ALONE, DEFAULT_L2, compile_shared_library, copies_for, progress,  # noqa: E402
                            time_fused, wait_or_die, write_result)

# The fused kernel's plan for these shapes at M <= 16 (k_split 2; 4-5 tiles a CTA).
PLANS = {(5120, 4096): (66, 2), (4608, 4096): (66, 2), (4096, 2048): (64, 2)}
MODES = {"mma": 0, "check": 1, "loads": 2}


def build_library(out_dir: str) -> str:
    return compile_shared_library(CU_SOURCE, out_dir)


class Probe:
    def __init__(self, so_path: str):
        lib = ctypes.CDLL(so_path)
        p, ll, i = ctypes.c_void_p, ctypes.c_longlong, ctypes.c_int
        lib.rs_probe_launch.argtypes = [p, p, p, ll, ll, i, i, i, i, i, i, p]
        lib.rs_probe_launch.restype = i
        lib.rs_probe_error_string.argtypes = [i]
        lib.rs_probe_error_string.restype = ctypes.c_char_p
        self.lib = lib

    def launch(self, w_ptr, x_ptr, out_ptr, n, k, token_tiles, early, mode) -> None:
        groups, k_split = PLANS[(n, k)]
        stream = torch.cuda.current_stream().cuda_stream
        code = self.lib.rs_probe_launch(w_ptr, x_ptr, out_ptr, n, k, groups, k_split, token_tiles, early,
                                        MODES[mode], 1, stream)
        if code != 0:
            raise RuntimeError(f"rs_probe_launch N={n} K={k}: CUDA error {code} "
                               f"({self.lib.rs_probe_error_string(code).decode()})")


def valid_e4m3_bytes(count: int, generator, device) -> torch.Tensor:
    """Random e4m3 bytes without the two NaN codes (0x7F, 0xFF): never zeros, never NaN."""
    b = torch.randint(0, 256, (count,), dtype=torch.uint8, device=device, generator=generator)
    b[(b & 0x7F) == 0x7F] -= 1
    return b


def check(probe: Probe, w: torch.Tensor, n: int, k: int, token_tiles: int, generator) -> dict:
    """One launch in check mode against a float32 matmul of the same e4m3 values."""
    tp = 8 * token_tiles
    _, k_split = PLANS[(n, k)]
    x = valid_e4m3_bytes(tp * k, generator, w.device)
    out = torch.zeros(k_split * 16, n, tp, dtype=torch.float32, device=w.device)
    probe.launch(w.data_ptr(), x.data_ptr(), out.data_ptr(), n, k, token_tiles, 4, "check")
    wait_or_die(f"check N={n} K={k} token_tiles={token_tiles}")
    wf = w[: n * k].view(torch.float8_e4m3fn).view(n, k).float()
    xf = x.view(torch.float8_e4m3fn).view(tp, k).float()
    got = out.sum(0)
    want = wf @ xf.T
    bound = (wf.abs() @ xf.abs().T) * 2e-3 + 1e-6
    bad = int((got - want).abs().gt(bound).sum())
    return {"N": n, "K": k, "token_tiles": token_tiles, "bad": bad, "cells": n * tp,
            "max_abs_err": float((got - want).abs().max()), "max_ref": float(want.abs().max())}


def fused_times(n, k, copies, replays, device) -> List[dict]:
    """The fused op (default plan) at M = 1, 8, 16 and its copies alone (flag 7) at M = 1."""
    points = [(1, "fused default", None), (8, "fused default", None), (16, "fused default", None),
              (1, "fused copies alone (flag 7)", COPIES_ALONE)]
    return [{"N": n, "K": k, "variant": f"{name} M={m}", "M": m, "us": us, "copies": copies}
            for m, name, _, us in time_fused(n, k, points, copies, replays, device)]


def run(args) -> dict:
    from sglang_fp8ext.bench import QWEN_TP4_SHAPES, git_commit, measure_copy_bandwidth, op_bytes, time_in_graph

    device = torch.device("cuda")
    props = torch.cuda.get_device_properties(0)
    l2_bytes = int(getattr(props, "L2_cache_size", 0) or DEFAULT_L2)
    tmp = tempfile.mkdtemp(prefix="rs_wgmma_probe_")
    probe = Probe(build_library(tmp))
    copy_tbps = measure_copy_bandwidth(device)
    progress(f"copy bandwidth: {copy_tbps:.2f} TB/s")
    generator = torch.Generator(device=device).manual_seed(0)
    variants = [(1, 4, "mma"), (1, 2, "mma"), (1, 4, "loads"), (1, 2, "loads"), (2, 4, "mma"), (2, 2, "mma")]
    rows, checks = [], []
    for n, k in QWEN_TP4_SHAPES:
        nbytes = n * k
        stride = (nbytes + 255) // 256 * 256
        copies = copies_for(nbytes, l2_bytes)
        pool = valid_e4m3_bytes(stride * copies, generator, device)
        for tt in (1, 2):
            c = check(probe, pool, n, k, tt, generator)
            checks.append(c)
            progress(f"check N={n} K={k} token_tiles={tt}: {c['bad']} bad of {c['cells']} "
                     f"(max |err| {c['max_abs_err']:.3g}, max |ref| {c['max_ref']:.3g})")
        x = valid_e4m3_bytes(16 * k, generator, device)
        groups, k_split = PLANS[(n, k)]
        out = torch.zeros(groups * k_split * 16, dtype=torch.float32, device=device)
        floors = {m: op_bytes(n, k, m, False) / copy_tbps / 1e6 for m in (1, 8, 16)}
        weight_floor = nbytes / copy_tbps / 1e6
        for tt, early, mode in variants:
            calls = [lambda i=i, tt=tt, early=early, mode=mode: probe.launch(
                pool.data_ptr() + i * stride, x.data_ptr(), out.data_ptr(), n, k, tt, early, mode)
                for i in range(copies)]
            us = time_in_graph(calls, args.replays)
            name = f"probe {mode} {8 * tt} tokens early {early}/4"
            rows.append({"N": n, "K": k, "variant": name, "token_tiles": tt, "early": early, "mode": mode, "us": us,
                         "copies": copies})
            progress(f"N={n} K={k} {name}: {us:.2f} us (weight floor {weight_floor:.2f})")
        del pool, out, x
        torch.cuda.empty_cache()
        rows.extend(fused_times(n, k, copies, args.replays, device))
        for r in rows:
            if (r["N"], r["K"]) == (n, k):
                r["weight_floor_us"] = weight_floor
                r["floor_us_m1_8_16"] = [floors[1], floors[8], floors[16]]
    return {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "git": git_commit(),
            "copy_TBps": copy_tbps, "replays": args.replays, "checks": checks, "rows": rows}


def print_tables(result: dict) -> None:
    print(f"\n{result['device']}  torch {result['torch']}  git {result['git'][:12]}  copy {result['copy_TBps']:.2f} TB/s")
    for c in result["checks"]:
        print(f"check N={c['N']} K={c['K']} tokens={8 * c['token_tiles']}: {c['bad']} bad of {c['cells']}")
    shapes = []
    for r in result["rows"]:
        if (r["N"], r["K"]) not in shapes:
            shapes.append((r["N"], r["K"]))
    for n, k in shapes:
        sel = [r for r in result["rows"] if (r["N"], r["K"]) == (n, k)]
        f1, f8, f16 = sel[0]["floor_us_m1_8_16"]
        print(f"\nN={n} K={k}: floor M=1/8/16 {f1:.2f}/{f8:.2f}/{f16:.2f} us, weight alone {sel[0]['weight_floor_us']:.2f}")
        for r in sel:
            print(f"  {r['variant']:<44} {r['us']:>7.2f} us  weight floor/us {sel[0]['weight_floor_us'] / r['us']:.3f}")


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help="directory for rs_wgmma_probe.json")
    parser.add_argument("--replays", type=int, default=20)
    parser.add_argument("--compile-only", action="store_true")
    args = parser.parse_args(argv)
    if args.compile_only:
        with tempfile.TemporaryDirectory(prefix="rs_wgmma_probe_") as tmp:
            Probe(build_library(tmp))
        print("rs_wgmma_probe: library built and loaded")
        return 0
    if not torch.cuda.is_available():
        print("rs_wgmma_probe: no CUDA device here; nothing measured, nothing written.")
        return 0
    if not args.out:
        parser.error("--out is required")
    os.makedirs(args.out, exist_ok=True)
    result = run(args)
    print_tables(result)
    write_result(args.out, "rs_wgmma_probe.json", result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
