"""`python -m sglang_fp8ext report`: docs/benchmarks.md is exactly what the generator makes of the committed
JSON (so the page and the data cannot disagree), and the generator's tables, geometric means, missing
fields and --check on a small synthetic run.

Files are located from this test file's repository root: CI also runs tests/ against an installed wheel
from another directory."""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys

import pytest

from sglang_fp8ext import __main__ as cli
from sglang_fp8ext import report

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "docs", "perf", "h200.json")
DECODE = os.path.join(ROOT, "docs", "perf", "h200_decode_step.json")
PAGE = os.path.join(ROOT, "docs", "benchmarks.md")

CUBLAS, UNFUSED, BF16 = "quant+scaled_mm(cuBLASLt)", "quant+scaled_gemm", "bf16_linear"


def test_committed_page_is_generated_from_the_committed_json():
    with open(BENCH) as f:
        bench = json.load(f)
    with open(DECODE) as f:
        decode = json.load(f)
    with open(PAGE, encoding="utf-8") as f:
        page = f.read()
    assert page == report.generate(bench, decode), (
        "docs/benchmarks.md differs from the generated page: python -m sglang_fp8ext report --out docs/benchmarks.md")
    # four tables (two orders x two scale formats) of a row per point, and about 80 lines besides
    assert len(page.splitlines()) <= 90 + 2 * len(bench["rows"])


def test_committed_page_passes_check_from_another_directory(tmp_path):
    """The command line, as CI would run it elsewhere: --check with explicit paths exits 0."""
    proc = subprocess.run(
        [sys.executable, "-m", "sglang_fp8ext", "report", "--bench", BENCH, "--decode", DECODE, "--check", PAGE],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def row(n, k, m, scale, fused, floor, peers):
    return {"N": n, "K": k, "M": m, "scale": scale, "fused_us": fused, "floor_us": floor, "peers": peers,
            "diagnostics": {}}


SYNTHETIC = {
    "device": "Test GPU",
    "torch": "2.99.0",
    "git": "abcdef1",
    "copy_TBps": 4.0,
    "weight_copies": 24,
    "replays": 25,
    "rows": [
        row(256, 128, 1, "fp32", 4.0, 2.0, {UNFUSED: 6.0, CUBLAS: 12.0, BF16: 5.0}),
        row(256, 128, 8, "fp32", 5.0, 2.5, {UNFUSED: 6.5, CUBLAS: None, BF16: 5.5}),
        row(512, 128, 1, "fp32", 8.0, 2.0, {UNFUSED: 9.0, CUBLAS: 16.0, BF16: 10.0}),
        row(256, 128, 1, "e8m0", 4.5, 2.0, {UNFUSED: 6.0, CUBLAS: 12.0, BF16: 5.0}),
        row(512, 128, 1, "e8m0", 9.0, 2.0, {UNFUSED: 9.0, CUBLAS: 18.0, BF16: 10.0}),
    ],
}
SYNTHETIC_DECODE = {
    "device": "Test GPU", "torch": "2.99.0", "git": "abcdef1",
    "config": {"hidden_size": 64, "replays": 20, "prompt_len": 16},
    "rows": [{"batch": 1, "bf16_us": 100.0, "fp8_us": 80.0, "fp8_unfused_us": 120.0}],
}


def section(page, title):
    """The lines of the section whose heading starts with `title`, up to the next heading."""
    lines = page.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("## " + title))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return lines[start:end]


def table_rows(lines):
    return [[c.strip() for c in line.strip("|").split("|")] for line in lines
            if line.startswith("|") and not line.startswith("|---")]


