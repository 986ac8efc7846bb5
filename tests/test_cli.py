"""The command line: ``python -m sglang_fp8ext {bench,tune,check}`` (--help of each), ``check`` on
the CPU (exit 0 with PASS lines and the path table; exit 1 when an op or the table is broken),
``tune`` refusing without a GPU, and tune's pure helpers."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import sglang_fp8ext as fx
from sglang_fp8ext import check, dispatch, tune
from sglang_fp8ext.dispatch import DeviceInfo
from sglang_fp8ext.kernel_config import KERNEL_INTERFACE_VERSION, Engine, KernelConfig, Toggle, parse_label

OPS = ["per1x128_quant fp32", "per1x128_quant ue8m0", "per1x128_quant fp32 transpose_scale",
       "per1x128_quant ue8m0 transpose_scale", "smallm_gemm fp32 plain", "smallm_gemm fp32 shuffled",
       "smallm_gemm e8m0 plain", "smallm_gemm e8m0 shuffled", "scaled_gemm fp32", "scaled_gemm e8m0",
       "rmsnorm_quant", "add_rmsnorm_quant", "fp8_block_linear"]


PKG_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(fx.__file__)))


def cli_env(env_extra=None):
    """The environment the command runs in: this package first on the path, no switches but env_extra."""
    env = dict(os.environ)
    env["PYTHONPATH"] = PKG_PARENT + os.pathsep + env.get("PYTHONPATH", "")
    for name in ("SGL_FP8_SMALLM", "SGLANG_ROCM_SMALLM_FP8_BS", "SGLANG_DSV4_DENSE_MXSCALE",
                 "SGLANG_DSV4_DENSE_MXSCALE_SHAPES", "SGL_FP8_CONFIG_DIR"):
        env.pop(name, None)
    env.update(env_extra or {})
    return env


def run_cli(*args, env_extra=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "sglang_fp8ext", *args], cwd=PKG_PARENT, env=cli_env(env_extra),
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("sub", [[], ["bench"], ["tune"], ["check"]])
def test_help(sub):
    r = run_cli(*sub, "--help")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage: python -m sglang_fp8ext"), r.stdout[:200]
    if sub == ["tune"]:
        assert "--shapes" in r.stdout and "--ms" in r.stdout and "--out" in r.stdout
    if not sub:
        for name in ("bench", "tune", "check"):
            assert name in r.stdout


def _meta(device="cpu"):
    """The metadata of a format-2 table of this build."""
    return {"format": dispatch.TABLE_FORMAT, "kernel_interface": KERNEL_INTERFACE_VERSION, "device": device}


def _cpu_only_env(tmp_path):
    # check self-tests the GPU too where one exists; these assertions are about the CPU run
    return {"SGL_FP8_CONFIG_DIR": str(tmp_path), "CUDA_VISIBLE_DEVICES": ""}


def test_check_on_cpu_passes_and_prints_the_path_table(tmp_path):
    r = run_cli("check", env_extra=_cpu_only_env(tmp_path))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = r.stdout
    assert f"built backend {fx.BUILT_BACKEND!r}" in out and f"torch {torch.__version__}" in out
    assert "FAIL" not in out
    for op in OPS:
        assert f"PASS  {op} [cpu]" in out, op
    for name in check.SWITCHES:
        assert name in out
    # every switch README's table documents is one check reports
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    documented = set(re.findall(r"^\| `([A-Z0-9_]+)=", readme, flags=re.M))
    assert "SGL_FP8_PDL" in documented and documented <= set(check.SWITCHES), documented
    for name in documented:
        assert f"  {name} " in out, name
    assert "heuristic decides" in out and str(tmp_path) in out
    rows = [line.split() for line in out.splitlines() if line.startswith("  ") and line.split()[:1] != ["N"]]
    for n, k in dispatch.SPEC_SHAPES:
        for scale in ("fp32", "e8m0"):
            row = next((x for x in rows if x[:3] == [str(n), str(k), scale]), None)
            assert row is not None, (n, k, scale)
            # CPU heuristic: fused at every M, marked H
            assert row[3:] == ["fused", "H"] * 6, row


def test_check_shows_the_table_in_use(tmp_path):
    table = dict(_meta(), torch="t", git="g", entries=[
        {"N": 4096, "K": 2048, "scale": "fp32", "M": 4, "path": "fused", "config": {"engine": "general", "ctas_per_sm": 2},
         "us": 1.0},
        {"N": 4096, "K": 2048, "scale": "fp32", "M": 16, "path": "unfused", "config": None, "us": 1.0}])
    (tmp_path / "cpu.json").write_text(json.dumps(table))
    r = run_cli("check", env_extra=_cpu_only_env(tmp_path))
    assert r.returncode == 0, r.stdout[-3000:]
    assert str(tmp_path / "cpu.json") in r.stdout
    row = next(line.split() for line in r.stdout.splitlines() if line.split()[:3] == ["4096", "2048", "fp32"])
    label = "fused(engine=general,ctas_per_sm=2)"
    assert row[3:] == [label, "T"] * 3 + ["unfused", "T"] * 2 + ["fused", "H"], row


def test_check_ignores_a_format_1_table(tmp_path):
    """A table written before the typed config is not used (one line says why): check passes."""
    table = {"device": "cpu", "torch": "t", "git": "g", "entries": [
        {"N": 4096, "K": 2048, "scale": "fp32", "M": 4, "path": "fused", "config": [2, 0, 0, 1, 256], "us": 1.0}]}
    (tmp_path / "cpu.json").write_text(json.dumps(table))
    r = run_cli("check", env_extra=_cpu_only_env(tmp_path))
    assert r.returncode == 0, r.stdout[-3000:]
    assert "none used" in r.stdout and "format" in r.stdout and "heuristic decides" in r.stdout
    row = next(line.split() for line in r.stdout.splitlines() if line.split()[:3] == ["4096", "2048", "fp32"])
    assert row[3:] == ["fused", "H"] * 6, row


def test_check_fails_on_a_malformed_table(tmp_path):
    (tmp_path / "cpu.json").write_text(json.dumps(dict(_meta(), entries=[{"N": 4096}])))
    r = run_cli("check", env_extra=_cpu_only_env(tmp_path))
    assert r.returncode == 1
    assert "FAIL  table" in r.stdout and "missing" in r.stdout
    # a config of a removed engine or knob is named, too
    entry = {"N": 4096, "K": 2048, "scale": "fp32", "M": 4, "path": "fused", "config": {"warps": 4}, "us": 1.0}
    (tmp_path / "cpu.json").write_text(json.dumps(dict(_meta(), entries=[entry])))
    r = run_cli("check", env_extra=_cpu_only_env(tmp_path))
    assert r.returncode == 1
    assert "FAIL  table" in r.stdout and "'warps'" in r.stdout


def test_a_closed_pipe_ends_the_command_quietly(tmp_path):
    """``python -m sglang_fp8ext check | head -1``: the reader is gone before the command writes, so
    its first write fails; it exits with the shell's SIGPIPE status, 141, and no traceback (not a
    self-test reported as FAILED because its PASS line could not be printed)."""
    p = subprocess.Popen([sys.executable, "-m", "sglang_fp8ext", "check"], cwd=PKG_PARENT,
                         env=cli_env(_cpu_only_env(tmp_path)), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()
    err = p.stderr.read().decode()
    status = p.wait(timeout=300)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err[-2000:]
    assert status == 141, (status, err[-2000:])


def test_check_fails_when_an_op_is_wrong(monkeypatch, tmp_path, capsys):
    """In process, with smallm_gemm made slightly wrong (one output element off by 5 %)."""
    monkeypatch.setenv("SGL_FP8_CONFIG_DIR", str(tmp_path))
    monkeypatch.setattr(check, "gpu_usable", lambda: False)
    real = fx.smallm_gemm

    def wrong(x, w, w_scale, w_shuffled=False, bias=None):
        out = real(x, w, w_scale, w_shuffled, bias).clone()
        out[0] *= 1.05
        return out

    monkeypatch.setattr(fx, "smallm_gemm", wrong)
    assert check.main() == 1
    out = capsys.readouterr().out
    assert "FAIL  smallm_gemm fp32 plain [cpu]: M=1" in out and "relative error" in out
    assert "PASS  per1x128_quant fp32 [cpu]" in out  # the others still run and pass


def test_check_catches_a_wrong_quant_bit(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("SGL_FP8_CONFIG_DIR", str(tmp_path))
    monkeypatch.setattr(check, "gpu_usable", lambda: False)
    real = fx.per1x128_quant

    def one_code_off(x, ue8m0=False, transpose_scale=False):
        q, s = real(x, ue8m0, transpose_scale)
        q = q.clone()
        q.view(torch.uint8).view(-1)[7] ^= 1
        return q, s

    monkeypatch.setattr(fx, "per1x128_quant", one_code_off)
    assert check.main() == 1
    out = capsys.readouterr().out
    assert "FAIL  per1x128_quant fp32 [cpu]: " in out and "1 fp8 codes differ" in out


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present: tune would run instead of refusing")
def test_tune_refuses_without_a_gpu(tmp_path):
    r = run_cli("tune", "--shapes", "4096x2048", "--out", str(tmp_path))
    assert r.returncode == 2
    assert "no GPU here" in r.stderr and "Nothing was written" in r.stderr
    assert "Traceback" not in r.stderr
    assert list(tmp_path.iterdir()) == []


def test_tune_refusal_reasons(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert "no GPU here" in tune.refusal()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(fx, "BUILT_BACKEND", "cpu")
    assert "built for 'cpu'" in tune.refusal()
    monkeypatch.setattr(fx, "BUILT_BACKEND", "cuda")
    assert tune.refusal() is None


def test_tune_candidates():
    """tune's candidates: the kernel's own plan ("fused"), then every KernelConfig of tune.CONFIGS
    (no flag bits, no positional lists) whose K split fits K, then cuBLASLt where eligible and the
    unfused path; names are the configs' labels, unique and parseable back to the config."""
    h200 = DeviceInfo("cuda", "NVIDIA H200", (9, 0), has_scaled_mm=True)
    cands = tune.candidates(h200, 4096, 2048, e8m0=False)
    names = [c.name for c in cands]
    assert len(names) == len(set(names))
    assert names[0] == "fused" and names[-1] == "unfused" and "scaled_mm" in names
    assert cands[0].config is None and cands[0].op_config is None
    fused = [c for c in cands if c.config is not None]
    assert all(isinstance(c.config, KernelConfig) and c.path == "fused" for c in fused)
    assert [c.config for c in fused] == list(tune.CONFIGS)  # K = 2048: 16 blocks, every split fits
    for c in fused:
        assert c.name == c.config.label() and parse_label(c.name) == c.config
        assert c.op_config == tuple(c.config.op_args())
    configs = {c.config for c in fused}
    assert {KernelConfig(k_split=s) for s in (1, 2, 4, 8)} <= configs
    assert {KernelConfig(engine=Engine.GENERAL), KernelConfig(engine=Engine.REGISTER_FED)} <= configs
    assert {KernelConfig(pair_activations=Toggle.ON), KernelConfig(pair_activations=Toggle.OFF),
            KernelConfig(copy_blocks=1), KernelConfig(copy_blocks=2)} <= configs
    assert KernelConfig() not in configs  # the plan is the "fused" candidate
    # K = 512 has 4 blocks: no k_split of 8; e8m0 and N = 2112: no cuBLASLt
    small = {c.config.k_split for c in tune.candidates(h200, 4096, 512, e8m0=False) if c.config and c.config.k_split}
    assert small == {1, 2, 4}
    assert "scaled_mm" not in [c.name for c in tune.candidates(h200, 4096, 2048, e8m0=True)]
    assert "scaled_mm" not in [c.name for c in tune.candidates(h200, 2112, 7168, e8m0=False)]


