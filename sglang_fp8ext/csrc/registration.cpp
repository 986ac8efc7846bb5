// The Python module entry point of the op library.
//
// The sgl_fp8 op schemas (SPEC §2) are defined from Python (sglang_fp8ext/schemas.py) before
// this library is loaded: with the stable ABI targeting torch 2.11, C++ cannot attach the
// pt2_compliant tag to a schema. Each backend registers its kernels for those schemas in its own
// file (STABLE_TORCH_LIBRARY_IMPL(sgl_fp8, CPU/CUDA, ...)); fake implementations live in ops.py.
//
// Only CPython's limited API is used here (the wheel is abi3).
#include <Python.h>

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

// Importing sglang_fp8ext._C loads this library, which runs the kernel registrations. The ops
// are reached through torch.ops.sgl_fp8; the module only says what was built, so that the
// package can check that the GPU present is one the library has code for.
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