def test_synthetic_tables_and_geometric_means():
    page = report.generate(SYNTHETIC, SYNTHETIC_DECODE)
    assert page == report.generate(json.loads(json.dumps(SYNTHETIC)), SYNTHETIC_DECODE)  # deterministic
    for scale in ("fp32", "e8m0"):
        sel = [r for r in SYNTHETIC["rows"] if r["scale"] == scale]
        rows = table_rows(section(page, "Back to back, " + scale))
        header, body, geo = rows[0], rows[1:-1], rows[-1]
        assert header[:6] == ["N", "K", "M", "fused µs", "floor µs", "floor/fused"]
        assert [h.split(" µs")[0] for h in header[6:]] == ["cuBLASLt", "unfused", "bf16"]  # fixed peer order
        # largest N first, then M ascending
        expected_order = sorted(sel, key=lambda r: (-r["N"], r["M"]))
        assert [(int(c[0]), int(c[1]), int(c[2])) for c in body] == [(r["N"], r["K"], r["M"]) for r in expected_order]
        for cells, r in zip(body, expected_order):
            assert cells[3] == f"{r['fused_us']:.2f}" and cells[4] == f"{r['floor_us']:.2f}"
            assert cells[5] == f"{r['floor_us'] / r['fused_us']:.3f}"
            for cell, name in zip(cells[6:], (CUBLAS, UNFUSED, BF16)):
                t = r["peers"][name]
                assert cell == ("n/a" if t is None else f"{t:.2f} ({t / r['fused_us']:.2f}x)")
        assert geo[0] == "geometric mean"
        assert geo[5] == f"{statistics.geometric_mean([r['floor_us'] / r['fused_us'] for r in sel]):.3f}"
        for cell, name in zip(geo[6:], (CUBLAS, UNFUSED, BF16)):
            ratios = [r["peers"][name] / r["fused_us"] for r in sel if r["peers"][name] is not None]
            assert cell == f"({statistics.geometric_mean(ratios):.2f}x)"
    decode = table_rows(section(page, "Decode step"))
    assert decode[1][:4] == ["1", "100.00", "80.00", "120.00"]
    assert decode[1][4:] == ["0.800", "1.500"]
    fractions = [r["floor_us"] / r["fused_us"] for r in SYNTHETIC["rows"]]
    assert f"reaches {min(fractions):.2f}-{max(fractions):.2f} of the copy-bandwidth floor" in page
    assert "[design](design/sm90.md)" in page
    assert "python -m sglang_fp8ext report --out docs/benchmarks.md" in page
    shapes = ",".join(dict.fromkeys(f"{r['N']}x{r['K']}" for r in SYNTHETIC["rows"]))
    ms = ",".join(str(m) for m in sorted({r["M"] for r in SYNTHETIC["rows"]}))
    assert f"python -m sglang_fp8ext bench --shapes {shapes} --ms {ms} --out docs/perf --name h200" in page


def test_missing_optional_fields_say_not_recorded():
    page = report.generate(SYNTHETIC, None)
    env = dict((c[0], c[1]) for c in table_rows(section(page, "Environment"))[1:])
    assert env["GPU"] == "Test GPU" and env["torch"] == "2.99.0" and env["commit measured (bench)"] == "abcdef1"
    for key in ("device UUID", "driver", "CUDA"):
        assert env[key] == "not recorded", key
    assert "Decode-step results: not recorded." in page
    recorded = dict(SYNTHETIC, device_uuid="GPU-1234", driver_version="570.1", cuda="12.8")
    env = dict((c[0], c[1]) for c in table_rows(section(report.generate(recorded), "Environment"))[1:])
    assert (env["device UUID"], env["driver"], env["CUDA"]) == ("GPU-1234", "570.1", "12.8")


def test_decode_commit_other_than_the_bench_is_said():
    other = dict(SYNTHETIC_DECODE, git="1234567")
    assert "not the bench's commit abcdef1" in report.generate(SYNTHETIC, other)
    assert "not the bench's commit" not in report.generate(SYNTHETIC, SYNTHETIC_DECODE)


@pytest.fixture
def synthetic_files(tmp_path):
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps(SYNTHETIC))
    decode = tmp_path / "decode.json"
    decode.write_text(json.dumps(SYNTHETIC_DECODE))
    return tmp_path, str(bench), str(decode)


