"""``python -m sglang_fp8ext tune``: measure the dispatch table of the GPU present.

For each shape, scale format (fp32, e8m0) and M, every candidate that can run the call is first
checked against the unfused path's output (which is itself checked against the float64 SPEC §3.4
reference) with the SPEC tolerance, 4e-3 relative per row, and then timed with bench.py's
method: CUDA-graph replay over rotated cold weight copies, median of the replays, each call after
a copy kernel that writes its activations (``--after copy``, the default; see below). The fastest
candidate that passed becomes the table entry; a candidate that failed the check or did not run
is recorded under "rejected" and never wins. The table is written as
``<out>/<dispatch.table_filename(device name)>`` and read back through the loader that
fp8_block_linear uses.

Candidates: the fused kernel with its own plan; the fused kernel with each configuration of
``CONFIGS`` (``kernel_config.KernelConfig``: a forced K split of 1, 2, 4 or 8 — above K/128
skipped —, tensor copies of one and of two K blocks, paired activations on and off, the general
engine, the register-fed engine); a configuration the kernels cannot plan for the call is rejected
with the launcher's error; quant + cuBLASLt scaled_mm where eligible
(``dispatch.scaled_mm_eligible``); quant + scaled_gemm (unfused). Weights are plain (not
AITER-shuffled); a shuffled weight whose entry says scaled_mm falls back to the heuristic at run
time.

Order (``--after``): ``copy`` (default) times each call behind a torch copy kernel that writes the
call's activations, as in a decode step, where every projection follows the kernel that produced
its input; every candidate gets the same copy, so the times are the pair's and compare fairly.
``none`` repeats the call back to back (``bench``'s back-to-back order). Back to back, a launch may start
beside its predecessor of the same kind (programmatic dependent launch), and on the H200 the
2-warpgroup variants of the wgmma kernel (since removed) won there on 4096x2048, 8192x1024 and
4096x1024 at M <= 8 but were slower than the 4-warpgroup kernel after a copy kernel
(docs/design/sm90.md): a table tuned back to back picked them for a decode step they slow down.

The table records the build it was measured with (``TABLE_FORMAT``, ``KERNEL_INTERFACE_VERSION``,
device, torch and CUDA versions); a build of another kernel interface ignores it with a warning.
"""

from __future__ import annotations

import json
import math
import os
import sys
from typing import List, NamedTuple, Optional

import torch

from . import dispatch, linear, reference
from .kernel_config import KERNEL_INTERFACE_VERSION, Engine, KernelConfig, Toggle
from .bench import device_uuid, git_commit, make_weight, parse_shapes, progress, time_in_graph

DEFAULT_MS = (1, 2, 4, 8, 16, 32)
K_SPLITS = (1, 2, 4, 8)
# Each configuration tune times besides the kernel's own plan (where it cannot run a call, the
# launcher's error rejects it): forced K splits, one and two K blocks per tensor copy (one block wins
# some 14-16-token points and loses elsewhere, so it is a table's choice, not the plan's:
# docs/design/sm90.md), paired activations forced on and off, and the two engines the plan does not
# take by itself at these sizes (the register-fed kernel wins some 1-2-token points after a copy kernel).
CONFIGS = tuple(KernelConfig(k_split=ks) for ks in K_SPLITS) + (
    KernelConfig(copy_blocks=1),
    KernelConfig(copy_blocks=2),
    KernelConfig(pair_activations=Toggle.ON),
    KernelConfig(pair_activations=Toggle.OFF),
    KernelConfig(engine=Engine.GENERAL),
    KernelConfig(engine=Engine.REGISTER_FED),
)
TOLERANCE = 4e-3  # SPEC §3.4, relative per row
MIN_COPIES = 24
MIN_REPLAYS = 20


class Candidate(NamedTuple):
    name: str  # "fused", KernelConfig.label() of a configuration, or the path's name
    path: str
    config: Optional[KernelConfig]  # fused only; None: the kernel's own plan

    @property
    def op_config(self) -> Optional[tuple]:
        """The config as linear.run_path takes it."""
        return None if self.config is None else tuple(self.config.op_args())


