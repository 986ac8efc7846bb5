"""CPU tests of the profiling tool's arithmetic (its GPU part needs a device): the per-kernel
statistics of tools/e2e_kernel_profile.py and its chrome-trace reader. Expected values are worked
out here by hand from the synthetic inputs, not taken from the tool. (tools/e2e_decode_bench.py's
argument checks are tested in tests/test_e2e_decode.py.)"""

import importlib.util
import json
import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = os.path.join(REPO, "tools")


def load_tool(name):
    sys.path.insert(0, TOOLS)
    try:
        spec = importlib.util.spec_from_file_location(name, os.path.join(TOOLS, f"{name}.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(TOOLS)


def test_kernel_profile_marginal_and_gap():
    """Two replays of a 3-kernel step; the second kernel started early (PDL) in replay 1."""
    prof = load_tool("e2e_kernel_profile")
    gemm = "void sgl_fp8::sm90::wgmma_ring_gemm_sm90<1, false, 4>(sgl_fp8::sm90::GemmKernelArgs)"
    records = [
        # replay 0: norm 0-2, gemm 2.5-12.5, copy 13-14
        (0.0, 2.0, "norm"), (2.5, 12.5, gemm), (13.0, 14.0, "copy"),
        # replay 1: norm 100-102, gemm 101-110 (entered 1 us early), copy 110.5-112
        (100.0, 102.0, "norm"), (101.0, 110.0, gemm), (110.5, 112.0, "copy"),
    ]
    step_us, kernels, by_kind = prof.step_statistics(records, 2)
    assert step_us == pytest.approx((14.0 + 12.0) / 2)
    assert [k["name"] for k in kernels] == ["norm", gemm, "copy"]
    assert kernels[1]["dur_us"] == pytest.approx((10.0 + 9.0) / 2)
    assert kernels[1]["marginal_us"] == pytest.approx((10.5 + 8.0) / 2)  # end minus the previous end
    assert kernels[1]["gap_us"] == pytest.approx((0.5 - 1.0) / 2)  # negative: it started early
    assert kernels[2]["marginal_us"] == pytest.approx((1.5 + 2.0) / 2)
    # the marginal times add up to the step
    assert sum(k["marginal_us"] for k in kernels) == pytest.approx(step_us)
    assert by_kind["sgl_fp8 GEMM"] == pytest.approx(9.25)
    with pytest.raises(SystemExit):
        prof.step_statistics(records[:3] + [(100.0, 102.0, "norm"), (101.0, 110.0, "other"), (110.5, 112.0, "copy")], 2)


def test_kernel_records_reads_kernels_memcpys_and_memsets(tmp_path):
    prof = load_tool("e2e_kernel_profile")
    trace = {"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "b", "ts": 5.0, "dur": 1.0},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "ts": 0.0, "dur": 9.0},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD", "ts": 2.0, "dur": 0.5},
        {"ph": "X", "cat": "gpu_memset", "name": "Memset", "ts": 7.0},
        {"ph": "i", "cat": "kernel", "name": "instant", "ts": 1.0},
    ]}
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(trace))
    assert prof.kernel_records(prof.trace_events(str(path))) == [(2.0, 2.5, "Memcpy DtoD"), (5.0, 6.0, "b"), (7.0, 7.0, "Memset")]
