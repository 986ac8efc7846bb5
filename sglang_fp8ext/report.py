"""``python -m sglang_fp8ext report``: a device's benchmarks page generated from the committed results.

Input: the JSON that ``python -m sglang_fp8ext bench`` writes on a GPU, ``docs/perf/<device>.json``
(default docs/perf/h200.json), and, optionally, the JSON of ``tools/e2e_decode_bench.py`` beside it,
``<device>_decode_step.json``. The page of h200.json is docs/benchmarks.md (the headline), that of any
other ``<device>.json`` docs/benchmarks_<device>.md. The page is a pure function of those files:
fixed formatting, no clock, no environment, so that a test can regenerate it and require the committed
page to be byte for byte the same.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import sys
from typing import List, Optional

HEADLINE = "h200"  # the device whose page is docs/benchmarks.md
BENCH_DEFAULT = os.path.join("docs", "perf", HEADLINE + ".json")
DECODE_SUFFIX = "_decode_step.json"

NOT_RECORDED = "not recorded"
NOT_MEASURED = "not measured"  # a figure the run did not take (e.g. a JSON older than the measurement)
DEEPGEMM = "deepgemm+quant"
DEEPGEMM_GEMM = "deepgemm_gemm_only"
# Known peers of bench.py, in the order the tables show them, with their column titles. Any other
# peer a JSON carries follows them in order of first appearance, titled by its own name.
PEER_TITLES = {
    DEEPGEMM: "DeepGEMM+quant",
    DEEPGEMM_GEMM: "DeepGEMM GEMM alone",
    "quant+scaled_mm(cuBLASLt)": "cuBLASLt",
    "quant+scaled_gemm": "unfused",
    "bf16_linear": "bf16",
}
SCALE_TITLES = {
    "fp32": "fp32 block scales",
    "e8m0": "e8m0 block scales (power-of-two weight scales, ue8m0 activation scales)",
}
# Alternative key names a JSON may use for the same environment field.
DRIVER_KEYS = ("driver", "driver_version", "nvidia_driver")
CUDA_KEYS = ("cuda", "cuda_version", "cuda_runtime", "torch_cuda")

KNOWN_LIMITS = [
    "**Fraction of the floor.** The op reaches {floor_range} of the copy-bandwidth floor: a fixed cost "
    "per call (the activation prologue, the split-K exchange, the launch) that the weight stream does not "
    "hide at these sizes{l2_note}. See [design](design/sm90.md).",
    "**gfx950.** The gfx950 kernels are compiled and their ISA checked in CI, and their unmodified "
    "sources run on the CPU under a wave64 emulator in CI (bit-exact quantization and norms, GEMMs within "
    "SPEC §3.4), but they have never executed on MI355X hardware; no figure on this page is from AMD. "
    "See [design](design/gfx950.md).",
]


def repo_root() -> str:
    """The source tree holding this package, when there is one (docs/ beside it); else the cwd."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if os.path.isdir(os.path.join(here, "docs")):
        return here
    return os.getcwd()