def test_out_then_check_match_and_mismatch(synthetic_files, capsys):
    tmp, bench, decode = synthetic_files
    page = tmp / "benchmarks.md"
    assert cli.main(["report", "--bench", bench, "--decode", decode, "--out", str(page)]) == 0
    assert page.read_text(encoding="utf-8") == report.generate(SYNTHETIC, SYNTHETIC_DECODE)
    assert cli.main(["report", "--bench", bench, "--decode", decode, "--check", str(page)]) == 0
    page.write_text(page.read_text(encoding="utf-8").replace("| 256 | 128 | 1 | 4.00 |", "| 256 | 128 | 1 | 4.01 |", 1), encoding="utf-8")
    capsys.readouterr()
    assert cli.main(["report", "--bench", bench, "--decode", decode, "--check", str(page)]) == 1
    err = capsys.readouterr().err
    assert "differs from the generated page (2 lines changed)" in err and "+| 256 | 128 | 1 | 4.00" in err
    assert cli.main(["report", "--bench", bench, "--decode", decode, "--check", str(tmp / "absent.md")]) == 1


def test_stdout_by_default(synthetic_files, capsys):
    _, bench, decode = synthetic_files
    assert cli.main(["report", "--bench", bench, "--decode", decode]) == 0
    assert capsys.readouterr().out == report.generate(SYNTHETIC, SYNTHETIC_DECODE)


def test_cpu_bench_json_is_refused(tmp_path, capsys):
    cpu = tmp_path / "cpu.json"
    cpu.write_text(json.dumps({"device": "cpu", "rows": [{"N": 1, "K": 128, "M": 1, "fused_us": 1.0}]}))
    assert cli.main(["report", "--bench", str(cpu)]) == 2
    assert "not a GPU bench result" in capsys.readouterr().err


DG = "deepgemm+quant"
DG_GEMM = "deepgemm_gemm_only"


def with_orders(bench, decode_rows=None, deepgemm=None, gemm_alone=None):
    """A copy of `bench` whose rows carry the decode-order and L2-resident fields (in the rows whose
    index is in `decode_rows`, all when None) and, with `deepgemm` (a dict: DeepGEMM's time per
    (N, M, scale)), DeepGEMM figures in both orders and the run's DeepGEMM record; with
    `gemm_alone` (likewise), its GEMM-alone figures."""
    out = json.loads(json.dumps(bench))
    for i, r in enumerate(out["rows"]):
        if deepgemm is not None:
            r["peers"][DG] = deepgemm.get((r["N"], r["M"], r["scale"]))
        if gemm_alone is not None:
            r["peers"][DG_GEMM] = gemm_alone.get((r["N"], r["M"], r["scale"]))
        if decode_rows is not None and i not in decode_rows:
            continue
        r["l2_resident_us"] = r["fused_us"] - 1.0
        r["decode"] = {"producer_us": 2.0, "fused_us": r["fused_us"] + 0.5,
                       "peers": {name: None if t is None else t + 1.0 for name, t in r["peers"].items()}}
    if deepgemm is not None:
        out["deepgemm"] = {"present": True, "version": "2.6.1", "pdl": True, "scale_layout_copy_free": True,
                           "failures": []}
    return out


DG_TIMES = {(256, 1, "fp32"): 3.0, (256, 8, "fp32"): 6.0, (512, 1, "fp32"): 10.0, (256, 1, "e8m0"): None,
            (512, 1, "e8m0"): 9.0}


