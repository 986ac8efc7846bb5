"""sglang-fp8ext: fused small-M FP8 block-scale projections for LLM decode.

The ops live under ``torch.ops.sgl_fp8`` (SPEC §2); this package loads the compiled library,
registers their fake implementations and re-exports the Python API (SPEC §5).
"""

import os

import torch  # noqa: F401  (loads libtorch, which the compiled library links against)

from . import schemas  # noqa: F401  (the op schemas: defined before the library registers kernels for them)

try:
    from . import _C
except ImportError as error:  # say which of the two usual causes it is, not Python's "circular import"
    _here = os.path.dirname(os.path.abspath(__file__))
    if not any(name.startswith("_C.") for name in os.listdir(_here)):
        raise ImportError(
            f"sglang_fp8ext: its compiled library is not built (no _C.* in {_here}): install the package "
            "with `pip install --no-build-isolation .` (`-e .` in a source checkout; docs/building.md)"
        ) from error
    raise ImportError(
        f"sglang_fp8ext: its compiled library did not load ({error}); it needs torch >= 2.11 and a torch of "
        f"the same kind (CPU, CUDA 13, ROCm) as the one it was built for; installed: torch {torch.__version__} "
        "(docs/building.md)"
    ) from error
from . import reference  # noqa: F401  (registers the fallback ops the GPU glue redispatches to)
from .layout import e8m0_to_scale, scale_to_e8m0, shuffle_weight, unshuffle_weight
from . import parallel  # noqa: F401  (tensor-parallel sharding helpers: fx.parallel)
from .linear import fp8_block_linear
from .module import Fp8BlockLinear, QuantizeReport, quantize_model_
from .ops import add_rmsnorm_quant, per1x128_quant, rmsnorm_quant, scaled_gemm, smallm_gemm

__version__ = "0.1.0"

#: Which backend the installed library was built for ("cpu", "cuda" or "rocm") and its archs.
BUILT_BACKEND: str = _C.backend
BUILT_DEVICE_ARCHS: tuple = tuple(a for a in _C.device_archs.split(",") if a)
#: The commit it was built from (short hash, "+dirty" with uncommitted changes), or "unknown".
try:
    from ._build_info import SOURCE_COMMIT as BUILT_COMMIT
except ImportError:  # a library not built by setup.py (copied in by hand)
    BUILT_COMMIT = "unknown"

__all__ = [
    "per1x128_quant",
    "smallm_gemm",
    "scaled_gemm",
    "rmsnorm_quant",
    "add_rmsnorm_quant",
    "fp8_block_linear",
    "shuffle_weight",
    "unshuffle_weight",
    "scale_to_e8m0",
    "e8m0_to_scale",
    "Fp8BlockLinear",
    "quantize_model_",
    "QuantizeReport",
    "parallel",
    "BUILT_BACKEND",
    "BUILT_DEVICE_ARCHS",
    "BUILT_COMMIT",
]