def test_bench_diagnose_runs_only_typed_configs():
    """``bench --diagnose`` times the fused op under KernelConfigs (each with a correct output),
    named by their labels, which are unique."""
    from sglang_fp8ext import bench

    assert bench.DIAGNOSTIC_CONFIGS
    assert all(isinstance(c, KernelConfig) and not c.is_default for c in bench.DIAGNOSTIC_CONFIGS)
    labels = [c.label() for c in bench.DIAGNOSTIC_CONFIGS]
    assert len(labels) == len(set(labels))
    assert all(len(c.op_args()) == len(KernelConfig().op_args()) for c in bench.DIAGNOSTIC_CONFIGS)


def test_tune_pick_winner_margin():
    assert tune.pick_winner({"fused": 10.0, "fused(k_split=2)": 9.8, "unfused": 14.0}, "fused", 0.03) == "fused"
    assert tune.pick_winner({"fused": 10.0, "fused(k_split=2)": 9.0, "unfused": 14.0}, "fused", 0.03) == "fused(k_split=2)"
    assert tune.pick_winner({"fused": 10.0, "scaled_mm": 9.0}, "scaled_mm", 0.03) == "scaled_mm"
    assert tune.pick_winner({"fused(k_split=1)": 12.0, "unfused": 11.0}, "fused", 0.03) == "unfused"  # default rejected


