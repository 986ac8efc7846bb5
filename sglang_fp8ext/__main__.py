"""Command line: ``python -m sglang_fp8ext {bench,tune,check,report}``."""

from __future__ import annotations

import argparse
import os
import sys


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sglang_fp8ext", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    bench = sub.add_parser(
        "bench",
        help="time the fused op against its bandwidth floor and peers on the device present",
        description="Times smallm_gemm on the GPU if one is present (CUDA-graph replay, cold weights, "
        "floor and peers measured in the same run, back to back and in decode order, i.e. each call after a "
        "producer kernel that writes its activations; the fused op also L2-resident; DeepGEMM's fp8_gemm_nt "
        "after our quant as a peer when `import deep_gemm` works; writes JSON and a PNG), else the CPU ops.",
    )
    bench.add_argument("--shapes", help="comma-separated NxK list, or 'spec' for the seven SPEC §6 shapes "
                       "(default: the Qwen3.5 TP4 shapes 5120x4096,4608x4096,4096x2048)")
    bench.add_argument("--ms", help="comma-separated token counts (default: 1,4,8,16,32)")
    bench.add_argument("--copies", type=int, default=24, help="rotated weight copies on the GPU (default 24, >= L2)")
    bench.add_argument("--replays", type=int, default=25, help="graph replays per figure on the GPU (default 25)")
    bench.add_argument("--repeats", type=int, default=5, help="timed calls per figure on the CPU (default 5)")
    bench.add_argument("--out", help="directory for the JSON (and PNG) results (default: .)")
    bench.add_argument("--name", help="file stem of the results (default: bench_gpu / bench_cpu)")
    bench.add_argument("--cpu", action="store_true", help="time the CPU ops even if a GPU is present")
    bench.add_argument("--diagnose", action="store_true",
                       help="GPU (sm_90): also time the fused op under other kernel configurations (the general and "
                       "register-fed engines, forced K splits, PDL off; each with a correct output) to see what each costs")
    bench.add_argument("--no-deepgemm", action="store_true",
                       help="GPU: do not time DeepGEMM (by default it is a peer whenever `import deep_gemm` works)")
    bench.add_argument("--no-decode", action="store_true",
                       help="GPU: time back to back only (no decode-order measurements: about half the run time)")

    tune = sub.add_parser(
        "tune",
        help="measure the dispatch table of the GPU present (which path and kernel instance per shape and M)",
        description="For each shape, scale format (fp32, e8m0) and M, checks every candidate path and fused-kernel "
        "instance against the unfused path (SPEC §3.4 tolerance), times the ones that pass like bench does "
        "(CUDA-graph replay, rotated cold weight copies, median of the replays) and writes the fastest as the "
        "device's table, read by fp8_block_linear (docs/dispatch.md). Needs a GPU.",
    )
    tune.add_argument("--shapes", help="comma-separated NxK list (default: the SPEC §6 shapes "
                      + ", ".join(f"{n}x{k}" for n, k in _spec_shapes()) + ")")
    tune.add_argument("--ms", help="comma-separated token counts, the table's M buckets (default: 1,2,4,8,16,32)")
    tune.add_argument("--out", help="directory for the table (default: the package's configs/ directory); "
                      "an existing table there keeps its entries for the points this run does not tune")
    tune.add_argument("--copies", type=int, default=24,
                      help="rotated weight copies, at least 24 (default 24; raised to twice the L2 for small weights)")
    tune.add_argument("--replays", type=int, default=25, help="graph replays per figure, at least 20 (default 25)")
    tune.add_argument("--margin", type=float, default=0.03,
                      help="a candidate replaces the heuristic's choice only if faster by more than this fraction "
                      "(default 0.03)")
    tune.add_argument("--after", choices=["copy", "none"], default="copy",
                      help="copy (default): time each call after a copy kernel that writes its input, as in a decode "
                      "step; none: back to back, as bench does")

    sub.add_parser(
        "check",
        help="print the build, the switches, the path each SPEC shape takes, and self-test every op",
        description="Prints the backend built, torch, the device, the switches and dispatch table in effect and "
        "the path fp8_block_linear takes for each SPEC §6 shape at M = 1..32, then checks every op on the devices "
        "present against sglang_fp8ext.reference (PASS/FAIL per op; exit code 1 on any failure).",
    )
    report = sub.add_parser(
        "report",
        help="generate a device's benchmarks page from the committed bench and decode-step JSON",
        description="Writes the benchmarks page (environment, method, one table per scale format with the "
        "floor and each peer's speedup, the decode step, the reproducing commands, known limits) from the JSON "
        "of `bench` and of tools/e2e_decode_bench.py. Deterministic: the same JSON gives the same bytes. "
        "docs/perf/h200.json makes docs/benchmarks.md; another docs/perf/<device>.json docs/benchmarks_<device>.md.",
    )
    report.add_argument("--bench", help="bench JSON, <device>.json (default: docs/perf/h200.json of the repository)")
    report.add_argument("--decode", help="decode-step JSON of tools/e2e_decode_bench.py "
                        "(default: <device>_decode_step.json beside the bench JSON, if present)")
    report.add_argument("--out", help="write the page here (default: print it to stdout)")
    report.add_argument("--check", metavar="PATH",
                        help="write nothing; exit 1 with a diff summary if PATH differs from the generated page")
    return parser


def _spec_shapes():
    from .dispatch import SPEC_SHAPES

    return SPEC_SHAPES


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "bench":
        from . import bench

        return bench.main(args)
    if args.command == "tune":
        from . import tune

        return tune.main(args)
    if args.command == "check":
        from . import check

        return check.main(args)
    if args.command == "report":
        from . import report

        return report.main(args)
    raise AssertionError(args.command)


def run(argv=None) -> int:
    """main, except that a reader closing the pipe (``check | head -1``) ends the command quietly."""
    try:
        status = main(argv)
        sys.stdout.flush()
        return status
    except BrokenPipeError:
        # Python's documented recipe: stdout goes to devnull so that the interpreter's own flush
        # at exit raises nothing more; 141 is the status a shell gives a process killed by SIGPIPE.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(run())
