"""CPU checks of the gfx950 kernels' lane and offset formulas (SPEC §7).

The formulas live in kernels/gfx950/gfx950_mfma_layout.h, a plain C++ header that the HIP kernels and
the host compiler both build. tests/gfx950_lanes_check.cpp includes it and checks, for every lane:
the MFMA operand map against SPEC §7 for both operands (same K permutation inside each 128-block),
the weight bytes each lane loads against SPEC §4 in the plain and the shuffled layout (every
(row, k) exactly once), the in-kernel quantization's LDS staging (every activation byte lands in
the fragment slot with the weight's K), the accumulator map D[4*(l/16)+i][l%16] and output
offsets, the cross-wave reduction slots, and an MFMA emulation (three hardware K orders) against
W . X^T. This file compiles it with g++, runs it, and additionally checks the shuffled offsets
against torch's own view/permute definition of the AITER shuffle.

No AMD GPU is involved; nothing here claims a gfx950 runtime result.
"""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "tests" / "gfx950_lanes_check.cpp"
HIP_DIR = ROOT / "kernels" / "gfx950"


@pytest.fixture(scope="module")
def lanes_binary(tmp_path_factory):
    cxx = shutil.which("g++")
    if cxx is None:
        print("test_gfx950_lanes: skipped, g++ not found on PATH")
        pytest.skip("g++ not found: cannot build the gfx950 lane-formula check")
    out = tmp_path_factory.mktemp("gfx950_lanes") / "gfx950_lanes_check"
    cmd = [cxx, "-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", "-I", str(ROOT / "kernels"), str(SOURCE), "-o", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, f"compiling the lane check failed:\n{' '.join(cmd)}\n{proc.stdout}\n{proc.stderr}"
    return out


def test_lane_formulas_against_spec(lanes_binary):
    proc = subprocess.run([str(lanes_binary), "check"], capture_output=True, text=True, timeout=300)
    print(proc.stdout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"\b0 failures\b", proc.stdout)


@pytest.mark.parametrize("n,k", [(16, 128), (32, 256), (64, 384), (48, 1024)])
@pytest.mark.parametrize("shuffled", [False, True])
def test_weight_offsets_against_torch_shuffle(lanes_binary, n, k, shuffled):
    """Each lane's two 16-byte weight loads hold (row 16*tile + l%16, K 128*kb + 16*(l/16) + j) and
    (.., 64 + 16*(l/16) + j) (SPEC §7) in the tensor produced by SPEC §4's view/permute."""
    torch = pytest.importorskip("torch")
    proc = subprocess.run([str(lanes_binary), "dump", str(n), str(k), str(int(shuffled))], capture_output=True,
                          text=True, check=True)
    rows = torch.tensor([[int(v) for v in line.split()] for line in proc.stdout.split("\n") if line.strip()])
    tile, kb, lane, half, start = rows.unbind(1)
    # Encode (n, k) of every element so that the bytes read back can be decoded.
    nn = torch.arange(n).view(n, 1).expand(n, k)
    kk = torch.arange(k).view(1, k).expand(n, k)
    code = nn * k + kk
    if shuffled:
        code = code.view(n // 16, 16, k // 32, 2, 16).permute(0, 2, 3, 1, 4).contiguous().view(n, k)
    flat = code.reshape(-1)
    j = torch.arange(16)
    got = flat[start.view(-1, 1) + j.view(1, -1)]  # [loads, 16]
    exp_n = (16 * tile + lane % 16).view(-1, 1)
    exp_k = (128 * kb + 64 * half + 16 * (lane // 16)).view(-1, 1) + j.view(1, -1)
    assert torch.equal(got // k, exp_n.expand_as(got))
    assert torch.equal(got % k, exp_k)
    # every byte of the weight is loaded exactly once
    counts = torch.bincount((start.view(-1, 1) + j.view(1, -1)).reshape(-1), minlength=n * k)
    assert torch.equal(counts, torch.ones(n * k, dtype=counts.dtype))


FORMULAS = [
    "weight_unit_base", "weight_lane_offset", "weight_scale_index", "activation_fragment_offset",
    "quant_load_offset", "quant_group_slot", "quant_slot_token", "quant_slot_block", "lds_row",
    "lds_quant_write_offset", "lds_fragment_row", "lds_fragment_read_offset", "lds_scale_offset",
    "lds_reduce_offset", "acc_output_offset", "acc_row", "acc_token", "fragment_index",
]


def test_gemm_kernel_indexes_only_through_the_formulas():
    """The GEMM source calls the header's formulas for every operand, LDS and output index, and
    computes no fragment/lane index of its own (no '% 16', '/ 16', 'lane >> 4' style arithmetic)."""
    src = (HIP_DIR / "gfx950_smallm_gemm.hip").read_text()
    code = re.sub(r"//[^\n]*", "", src)
    for name in FORMULAS:
        assert re.search(rf"\b{name}\(", code), f"gfx950_smallm_gemm.hip does not use {name}()"
    kernel = code[code.index("__global__"):code.index("// ---- host side")] if "// ---- host side" in code else code
    for pattern in [r"lane\s*%\s*16", r"lane\s*/\s*16", r"lane\s*>>\s*4", r"lane\s*&\s*15\)\s*\*", r"\*\s*2048", r"\*\s*512\b"]:
        assert not re.search(pattern, kernel), f"ad-hoc lane/offset arithmetic '{pattern}' in the GEMM kernel"


def test_hip_sources_include_only_hip_runtime_and_kernel_headers():
    """SPEC §7: Debian's HIP 5.2 headers; only hip/hip_runtime.h plus headers under kernels/."""
    for path in sorted(HIP_DIR.glob("*.hip")) + sorted(HIP_DIR.glob("*.h")):
        for inc in re.findall(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', path.read_text(), re.M):
            if inc in ("hip/hip_runtime.h", "stdint.h", "string.h"):
                continue
            assert (path.parent / inc).resolve().is_relative_to(ROOT / "kernels"), f"{path.name} includes {inc}"
            assert (path.parent / inc).exists(), f"{path.name} includes missing {inc}"
