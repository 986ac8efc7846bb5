// The sgl_fp8 op schemas (SPEC §2, verbatim) and the Python module entry point.
//
// Backends register their kernels for the same library in their own files
// (TORCH_LIBRARY_IMPL(sgl_fp8, CPU/CUDA, ...)); fake implementations live in ops.py.
#include <Python.h>
#include <torch/library.h>

TORCH_LIBRARY(sgl_fp8, m) {
  const std::vector<at::Tag> tags{at::Tag::pt2_compliant_tag};
  m.def("per1x128_quant(Tensor x, bool ue8m0=False, bool transpose_scale=False) -> (Tensor q, Tensor scale)", tags);
  m.def("smallm_gemm(Tensor x, Tensor w, Tensor w_scale, bool w_shuffled=False, Tensor? bias=None) -> Tensor", tags);
  m.def(
      "scaled_gemm(Tensor xq, Tensor x_scale, Tensor w, Tensor w_scale, bool w_shuffled=False, "
      "ScalarType? out_dtype=None, Tensor? bias=None) -> Tensor",
      tags);
  // Private: smallm_gemm with an explicit kernel configuration: the fields of GemmConfig
  // (kernels/common/gpu_launch.h) in order, as sglang_fp8ext/kernel_config.py encodes them (all 0: the
  // plan's own), for fp8_block_linear's tuned table, `python -m sglang_fp8ext tune` and the benchmarks.
  m.def(
      "_smallm_gemm_configured(Tensor x, Tensor w, Tensor w_scale, bool w_shuffled, Tensor? bias, int[] config) "
      "-> Tensor",
      tags);
  m.def("rmsnorm_quant(Tensor x, Tensor weight, float eps, bool ue8m0=False) -> (Tensor q, Tensor scale)", tags);
  m.def(
      "add_rmsnorm_quant(Tensor x, Tensor residual, Tensor weight, float eps, bool ue8m0=False) "
      "-> (Tensor q, Tensor scale, Tensor residual_out)",
      tags);
}

#if defined(SGL_FP8_WITH_CUDA)
#define SGL_FP8_BACKEND "cuda"
#elif defined(SGL_FP8_WITH_HIP)
#define SGL_FP8_BACKEND "rocm"
#else
#define SGL_FP8_BACKEND "cpu"
#endif
#ifndef SGL_FP8_DEVICE_ARCHS
#define SGL_FP8_DEVICE_ARCHS ""
#endif

// Importing sglang_fp8ext._C loads this library, which runs the registrations above. The ops are
// reached through torch.ops.sgl_fp8; the module only says what was built, so that the package
// can check at import that the GPU present is one the library has code for.
extern "C" PyMODINIT_FUNC PyInit__C(void) {
  static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_C", "sgl_fp8 op library", -1, nullptr};
  PyObject* module = PyModule_Create(&module_def);
  if (module == nullptr) return nullptr;
  if (PyModule_AddStringConstant(module, "backend", SGL_FP8_BACKEND) < 0 ||
      PyModule_AddStringConstant(module, "device_archs", SGL_FP8_DEVICE_ARCHS) < 0) {
    Py_DECREF(module);
    return nullptr;
  }
  return module;
}
