"""Build configuration shared by setup.py and the CI compile checks (.ci/), so that CI compiles
the device sources with exactly the flags the wheel uses. Imports nothing but the standard
library; setup.py passes torch in."""

import subprocess
from pathlib import Path

# No -ffast-math anywhere: the quantization is bit-exact IEEE arithmetic (SPEC §3.1).
# No -std either for code that includes torch headers: torch.utils.cpp_extension adds the
# standard torch itself was built with (C++17 up to torch 2.11, C++20 from 2.12). Forcing C++20
# on a C++17 torch made libstdc++'s ostream code in our library crash in error messages.
CXX_FLAGS = ["-O3"]

# The glue is written against the LibTorch stable ABI (torch/csrc/stable, torch/headeronly) and
# CPython's limited API, so one wheel loads under every torch from this version on: 2.11 is the
# first whose stable ABI has float8_e8m0fnu. The oldest CPython the abi3 wheel supports is 3.10.
TORCH_TARGET_VERSION = (2, 11)
MIN_TORCH = ".".join(map(str, TORCH_TARGET_VERSION))
PY_LIMITED_API = "cp310"
STABLE_ABI_FLAGS = ["-DTORCH_TARGET_VERSION=0x{:02x}{:02x}000000000000".format(*TORCH_TARGET_VERSION)]
# The stable shim declares its CUDA entry points (the current-stream getter) only under
# USE_CUDA; a ROCm torch serves HIP through the same entry points.
GPU_GLUE_FLAGS = ["-DUSE_CUDA"]

# sm_90a: Hopper's own instructions (setmaxnreg, wgmma) need the 'a' target; the -gencode form
# is the one that assembles for it with nvcc 13.0.
# The .cu kernel translation units include no torch header, so their standard is ours to pick.
NVCC_FLAGS = [
    "-O3",
    "-std=c++20",
    "-gencode=arch=compute_90a,code=sm_90a",
    "--expt-relaxed-constexpr",
    "-DSGL_FP8_WITH_CUDA",
    # torch's default flags disable the half/bf16 operators; the kernels use bit operations and
    # intrinsics, so keep torch's defaults.
]

# gfx950 is the only ROCm target with OCP e4m3 (float8_e4m3fn) MFMA support that this package
# serves; gfx942 (MI300) uses e4m3fnuz, which is out of scope (SPEC §1).
SUPPORTED_ROCM_ARCHS = ("gfx950",)
DEFAULT_ROCM_ARCH = "gfx950"

CPU_SOURCES = ["sglang_fp8ext/csrc/registration.cpp", "sglang_fp8ext/csrc/cpu_ops.cpp"]
# The GPU glue is one file for both vendors (torch hipifies it on ROCm); the kernels are
# torch-free translation units implementing kernels/common/gpu_launch.h.
GPU_GLUE_SOURCES = ["sglang_fp8ext/csrc/gpu_ops.cpp"]
CUDA_KERNEL_SOURCES = ["kernels/sm90/sm90_kernels.cu"]


def select_backend(torch, environ) -> str:
    forced = environ.get("SGL_FP8_BUILD", "").strip().lower()
    if forced:
        if forced not in ("cpu", "cuda", "rocm"):
            raise SystemExit(f"SGL_FP8_BUILD must be cpu, cuda or rocm, got {forced!r}")
        return forced
    if getattr(torch.version, "hip", None):
        return "rocm"
    if getattr(torch.version, "cuda", None):
        return "cuda"
    return "cpu"


def wheel_version(base: str, backend: str, torch) -> str:
    """The package version with a local label naming what the wheel needs besides torch >= 2.11:
    +cpu, +cu13 (any CUDA 13.x build of torch), +rocm7.0 (that ROCm release). The CPU and the
    CUDA wheel have the same platform tag, so the label is what tells them apart (as torch's own
    +cpu / +cu130 wheels do)."""
    if backend == "cpu":
        return f"{base}+cpu"
    if backend == "cuda":
        return f"{base}+cu{torch.version.cuda.split('.')[0]}"
    return f"{base}+rocm{'.'.join(torch.version.hip.split('.')[:2])}"


def source_commit(root: Path) -> str:
    """The commit the sources at `root` come from: its short hash, "+dirty" when tracked files
    differ from it, "unknown" when `root` is not the top of a git checkout (an sdist, a copied
    tree, a directory inside some other repository) or git is missing."""
    def git(*args):
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=30)
        return done.stdout.strip() if done.returncode == 0 else None

    try:
        top = git("rev-parse", "--show-toplevel")
        if top is None or Path(top).resolve() != Path(root).resolve():
            return "unknown"
        head = git("rev-parse", "--short=7", "HEAD")
        changes = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    if not head or changes is None:
        return "unknown"
    return head + ("+dirty" if changes else "")


BUILD_INFO = "sglang_fp8ext/_build_info.py"  # written by setup.py, not in git


def write_build_info(root: Path) -> str:
    """Records source_commit(root) in the package (sglang_fp8ext.BUILT_COMMIT); returns it."""
    commit = source_commit(root)
    (Path(root) / BUILD_INFO).write_text(
        "# Written by setup.py when the library is built (build_config.write_build_info); not in git.\n"
        f"SOURCE_COMMIT = {commit!r}\n")
    return commit


def hip_kernel_sources(root: Path):
    return sorted(str(p.relative_to(root)) for p in (root / "kernels" / "gfx950").glob("*.hip"))


def sources_for(backend: str, root: Path):
    extra = {
        "cpu": [],
        "cuda": GPU_GLUE_SOURCES + CUDA_KERNEL_SOURCES,
        "rocm": GPU_GLUE_SOURCES + hip_kernel_sources(root),
    }[backend]
    return [str(root / p) for p in CPU_SOURCES + extra]


def rocm_arch_list(environ):
    requested = [a.strip() for a in environ.get("PYTORCH_ROCM_ARCH", DEFAULT_ROCM_ARCH).replace(",", ";").split(";")]
    requested = [a for a in requested if a]
    unsupported = [a for a in requested if a.split(":")[0] not in SUPPORTED_ROCM_ARCHS]
    if unsupported:
        raise SystemExit(
            f"sglang-fp8ext: PYTORCH_ROCM_ARCH asks for {', '.join(unsupported)}, which has no OCP FP8 "
            f"(float8_e4m3fn) support this package serves; supported: {', '.join(SUPPORTED_ROCM_ARCHS)}. "
            "gfx942 (MI300) uses e4m3fnuz and is out of scope: use AITER there."
        )
    return requested


def hipcc_flags(arch_list):
    return ["-O3", "-std=c++20", "-DSGL_FP8_WITH_HIP", "-D__HIP_PLATFORM_AMD__"] + [
        f"--offload-arch={a}" for a in arch_list
    ]