def test_decode_order_is_the_headline_with_deepgemm_and_l2():
    bench = with_orders(SYNTHETIC, deepgemm=DG_TIMES)
    page = report.generate(bench, SYNTHETIC_DECODE)
    headings = [line for line in page.splitlines() if line.startswith("## ")]
    assert headings.index("## Decode order, fp32 block scales") < headings.index("## Back to back, fp32 block scales")
    assert headings.index("## Method") < headings.index("## Decode order, fp32 block scales")
    for scale in ("fp32", "e8m0"):
        sel = sorted((r for r in bench["rows"] if r["scale"] == scale), key=lambda r: (-r["N"], r["M"]))
        rows = table_rows(section(page, "Decode order, " + scale))
        header, body, geo = rows[0], rows[1:-1], rows[-1]
        assert header[:5] == ["N", "K", "M", "fused µs", "fused L2-resident µs"]
        # DeepGEMM first, then the other peers in their fixed order
        assert [h.split(" µs")[0] for h in header[5:]] == ["DeepGEMM+quant", "cuBLASLt", "unfused", "bf16"]
        assert [(int(c[0]), int(c[2])) for c in body] == [(r["N"], r["M"]) for r in sel]
        for cells, r in zip(body, sel):
            fused = r["decode"]["fused_us"]
            assert cells[3] == f"{fused:.2f}" and cells[4] == f"{r['l2_resident_us']:.2f}"
            for cell, name in zip(cells[5:], (DG, CUBLAS, UNFUSED, BF16)):
                t = r["decode"]["peers"][name]
                assert cell == ("n/a" if t is None else f"{t:.2f} ({t / fused:.2f}x)"), (cell, name)
        for cell, name in zip(geo[5:], (DG, CUBLAS, UNFUSED, BF16)):
            ratios = [r["decode"]["peers"][name] / r["decode"]["fused_us"] for r in sel
                      if r["decode"]["peers"][name] is not None]
            assert cell == f"({statistics.geometric_mean(ratios):.2f}x)"
    # the back-to-back tables carry DeepGEMM too, from the back-to-back figures
    b2b = table_rows(section(page, "Back to back, fp32"))
    m8 = next(c for c in b2b[1:-1] if (c[0], c[2]) == ("256", "8"))
    assert b2b[0][6].startswith("DeepGEMM+quant") and m8[6] == "6.00 (1.20x)"  # 256x128 M=8: 6.0 / 5.0
    method = "\n".join(section(page, "Method"))
    assert "DeepGEMM 2.6.1's `fp8_gemm_nt`" in method and "programmatic dependent launch on" in method
    assert "checked at every point" in method and "(producer + call) minus the producer" in method
    assert "**L2-resident**" in method
    # known limits: DeepGEMM's ratios from the decode order (faster where below 1), the L2 range
    ratios = [r["decode"]["peers"][DG] / r["decode"]["fused_us"] for r in bench["rows"]
              if r["decode"]["peers"][DG] is not None]
    assert ratios and min(ratios) < 1 < max(ratios)
    limits = "\n".join(section(page, "Known limits"))
    assert f"takes {min(ratios):.2f}-{max(ratios):.2f}x the fused op's time over the {len(ratios)} points" in limits
    assert "DeepGEMM is faster at 1: 256x128 M=1 fp32 (0.889x)" in limits  # (3 + 1) / (4 + 0.5)
    assert "No decode-order comparison" not in limits
    l2 = [r["l2_resident_us"] for r in bench["rows"]]
    assert f"a call takes {min(l2):.2f}-{max(l2):.2f} µs" in limits


def test_deepgemm_gemm_alone_column_method_and_limit():
    """DeepGEMM's GEMM alone, where the JSON has it: a column after DeepGEMM+quant in every table,
    a sentence in the method and its decode-order ratios in the known limits."""
    alone = {key: None if t is None else t - 2.0 for key, t in DG_TIMES.items()}
    bench = with_orders(SYNTHETIC, deepgemm=DG_TIMES, gemm_alone=alone)
    page = report.generate(bench, SYNTHETIC_DECODE)
    for title in ("Decode order, fp32", "Back to back, e8m0"):
        header = table_rows(section(page, title))[0]
        first_peer = 5 if title.startswith("Decode") else 6
        assert [h.split(" µs")[0] for h in header[first_peer:]] == [
            "DeepGEMM+quant", "DeepGEMM GEMM alone", "cuBLASLt", "unfused", "bf16"]
    b2b = table_rows(section(page, "Back to back, fp32"))
    m8 = next(c for c in b2b[1:-1] if (c[0], c[2]) == ("256", "8"))
    assert m8[6] == "6.00 (1.20x)" and m8[7] == "4.00 (0.80x)"  # 256x128 M=8: 6.0 and 4.0 over 5.0
    assert "DeepGEMM GEMM alone = its `fp8_gemm_nt` on activations quantized once" in "\n".join(section(page, "Method"))
    ratios = [r["decode"]["peers"][DG_GEMM] / r["decode"]["fused_us"] for r in bench["rows"]
              if r["decode"]["peers"][DG_GEMM] is not None]
    faster_ms = sorted({r["M"] for r in bench["rows"] if r["decode"]["peers"][DG_GEMM] is not None
                        and r["decode"]["peers"][DG_GEMM] < r["decode"]["fused_us"]})
    assert ratios and faster_ms
    limits = "\n".join(section(page, "Known limits"))
    assert (f"Its GEMM alone (the quant taken as free) takes {min(ratios):.2f}-{max(ratios):.2f}x the fused op's "
            f"time; it is faster at {sum(q < 1 for q in ratios)} of {len(ratios)} points "
            f"(M = {', '.join(map(str, faster_ms))}).") in limits
    without = report.generate(with_orders(SYNTHETIC, deepgemm=DG_TIMES), SYNTHETIC_DECODE)
    assert "GEMM alone" not in without