def candidates(dev: dispatch.DeviceInfo, n: int, k: int, e8m0: bool) -> List[Candidate]:
    out = [Candidate("fused", "fused", None)]
    for config in CONFIGS:
        if config.k_split > k // 128:  # cannot split K into more parts than it has 128-wide blocks
            continue
        out.append(Candidate(config.label(), "fused", config))
    if dispatch.scaled_mm_eligible(dev, n, k, e8m0=e8m0, shuffled=False):
        out.append(Candidate("scaled_mm", "scaled_mm", None))
    out.append(Candidate("unfused", "unfused", None))
    return out


def heuristic_candidate(dev: dispatch.DeviceInfo, m: int, n: int, k: int, e8m0: bool) -> str:
    """Name of the candidate the heuristic would run (the fused kernel's own plan for "fused")."""
    ok = dispatch.scaled_mm_eligible(dev, n, k, e8m0=e8m0, shuffled=False)
    return dispatch.heuristic(dev, m, n=n, k=k, e8m0=e8m0, shuffled=False, scaled_mm_ok=ok)[0]


def check_rows(out: torch.Tensor, ref: torch.Tensor, against: str) -> Optional[str]:
    """None if every row is within TOLERANCE of ref, else why not."""
    err = reference.relative_row_errors(out, ref).cpu()
    bad = ~(err <= TOLERANCE)  # NaN counts as bad
    if not bad.any():
        return None
    i = int(torch.nonzero(bad)[0])
    return f"row {i}: relative error {float(err[i]):.3e} vs {against} (tolerance {TOLERANCE:g}), {int(bad.sum())} bad rows"


