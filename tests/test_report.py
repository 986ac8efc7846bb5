"""`python -m sglang_fp8ext report`: docs/benchmarks.md is exactly what the generator makes of the committed
JSON (so the page and the data cannot disagree), and the generator's tables, geometric means, missing
fields and --check on a small synthetic run.

Files are located from this test file's repository root: CI also runs tests/ against an installed wheel
from another directory."""

from __future__ import annotations

import json
import os
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
    assert len(page.splitlines()) <= 150


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
        rows = table_rows(section(page, scale))
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
