"""CPU checks of the sm_90 GEMM's index formulas, launch plans and engine choice
(kernels/sm90/sm90_gemm_layout.h, sm90_gemm_plan.h): every lane loads SPEC §4's bytes in both layouts, a unit's 2 KB are covered
once, the weight and activation operands share one K permutation, the activation reads are free
of bank conflicts, the wgmma ring kernel's weight and e4m3 activation bytes sit where the TMA's
and wgmma's 128-byte swizzle put them, its windows park every tile once, and every launch plan
covers each (tile, K block) exactly once within one wave and the shared memory limit. The
kernels index through these headers only. choose_gemm's answer for every SPEC §6 shape is read
back from the checker's --table mode."""

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
    src = "".join((ROOT / "kernels" / "sm90" / name).read_text()
                  for name in ("sm90_general_gemm.cuh", "sm90_gemm_common.cuh"))
    for name in ("unit_lane_offset(", "unit_block_stride(", "unit_k_of(", "act_f16_offset("):
        assert name in src, name
    assert "weight_chunk16_offset" not in src and "shuffled_weight_offset" not in src
    assert "act_fp8_offset(" in src  # the e4m3 activations of the wgmma ring kernel
    fed = (ROOT / "kernels" / "sm90" / "sm90_register_fed_gemm.cuh").read_text()
    for name in ("unit_lane_offset(", "unit_block_stride(", "unit_k_of(", "register_fed_act_offset(",
                 "register_fed_xs_offset(", "register_fed_red_offset(", "register_fed_red_index("):
        assert name in fed, name
    assert "weight_chunk16_offset" not in fed and "shuffled_weight_offset" not in fed
    wgmma = (ROOT / "kernels" / "sm90" / "sm90_wgmma_ring_gemm.cuh").read_text()
    for name in ("WgmmaRingSmemLayout", "wgmma_window_tile(", "smem_descriptor_sw128_lo(", "smem_descriptor_sw128_from_lo("):
        assert name in wgmma, name


SPEC_SHAPES = ((5120, 4096), (4608, 4096), (4096, 2048), (8192, 1024), (4096, 1024), (1536, 4096), (2112, 7168))


def read_choice_table(checker):
    """choose_gemm's answers as the checker prints them with --table: {(config, N, K, M, weight): row}."""
    res = subprocess.run([str(checker), "--table"], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout[-4000:]
    table = {}
    for line in res.stdout.splitlines():
        if not line.startswith("choose "):
            continue
        row = dict(item.split("=", 1) for item in line.split()[1:])
        for key in ("N", "K", "M", "k_split", "row_groups", "tiles_per_cta", "blocks_per_cta", "pair", "co_resident",
                    "chunks", "smem"):
            row[key] = int(row[key])
        table[(row["config"], row["N"], row["K"], row["M"], row["weight"])] = row
    return table


def test_engine_choice_for_every_spec_shape(checker):
    """One function (choose_gemm) picks the engine: plain weights up to 32 tokens take the wgmma ring
    kernel, shuffled weights and M > 32 the general kernel; engine register_fed asked runs it where it
    applies (K % 1024 == 0, K <= 8192, M <= 16, plain) and is an error elsewhere."""
    table = read_choice_table(checker)
    summary = []
    for n, k in SPEC_SHAPES:
        for weight in ("plain", "shuffled"):
            for m in range(1, 34):
                row = table[("auto", n, k, m, weight)]
                want = "wgmma" if weight == "plain" and m <= 32 else "general"
                assert row["engine"] == want, row
                assert row["co_resident"] == 0, row
                fed = table[("register_fed", n, k, m, weight)]
                applies = weight == "plain" and k % 1024 == 0 and k <= 8192 and m <= 16
                assert fed["engine"] == ("register_fed" if applies else "error"), fed
        plain = [table[("auto", n, k, m, "plain")] for m in range(1, 34)]
        summary.append(f"{n}x{k}: " + " ".join(f"{r['M']}:{r['engine'][0]}{r['k_split']}{'p' if r['pair'] else ''}"
                                               for r in plain))
    print("\n".join(summary))
    # the decode-step benchmark's MLP shares: the wgmma kernel's co-resident variant up to 16 tokens,
    # its 4-warpgroup kernel over more than one wave of the 132 SMs from 17
    for n, k in ((12288, 4096), (4096, 12288)):
        for m in (1, 8, 16):
            row = table[("auto", n, k, m, "plain")]
            assert row["engine"] == "wgmma" and row["co_resident"] == 1, row
        for m in (17, 24, 32):
            row = table[("auto", n, k, m, "plain")]
            assert row["engine"] == "wgmma" and row["co_resident"] == 0, row
            assert row["k_split"] * row["row_groups"] > 132, row


def test_h200_engine_for_every_spec_shape_with_the_shipped_table(checker):
    """What an H200 runs for each SPEC §6 shape, scale format and tabulated M, end to end on the CPU:
    fp8_block_linear's choice (the shipped table, else the heuristic) and, for the fused path, the
    engine choose_gemm gives the table's config. Every tuned config must name an engine that runs
    there (a table entry the kernels would refuse is an error in the server, not here)."""
    from sglang_fp8ext import dispatch
    from sglang_fp8ext.kernel_config import Engine, KernelConfig

    h200 = dispatch.DeviceInfo("cuda", "NVIDIA H200", (9, 0), has_scaled_mm=True)
    meta, groups = dispatch.load_table_file(str(ROOT / "sglang_fp8ext" / "configs" / "nvidia_h200.json"))
    assert dispatch.table_mismatch(meta, h200.name, "13.0") == ""
    table = read_choice_table(checker)
    engines = {}
    for n, k in SPEC_SHAPES:
        for e8m0 in (False, True):
            for m in (1, 2, 4, 8, 16, 32):
                choice = dispatch.select(h200, m, n, k, e8m0=e8m0, groups=groups)
                assert choice.path == "fused" and choice.source == "table", (n, k, m, choice)
                config = KernelConfig() if choice.config is None else KernelConfig.from_op_args(choice.config)
                asked = "register_fed" if config.engine == Engine.REGISTER_FED else "auto"
                row = table[(asked, n, k, m, "plain")]
                assert row["engine"] == ("register_fed" if asked == "register_fed" else "wgmma"), (n, k, m, row)
                engines[(n, k, e8m0, m)] = row["engine"]
    fed = sorted({(n, k, m) for (n, k, _, m), e in engines.items() if e == "register_fed"})
    assert fed == [(2112, 7168, 1), (4096, 1024, 2)], fed