def test_tune_check_rows():
    ref = torch.randn(3, 64, dtype=torch.float64) + 5
    assert tune.check_rows(ref.bfloat16(), ref, "ref") is None
    off = ref.clone()
    off[1] *= 1.01
    assert "row 1" in tune.check_rows(off, ref, "ref")
    nan = ref.clone()
    nan[2, 3] = float("nan")
    assert "row 2" in tune.check_rows(nan, ref, "ref")


def test_tune_bookkeeping_on_cpu_with_a_stand_in_timer(monkeypatch, tmp_path):
    """tune() end to end on the CPU (the graph timer replaced: it runs every call once and returns
    a made-up time per candidate): every candidate is checked before it may win, a wrong one is
    rejected even when it would be the fastest, and the written table (format 2: the build's
    metadata, the winner's config as named fields) loads and drives fp8_block_linear."""
    from sglang_fp8ext import linear

    ks2, ks1 = KernelConfig(k_split=2), KernelConfig(k_split=1)
    fake_us = {"fused": 10.0, ks2.label(): 5.0, ks1.label(): 1.0, "unfused": 20.0}
    timed = []

    def stand_in_timer(calls, replays):
        for call in calls:
            call()
        name = current["name"]
        timed.append(name)
        return fake_us.get(name, 15.0)

    current = {}
    real_run_path = linear.run_path

    def run_path(path, config, x2, *rest):
        current["name"] = path if config is None else KernelConfig.from_op_args(config).label()
        out = real_run_path(path, config, x2, *rest)
        if config == tuple(ks1.op_args()):  # this config is "broken": one row 1 % off
            out = out.clone()
            out[-1] *= 1.01
        return out

    monkeypatch.setattr(tune, "time_in_graph", stand_in_timer)
    monkeypatch.setattr(linear, "run_path", run_path)
    monkeypatch.setenv("SGL_FP8_CONFIG_DIR", str(tmp_path))
    dispatch.clear_table_cache()
    result = tune.tune([(272, 512)], [1, 3], copies=2, replays=1, margin=0.03, device=torch.device("cpu"))
    assert result["device"] == "cpu" and not result["failures"] and result["after"] == "copy"
    # the metadata the loader compares with the build
    assert result["format"] == dispatch.TABLE_FORMAT and result["kernel_interface"] == KERNEL_INTERFACE_VERSION
    assert result["torch"] == torch.__version__ and result["cuda"] == getattr(torch.version, "cuda", None)
    assert "hip" in result
    assert [(e["scale"], e["M"]) for e in result["entries"]] == [("fp32", 1), ("fp32", 3), ("e8m0", 1), ("e8m0", 3)]
    for e in result["entries"]:
        assert (e["path"], e["config"], e["us"]) == ("fused", {"k_split": 2}, 5.0), e
        assert e["rejected"][ks1.label()].startswith("wrong result: row")
        assert ks1.label() not in e["candidates"] and "unfused" in e["candidates"]
        assert set(e["candidates"]) <= {"fused", "unfused"} | {c.label() for c in tune.CONFIGS}
        assert e["heuristic"] == {"path": "fused", "us": 10.0}
        assert tune.entry_label(e) == "fused(k_split=2)"
    assert ks1.label() not in timed
    path = tune.write_table(result, str(tmp_path))
    assert path == str(tmp_path / "cpu.json")
    with open(path) as f:
        raw = json.load(f)
    for key in ("format", "kernel_interface", "device", "torch", "cuda"):
        assert key in raw and raw[key] == result[key], key
    meta, _ = dispatch.load_table_file(path)
    assert dispatch.table_mismatch(meta, "cpu", getattr(torch.version, "cuda", None)) == ""
    monkeypatch.setattr(linear, "run_path", real_run_path)
    assert linear.choose(torch.device("cpu"), 2, 272, 512) == ("fused", tuple(ks2.op_args()), "table", "2<=M<=3")
    assert linear.choose(torch.device("cpu"), 4, 272, 512).source == "heuristic"


