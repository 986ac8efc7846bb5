"""The sgl_fp8 op schemas (SPEC §2, verbatim), defined with the ``pt2_compliant_tag``.

They are defined here, from Python, before the compiled library is loaded: the library is built
on the LibTorch stable ABI targeting torch 2.11, where C++ cannot attach tags to a schema. The
library then registers its CPU and GPU kernels for these names (csrc/*_ops.cpp), and ops.py adds
the fake implementations.
"""

import torch

SCHEMAS = {
    "per1x128_quant": "(Tensor x, bool ue8m0=False, bool transpose_scale=False) -> (Tensor q, Tensor scale)",
    "smallm_gemm": "(Tensor x, Tensor w, Tensor w_scale, bool w_shuffled=False, Tensor? bias=None) -> Tensor",
    "scaled_gemm": "(Tensor xq, Tensor x_scale, Tensor w, Tensor w_scale, bool w_shuffled=False, "
    "ScalarType? out_dtype=None, Tensor? bias=None) -> Tensor",
    # Private: smallm_gemm with an explicit kernel configuration: the fields of GemmConfig
    # (kernels/common/gpu_launch.h) in order, as kernel_config.py encodes them (all 0: the plan's
    # own), for fp8_block_linear's tuned table, `python -m sglang_fp8ext tune` and the benchmarks.
    "_smallm_gemm_configured": "(Tensor x, Tensor w, Tensor w_scale, bool w_shuffled, Tensor? bias, int[] config) "
    "-> Tensor",
    "rmsnorm_quant": "(Tensor x, Tensor weight, float eps, bool ue8m0=False) -> (Tensor q, Tensor scale)",
    "add_rmsnorm_quant": "(Tensor x, Tensor residual, Tensor weight, float eps, bool ue8m0=False) "
    "-> (Tensor q, Tensor scale, Tensor residual_out)",
}

LIBRARY = torch.library.Library("sgl_fp8", "DEF")
for _name, _schema in SCHEMAS.items():
    LIBRARY.define(_name + _schema, tags=(torch.Tag.pt2_compliant_tag,))
