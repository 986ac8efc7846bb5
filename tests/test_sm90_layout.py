"""CPU checks of the sm_90 GEMM's index formulas and launch plan (kernels/sm90/sm90_gemm_layout.h,
sm90_gemm_plan.h): every lane loads SPEC §4's bytes in both layouts, a unit's 2 KB are covered
once, the weight and activation operands share one K permutation, the activation reads are free
of bank conflicts, the wgmma ring kernel's weight and e4m3 activation bytes sit where the TMA's
and wgmma's 128-byte swizzle put them, its windows park every tile once, and every launch plan
covers each (tile, K block) exactly once within one wave and the shared memory limit. The
kernels index through these headers only."""

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def checker(tmp_path_factory):
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("g++ not found: cannot build the sm_90 layout check")
    exe = tmp_path_factory.mktemp("sm90") / "sm90_layout_check"
    cmd = [cxx, "-std=c++17", "-O1", "-Wall", "-Werror", "-I", str(ROOT / "kernels"),
           str(ROOT / "tests" / "sm90_layout_check.cpp"), "-o", str(exe)]
    subprocess.run(cmd, check=True)
    return exe


def test_sm90_layout_and_plans(checker):
    res = subprocess.run([str(checker)], capture_output=True, text=True)
    print(res.stdout[-2000:])
    assert res.returncode == 0, res.stdout[-4000:]
    checks = int(res.stdout.strip().splitlines()[-1].split()[0].split("=")[1])
    assert checks > 100_000, checks  # the check really ran its loops


def test_kernel_indexes_through_the_layout_header():
    """The GEMM kernels take their weight offsets, K permutation, activation offsets and ring
    layout from sm90_gemm_layout.h (no private copies of the formulas)."""
    src = (ROOT / "kernels" / "sm90" / "sm90_block_scaled_gemm.cuh").read_text()
    for name in ("unit_lane_offset(", "unit_block_stride(", "lane_k_of<", "act_f16_offset("):
        assert name in src, name
    assert "weight_chunk16_offset" not in src and "shuffled_weight_offset" not in src
    ring = (ROOT / "kernels" / "sm90" / "sm90_ring_gemm.cuh").read_text()
    for name in ("ring_lane_offset(", "ring_block_stride(", "ring_stage_bytes(", "RingSmemLayout"):
        assert name in ring, name
    assert "weight_chunk16_offset" not in ring and "shuffled_weight_offset" not in ring
    assert "act_fp8_offset(" in src  # the e4m3 activations of the wgmma ring kernel
    fed = (ROOT / "kernels" / "sm90" / "sm90_register_fed_gemm.cuh").read_text()
    for name in ("unit_lane_offset(", "unit_block_stride(", "unit_k_of(", "register_fed_act_offset(",
                 "register_fed_xs_offset(", "register_fed_red_offset(", "register_fed_red_index("):
        assert name in fed, name
    assert "weight_chunk16_offset" not in fed and "shuffled_weight_offset" not in fed
    wgmma = (ROOT / "kernels" / "sm90" / "sm90_wgmma_ring_gemm.cuh").read_text()
    for name in ("WgmmaRingSmemLayout", "wgmma_window_tile(", "smem_descriptor_sw128_lo(", "smem_descriptor_sw128_from_lo("):
        assert name in wgmma, name