def activations(m: int, k: int, generator, device) -> torch.Tensor:
    """Random bf16 activations with a few large channels (as in real decode activations)."""
    x = torch.randn(m, k, generator=generator, device=device)
    cols = torch.randint(0, k, (max(1, k // 256),), generator=generator, device=device)
    x[:, cols] *= 20
    return x.to(torch.bfloat16)


def pick_winner(times: dict, default: str, margin: float) -> str:
    """The fastest candidate, except that the heuristic's own choice (``default``) is kept unless
    another beats it by more than ``margin`` (a fraction): medians of graph replays still move
    by a percent or two, and a table should not flap between runs over noise."""
    best = min(times, key=times.get)
    if default in times and times[best] > times[default] * (1 - margin):
        return default
    return best


AFTER = ("copy", "none")


def tune_point(dev, n, k, m, e8m0, weights, generator, replays, margin, after: str = "copy") -> dict:
    """One table entry: check, time and pick among the candidates for (N, K, scale, M)."""
    device = weights[0][0].device
    x = activations(m, k, generator, device)
    x_source = x.clone()  # what the copy before each timed call (after == "copy") writes into x
    w0, s0, _ = weights[0]
    scale = "e8m0" if e8m0 else "fp32"
    entry = {"N": n, "K": k, "scale": scale, "M": m}
    # the yardstick: the unfused path, itself held to the float64 SPEC reference
    q, xs = reference.per1x128_quant(x, ue8m0=e8m0)
    ref64 = reference.block_scaled_gemm(q, xs, w0, s0, False, None, torch.float64)
    unfused = linear.run_path("unfused", None, x, w0, s0, False, None)
    problem = check_rows(unfused, ref64, "the float64 SPEC reference")
    if problem:
        entry["error"] = f"unfused path fails the SPEC check: {problem}"
        return entry
    times, rejected = {}, {}
    cands = candidates(dev, n, k, e8m0)
    for cand in cands:
        try:
            out = linear.run_path(cand.path, cand.op_config, x, w0, s0, False, None)
            if out.is_cuda:
                torch.cuda.synchronize()  # an asynchronous launch error surfaces here, not in the timing
        except (RuntimeError, ValueError, TypeError) as e:  # e.g. a forced config the kernel cannot plan
            rejected[cand.name] = "did not run: " + str(e).strip().splitlines()[0][:200]
            continue
        problem = check_rows(out, unfused, "the unfused path")
        if problem:
            rejected[cand.name] = "wrong result: " + problem
            continue
        def call(w, s, c=cand):
            if after == "copy":
                x.copy_(x_source)
            return linear.run_path(c.path, c.op_config, x, w, s, False, None)

        try:
            times[cand.name] = time_in_graph([lambda w=w, s=s: call(w, s) for w, s, _ in weights], replays)
        except RuntimeError as e:
            rejected[cand.name] = "could not be timed in a CUDA graph: " + str(e).strip().splitlines()[0][:200]
    if not times:
        entry["error"] = "no candidate could be timed: " + "; ".join(f"{name}: {why}" for name, why in rejected.items())
        return entry
    by_name = {c.name: c for c in cands}
    default = heuristic_candidate(dev, m, n, k, e8m0)
    best = pick_winner(times, default, margin)
    winner = by_name[best]
    entry.update({
        "path": winner.path,
        "config": None if winner.config is None else winner.config.to_json(),
        "us": round(times[best], 3),
        "candidates": {name: round(t, 3) for name, t in times.items()},
        "heuristic": {"path": default, "us": None if default not in times else round(times[default], 3)},
    })
    if rejected:
        entry["rejected"] = rejected
    return entry


def copies_for(n: int, k: int, requested: int, device: torch.device) -> int:
    """Rotated weight copies: at least `requested`, and at least twice the L2 in bytes (cold weights)."""
    l2 = 0
    if device.type == "cuda":
        l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 0
    weight_bytes = n * k + 4 * ((n + 127) // 128) * (k // 128)
    return max(requested, min(256, math.ceil(2 * l2 / weight_bytes)))


def tune(shapes, ms, copies: int, replays: int, margin: float, device: torch.device, after: str = "copy") -> dict:
    """The table (a dict, as written to JSON). ``main`` runs it on the GPU; the tests run its
    bookkeeping on the CPU with a stand-in for the graph timer."""
    if after not in AFTER:
        raise ValueError(f"after must be one of {AFTER}, not {after!r}")
    dev = linear.device_info(device)
    generator = torch.Generator(device=device).manual_seed(0)
    entries, failures = [], []
    total = len(shapes) * 2 * len(ms)
    done = 0
    for n, k in shapes:
        for scale in ("fp32", "e8m0"):
            e8m0 = scale == "e8m0"
            count = copies_for(n, k, copies, device)
            weights = [make_weight(n, k, e8m0, device, generator) for _ in range(count)]
            for m in ms:
                done += 1
                progress(f"[{done}/{total}] N={n} K={k} {scale} M={m} ({len(candidates(dev, n, k, e8m0))} candidates, "
                         f"{count} weight copies)")
                entry = tune_point(dev, n, k, m, e8m0, weights, generator, replays, margin, after)
                if "error" in entry:
                    progress("  FAILED: " + entry["error"])
                    failures.append(entry)
                    continue
                for name, why in entry.get("rejected", {}).items():
                    progress(f"  rejected {name}: {why}")
                progress(f"  -> {entry_label(entry)} {entry['us']:.2f} us")
                entries.append(entry)
            del weights
            if device.type == "cuda":
                torch.cuda.empty_cache()
    return {
        "format": dispatch.TABLE_FORMAT,
        "kernel_interface": KERNEL_INTERFACE_VERSION,
        "device": dev.name,
        "capability": list(dev.capability) if dev.capability else None,
        "device_uuid": device_uuid(device) if device.type == "cuda" else None,
        "torch": torch.__version__,
        "cuda": getattr(torch.version, "cuda", None),
        "hip": getattr(torch.version, "hip", None),
        "git": git_commit(),
        "weight_copies_min": copies,
        "replays": replays,
        "margin": margin,
        "after": after,  # each timed call after a copy kernel ("copy") or back to back ("none")
        "entries": entries,
        "failures": failures,
    }


def entry_label(entry: dict) -> str:
    """An entry's choice as its candidate name, e.g. "scaled_mm" or "fused(k_split=4)"."""
    if entry["path"] != "fused" or not entry.get("config"):
        return entry["path"]
    return KernelConfig.from_json(entry["config"]).label()


def print_table(result: dict) -> None:
    print(f"\n{result['device']}  torch {result['torch']}  git {result['git'][:12]}  "
          f"(median of {result['replays']} graph replays over >= {result['weight_copies_min']} cold weight copies, "
          f"{'each call after a copy kernel' if result.get('after') == 'copy' else 'calls back to back'})")
    header = f"{'N':>5} {'K':>5} {'scale':>5} {'M':>3} | {'chosen':<22} {'us':>7} | {'heuristic':<9} {'us':>7} {'gain':>6} | rejected"
    print(header)
    print("-" * len(header))
    for e in result["entries"]:
        chosen = entry_label(e)
        h = e["heuristic"]
        h_us = "n/a" if h["us"] is None else f"{h['us']:.2f}"
        gain = "" if h["us"] is None else f"{h['us'] / e['us']:.2f}x"
        print(f"{e['N']:>5} {e['K']:>5} {e['scale']:>5} {e['M']:>3} | {chosen:<22} {e['us']:>7.2f} | "
              f"{h['path']:<9} {h_us:>7} {gain:>6} | {len(e.get('rejected', {}))}")
    for f in result["failures"]:
        print(f"FAILED N={f['N']} K={f['K']} {f['scale']} M={f['M']}: {f['error']}")


def refusal() -> Optional[str]:
    """Why tune cannot run here (None if it can)."""
    import sglang_fp8ext  # noqa: PLC0415

    if not torch.cuda.is_available():
        return ("no GPU here (torch.cuda.is_available() is False). tune times the kernels on the GPU it "
                "runs on and writes that GPU's table; run it on the GPU machine. Nothing was written.")
    if sglang_fp8ext.BUILT_BACKEND not in ("cuda", "rocm"):
        return (f"sglang_fp8ext was built for {sglang_fp8ext.BUILT_BACKEND!r}, not for this GPU: rebuild it "
                "against a CUDA/ROCm torch first. Nothing was written.")
    return None


def main(args) -> int:
    why = refusal()
    if why:
        print(f"python -m sglang_fp8ext tune: {why}", file=sys.stderr)
        return 2
    if args.copies < MIN_COPIES or args.replays < MIN_REPLAYS:
        print(f"python -m sglang_fp8ext tune: need --copies >= {MIN_COPIES} and --replays >= {MIN_REPLAYS} "
              "(cold weights, stable medians)", file=sys.stderr)
        return 2
    shapes = parse_shapes(args.shapes) if args.shapes else list(dispatch.SPEC_SHAPES)
    ms = [int(m) for m in args.ms.split(",")] if args.ms else list(DEFAULT_MS)
    out_dir = args.out or dispatch.package_config_dir()
    device_name = torch.cuda.get_device_name()
    progress(f"tuning {len(shapes)} shapes x 2 scale formats x {len(ms)} M on {device_name}; the table goes to "
             f"{os.path.join(out_dir, dispatch.table_filename(device_name))}")
    result = tune(shapes, sorted(set(ms)), args.copies, args.replays, args.margin, torch.device("cuda"), args.after)
    print_table(result)
    kept = merge_existing(result, os.path.join(out_dir, dispatch.table_filename(device_name)))
    path = write_table(result, out_dir)
    print(f"\nwrote {path} ({len(result['entries'])} entries"
          + (f", {kept} of them kept from the previous table for points not tuned now)" if kept else ")"))
    return 1 if result["failures"] else 0


def merge_existing(result: dict, path: str) -> int:
    """Keeps the entries of an existing table of the same device for the points (shape, scale
    format, M) this run did not tune, so that a table can be built or refreshed in several runs
    (other shapes, or only some M buckets); a point tuned now replaces its old entry in place, and
    points new to the table follow in this run's order. Returns how many entries were kept."""
    if not os.path.isfile(path):
        return 0
    try:
        with open(path) as f:
            old = json.load(f)
        meta, _ = dispatch.parse_table(old, path)
    except (ValueError, OSError) as e:
        progress(f"the existing {path} is replaced (unreadable: {e})")
        return 0
    why = dispatch.table_mismatch(meta, result["device"], result.get("cuda"))
    if why:
        progress(f"the existing {path} is replaced ({why})")
        return 0

    def point(e):
        return e["N"], e["K"], e["scale"], e["M"]

    tuned = {point(e): e for e in result["entries"]}
    merged, kept = [], 0
    for e in old["entries"]:
        if point(e) in tuned:
            merged.append(tuned.pop(point(e)))
            continue
        # the top-level torch/git describe this run: kept entries say where they came from
        e.setdefault("torch", old.get("torch"))
        e.setdefault("git", old.get("git"))
        e.setdefault("after", old.get("after", "none"))  # tables without "after" were timed back to back
        merged.append(e)
        kept += 1
    merged += [e for e in result["entries"] if point(e) in tuned]
    result["entries"] = merged
    return kept


def write_table(result: dict, out_dir: str) -> str:
    """Writes ``<out_dir>/<table_filename(device)>`` and reads it back through the loader
    fp8_block_linear uses (a table that would not load is an error here, not in the server)."""
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, dispatch.table_filename(result["device"]))
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    dispatch.load_table_file(path)
    dispatch.clear_table_cache()
    return path
