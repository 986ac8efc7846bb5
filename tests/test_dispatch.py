"""fp8_block_linear's dispatch (sglang_fp8ext/dispatch.py, docs/dispatch.md): table lookup, the
heuristic per device type (through the pure ``dispatch.select`` with hand-built devices, so every
device type is covered without its GPU), the switches, cuBLASLt eligibility, the debug log,
torch.compile of the table path, the table format (format 2: metadata that must match the build,
typed kernel configs) and on an sm_90 GPU the numerics of the cuBLASLt path.

Expected paths come from the rules of the brief/docs (written out below), never from the code
under test. Every test writes its own tables into tmp_path (SGL_FP8_CONFIG_DIR)."""

from __future__ import annotations

import json
import os
import logging

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import sglang_fp8ext as fx
from sglang_fp8ext import dispatch, linear, tune
from sglang_fp8ext.dispatch import DeviceInfo
from sglang_fp8ext.kernel_config import KERNEL_INTERFACE_VERSION, Engine, KernelConfig, parse_label
from conftest import assert_gemm_contract, dense, rand_act, rand_weight, rand_wscale
from test_gemm import smallm_ref

H200 = DeviceInfo("cuda", "NVIDIA H200", (9, 0), has_scaled_mm=True)
H100 = DeviceInfo("cuda", "NVIDIA H100 80GB HBM3", (9, 0), has_scaled_mm=True)
B200 = DeviceInfo("cuda", "NVIDIA B200", (10, 0), has_scaled_mm=True)
L40 = DeviceInfo("cuda", "NVIDIA L40S", (8, 9), has_scaled_mm=True)
MI355 = DeviceInfo("rocm", "AMD Instinct MI355X", None, has_scaled_mm=True, has_aiter=True)
MI355_NO_AITER = MI355._replace(has_aiter=False)
CPU = DeviceInfo("cpu", "cpu")
CPU_DEV = torch.device("cpu")
N, K = 272, 512  # small enough for the CPU; N not a multiple of 128
# kernel configs as a table names them (JSON) and as a Choice carries them (op arguments)
KS2 = KernelConfig(k_split=2)
KS1 = KernelConfig(k_split=1)
GEN2 = KernelConfig(engine=Engine.GENERAL, ctas_per_sm=2)


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    for name in ("SGL_FP8_SMALLM", "SGLANG_ROCM_SMALLM_FP8_BS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SGL_FP8_CONFIG_DIR", str(tmp_path))
    dispatch.clear_table_cache()
    linear._logged_paths.clear()
    yield
    dispatch.clear_table_cache()


def entry(n, k, m, path, config=None, scale="fp32", us=1.0):
    return {"N": n, "K": k, "scale": scale, "M": m, "path": path, "config": config, "us": us, "candidates": {path: us}}


def j(config):
    """A KernelConfig as a table entry holds it."""
    return config.to_json()


def args(config):
    """A KernelConfig as Choice.config holds it (the op's arguments)."""
    return tuple(config.op_args())


def table(device, entries, **meta):
    """A format-2 table of this build (metadata first, then the entries)."""
    t = {"format": dispatch.TABLE_FORMAT, "kernel_interface": KERNEL_INTERFACE_VERSION, "device": device,
         "torch": torch.__version__, "cuda": getattr(torch.version, "cuda", None), "git": "test"}
    t.update(meta)
    t["entries"] = entries
    return t


def write_table(directory, device, entries, name=None, **meta):
    path = directory / (name or dispatch.table_filename(device))
    path.write_text(json.dumps(table(device, entries, **meta)))
    return path


def groups_of(device, entries):
    meta, groups = dispatch.parse_table(table(device, entries), "test")
    assert meta["format"] == dispatch.TABLE_FORMAT and "entries" not in meta
    return groups


def select(dev, m, n=5120, k=4096, **kw):
    return dispatch.select(dev, m, n, k, **kw)