def test_tune_times_each_call_after_a_copy_of_its_input(monkeypatch):
    """tune's default order: every timed call is preceded by a copy that writes the call's
    activations (x.copy_ of the saved input, so the values stay the same); --after none times the
    calls alone; any other order is refused. Records what runs inside the (stand-in) timer."""
    from sglang_fp8ext import linear

    timed, inside = [], [False]
    real_copy, real_run_path = torch.Tensor.copy_, linear.run_path

    def stand_in_timer(calls, replays):
        inside[0] = True
        timed.append([])
        for call in calls:
            call()
        inside[0] = False
        return 1.0

    def recording_copy(self, src, *args, **kwargs):
        if inside[0]:
            timed[-1].append("copy")
        return real_copy(self, src, *args, **kwargs)

    def run_path(path, config, x2, *rest):
        if inside[0]:
            timed[-1].append("gemm")
        return real_run_path(path, config, x2, *rest)

    monkeypatch.setattr(tune, "time_in_graph", stand_in_timer)
    monkeypatch.setattr(linear, "run_path", run_path)
    monkeypatch.setattr(torch.Tensor, "copy_", recording_copy)
    for after in ("copy", "none"):
        timed.clear()
        result = tune.tune([(272, 512)], [1], copies=2, replays=1, margin=0.03, device=torch.device("cpu"),
                           after=after)
        assert result["after"] == after and len(result["entries"]) == 2 and len(timed) >= 4
        for calls in timed:  # one timer call per candidate, over the 2 weight copies
            if after == "copy":
                assert calls[:2] == ["copy", "gemm"] and calls.count("gemm") == 2, calls
                assert all(calls[i - 1] == "copy" for i, c in enumerate(calls) if c == "gemm"), calls
            else:
                assert calls[0] == "gemm" and calls.count("gemm") == 2, calls
    with pytest.raises(ValueError, match="after must be one of"):
        tune.tune([(272, 512)], [1], copies=2, replays=1, margin=0.03, device=torch.device("cpu"), after="flush")


