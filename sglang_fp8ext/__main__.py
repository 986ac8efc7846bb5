"""Command line: ``python -m sglang_fp8ext {bench,check}``."""

from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sglang_fp8ext", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    bench = sub.add_parser(
        "bench",
        help="time the fused op against its bandwidth floor and peers on the device present",
        description="Times smallm_gemm on the GPU if one is present (CUDA-graph replay, cold weights, "
        "floor and peers measured in the same run; writes JSON and a PNG), else the CPU ops.",
    )
    bench.add_argument("--shapes", help="comma-separated NxK list (default: the Qwen3.5 TP4 shapes 5120x4096,4608x4096,4096x2048)")
    bench.add_argument("--ms", help="comma-separated token counts (default: 1,4,8,16,32)")
    bench.add_argument("--copies", type=int, default=24, help="rotated weight copies on the GPU (default 24, >= L2)")
    bench.add_argument("--replays", type=int, default=25, help="graph replays per figure on the GPU (default 25)")
    bench.add_argument("--repeats", type=int, default=5, help="timed calls per figure on the CPU (default 5)")
    bench.add_argument("--out", help="directory for the JSON (and PNG) results (default: .)")
    bench.add_argument("--name", help="file stem of the results (default: bench_gpu / bench_cpu)")
    bench.add_argument("--cpu", action="store_true", help="time the CPU ops even if a GPU is present")
    bench.add_argument("--diagnose", action="store_true",
                       help="GPU (sm_90): also time diagnostic variants of the fused kernel (stages skipped, "
                       "forced k_split, PDL off; their outputs are garbage) to locate where its time goes")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "bench":
        from . import bench

        return bench.main(args)
    raise AssertionError(args.command)


if __name__ == "__main__":
    sys.exit(main())