class OpRecorder(TorchDispatchMode):
    """Records the name of every op dispatched (custom sgl_fp8 ops included) and their int-list args."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls.append((str(func.overloadpacket), [a for a in args if isinstance(a, list)]))
        return func(*args, **(kwargs or {}))

    def names(self):
        return [c[0] for c in self.calls]


def bits(t):
    return dense(t).view(torch.int16)


# ---- heuristic, per device type --------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["fp32", "e8m0"])
def test_heuristic_cpu_fused_at_any_m(fmt):
    for m in (0, 1, 8, 9, 32, 33, 1000):
        c = select(CPU, m, e8m0=fmt == "e8m0")
        assert (c.path, c.config, c.source) == ("fused", None, "heuristic"), (m, c)
        assert select(CPU, m, e8m0=fmt == "e8m0", fused_enabled=False).path == "unfused"


def test_heuristic_cuda_sm90():
    # eligible shapes (N % 128, K % 512, fp32, plain): fused up to 16 tokens; from 17 to 32 fused
    # where the weight is at most 22 MiB (5120x4096: 20 MiB), cuBLASLt where it is larger
    # (6144x4096: 24 MiB); cuBLASLt above 32. Where cuBLASLt cannot run, fused up to 32 tokens.
    assert dispatch.CUDA_FUSED_MAX_WEIGHT_BYTES_ABOVE_16 == 22 * 2**20
    for m in (1, 2, 8, 9, 16, 17, 24, 32):
        assert select(H200, m).path == "fused", m
        assert select(H200, m, n=4096, k=4096).path == "fused", m
    for m in (33, 200):
        assert select(H200, m).path == "scaled_mm", m
    for n, k in ((6144, 4096), (12288, 4096), (4096, 12288), (4608, 7168)):
        for m in (1, 8, 16):
            assert select(H200, m, n=n, k=k).path == "fused", (n, k, m)
        for m in (17, 32, 33, 200):
            assert select(H200, m, n=n, k=k).path == "scaled_mm", (n, k, m)
        # no cuBLASLt for e8m0 scales: the fused op up to 32 tokens (its wgmma plan over several
        # waves), the unfused path above
        for m in (16, 17, 32):
            assert select(H200, m, n=n, k=k, e8m0=True).path == "fused", (n, k, m)
        assert {select(H200, m, n=n, k=k, e8m0=True).bucket for m in (17, 32)} == {"16<M<=32"}
        for m in (33, 200):
            assert select(H200, m, n=n, k=k, e8m0=True).path == "unfused", (n, k, m)
        # a shuffled weight (the general kernel either way): the unfused path above 16 tokens
        assert select(H200, 17, n=n, k=k, e8m0=True, shuffled=True).path == "unfused"
        # one bucket for every M above 16 (one compile guard)
        assert {select(H200, m, n=n, k=k).bucket for m in (17, 32, 33, 500)} == {"M>16"}
    # 22 MiB exactly is small, one 128-row block more is not
    assert select(H200, 20, n=5632, k=4096).path == "fused"
    assert select(H200, 20, n=5632 + 128, k=4096).path == "scaled_mm"
    # N = 2112 (a partial last scale block) or K/128 not a multiple of 4 (K = 256, 640: cuBLASLt
    # measured wrong at K = 256): never cuBLASLt; fused up to 32 tokens, unfused above
    for n, k in ((2112, 7168), (4096, 256), (4096, 640)):
        for m in (1, 8, 9, 16, 32):
            assert select(H200, m, n=n, k=k).path == "fused", (n, k, m)
        for m in (33, 64, 500):
            assert select(H200, m, n=n, k=k).path == "unfused", (n, k, m)
    # a shuffled weight is not described to cuBLASLt either
    assert select(H200, 16, shuffled=True).path == "fused"
    assert select(H200, 20, shuffled=True).path == "fused"
    assert select(H200, 20, n=12288, k=4096, shuffled=True).path == "unfused"
    assert select(H200, 40, shuffled=True).path == "unfused"


def test_heuristic_cuda_without_scaled_mm_eligibility():
    for dev in (B200, L40, H200._replace(has_scaled_mm=False)):
        assert [select(dev, m).path for m in (1, 8, 9, 32, 33)] == ["fused"] * 4 + ["unfused"], dev


def test_heuristic_rocm():
    for dev in (MI355, MI355_NO_AITER):
        for m in (1, 9, 16, 32):
            assert select(dev, m, shuffled=True).path == "fused", (dev, m)
    assert select(MI355, 33, shuffled=True).path == "aiter"
    assert select(MI355, 33, shuffled=False).path == "unfused"  # AITER's GEMM wants a shuffled weight
    assert select(MI355, 33, shuffled=True, e8m0=True).path == "unfused"  # and fp32 scales
    assert select(MI355_NO_AITER, 33, shuffled=True).path == "unfused"
    assert select(MI355, 16, n=4096, k=4096).path == "fused"  # never cuBLASLt on ROCm


def test_fused_switch_off_heuristic_per_device():
    off = dict(fused_enabled=False)
    assert [select(H200, m, **off).path for m in (1, 8, 33)] == ["scaled_mm"] * 3
    assert [select(H200, m, n=2112, k=7168, **off).path for m in (1, 8, 33)] == ["unfused"] * 3
    assert select(MI355, 1, shuffled=True, **off).path == "aiter"
    assert select(MI355, 1, shuffled=False, **off).path == "unfused"
    assert select(CPU, 1, **off).path == "unfused"


# ---- cuBLASLt eligibility ------------------------------------------------------------------------


def test_scaled_mm_eligibility():
    ok = dict(e8m0=False, shuffled=False)
    assert dispatch.scaled_mm_eligible(H200, 4096, 4096, **ok)
    assert dispatch.scaled_mm_eligible(H200, 1536, 4096, **ok)
    assert not dispatch.scaled_mm_eligible(H200, 2112, 7168, **ok)  # N % 128 != 0
    assert not dispatch.scaled_mm_eligible(H200, 4096, 640, **ok)  # K/128 = 5: scale stride not 16-byte aligned
    for k in (1024, 2048, 4096, 7168):  # every SPEC §6 K
        assert dispatch.scaled_mm_eligible(H200, 4096, k, **ok)
    assert not dispatch.scaled_mm_eligible(H200, 4096, 4096, e8m0=True, shuffled=False)
    assert not dispatch.scaled_mm_eligible(H200, 4096, 4096, e8m0=False, shuffled=True)
    for dev in (B200, L40, H200._replace(has_scaled_mm=False), MI355, CPU):
        assert not dispatch.scaled_mm_eligible(dev, 4096, 4096, **ok), dev


def test_e8m0_never_takes_scaled_mm_even_when_tabulated():
    groups = groups_of("NVIDIA H200", [
        entry(4096, 4096, 64, "scaled_mm", scale="e8m0"), entry(4096, 4096, 64, "scaled_mm")])
    for m in (1, 8, 9, 16, 32, 33, 64, 100):
        c = select(H200, m, n=4096, k=4096, e8m0=True, groups=groups)
        assert c.path != "scaled_mm" and c.source == "heuristic", (m, c)
        for enabled in (True, False):
            assert select(H200, m, n=4096, k=4096, e8m0=True, fused_enabled=enabled).path != "scaled_mm"
    # the fp32 group of the same table is taken
    assert select(H200, 1, n=4096, k=4096, groups=groups) == ("scaled_mm", None, "table", "M<=64")
    # ... but not by a shuffled weight, nor for N = 2112
    assert select(H200, 1, n=4096, k=4096, groups=groups, shuffled=True).path == "fused"


def test_scaled_mm_table_entry_for_an_ineligible_shape_is_not_taken():
    groups = groups_of("NVIDIA H200", [entry(2112, 7168, 64, "scaled_mm")])
    for m in (1, 16, 33, 64):
        c = select(H200, m, n=2112, k=7168, groups=groups)
        assert c.path != "scaled_mm" and c.source == "heuristic"


# ---- tables ----------------------------------------------------------------------------------------


def test_table_filename():
    assert dispatch.table_filename("NVIDIA H200") == "nvidia_h200.json"
    assert dispatch.table_filename("AMD Instinct MI355X") == "amd_instinct_mi355x.json"
    assert dispatch.table_filename("NVIDIA H100 80GB HBM3") == "nvidia_h100_80gb_hbm3.json"
    assert dispatch.table_filename("cpu") == "cpu.json"
    with pytest.raises(ValueError):
        dispatch.table_filename("  ")


def test_config_dir_env(monkeypatch, tmp_path):
    assert dispatch.config_dir() == str(tmp_path)
    monkeypatch.delenv("SGL_FP8_CONFIG_DIR")
    assert dispatch.config_dir() == dispatch.package_config_dir()
    assert dispatch.package_config_dir().endswith("sglang_fp8ext/configs")


def test_table_lookup_m_buckets(tmp_path):
    write_table(tmp_path, "cpu", [
        entry(N, K, 2, "fused", j(GEN2)),
        entry(N, K, 8, "unfused"),
        entry(N, K, 16, "fused", {"engine": "auto", "k_split": 0}),  # the defaults: the kernel's own plan
        entry(N, K, 4, "fused", j(KS1), scale="e8m0"),
        entry(N + 16, K, 64, "unfused"),
    ])
    def choose(m, **kw):
        return linear.choose(CPU_DEV, m, kw.pop("n", N), K, **kw)

    for m in (0, 1, 2):  # smallest tabulated M >= m
        assert choose(m) == ("fused", args(GEN2), "table", "M<=2"), m
    for m in (3, 5, 8):
        assert choose(m) == ("unfused", None, "table", "3<=M<=8"), m
    for m in (9, 16):
        assert choose(m) == ("fused", None, "table", "9<=M<=16"), m
    for m in (17, 100):  # above every tabulated M: the heuristic (CPU: fused)
        assert choose(m) == ("fused", None, "heuristic", "any M"), m
    # the scale format and N are part of the key
    assert choose(3, e8m0=True) == ("fused", args(KS1), "table", "M<=4")
    assert choose(5, e8m0=True).source == "heuristic"
    assert choose(40, n=N + 16).path == "unfused" and choose(80, n=N + 16).source == "heuristic"
    assert choose(3, n=N + 32).source == "heuristic"
    assert linear.select_path(CPU_DEV, 5, N, K) == "unfused"


def test_table_entries_in_any_order_and_sorted(tmp_path):
    write_table(tmp_path, "cpu", [entry(N, K, 32, "fused"), entry(N, K, 4, "unfused")])
    assert linear.choose(CPU_DEV, 3, N, K).path == "unfused"
    assert linear.choose(CPU_DEV, 5, N, K) == ("fused", None, "table", "5<=M<=32")


def test_fp8_block_linear_runs_the_tabulated_instance(tmp_path):
    write_table(tmp_path, "cpu", [entry(N, K, 4, "fused", j(GEN2)), entry(N, K, 32, "unfused")])
    w, ws = rand_weight(N, K, 1), rand_wscale(N, K, False, 1)
    bias = rand_act((N,), torch.bfloat16, 2, outliers=False)
    for m, op, config in ((3, "sgl_fp8._smallm_gemm_configured", [GEN2.op_args()]), (9, "sgl_fp8.scaled_gemm", [])):
        x = rand_act((m, K), torch.bfloat16, m)
        with OpRecorder() as rec:
            out = fx.fp8_block_linear(x, w, ws, bias=bias)
        gemms = [c for c in rec.calls if "gemm" in c[0]]
        assert [c[0] for c in gemms] == [op], rec.names()
        assert gemms[0][1] == config
        assert_gemm_contract(out, smallm_ref(x, w, ws, bias), f"table path M={m}")
        # the CPU has one GEMM implementation: every path gives the same bits
        assert torch.equal(bits(out), bits(fx.smallm_gemm(x, w, ws, False, bias)))


def _ignored_once(tmp_path, caplog, expect):
    """The cpu table in tmp_path is not used: the heuristic decides every call, and one warning
    (for all the calls) names the file and ``expect``."""
    with caplog.at_level(logging.WARNING, logger="sglang_fp8ext"):
        for m in (3, 4, 1, 40):
            assert linear.choose(CPU_DEV, m, N, K) == ("fused", None, "heuristic", "any M"), m
        x, w, ws = rand_act((2, K), torch.bfloat16, 1), rand_weight(N, K, 1), rand_wscale(N, K, False, 1)
        with OpRecorder() as rec:
            fx.fp8_block_linear(x, w, ws)
        assert "sgl_fp8.smallm_gemm" in rec.names(), rec.names()  # the heuristic's path, not the table's
    file, note, groups = dispatch.table_for(str(tmp_path), "cpu")
    assert file.endswith("cpu.json") and expect in note and groups == ()
    warnings = [r for r in caplog.records if "not used" in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert "cpu.json" in warnings[0].getMessage() and expect in warnings[0].getMessage()
    assert warnings[0].levelno == logging.WARNING


def test_device_mismatch_is_not_used(tmp_path, caplog):
    # the file for "cpu" says it was measured on another device: not used, a warning says why
    write_table(tmp_path, "CPU", [entry(N, K, 64, "unfused")], name="cpu.json")
    _ignored_once(tmp_path, caplog, "not this device")
    assert "'CPU'" in dispatch.table_for(str(tmp_path), "cpu")[1]


def test_format_1_table_is_ignored_with_one_warning(tmp_path, caplog):
    """A table written before the typed config (no "format", configs as positional lists, flag
    bits of engines since removed) is not read, let alone rejected: re-tuning replaces it."""
    old = {"device": "cpu", "torch": "2.11", "git": "old", "entries": [
        entry(N, K, 4, "fused", [0, 0, 0, 0, 256]), entry(N, K, 64, "unfused", None)]}
    (tmp_path / "cpu.json").write_text(json.dumps(old))
    _ignored_once(tmp_path, caplog, "format None")


@pytest.mark.parametrize("fmt", [1, 3, "2"])
def test_other_format_is_ignored_with_one_warning(tmp_path, caplog, fmt):
    write_table(tmp_path, "cpu", [entry(N, K, 64, "unfused")], format=fmt)
    _ignored_once(tmp_path, caplog, f"format {fmt!r}")


@pytest.mark.parametrize("version", [KERNEL_INTERFACE_VERSION - 1, KERNEL_INTERFACE_VERSION + 1])
def test_other_kernel_interface_is_ignored_with_one_warning(tmp_path, caplog, version):
    write_table(tmp_path, "cpu", [entry(N, K, 64, "unfused")], kernel_interface=version)
    _ignored_once(tmp_path, caplog, f"kernel interface {version}")


def test_other_cuda_major_is_ignored_with_one_warning(tmp_path, caplog, monkeypatch):
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    write_table(tmp_path, "cpu", [entry(N, K, 64, "unfused")], cuda="13.0")
    _ignored_once(tmp_path, caplog, "CUDA 13.0")


@pytest.mark.parametrize("table_cuda, torch_cuda", [("13.0", "13.2"), (None, "13.0"), ("13.0", None), (None, None)])
def test_same_cuda_major_or_unknown_is_used(tmp_path, monkeypatch, table_cuda, torch_cuda):
    monkeypatch.setattr(torch.version, "cuda", torch_cuda)
    write_table(tmp_path, "cpu", [entry(N, K, 64, "unfused")], cuda=table_cuda)
    assert linear.choose(CPU_DEV, 3, N, K) == ("unfused", None, "table", "M<=64")


def test_table_mismatch_rules():
    meta = {k: v for k, v in table("NVIDIA H200", [], cuda="13.0").items() if k != "entries"}
    assert dispatch.table_mismatch(meta, "NVIDIA H200", "13.0") == ""
    assert dispatch.table_mismatch(meta, "NVIDIA H200", "13.1") == ""
    assert dispatch.table_mismatch(meta, "NVIDIA H200", None) == ""  # a ROCm or CPU torch: not compared
    assert "CUDA 13.0" in dispatch.table_mismatch(meta, "NVIDIA H200", "12.9")
    assert "not this device" in dispatch.table_mismatch(meta, "NVIDIA H200 NVL", "13.0")  # exact names only
    assert "format" in dispatch.table_mismatch(dict(meta, format=1), "NVIDIA H200", "13.0")
    assert "format" in dispatch.table_mismatch({k: v for k, v in meta.items() if k != "format"}, "NVIDIA H200", "13.0")
    assert "kernel interface" in dispatch.table_mismatch(dict(meta, kernel_interface=1), "NVIDIA H200", "13.0")


def test_table_of_another_device_is_ignored(tmp_path):
    write_table(tmp_path, "NVIDIA H200", [entry(N, K, 64, "unfused")])
    assert linear.choose(CPU_DEV, 3, N, K).source == "heuristic"
    assert dispatch.table_for(str(tmp_path), "NVIDIA H200")[2] != ()


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda t: t["entries"][0].update(config={"warps": 4}), r"config: unknown kernel config field\(s\) \['warps'\]"),
        (lambda t: t["entries"][0].update(config={"k_split": 2, "flags": 256}), r"unknown kernel config field\(s\) \['flags'\]"),
        (lambda t: t["entries"][0].update(config={"engine": "mma_sync"}), r"config: KernelConfig\.engine must be one of"),
        (lambda t: t["entries"][0].update(config={"engine": 7}), r"KernelConfig\.engine must be one of"),
        (lambda t: t["entries"][0].update(config={"pair_activations": "maybe"}), r"KernelConfig\.pair_activations"),
        (lambda t: t["entries"][0].update(config={"k_split": -1}), r"config: KernelConfig\.k_split must be an integer"),
        (lambda t: t["entries"][0].update(config={"copy_blocks": 1 << 16}), r"KernelConfig\.copy_blocks must be an integer"),
        (lambda t: t["entries"][0].update(config={"ctas_per_sm": 1.5}), r"KernelConfig\.ctas_per_sm must be an integer"),
        (lambda t: t["entries"][0].update(config={"k_split": True}), r"KernelConfig\.k_split must be an integer"),
        (lambda t: t["entries"][0].update(config=[2, 0, 0, 0, 0]), r"config: a kernel config is an object of named fields"),
        (lambda t: t["entries"][0].update(config="fused(k_split=2)"), r"config: a kernel config is an object"),
        (lambda t: t["entries"][1].update(config={"k_split": 2}), r"only meaningful for the fused path"),
        (lambda t: t["entries"][0].update(path="cublas"), r"path must be one of"),
        (lambda t: t["entries"][0].update(scale="bf16"), r"scale must be one of"),
        (lambda t: t["entries"][0].pop("M"), r"missing 'M'"),
        (lambda t: t["entries"][0].update(N=100), r"N must be"),
        (lambda t: t["entries"][0].update(K=100), r"K must be"),
        (lambda t: t["entries"][0].update(M=-1), r"M must be"),
        (lambda t: t["entries"][0].update(M="4"), r"M must be"),
        (lambda t: t["entries"][0].update(us=float("nan")), r"us must be"),
        (lambda t: t["entries"].append(dict(t["entries"][0])), r"a second entry for N=272 K=512 scale=fp32 M=4"),
        (lambda t: t["entries"].append(dict(t["entries"][0], config={"k_split": 1})), r"a second entry"),
        (lambda t: t.pop("entries"), r"'entries'"),
        (lambda t: t.update(device=""), r"'device'"),
        (lambda t: t.pop("kernel_interface"), r"'kernel_interface'"),
        (lambda t: t.update(kernel_interface="2"), r"'kernel_interface'"),
    ],
)
def test_malformed_table_is_a_clear_error(tmp_path, mutate, message):
    t = table("cpu", [entry(N, K, 4, "fused", j(KS2)), entry(N, K, 8, "unfused")])
    mutate(t)
    (tmp_path / "cpu.json").write_text(json.dumps(t))
    x, w, ws = rand_act((2, K), torch.bfloat16, 1), rand_weight(N, K, 1), rand_wscale(N, K, False, 1)
    with pytest.raises(ValueError, match=message) as ei:
        fx.fp8_block_linear(x, w, ws)
    assert isinstance(ei.value, dispatch.TableError)
    assert str(tmp_path / "cpu.json") in str(ei.value)  # the message names the file
    # and it stays an error at every call (not cached as "no table")
    with pytest.raises(dispatch.TableError):
        linear.choose(CPU_DEV, 2, N, K)


def test_bad_json_is_a_clear_error(tmp_path):
    (tmp_path / "cpu.json").write_text('{"format": 2, "device": "cpu", "entries": [')
    with pytest.raises(dispatch.TableError, match=r"cpu\.json: not valid JSON"):
        linear.choose(CPU_DEV, 1, N, K)


def test_table_as_tune_writes_it_is_accepted():
    """Extra keys (candidates, rejected, heuristic, failures, ...) are allowed; null config too."""
    t = table("NVIDIA H200", [dict(entry(5120, 4096, 1, "fused", j(GEN2)), heuristic={"path": "fused", "us": 9.0},
                                   rejected={"fused(k_split=8)": "did not run: ..."}),
                              entry(5120, 4096, 16, "scaled_mm"), entry(5120, 4096, 32, "fused", {})],
              capability=[9, 0], margin=0.03, failures=[])
    meta, groups = dispatch.parse_table(t, "t")
    assert meta["device"] == "NVIDIA H200" and meta["kernel_interface"] == KERNEL_INTERFACE_VERSION
    assert meta["capability"] == [9, 0] and "entries" not in meta
    assert groups == ((5120, 4096, "fp32", ((1, "fused", args(GEN2)), (16, "scaled_mm", None), (32, "fused", None))),)


def test_tune_write_table_round_trip(tmp_path):
    """What tune writes (tune.write_table: format-2 metadata of this build, configs as objects of
    named fields) reads back to the same choices, each config the KernelConfig tune chose."""
    configs = (GEN2, KS2, KernelConfig(engine=Engine.REGISTER_FED), KernelConfig(copy_blocks=2, pair_activations="off"))
    entries = [entry(N, K, 1 << i, "fused", c.to_json()) for i, c in enumerate(configs)]
    entries += [entry(N, K, 64, "fused", None), entry(N, K, 128, "unfused"),
                entry(N, K, 4, "fused", KernelConfig(k_split=4).to_json(), scale="e8m0")]
    result = table("cpu", entries, capability=None, failures=[])
    path = tune.write_table(result, str(tmp_path))
    assert path == str(tmp_path / "cpu.json")
    with open(path) as f:
        raw = json.load(f)
    assert raw["format"] == dispatch.TABLE_FORMAT == 2 and raw["kernel_interface"] == KERNEL_INTERFACE_VERSION
    assert raw["entries"][2]["config"] == {"engine": "register_fed"}
    meta, groups = dispatch.load_table_file(path)
    assert dispatch.table_mismatch(meta, "cpu", getattr(torch.version, "cuda", None)) == ""
    by_m = {(s, m): (p, c) for n, k, s, es in groups for m, p, c in es}
    for i, c in enumerate(configs):
        assert by_m[("fp32", 1 << i)] == ("fused", args(c))
        assert KernelConfig.from_op_args(by_m[("fp32", 1 << i)][1]) == c
    assert by_m[("fp32", 64)] == ("fused", None) and by_m[("fp32", 128)] == ("unfused", None)
    for i, c in enumerate(configs):
        lo = 1 if i == 0 else (1 << (i - 1)) + 1
        for m in (lo, 1 << i):
            assert linear.choose(CPU_DEV, m, N, K).config == args(c), (m, c)
    assert linear.choose(CPU_DEV, 3, N, K, e8m0=True) == ("fused", args(KernelConfig(k_split=4)), "table", "M<=4")


def test_switch_off_overrides_the_table(tmp_path, monkeypatch):
    write_table(tmp_path, "cpu", [entry(N, K, 8, "fused", j(KS2)), entry(N, K, 16, "fused")])
    assert linear.choose(CPU_DEV, 4, N, K).path == "fused"
    for name in ("SGL_FP8_SMALLM", "SGLANG_ROCM_SMALLM_FP8_BS"):
        monkeypatch.setenv(name, "0")
        for m in (1, 4, 12, 40):
            assert linear.choose(CPU_DEV, m, N, K) == ("unfused", None, "heuristic", "any M"), (name, m)
        x, w, ws = rand_act((3, K), torch.bfloat16, 1), rand_weight(N, K, 1), rand_wscale(N, K, False, 1)
        with OpRecorder() as rec:
            fx.fp8_block_linear(x, w, ws)
        assert "sgl_fp8.scaled_gemm" in rec.names() and not any("smallm" in n for n in rec.names())
        monkeypatch.delenv(name)
    # on a GPU, the switch off with a tabulated fused entry falls to the heuristic without fused
    groups = groups_of("NVIDIA H200", [entry(4096, 4096, 8, "fused")])
    assert select(H200, 4, n=4096, k=4096, groups=groups, fused_enabled=False) == ("scaled_mm", None, "heuristic", "any M")


def test_tabulated_aiter_needs_rocm_aiter_and_a_shuffled_weight():
    groups = groups_of("x", [entry(4096, 4096, 64, "aiter")])
    assert select(MI355, 40, n=4096, k=4096, groups=groups, shuffled=True) == ("aiter", None, "table", "M<=64")
    assert select(MI355, 4, n=4096, k=4096, groups=groups, shuffled=False).source == "heuristic"
    assert select(MI355_NO_AITER, 40, n=4096, k=4096, groups=groups, shuffled=True).path == "unfused"
    assert select(H200, 40, n=4096, k=4096, groups=groups, shuffled=True).path == "unfused"


# ---- the debug log -----------------------------------------------------------------------------------


def test_debug_log_once_per_bucket_path_and_config(tmp_path, caplog):
    write_table(tmp_path, "cpu", [entry(N, K, 4, "fused", j(GEN2))])
    w, ws = rand_weight(N, K, 1), rand_wscale(N, K, False, 1)
    with caplog.at_level(logging.DEBUG, logger="sglang_fp8ext"):
        for m in (1, 3, 4, 2):  # one bucket
            fx.fp8_block_linear(rand_act((m, K), torch.bfloat16, m), w, ws)
        for m in (5, 9):  # above the table: heuristic
            fx.fp8_block_linear(rand_act((m, K), torch.bfloat16, m), w, ws)
    lines = [r.getMessage() for r in caplog.records if "fp8_block_linear" in r.getMessage()]
    assert len(lines) == 2, lines
    assert f"N={N} K={K}" in lines[0] and "fused path" in lines[0] and f"({GEN2.label()})" in lines[0]
    assert "chosen by the table" in lines[0] and "M<=4" in lines[0]
    assert "fused path" in lines[1] and "chosen by the heuristic" in lines[1] and "(fused(" not in lines[1]


# ---- torch.compile of the table path ---------------------------------------------------------------


@pytest.mark.parametrize("unbacked", [False, True], ids=["dynamic", "unbacked"])
def test_compile_chooses_the_path_per_call(tmp_path, caplog, unbacked):
    """Under torch.compile the path is chosen at run time inside one opaque op: one graph serves
    M on both sides of a table boundary (dynamic or unbacked M: vLLM runs one graph for every
    batch size), each M takes its own path (the debug log, written where the choice is made),
    and the results equal eager bitwise. Tracing the choice instead guarded on M (a recompile per
    bucket) and failed to compile with unbacked M ("Could not guard on data-dependent expression")."""
    write_table(tmp_path, "cpu", [entry(N, K, 8, "fused", j(GEN2)), entry(N, K, 32, "unfused")])
    w, ws = rand_weight(N, K, 3), rand_wscale(N, K, False, 3)
    graphs = []

    def backend(gm, example_inputs):
        graphs.append({str(n.target) for n in gm.graph.nodes if n.op == "call_function"})
        return gm.forward

    def f(x):
        return fx.fp8_block_linear(x, w, ws)

    cf = torch.compile(f, backend=backend, fullgraph=True, dynamic=True)
    # the first M differs from every weight dimension (272, 512, 3, 4): duck sizing would tie them
    with caplog.at_level(logging.DEBUG, logger="sglang_fp8ext"):
        for m in (6, 5, 7, 8, 17, 32, 9):
            x = rand_act((m, K), torch.bfloat16, m)
            if unbacked:
                torch._dynamo.decorators.mark_unbacked(x, 0)
            assert torch.equal(bits(cf(x)), bits(f(x))), m
    assert len(graphs) == 1, graphs
    assert any("sgl_fp8._block_linear" in t for t in graphs[0]), graphs[0]
    lines = [r.getMessage() for r in caplog.records if "fp8_block_linear" in r.getMessage()]
    assert len(lines) == 2, lines
    assert "M<=8" in lines[0] and "fused path" in lines[0] and f"({GEN2.label()})" in lines[0]
    assert "9<=M<=32" in lines[1] and "unfused path" in lines[1]


def test_compile_sees_a_switch_changed_after_tracing(monkeypatch, caplog):
    """The switches are read per call under torch.compile too, as the docs say for eager."""
    w, ws = rand_weight(N, K, 4), rand_wscale(N, K, False, 4)
    cf = torch.compile(lambda x: fx.fp8_block_linear(x, w, ws), backend="aot_eager", fullgraph=True, dynamic=True)
    x = rand_act((6, K), torch.bfloat16, 6)
    with caplog.at_level(logging.DEBUG, logger="sglang_fp8ext"):
        cf(x)
        monkeypatch.setenv("SGL_FP8_SMALLM", "0")
        cf(x)
    lines = [r.getMessage() for r in caplog.records if "fp8_block_linear" in r.getMessage()]
    assert len(lines) == 2 and "fused path" in lines[0] and "unfused path" in lines[1], lines


# ---- GPU: the cuBLASLt path ------------------------------------------------------------------------

GPU_MS = (1, 3, 16, 33, 64)


def _require_sm90(gpu):
    if torch.version.hip or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip(f"cuBLASLt blockwise path is sm_90 only; this GPU is {torch.cuda.get_device_name()} "
                    f"(capability {torch.cuda.get_device_capability()})")
    if not hasattr(torch, "_scaled_mm"):
        pytest.skip(f"torch {torch.__version__} has no torch._scaled_mm")


def test_gpu_device_facts(gpu):
    info = linear.device_info(torch.device(gpu))
    assert info.name == torch.cuda.get_device_name()
    assert info.kind == ("rocm" if torch.version.hip else "cuda")
    assert info.capability == tuple(torch.cuda.get_device_capability())


@pytest.mark.parametrize("n, k", dispatch.SPEC_SHAPES)
def test_gpu_scaled_mm_path_vs_float64_reference(gpu, tmp_path, monkeypatch, n, k):
    """A table that says scaled_mm for every M: fp8_block_linear runs cuBLASLt for the eligible
    shapes and meets the SPEC §3.4 contract at M = 1, 3, 16, 33, 64 (bias too); N = 2112 never
    takes it."""
    _require_sm90(gpu)
    write_table(tmp_path, torch.cuda.get_device_name(), [entry(n, k, 64, "scaled_mm")])
    calls = []
    real = dispatch.scaled_mm_linear
    monkeypatch.setattr(dispatch, "scaled_mm_linear", lambda *a: calls.append(1) or real(*a))
    eligible = n % 128 == 0
    assert eligible == (n != 2112)
    w, ws = rand_weight(n, k, 5), rand_wscale(n, k, False, 5)
    wd, wsd = w.to(gpu), ws.to(gpu)
    bias = rand_act((n,), torch.bfloat16, 6, outliers=False)
    for m in GPU_MS:
        x = rand_act((m, k), torch.bfloat16, m)
        expected = "scaled_mm" if eligible else ("fused" if m <= 32 else "unfused")
        assert linear.choose(torch.device(gpu), m, n, k).path == expected, m
        before = len(calls)
        out = fx.fp8_block_linear(x.to(gpu), wd, wsd)
        assert len(calls) - before == (1 if eligible else 0), m
        assert out.shape == (m, n) and out.dtype == torch.bfloat16
        assert_gemm_contract(out, smallm_ref(x, w, ws), f"scaled_mm path N={n} K={k} M={m}")
        if m in (3, 33):
            outb = fx.fp8_block_linear(x.to(gpu), wd, wsd, bias=bias.to(gpu))
            assert_gemm_contract(outb, smallm_ref(x, w, ws, bias), f"scaled_mm path + bias N={n} K={k} M={m}")
        if eligible:  # the helper itself, fp16 activations too
            xh = rand_act((m, k), torch.float16, m + 1)
            outh = dispatch.scaled_mm_linear(xh.to(gpu), wd, wsd)
            assert outh.dtype == torch.float16
            assert_gemm_contract(outh, smallm_ref(xh, w, ws), f"scaled_mm fp16 N={n} K={k} M={m}")


def test_gpu_heuristic_takes_scaled_mm_above_16_on_sm90(gpu, tmp_path, monkeypatch):
    """Without a table, CUDA takes the fused op up to dispatch.CUDA_FUSED_ONLY_MAX_M (16), and up
    to 32 tokens where the weight is at most 22 MiB; cuBLASLt above where eligible (fp32 scales,
    N a multiple of 128, K of 512)."""
    _require_sm90(gpu)
    assert dispatch.CUDA_FUSED_ONLY_MAX_M == 16
    monkeypatch.setenv("SGL_FP8_CONFIG_DIR", str(tmp_path))  # no table: the heuristic
    dispatch.clear_table_cache()
    calls = []
    real = dispatch.scaled_mm_linear
    monkeypatch.setattr(dispatch, "scaled_mm_linear", lambda *a: calls.append(a[0].shape[0]) or real(*a))
    for n, k, takes in ((4096, 2048, [40]), (256, 512, [40]), (512, 256, []), (6144, 4096, [17, 40])):
        w, ws = rand_weight(n, k, 7), rand_wscale(n, k, False, 7)
        calls.clear()
        for m in (8, 16, 17, 40):
            x = rand_act((m, k), torch.bfloat16, m)
            out = fx.fp8_block_linear(x.to(gpu), w.to(gpu), ws.to(gpu))
            assert_gemm_contract(out, smallm_ref(x, w, ws), f"heuristic N={n} K={k} M={m}")
        assert calls == takes, (n, k)
    n, k = 4096, 2048
    w, e8 = rand_weight(n, k, 7), rand_wscale(n, k, True, 7)
    calls.clear()
    fx.fp8_block_linear(rand_act((40, k), torch.bfloat16, 1).to(gpu), w.to(gpu), e8.to(gpu))
    assert calls == []  # e8m0 scales: never cuBLASLt
    dispatch.clear_table_cache()


def _blockwise_scaled_mm_stand_in(a, b, scale_a, scale_b, out_dtype):
    """torch._scaled_mm's 1x128 x 128x128 blockwise contract in plain torch (for CPU tracing tests):
    out[m, n] = sum_kb scale_a[m, kb] * scale_b[kb, n // 128] * sum_k a[m, k] * b[k, n]."""
    m, k = a.shape
    n = b.shape[1]
    kb = k // 128
    partial = torch.einsum("mbk,nbk->mnb", a.float().view(m, kb, 128), b.t().float().reshape(n, kb, 128))
    sb = scale_b.t().repeat_interleave(128, dim=0)[:n]  # [N, KB]
    return (partial * scale_a[:, None, :] * sb[None, :, :]).sum(-1).to(out_dtype)


@pytest.mark.parametrize("dynamic", [False, True])
def test_scaled_mm_linear_traces_under_compile(monkeypatch, dynamic):
    """The cuBLASLt path's padding (M to a multiple of 4, at least 4) and slicing compile with
    fullgraph=True for static and dynamic M, and compute the same as eager. torch._scaled_mm is
    replaced by a plain-torch model of its blockwise contract, so this runs on the CPU; the real
    call is checked on the H200 by the GPU tests above. (A torch.sym_max of two ints in the padding
    broke the compiled e2e decode on the H200 with torch 2.11; torch 2.13 here accepts it, so this
    test checks the traced padding, not that torch version's failure.)"""
    monkeypatch.setattr(torch, "_scaled_mm", _blockwise_scaled_mm_stand_in)
    n, k = 256, 512
    w, ws = rand_weight(n, k, 3), rand_wscale(n, k, False, 3)
    bias = rand_act((n,), torch.bfloat16, 4, outliers=False)
    torch._dynamo.reset()
    compiled = torch.compile(dispatch.scaled_mm_linear, fullgraph=True, dynamic=dynamic, backend="aot_eager")
    for m in (1, 3, 4, 5, 9, 16):
        x = rand_act((m, k), torch.bfloat16, m)
        eager = dispatch.scaled_mm_linear(x, w, ws, bias)
        assert eager.shape == (m, n)
        assert_gemm_contract(eager, smallm_ref(x, w, ws, bias), f"stand-in scaled_mm M={m}")
        out = compiled(x, w, ws, bias)
        assert out.shape == (m, n) and torch.equal(out, eager), m
    empty = dispatch.scaled_mm_linear(rand_act((0, k), torch.bfloat16, 1), w, ws)
    assert empty.shape == (0, n)
    torch._dynamo.reset()


SHIPPED_TABLES = [H200, H100]  # the devices whose tables sglang_fp8ext/configs/ ships


def test_the_shipped_tables_are_those_listed():
    names = sorted(f for f in os.listdir(dispatch.package_config_dir()) if f.endswith(".json"))
    assert names == sorted(dispatch.table_filename(d.name) for d in SHIPPED_TABLES)


@pytest.mark.parametrize("device", SHIPPED_TABLES, ids=lambda d: d.name)
def test_shipped_table_is_valid_and_covers_the_spec_shapes(device):
    """Each table the package ships (H200, H100 SXM) is format 2 of this build's kernel interface (so
    that device uses it), parses with the loader fp8_block_linear uses, was measured on that device,
    after copy kernels, with a recorded torch and CUDA, covers every SPEC §6 shape x scale format at
    M = 1..32, and never names a path that cannot run its entry: cuBLASLt only where eligible; every
    fused config a valid KernelConfig of a kept engine; the register-fed engine only where its plan
    applies (K a multiple of 1024 up to 8192, at most 16 tokens, N a multiple of 16; elsewhere the op
    raises its plan error). The register-fed engine is on main because the tables name it (issue 47:
    an engine stays only where it pays), so each must name it somewhere."""
    path = os.path.join(dispatch.package_config_dir(), dispatch.table_filename(device.name))
    meta, groups = dispatch.load_table_file(path)
    assert meta["format"] == dispatch.TABLE_FORMAT and meta["kernel_interface"] == KERNEL_INTERFACE_VERSION
    assert meta["device"] == device.name and meta["after"] == "copy"
    assert dispatch.table_mismatch(meta, device.name, meta["cuda"]) == ""
    assert meta["torch"].startswith("2.") and meta["cuda"] and meta["git"] and not meta.get("failures")
    assert groups
    with open(path) as f:
        raw = json.load(f)
    engines = set()
    for e in raw["entries"]:
        if e.get("config") is not None:
            assert e["path"] == "fused", e
            config = KernelConfig.from_json(e["config"])
            assert not config.is_default and config.to_json() == e["config"], e  # written as tune writes it
            assert config.engine in (Engine.AUTO, Engine.WGMMA, Engine.GENERAL, Engine.REGISTER_FED), e
            assert config.tiles_per_wave == 0, e  # a gfx950 knob in an sm_90 table
            engines.add(config.engine)
        for name in e.get("candidates", {}):  # the candidates it was chosen from are today's labels
            assert name in ("scaled_mm", "unfused", "aiter") or parse_label(name) is not None, (e["N"], e["K"], name)
    assert Engine.REGISTER_FED in engines
    by_key = {(n, k, s): entries for n, k, s, entries in groups}
    for n, k in dispatch.SPEC_SHAPES:
        for scale in ("fp32", "e8m0"):
            entries = by_key[(n, k, scale)]
            assert [m for m, _, _ in entries] == [1, 2, 4, 8, 16, 32], (n, k, scale)
            for m, path_name, config in entries:
                if path_name == "scaled_mm":
                    assert dispatch.scaled_mm_eligible(device, n, k, e8m0=scale == "e8m0", shuffled=False), (n, k, m)
                if config is not None:
                    assert path_name == "fused"
                    typed = KernelConfig.from_op_args(config)
                    if typed.engine is Engine.REGISTER_FED:
                        assert k % 1024 == 0 and k <= 8192 and m <= 16 and n % 16 == 0, (n, k, m, typed)
                    if typed.k_split:
                        assert typed.k_split <= k // 128, (n, k, m, typed)
                c = select(device, m, n=n, k=k, e8m0=scale == "e8m0", groups=groups)
                assert c.source == "table" and (c.path, c.config) == (path_name, config), (n, k, scale, m, c)