def test_tune_merges_the_previous_table_for_other_points(tmp_path):
    def entry(n, m, path, scale="fp32"):
        return {"N": n, "K": 1024, "scale": scale, "M": m, "path": path, "config": None, "us": 1.0}

    path = tmp_path / "nvidia_h200.json"
    old = dict(_meta("NVIDIA H200"), torch="old", git="abc",
               entries=[entry(8192, 1, "fused"), entry(4096, 1, "unfused"), entry(4096, 16, "unfused"),
                        entry(4096, 16, "unfused", "e8m0")])
    path.write_text(json.dumps(old))
    # a run that tuned 4096x1024 fp32 at M = 16 and 32 only: M = 1 and the e8m0 entry are kept, M = 16
    # is replaced in place, M = 32 (new to the table) follows
    result = {"device": "NVIDIA H200", "torch": "new", "git": "def",
              "entries": [entry(4096, 16, "fused"), entry(4096, 32, "fused")]}
    assert tune.merge_existing(result, str(path)) == 3
    assert [(e["N"], e["M"], e["scale"], e["path"], e.get("git")) for e in result["entries"]] == [
        (8192, 1, "fp32", "fused", "abc"), (4096, 1, "fp32", "unfused", "abc"), (4096, 16, "fp32", "fused", None),
        (4096, 16, "e8m0", "unfused", "abc"), (4096, 32, "fp32", "fused", None)]
    other = {"device": "NVIDIA H100", "entries": [entry(4096, 1, "fused")]}
    assert tune.merge_existing(other, str(path)) == 0 and len(other["entries"]) == 1
    # a table of another kernel interface (or format 1) is replaced, not merged
    for stale in (dict(old, kernel_interface=KERNEL_INTERFACE_VERSION - 1),
                  {k: v for k, v in old.items() if k not in ("format", "kernel_interface")}):
        path.write_text(json.dumps(stale))
        fresh = {"device": "NVIDIA H200", "entries": [entry(4096, 32, "fused")]}
        assert tune.merge_existing(fresh, str(path)) == 0 and len(fresh["entries"]) == 1
    path.write_text("{")
    assert tune.merge_existing(result, str(path)) == 0
