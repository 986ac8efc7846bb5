"""Ahead-of-time build of sglang_fp8ext._C.

The backend is chosen by the torch that is installed (SPEC §1):
  * torch with CUDA  -> CPU ops + sm_90a CUDA kernels (kernels/sm90), nvcc
  * torch with ROCm  -> CPU ops + gfx950 HIP kernels (kernels/gfx950), for PYTORCH_ROCM_ARCH
  * CPU-only torch   -> CPU ops only
SGL_FP8_BUILD=cpu forces the CPU-only library on any torch. Nothing is compiled at import time.

The glue uses only the LibTorch stable ABI and CPython's limited API (build_config), so the
wheel is abi3 and loads under every torch >= build_config.MIN_TORCH of the same kind.
"""

import os
import re
import sys
from pathlib import Path

from setuptools import find_packages, setup

ROOT = Path(__file__).parent.resolve()
sys.path.insert(0, str(ROOT))  # for build_config, which setup.py and the CI checks share

import build_config  # noqa: E402

try:
    import torch
    from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension
except ImportError as e:  # pragma: no cover - the message is the point
    raise SystemExit(
        f"sglang-fp8ext builds against the installed torch (>= {build_config.MIN_TORCH}): install torch first, "
        "then build with `pip install --no-build-isolation .`"
    ) from e


def relative(paths):
    return [os.path.relpath(p, ROOT) for p in paths]


def make_extension():
    backend = build_config.select_backend(torch, os.environ)
    cxx_flags = build_config.CXX_FLAGS + build_config.STABLE_ABI_FLAGS
    sources = relative(build_config.sources_for(backend, ROOT))
    common = dict(include_dirs=[str(ROOT)], py_limited_api=True)
    if backend == "cpu":
        return backend, CppExtension("sglang_fp8ext._C", sources, extra_compile_args={"cxx": cxx_flags}, **common)
    # No -lcuda: the kernels look the driver entry point up at run time, so the library builds
    # (and imports) on a machine without a driver.
    if backend == "cuda":
        return backend, CUDAExtension(
            "sglang_fp8ext._C",
            sources,
            extra_compile_args={
                "cxx": cxx_flags + build_config.GPU_GLUE_FLAGS
                + ["-DSGL_FP8_WITH_CUDA", '-DSGL_FP8_DEVICE_ARCHS="sm_90a"'],
                "nvcc": build_config.NVCC_FLAGS,
            },
            **common,
        )
    arch_list = build_config.rocm_arch_list(os.environ)
    os.environ["PYTORCH_ROCM_ARCH"] = ";".join(arch_list)
    return backend, CUDAExtension(
        "sglang_fp8ext._C",
        sources,
        extra_compile_args={
            "cxx": cxx_flags + build_config.GPU_GLUE_FLAGS
            + ["-DSGL_FP8_WITH_HIP", f'-DSGL_FP8_DEVICE_ARCHS="{",".join(arch_list)}"'],
            "nvcc": build_config.hipcc_flags(arch_list),
        },
        **common,
    )


backend, extension = make_extension()
version = build_config.wheel_version(
    re.search(r'^__version__ = "(.+)"$', (ROOT / "sglang_fp8ext" / "__init__.py").read_text(), re.M).group(1),
    backend,
    torch,
)
commit = build_config.write_build_info(ROOT)
print(f"sglang-fp8ext {version} ({commit}): building the {backend} backend against torch {torch.__version__}",
      flush=True)

setup(
    name="sglang-fp8ext",
    version=version,
    packages=find_packages(include=["sglang_fp8ext", "sglang_fp8ext.*"]),
    package_data={"sglang_fp8ext": ["configs/*.json"]},
    ext_modules=[extension],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)},
    options={"bdist_wheel": {"py_limited_api": build_config.PY_LIMITED_API}},
)
