"""CI check of the sm_90 kernels on a machine without a GPU (issue 3, item 7).

Compiles kernels/cuda/sm90_kernels.cu alone with nvcc and exactly the wheel's flags
(build_config.NVCC_FLAGS, sm_90a), then reads the SASS with cuobjdump and fails when
  * the compile fails, or ptxas reports a stack frame above the allowance below;
  * a register- or mma.sync-ring-kernel GEMM instance lacks tensor-core MMAs (HMMA) or the e4m3
    decode that feeds them (F2FP.F16.E4M3.UNPACK); a wgmma-ring-kernel instance lacks the FP8
    warpgroup MMA (QGMMA ... E4M3.E4M3) or the TMA tensor copy (UTMALDG); the fused instances lack
    the in-register e4m3 quantization (F2FP.SATFINITE.E4M3); a ring-kernel instance (either) also
    needs mbarrier waits (SYNCS.PHASECHK), and the mma.sync one the TMA bulk copy (UBLKCP);
  * a quantization kernel lacks the e4m3 quantization instruction;
  * an expected kernel is missing.
cuobjdump/nvdisasm come from PyPI (nvidia-cuda-cuobjdump, nvidia-cuda-nvdisasm) when absent.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import build_config  # noqa: E402

# ptxas may spill a few registers of the 32-token instance under the 128-register cap that keeps
# two CTAs per SM; more than this is a regression worth failing on.
MAX_STACK_BYTES = 64


def log(msg):
    print(f"[check_sm90] {msg}", flush=True)


def find_tool(name):
    path = shutil.which(name)
    if path:
        return path
    try:
        import nvidia  # the PyPI CUDA tool wheels install under nvidia/cu13/bin
        for base in nvidia.__path__:
            for candidate in Path(base).glob(f"cu*/bin/{name}"):
                return str(candidate)
    except ImportError:
        pass
    return None


def ensure_tools():
    if find_tool("cuobjdump") and find_tool("nvdisasm"):
        return
    log("installing cuobjdump and nvdisasm from PyPI")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "nvidia-cuda-cuobjdump", "nvidia-cuda-nvdisasm"],
                   check=True)


def main():
    nvcc = shutil.which("nvcc")
    if not nvcc:
        log("FAIL: nvcc not found")
        return 1
    ensure_tools()
    cuobjdump, nvdisasm = find_tool("cuobjdump"), find_tool("nvdisasm")
    env = dict(os.environ, PATH=os.path.dirname(nvdisasm) + os.pathsep + os.environ.get("PATH", ""))
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        obj = os.path.join(tmp, "sm90_kernels.o")
        src = ROOT / build_config.CUDA_KERNEL_SOURCES[0]
        cmd = [nvcc, *build_config.NVCC_FLAGS, "-Xptxas", "-v", "-I", str(ROOT), "-c", str(src), "-o", obj]
        log(" ".join(cmd))
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            print(res.stdout, res.stderr)
            log("FAIL: nvcc")
            return 1
        stacks = [int(s) for s in re.findall(r"(\d+) bytes stack frame", res.stderr)]
        if stacks and max(stacks) > MAX_STACK_BYTES:
            failures.append(f"a kernel uses a {max(stacks)}-byte stack frame (> {MAX_STACK_BYTES}): spills")
        sass = subprocess.run([cuobjdump, "--dump-sass", obj], capture_output=True, text=True, env=env, check=True).stdout
    functions = re.split(r"\n\s+Function : ", sass)[1:]
    if not functions:
        log("FAIL: no SASS functions found")
        return 1
    counts = {"gemm": 0, "ring": 0, "wgmma": 0, "quant": 0}
    for body in functions:
        name = body.split("\n", 1)[0].strip()
        ops = re.findall(r"/\*[0-9a-f]{4,8}\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9]+(?:\.[A-Z0-9_]+)*)", body)
        has = lambda prefix: any(op.startswith(prefix) for op in ops)  # noqa: E731
        if "block_scaled_gemm" in name or "ring_gemm" in name:
            wgmma = "wgmma_ring_gemm" in name
            ring = "ring_gemm" in name and not wgmma
            counts["wgmma" if wgmma else "ring" if ring else "gemm"] += 1
            prequant = re.search(r"ILi\d+ELb1E", name) is not None  # the first bool: pre-quantized input
            paired = wgmma and re.search(r"ELi\d+ELi\d+ELb1EEE", name) is not None  # paired activations
            need = [] if prequant else ["F2FP.SATFINITE.E4M3"]
            if wgmma:
                need += ["QGMMA", "UTMALDG", "SYNCS.PHASECHK"]
            else:
                need += ["HMMA", "F2FP.F16.E4M3.UNPACK"] + (["UBLKCP", "SYNCS.PHASECHK"] if ring else [])
            if paired:  # st.async of the e4m3 bytes into the pair peer's shared memory
                need += ["STAS.64"]
            missing = [n for n in need if not has(n)]
            if wgmma and not re.search(r"QGMMA\.64x\d+x32\.F32\.E4M3\.E4M3 ", body):  # the shape (lower-case x) and operand types
                missing.append("QGMMA.64xNx32.F32.E4M3.E4M3")
            mma = "QGMMA" if wgmma else "HMMA"
            log(f"{name[:60]:60s} {len(ops):5d} instr, {mma} {sum(o.startswith(mma) for o in ops)}"
                + (f"  MISSING {missing}" if missing else ""))
            if missing:
                failures.append(f"{name}: no {missing}")
        elif "quant" in name:
            counts["quant"] += 1
            if not has("F2FP.SATFINITE.E4M3"):
                failures.append(f"{name}: no F2FP.SATFINITE.E4M3")
            log(f"{name[:60]:60s} {len(ops):5d} instr")
    if counts["gemm"] != 8 or counts["ring"] != 4 or counts["wgmma"] != 17 or counts["quant"] != 2:
        failures.append("expected 8 register-kernel GEMM instances, 4 mma.sync-ring ones, 17 wgmma-ring ones and 2 quant "
                        f"kernels, found {counts}")
    for f in failures:
        log("FAIL: " + f)
    log("OK" if not failures else f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