def test_decode_order_not_measured_renders():
    """A JSON without the decode order (an older bench, or `--no-decode`) renders: the headline says
    not measured, DeepGEMM is said not measured, and its known limit says it was not timed, with the
    run's reason and no figure from elsewhere; a JSON where only some rows carry the decode order
    marks the others per cell."""
    page = report.generate(SYNTHETIC, SYNTHETIC_DECODE)
    assert "Decode-order and L2-resident times: not measured" in "\n".join(section(page, "Decode order"))
    assert not any(line.startswith("## Decode order,") for line in page.splitlines())
    assert "DeepGEMM+quant: not measured in this run (the bench JSON has no DeepGEMM record)." in page
    assert "a call takes" not in page
    limits = "\n".join(section(page, "Known limits"))
    assert "**DeepGEMM.** No decode-order comparison in this run (the bench JSON has no DeepGEMM record);" in limits
    assert not re.search(r"\d\.\d\dx", limits.split("**Fraction")[0]), limits  # no ratio quoted from elsewhere
    absent = dict(SYNTHETIC, deepgemm={"present": False, "reason": "import deep_gemm failed: ModuleNotFoundError"})
    page = report.generate(absent)
    assert "not measured in this run (import deep_gemm failed: ModuleNotFoundError)" in page
    assert "**DeepGEMM.** No decode-order comparison in this run (import deep_gemm failed: ModuleNotFoundError);" in page
    b2b_only = with_orders(SYNTHETIC, decode_rows=set(), deepgemm=DG_TIMES)
    assert "**DeepGEMM.** No decode-order comparison in this run (timed back to back only);" in report.generate(b2b_only)
    partial = with_orders(SYNTHETIC, decode_rows={0})
    page = report.generate(partial)
    body = table_rows(section(page, "Decode order, fp32"))[1:-1]
    first = next(c for c in body if (c[0], c[2]) == ("256", "1"))
    others = [c for c in body if c is not first]
    assert first[3] == "4.50" and first[4] == "3.00" and first[5:] == ["13.00 (2.89x)", "7.00 (1.56x)", "6.00 (1.33x)"]
    assert others and all(c[3:] == ["not measured"] * 5 for c in others)
    assert not any(h.startswith("DeepGEMM") for h in table_rows(section(page, "Decode order, fp32"))[0])


def test_deepgemm_failures_and_copying_are_said():
    bench = with_orders(SYNTHETIC, deepgemm=DG_TIMES)
    bench["deepgemm"].update(scale_layout_copy_free=False, failures=["N=256 K=128 M=1 e8m0: RuntimeError: x"])
    method = "\n".join(section(report.generate(bench), "Method"))
    assert "the check failed: DeepGEMM copied the scales" in method
    assert "Not timed at 1 point(s), e.g. N=256 K=128 M=1 e8m0: RuntimeError: x." in method
    assert "checked at every point" not in method
