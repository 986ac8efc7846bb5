"""Where a kernel's warps stall, by region of its SASS, from an Nsight Compute source page.

    ncu --cache-control all -k regex:wgmma_ring -s 2 -c 1 --section SourceCounters --page source \\
        --print-source sass --csv python tools/profile_gemm.py 4096 4096 8 > source.csv
    python tools/ncu_stall_regions.py source.csv[.gz] [--runs]

Prints the warp-stall samples by reason, then, for three regions of the code (entry to the
grid-dependency wait ACQBULK, from there to the first wgmma (QGMMA) that executed, the rest): the
code's size, how much of it executed, its warp instructions, its samples and those stalled on
instruction fetch ("stall_no_inst": waiting for an instruction, an instruction-cache miss).
--runs lists every stretch of consecutive executed instructions. With --cache-control all the
caches are flushed before the launch, so the code is fetched cold, as in a decode step where other
kernels ran before the GEMM (docs/sm90.md, session 13).
"""

from __future__ import annotations

import argparse
import collections
import csv
import gzip
import sys

INSTRUCTION_BYTES = 16


def read_source_page(path: str):
    """The source page's rows as dicts (ncu's other output before the header is skipped)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        lines = f.read().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"Address"'))
    reader = csv.reader(lines[start:])
    header = next(reader)
    return [dict(zip(header, row)) for row in reader if len(row) == len(header)]


def number(text: str) -> float:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def opcode(source: str) -> str:
    words = source.split()
    if words and words[0].startswith("@"):  # a predicate
        words = words[1:]
    return words[0].split(".")[0] if words else ""


def stall_reasons(rows) -> list[str]:
    return [k for k in rows[0] if k.startswith("stall_") and "Not Issued" not in k]


def instructions(rows):
    """(offset from the first instruction, opcode, executed warp instructions, samples, no_inst samples)."""
    reasons = stall_reasons(rows)
    base = int(rows[0]["Address"], 16)
    out = []
    for r in rows:
        samples = sum(number(r[k]) for k in reasons)
        executed = number(r["Instructions Executed"])
        out.append((int(r["Address"], 16) - base, opcode(r["Source"]), executed, samples,
                    number(r.get("stall_no_inst", "0"))))
    return out


def regions(insts):
    """[(name, begin, end)]: entry .. ACQBULK, .. the first executed QGMMA, .. the end."""
    end = insts[-1][0] + INSTRUCTION_BYTES
    wait = next((a for a, op, *_ in insts if op == "ACQBULK"), 0)
    first_mma = next((a for a, op, executed, *_ in insts if op == "QGMMA" and executed > 0), end)
    return [("entry .. ACQBULK", 0, wait), ("ACQBULK .. first wgmma", wait, first_mma), ("first wgmma .. end", first_mma, end)]


def region_summary(insts, begin: int, end: int) -> dict:
    inside = [i for i in insts if begin <= i[0] < end]
    executed = [i for i in inside if i[2] > 0]
    return dict(code_bytes=len(inside) * INSTRUCTION_BYTES, executed_bytes=len(executed) * INSTRUCTION_BYTES,
                warp_instructions=sum(i[2] for i in inside), samples=sum(i[3] for i in inside),
                no_inst=sum(i[4] for i in inside))


def executed_runs(insts):
    """Stretches of consecutive executed instructions: (begin, end, warp instructions, samples, no_inst, opcodes)."""
    runs = []
    for a, op, executed, samples, no_inst in insts:
        if executed <= 0:
            continue
        if runs and runs[-1][1] == a:
            b, _, n, s, ni, ops = runs[-1]
            runs[-1] = (b, a + INSTRUCTION_BYTES, n + executed, s + samples, ni + no_inst, ops + [op])
        else:
            runs.append((a, a + INSTRUCTION_BYTES, executed, samples, no_inst, [op]))
    return runs


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("csv", help="ncu --page source --print-source sass --csv output (may be .gz)")
    p.add_argument("--runs", action="store_true", help="list every stretch of executed instructions")
    args = p.parse_args(argv)
    rows = read_source_page(args.csv)
    reasons = stall_reasons(rows)
    totals = collections.Counter({k: sum(number(r[k]) for r in rows) for k in reasons})
    all_samples = sum(totals.values())
    print(f"{len(rows)} instructions, {all_samples:.0f} warp-stall samples")
    for k, v in totals.most_common(8):
        print(f"  {k:<24} {v:6.0f} {100 * v / max(all_samples, 1):5.1f} %")
    insts = instructions(rows)
    for name, begin, end in regions(insts):
        s = region_summary(insts, begin, end)
        print(f"{name:<24} [{begin:#7x}, {end:#7x}) code {s['code_bytes'] / 1024:5.1f} KB, executed "
              f"{s['executed_bytes'] / 1024:5.1f} KB, warp instructions {s['warp_instructions']:9.0f}, "
              f"samples {s['samples']:5.0f}, no_inst {s['no_inst']:5.0f}")
    if args.runs:
        for b, e, n, s, ni, ops in executed_runs(insts):
            top = ", ".join(f"{op} {c}" for op, c in collections.Counter(ops).most_common(3))
            print(f"  {b:#7x}-{e:#7x} {(e - b) // INSTRUCTION_BYTES:4d} instructions, warp instructions {n:8.0f}, "
                  f"samples {s:4.0f}, no_inst {ni:4.0f}  ({top})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