def load(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def fmt(x: Optional[float], digits: int = 2) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def geomean(values: List[float]) -> Optional[float]:
    values = [v for v in values if v is not None]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def field(d: dict, keys) -> str:
    for key in keys:
        value = d.get(key)
        if value not in (None, "", "unknown"):
            return str(value)
    return NOT_RECORDED


def peer_names(rows: List[dict]) -> List[str]:
    seen: List[str] = []
    for row in rows:
        for name in list(row.get("peers", {})) + list((row.get("decode") or {}).get("peers", {})):
            if name not in seen:
                seen.append(name)
    known = [name for name in PEER_TITLES if name in seen]
    return known + [name for name in seen if name not in PEER_TITLES]


def peer_title(name: str) -> str:
    return PEER_TITLES.get(name, name)


def scale_formats(rows: List[dict]) -> List[str]:
    seen: List[str] = []
    for row in rows:
        if row["scale"] not in seen:
            seen.append(row["scale"])
    return [s for s in SCALE_TITLES if s in seen] + [s for s in seen if s not in SCALE_TITLES]


def speedup(row: dict, name: str) -> Optional[float]:
    t = row.get("peers", {}).get(name)
    return None if t is None else t / row["fused_us"]


def environment(bench: dict, decode: Optional[dict]) -> List[str]:
    torch_version = field(bench, ("torch",))
    cuda = field(bench, CUDA_KEYS)
    if cuda == NOT_RECORDED and "+cu" in torch_version:
        cuda = f"{NOT_RECORDED} (torch build tag `{torch_version.split('+', 1)[1]}`)"
    lines = [
        "## Environment",
        "",
        "| | |",
        "|---|---|",
        f"| GPU | {field(bench, ('device',))} |",
        f"| device UUID | {field(bench, ('device_uuid',))} |",
        f"| driver | {field(bench, DRIVER_KEYS)} |",
        f"| CUDA | {cuda} |",
        f"| torch | {torch_version} |",
        f"| commit measured (bench) | {field(bench, ('git',))} |",
    ]
    if decode is not None:
        lines.append(f"| commit measured (decode step) | {field(decode, ('git',))} |")
    copy = bench.get("copy_TBps")
    lines.append(f"| device-to-device copy rate | {NOT_RECORDED if copy is None else f'{copy:.2f} TB/s'} |")
    return lines


def deepgemm_record(bench: dict) -> dict:
    """The run's DeepGEMM record ({} for a JSON from before bench timed DeepGEMM)."""
    record = bench.get("deepgemm")
    return record if isinstance(record, dict) else {}


def has_decode(rows: List[dict]) -> bool:
    return any(r.get("decode") for r in rows)


def deepgemm_absence(dg: dict) -> str:
    """Why a run has no DeepGEMM figures, from its DeepGEMM record."""
    return dg.get("reason") or "the bench JSON has no DeepGEMM record"


def deepgemm_method(bench: dict) -> str:
    dg = deepgemm_record(bench)
    if not dg.get("present"):
        return f"DeepGEMM+quant: {NOT_MEASURED} in this run ({deepgemm_absence(dg)})."
    pdl = {True: "on", False: "off"}.get(dg.get("pdl"), NOT_RECORDED)
    copy_free = dg.get("scale_layout_copy_free")
    checked = {True: "checked at every point", None: NOT_RECORDED}.get(
        copy_free, "**the check failed: DeepGEMM copied the scales**")
    text = (
        f"DeepGEMM+quant = our `per1x128_quant` (fp32 scales) then DeepGEMM {field(dg, ('version',))}'s "
        f"`fp8_gemm_nt` (sm90, 1x128 activation and 128x128 fp32 weight scales), programmatic dependent launch "
        f"{pdl} (`deep_gemm.set_pdl(True)`, its best setting); its kernels are JIT-compiled and run once per "
        "point before capture. The quant reads the activations from a buffer padded with zero rows to a "
        "multiple of 4, so that with `transpose_scale=True` its one kernel writes the MN-major scales with the "
        f"16-byte-aligned column stride DeepGEMM reads as they are (no transpose kernel: {checked}). e8m0 rows "
        "give it the same power-of-two weight scales as fp32, and fp32 activation scales (sm90 DeepGEMM has no "
        "e8m0 inputs). Each point checks its output against our `scaled_gemm` on the same quantized inputs "
        "before timing it.")
    if any(DEEPGEMM_GEMM in r.get("peers", {}) for r in bench.get("rows", [])):
        text += (" DeepGEMM GEMM alone = its `fp8_gemm_nt` on activations quantized once before the graph: "
                 "what it would cost if the quant were free.")
    failures = dg.get("failures") or []
    if failures:
        text += f" Not timed at {len(failures)} point(s), e.g. {failures[0]}."
    return text


def method(bench: dict, peers: List[str]) -> List[str]:
    copies = bench.get("weight_copies", NOT_RECORDED)
    replays = bench.get("replays", NOT_RECORDED)
    return [
        "## Method",
        "",
        f"`python -m sglang_fp8ext bench`: for each (N, K, M) and scale format, a CUDA graph calls the op once "
        f"on each of {copies} rotated weight copies (more bytes than L2: cold weights, as in decode); a figure "
        f"is the median over {replays} replays of that graph divided by the number of calls. Activations are "
        "random bf16, weights random FP8 with random fp32 or power-of-two (e8m0) block scales.",
        "Two orders, in the same run. **Decode order** (the headline): each call is preceded in the graph by a "
        "producer kernel, `x.copy_(x_src)`, that writes the call's M x K bf16 activations, as in a decode step, "
        "where every projection follows the kernel that made its input; the producer alone is timed the same "
        "way at the same point, and a path's figure is (producer + call) minus the producer, for the fused op "
        "and every peer alike. **Back to back**: the calls one after another, nothing between them.",
        "**L2-resident**: the fused op back to back on one weight (the same weight every call, so after the "
        "first call it is read from L2, not HBM). Cold minus L2-resident is what streaming the weight costs; "
        "the L2-resident time is the fixed cost of a call (launch, activation prologue, split-K exchange, "
        "epilogue).",
        "The floor is the op's bytes (weight + block scales + bf16 activations + bf16 output) over the "
        "device-to-device copy rate measured in the same run; floor/fused is the fraction of it the op reaches.",
        "Peers, timed the same way in the same run: cuBLASLt = our quant + `torch._scaled_mm` with blockwise "
        "scales (e8m0 rows give it the same scales as fp32); unfused = our quant + `scaled_gemm`; bf16 = "
        "`F.linear` on the dequantized bf16 weight. A peer's cell is its time in µs and, in parentheses, "
        "peer / fused (above 1: the fused op is faster).",
        deepgemm_method(bench),
    ]


def ratio_cell(t: Optional[float], fused: Optional[float]) -> str:
    if t is None:
        return " n/a |"
    return f" {fmt(t)} ({fmt(t / fused)}x) |" if fused else f" {fmt(t)} |"


def table_head(title: str, columns: List[str], peers: List[str]) -> List[str]:
    """A section title and the header of a table of right-aligned columns, then one column per peer
    (its µs and, in parentheses, peer / fused)."""
    names = columns + [f"{peer_title(name)} µs (peer/fused)" for name in peers]
    return [f"## {title}", "", "| " + " | ".join(names) + " |", "|" + "---:|" * len(names)]


def decode_times(row: dict):
    """(fused decode-order µs, {peer: µs}) of a row; (None, {}) where it has no decode order."""
    decode = row.get("decode") or {}
    return decode.get("fused_us"), decode.get("peers", {})


def decode_table(rows: List[dict], scale: str, peers: List[str]) -> List[str]:
    """The headline: fused vs each peer in decode order, with the fused op's L2-resident time."""
    sel = sorted((r for r in rows if r["scale"] == scale), key=lambda r: (-r["N"], -r["K"], r["M"]))
    lines = table_head(f"Decode order, {SCALE_TITLES.get(scale, scale)}",
                       ["N", "K", "M", "fused µs", "fused L2-resident µs"], peers)
    for r in sel:
        fused, decode_peers = decode_times(r)
        l2 = r.get("l2_resident_us")
        line = (f"| {r['N']} | {r['K']} | {r['M']} | {NOT_MEASURED if fused is None else fmt(fused)} | "
                f"{NOT_MEASURED if l2 is None else fmt(l2)} |")
        for name in peers:
            if fused is None or name not in decode_peers:
                line += f" {NOT_MEASURED} |"
            else:
                line += ratio_cell(decode_peers[name], fused)
        lines.append(line)
    geo = "| geometric mean | | | | |"
    for name in peers:
        ratios = []
        for r in sel:
            fused, decode_peers = decode_times(r)
            if fused and decode_peers.get(name) is not None:
                ratios.append(decode_peers[name] / fused)
        g = geomean(ratios)
        geo += " n/a |" if g is None else f" ({fmt(g)}x) |"
    lines.append(geo)
    return lines


def decode_headline(rows: List[dict], peers: List[str]) -> List[str]:
    if not has_decode(rows):
        return ["## Decode order", "",
                f"Decode-order and L2-resident times: {NOT_MEASURED} (the bench JSON has no decode-order fields; "
                "the back-to-back tables below are the figures it holds)."]
    lines: List[str] = []
    for scale in scale_formats(rows):
        lines += decode_table(rows, scale, peers) + [""]
    return lines[:-1]


def decode_ratios(rows: List[dict], peer: str) -> list:
    """(row, peer / fused) in decode order at every row where both were timed."""
    points = []
    for r in rows:
        fused, decode_peers = decode_times(r)
        if fused and decode_peers.get(peer) is not None:
            points.append((r, decode_peers[peer] / fused))
    return points


def deepgemm_limit(rows: List[dict], record: dict) -> str:
    """The known limit about DeepGEMM, from this run's decode-order figures; where the run has none,
    why not (the run's `deepgemm` record), never figures from elsewhere."""
    points = decode_ratios(rows, DEEPGEMM)
    if not points:
        why = "timed back to back only" if record.get("present") else deepgemm_absence(record)
        return (f"**DeepGEMM.** No decode-order comparison in this run ({why}); `bench` times DeepGEMM+quant and "
                "its GEMM alone in both orders whenever `import deep_gemm` works. See [design](design/sm90.md).")
    faster = sorted(((r, q) for r, q in points if q < 1.0), key=lambda p: (-p[0]["N"], -p[0]["K"], p[0]["M"], p[0]["scale"]))
    low, high = min(q for _, q in points), max(q for _, q in points)
    text = (f"**DeepGEMM.** In decode order DeepGEMM+quant takes {low:.2f}-{high:.2f}x the fused op's time over "
            f"the {len(points)} points where both were timed; ")
    if faster:
        where = ", ".join(f"{r['N']}x{r['K']} M={r['M']} {r['scale']} ({q:.3f}x)" for r, q in faster)
        text += f"DeepGEMM is faster at {len(faster)}: {where}."
    else:
        text += "the fused op is faster at every one."
    return text + deepgemm_gemm_limit(rows) + " See [design](design/sm90.md)."


def deepgemm_gemm_limit(rows: List[dict]) -> str:
    """DeepGEMM's GEMM alone against the fused op in decode order, where the JSON has it."""
    points = decode_ratios(rows, DEEPGEMM_GEMM)
    if not points:
        return ""
    low, high = min(q for _, q in points), max(q for _, q in points)
    faster = sorted({r["M"] for r, q in points if q < 1.0})
    text = (f" Its GEMM alone (the quant taken as free) takes {low:.2f}-{high:.2f}x the fused op's time; it is faster "
            f"at {sum(q < 1.0 for _, q in points)} of {len(points)} points")
    return text + (f" (M = {', '.join(map(str, faster))})." if faster else ".")


def scale_table(rows: List[dict], scale: str, peers: List[str]) -> List[str]:
    sel = sorted((r for r in rows if r["scale"] == scale), key=lambda r: (-r["N"], -r["K"], r["M"]))
    lines = table_head(f"Back to back, {SCALE_TITLES.get(scale, scale)}",
                       ["N", "K", "M", "fused µs", "floor µs", "floor/fused"], peers)
    for r in sel:
        line = (f"| {r['N']} | {r['K']} | {r['M']} | {fmt(r['fused_us'])} | {fmt(r['floor_us'])} | "
                f"{fmt(r['floor_us'] / r['fused_us'], 3)} |")
        for name in peers:
            line += f" {NOT_MEASURED} |" if name not in r.get("peers", {}) else ratio_cell(r["peers"][name], r["fused_us"])
        lines.append(line)
    geo = f"| geometric mean | | | | | {fmt(geomean([r['floor_us'] / r['fused_us'] for r in sel]), 3)} |"
    for name in peers:
        g = geomean([speedup(r, name) for r in sel])
        geo += " n/a |" if g is None else f" ({fmt(g)}x) |"
    lines.append(geo)
    return lines


DECODE_COLUMNS = [  # (field, title, digits)
    ("bf16_us", "bf16 µs", 2),
    ("fp8_us", "fp8 fused µs", 2),
    ("fp8_unfused_us", "fp8 unfused µs", 2),
]


def decode_section(decode: Optional[dict], bench_git: Optional[str] = None) -> List[str]:
    lines = ["## Decode step", ""]
    if decode is None:
        return lines + [f"Decode-step results: {NOT_RECORDED}."]
    config = decode.get("config", {})
    model = ", ".join(f"{k} {v}" for k, v in config.items() if k not in ("replays", "prompt_len"))
    lines.append(
        f"`tools/e2e_decode_bench.py`: one decode step of a Qwen3-style model (transformers; "
        f"{model or NOT_RECORDED}; random weights) captured as a CUDA graph, median of "
        f"{config.get('replays', NOT_RECORDED)} replays, the KV cache growing from a "
        f"{config.get('prompt_len', NOT_RECORDED)}-token prompt. fp8 = the same model with FP8 block-scale "
        "projections (`fp8_block_linear`; unfused: `SGL_FP8_SMALLM=0`); lm_head stays bf16.")
    note = f"GPU {field(decode, ('device',))}, torch {field(decode, ('torch',))}, commit {field(decode, ('git',))}"
    decode_git = field(decode, ("git",))
    if bench_git not in (None, NOT_RECORDED) and not (decode_git.startswith(bench_git) or bench_git.startswith(decode_git)):
        note += f" (not the bench's commit {bench_git}: the kernels may differ)"
    lines.append(note + ".")
    lines.append("")
    rows = decode.get("rows", [])
    cols = [c for c in DECODE_COLUMNS if any(c[0] in r for r in rows)]
    ratio = all(k in r for r in rows for k in ("fp8_us", "bf16_us"))
    unfused = all(k in r for r in rows for k in ("fp8_us", "fp8_unfused_us"))
    cos = any("fp8_logits_min_cos" in r for r in rows)
    header = "| batch |" + "".join(f" {title} |" for _, title, _ in cols)
    rule = "|---:|" + "---:|" * len(cols)
    if ratio:
        header += " fp8 / bf16 (time) |"
        rule += "---:|"
    if unfused:
        header += " unfused / fused (speedup) |"
        rule += "---:|"
    if cos:
        header += " logits min cos (fp8 vs bf16) |"
        rule += "---:|"
    lines += [header, rule]
    for r in rows:
        line = f"| {r.get('batch', 'n/a')} |" + "".join(f" {fmt(r.get(k), d)} |" for k, _, d in cols)
        if ratio:
            line += f" {fmt(r['fp8_us'] / r['bf16_us'], 3)} |"
        if unfused:
            line += f" {fmt(r['fp8_unfused_us'] / r['fp8_us'], 3)} |"
        if cos:
            line += f" {fmt(r.get('fp8_logits_min_cos'), 4)} |"
        lines.append(line)
    return lines


def page_name(stem: str) -> str:
    """The page of docs/perf/<stem>.json, relative to docs/."""
    return "benchmarks.md" if stem == HEADLINE else f"benchmarks_{stem}.md"


def generate(bench: dict, decode: Optional[dict] = None, stem: str = HEADLINE) -> str:
    """The page of ``bench`` (docs/perf/<stem>.json) and ``decode`` (<stem>_decode_step.json)."""
    rows = bench["rows"]
    device = field(bench, ("device",))
    page = "docs/" + page_name(stem)
    report_command = "python -m sglang_fp8ext report" + (
        "" if stem == HEADLINE else f" --bench docs/perf/{stem}.json") + f" --out {page}"
    peers = peer_names(rows)
    fractions = [r["floor_us"] / r["fused_us"] for r in rows]
    floor_range = f"{min(fractions):.2f}-{max(fractions):.2f}" if fractions else NOT_RECORDED
    shapes = ", ".join(f"{n}x{k}" for n, k in sorted({(r["N"], r["K"]) for r in rows}, key=lambda s: (-s[0], -s[1])))
    ms = ", ".join(str(m) for m in sorted({r["M"] for r in rows}))
    lines = [
        f"# Benchmarks: {device}",
        "",
        f"<!-- Generated by `{report_command}` from docs/perf/{stem}*.json; "
        "do not edit by hand (tests/test_report.py checks it). -->",
        "",
        f"The fused `smallm_gemm` (1x128 activation quant inside the FP8 block-scale GEMM) on "
        f"{device}, N x K = {shapes}, M = {ms} tokens. "
        f"Raw data: [perf/{stem}.json](perf/{stem}.json), plot: [perf/{stem}.png](perf/{stem}.png)"
        + (f", decode step: [perf/{stem}{DECODE_SUFFIX}](perf/{stem}{DECODE_SUFFIX})." if decode is not None else "."),
        "",
    ]
    lines += environment(bench, decode) + [""]
    lines += method(bench, peers) + [""]
    lines += decode_headline(rows, peers) + [""]
    for scale in scale_formats(rows):
        lines += scale_table(rows, scale, peers) + [""]
    lines += decode_section(decode, field(bench, ("git",))) + [""]
    lines += [
        "## Reproduce",
        "",
        f"On the {device}, from the repository root with the extension built:",
        "",
        "```bash",
        f"python -m sglang_fp8ext bench {bench_selection(rows)} --out docs/perf --name {stem}   # {stem}.json, {stem}.png",
        f"python tools/e2e_decode_bench.py --out docs/perf/{stem}{DECODE_SUFFIX}",
        report_command,
        "```",
        "",
        "DeepGEMM is a peer whenever `import deep_gemm` works (DeepGEMM built from source and on PYTHONPATH: "
        "CONTRIBUTING.md); `--no-deepgemm` leaves it out, `--no-decode` times back to back only.",
        "",
        "## Known limits",
        "",
    ]
    l2 = [r["l2_resident_us"] for r in rows if r.get("l2_resident_us") is not None]
    l2_note = f" (L2-resident, with no weight stream, a call takes {min(l2):.2f}-{max(l2):.2f} µs)" if l2 else ""
    lines.append(f"* {deepgemm_limit(rows, deepgemm_record(bench))}")
    lines += [f"* {text.format(floor_range=floor_range, l2_note=l2_note)}" for text in KNOWN_LIMITS]
    return "\n".join(lines) + "\n"


def bench_selection(rows: List[dict]) -> str:
    """The bench flags that select the shapes and token counts the JSON holds, in its order."""
    shapes, ms = [], []
    for r in rows:
        if (r["N"], r["K"]) not in shapes:
            shapes.append((r["N"], r["K"]))
        if r["M"] not in ms:
            ms.append(r["M"])
    return "--shapes " + ",".join(f"{n}x{k}" for n, k in shapes) + " --ms " + ",".join(str(m) for m in sorted(ms))


def decode_beside(bench_path: str) -> Optional[str]:
    """``<device>_decode_step.json`` beside ``<device>.json``, if it exists."""
    stem, _ = os.path.splitext(bench_path)
    path = stem + DECODE_SUFFIX
    return path if os.path.exists(path) else None


def diff_summary(expected: str, actual: str, path: str, limit: int = 40) -> str:
    diff = list(difflib.unified_diff(actual.splitlines(), expected.splitlines(), f"{path} (committed)",
                                     f"{path} (generated)", lineterm="", n=0))
    changed = sum(1 for d in diff if d[:1] in "+-" and not d.startswith(("+++", "---")))
    head = diff[:limit] + ([f"... ({len(diff) - limit} more diff lines)"] if len(diff) > limit else [])
    return "\n".join([f"{path} differs from the generated page ({changed} lines changed):"] + head)


def main(args) -> int:
    bench_path = args.bench or os.path.join(repo_root(), BENCH_DEFAULT)
    stem = os.path.splitext(os.path.basename(bench_path))[0]
    decode_path = args.decode or decode_beside(bench_path)
    try:
        bench = load(bench_path)
        decode = load(decode_path) if decode_path else None
    except (OSError, ValueError) as e:
        print(f"report: cannot read input: {e}", file=sys.stderr)
        return 2
    if "rows" not in bench or not all("floor_us" in r for r in bench["rows"]):
        print(f"report: {bench_path} is not a GPU bench result (rows with fused_us and floor_us)", file=sys.stderr)
        return 2
    page = generate(bench, decode, stem)
    if args.check:
        try:
            with open(args.check, encoding="utf-8") as f:
                current = f.read()
        except OSError as e:
            print(f"report: {e}", file=sys.stderr)
            return 1
        if current != page:
            print(diff_summary(page, current, args.check), file=sys.stderr)
            print("regenerate it: python -m sglang_fp8ext report --out " + args.check, file=sys.stderr)
            return 1
        print(f"{args.check} matches the generated page")
        return 0
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(page)
        print(f"wrote {args.out} ({page.count(chr(10))} lines)", file=sys.stderr)
    else:
        sys.stdout.write(page)
    return 0
