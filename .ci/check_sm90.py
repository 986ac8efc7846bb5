"""CI check of the sm_90 kernels on a machine without a GPU (issue 3, item 7).

Compiles kernels/sm90/sm90_kernels.cu alone with nvcc and exactly the wheel's flags
(build_config.NVCC_FLAGS, sm_90a), then reads the SASS with cuobjdump and fails when
  * the compile fails, or ptxas reports a stack frame above the allowance below;
  * a general-kernel GEMM instance (general_gemm_sm90, 8 of them) lacks tensor-core MMAs
    (HMMA) or the e4m3 decode that feeds them (F2FP.F16.E4M3.UNPACK); a wgmma-ring-kernel instance
    (17: 4-warpgroup, paired and co-resident) lacks the FP8 warpgroup MMA (QGMMA ... E4M3.E4M3), the
    TMA tensor copy (UTMALDG) or mbarrier waits (SYNCS.PHASECHK); the fused instances lack the
    in-register e4m3 quantization (F2FP.SATFINITE.E4M3);
  * a quantization kernel lacks the e4m3 quantization instruction;
  * an expected kernel is missing, or one of an engine that left main (the mma.sync ring kernel) is
    back;
  * a GEMM instance issues no weight copy or load before its griddepcontrol.wait (ACQBULK): ptxas may
    schedule the wait above loads written before it, and then nothing streams while the previous
    launch finishes;
  * a register-fed kernel instance (sm90_register_fed_gemm.cuh, 16 of them) lacks HMMA, the e4m3
    decode or the e4m3 quantization, or issues fewer than 4 weight loads a block before its wait for
    its min(K blocks a warp, 2) blocks loaded at entry;
  * any kernel carries timeline code: a read of the global timer, the SM clock or the SM id
    (SR_GLOBALTIMER*, SR_CLOCK*, SR_VIRTUALSMID / SR_SMID), which only diagnostics read; or the wheel's
    flags define SGL_FP8_DEV_DIAGNOSTICS (the macro reserved for developer-only diagnostics).
cuobjdump/nvdisasm come from PyPI (nvidia-cuda-cuobjdump, nvidia-cuda-nvdisasm) when absent.

`--library PATH` reads the SASS embedded in a built library instead (the CUDA wheel's own
`_C.abi3.so`), with the same checks but for the ptxas stack frames, which only a compile reports.
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
# Special registers that only diagnostics read (timeline stamps: %globaltimer, clock64, %smid).
DIAGNOSTIC_REGISTERS = re.compile(r"\bSR_(?:GLOBALTIMER\w*|CLOCK\w*|VIRTUALSMID|SMID)\b")
DEV_DIAGNOSTICS_MACRO = "SGL_FP8_DEV_DIAGNOSTICS"


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


def compiled_sass(cuobjdump, env, failures):
    """The SASS of kernels/sm90 compiled with the wheel's flags; None when nvcc fails."""
    nvcc = shutil.which("nvcc")
    if not nvcc:
        log("FAIL: nvcc not found")
        return None
    with tempfile.TemporaryDirectory() as tmp:
        obj = os.path.join(tmp, "sm90_kernels.o")
        src = ROOT / build_config.CUDA_KERNEL_SOURCES[0]
        cmd = [nvcc, *build_config.NVCC_FLAGS, "-Xptxas", "-v", "-I", str(ROOT), "-c", str(src), "-o", obj]
        log(" ".join(cmd))
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            print(res.stdout, res.stderr)
            log("FAIL: nvcc")
            return None
        stacks = [int(s) for s in re.findall(r"(\d+) bytes stack frame", res.stderr)]
        if stacks and max(stacks) > MAX_STACK_BYTES:
            failures.append(f"a kernel uses a {max(stacks)}-byte stack frame (> {MAX_STACK_BYTES}): spills")
        return subprocess.run([cuobjdump, "--dump-sass", obj], capture_output=True, text=True, env=env,
                              check=True).stdout


def main(argv):
    library = argv[argv.index("--library") + 1] if "--library" in argv else None
    ensure_tools()
    cuobjdump, nvdisasm = find_tool("cuobjdump"), find_tool("nvdisasm")
    env = dict(os.environ, PATH=os.path.dirname(nvdisasm) + os.pathsep + os.environ.get("PATH", ""))
    failures = []
    if any(DEV_DIAGNOSTICS_MACRO in flag for flag in build_config.NVCC_FLAGS):
        failures.append(f"build_config.NVCC_FLAGS defines {DEV_DIAGNOSTICS_MACRO}: the wheel would ship diagnostics")
    if library:
        log(f"reading the SASS embedded in {library}")
        sass = subprocess.run([cuobjdump, "--dump-sass", library], capture_output=True, text=True, env=env,
                              check=True).stdout
    else:
        sass = compiled_sass(cuobjdump, env, failures)
        if sass is None:
            return 1
    functions = re.split(r"\n\s+Function : ", sass)[1:]
    if not functions:
        log("FAIL: no SASS functions found")
        return 1
    counts = {"gemm": 0, "wgmma": 0, "quant": 0, "register_fed": 0, "other": 0}
    for body in functions:
        name = body.split("\n", 1)[0].strip()
        timer_reads = sorted(set(DIAGNOSTIC_REGISTERS.findall(body)))
        if timer_reads:
            failures.append(f"{name}: reads {timer_reads} (timeline code in a shipped kernel)")
        ops = re.findall(r"/\*[0-9a-f]{4,8}\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9]+(?:\.[A-Z0-9_]+)*)", body)
        has = lambda prefix: any(op.startswith(prefix) for op in ops)  # noqa: E731
        if "register_fed_gemm" in name:
            counts["register_fed"] += 1
            params = re.search(r"register_fed_gemm_sm90ILi(\d+)ELi(\d+)EEEv", name)
            if not params:
                failures.append(f"{name}: unexpected template arguments")
                continue
            kb = int(params.group(2))
            need = ["HMMA", "F2FP.F16.E4M3.UNPACK", "F2FP.SATFINITE.E4M3"]
            missing = [n for n in need if not has(n)]
            early = loads_before_wait(body, r"LDG\.E\.NA")
            if early < 4 * min(kb, 2):
                missing.append(f"{4 * min(kb, 2)} weight loads before ACQBULK (found {early})")
            log(f"{name[:60]:60s} {len(ops):5d} instr, HMMA {sum(o.startswith('HMMA') for o in ops)}, "
                f"{early} loads before the wait" + (f"  MISSING {missing}" if missing else ""))
            if missing:
                failures.append(f"{name}: no {missing}")
        elif "general_gemm" in name or "wgmma_ring_gemm" in name:
            wgmma = "wgmma_ring_gemm" in name
            counts["wgmma" if wgmma else "gemm"] += 1
            prequant = re.search(r"ILi\d+ELb1E", name) is not None  # the first bool: pre-quantized input
            paired = wgmma and re.search(r"ELi\d+ELi\d+ELb1EEE", name) is not None  # paired activations
            need = [] if prequant else ["F2FP.SATFINITE.E4M3"]
            if wgmma:
                need += ["QGMMA", "UTMALDG", "SYNCS.PHASECHK"]
            else:
                need += ["HMMA", "F2FP.F16.E4M3.UNPACK"]
            if paired:  # st.async of the e4m3 bytes into the pair peer's shared memory
                need += ["STAS.64"]
            missing = [n for n in need if not has(n)]
            early = loads_before_wait(body, r"\b(?:LDG|LDGSTS|UTMALDG|UBLKCP)\b")
            if early < 1:
                missing.append("a weight copy before ACQBULK")
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
        else:
            counts["other"] += 1
            failures.append(f"{name}: a kernel of no known engine")
    if (counts["gemm"] != 8 or counts["wgmma"] != 17 or counts["quant"] != 2 or counts["register_fed"] != 16
            or counts["other"] != 0):
        failures.append("expected 8 general-kernel GEMM instances, 17 wgmma-ring ones, 16 register-fed ones, 2 quant "
                        f"kernels and nothing else, found {counts}")
    log(f"{len(functions)} kernels checked for timeline code (no global timer, SM clock or SM id read)")
    for f in failures:
        log("FAIL: " + f)
    log("OK" if not failures else f"{len(failures)} failure(s)")
    return 1 if failures else 0


def loads_before_wait(body, pattern):
    """Instructions matching `pattern` in a function's SASS before its first ACQBULK (griddepcontrol.wait);
    -1 when it has no ACQBULK."""
    lines = body.split("\n")
    wait = next((i for i, line in enumerate(lines) if "ACQBULK" in line), None)
    if wait is None:
        return -1
    return sum(1 for line in lines[:wait] if re.search(pattern, line))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
