// The interface between the torch glue (sglang_fp8ext/csrc/gpu_ops.cpp) and the device code.
//
// Free of torch, CUDA and HIP headers: the same declarations are implemented by the sm_90
// kernels (kernels/sm90/sm90_kernels.cu) on CUDA builds and by the gfx950 kernels
// (kernels/gfx950/*.hip) on ROCm builds. The glue validates every argument (op_checks.h) before
// filling these structs, so launchers may assume SPEC §2's shape rules hold.
//
// Every launcher enqueues its work on `stream` (a cudaStream_t / hipStream_t), never
// synchronizes, never allocates, and returns nullptr on success or a static error message.
#pragma once

#include <stdint.h>

namespace sgl_fp8 {

enum class ElemType : int32_t { kBF16 = 0, kFP16 = 1, kE4M3 = 2, kFP32 = 3, kE8M0 = 4 };

// Optional per-call kernel configuration: the engine and its named knobs. Zero in every field is
// the backend's own plan. Tuned tables (sglang_fp8ext/configs/*.json) store these per
// (device, N, K, M); the Python mirror is sglang_fp8ext/kernel_config.py (KernelConfig, whose
// fields a test compares with this struct's).
enum class GemmEngine : int32_t { kAuto = 0, kWgmma = 1, kGeneral = 2, kRegisterFed = 3 };
enum class Toggle : int32_t { kAuto = 0, kOn = 1, kOff = 2 };
struct GemmConfig {   // zero everywhere: the backend's own plan
  GemmEngine engine = GemmEngine::kAuto;  // sm_90 engine (gfx950 has one GEMM kernel, ignores it)
  int32_t k_split = 0;          // sm_90: CTAs of a cluster splitting K; gfx950: waves splitting K
  int32_t copy_blocks = 0;      // sm_90 wgmma: K blocks per tensor copy (0: about 32 KB)
  int32_t early_copies = 0;     // sm_90 wgmma: copies requested before the activations are read (0: half)
  Toggle pair_activations = Toggle::kAuto;  // sm_90 wgmma, 9-32 tokens
  int32_t ctas_per_sm = 0;      // sm_90 general: CTAs per SM the grid is sized for (0: one)
  int32_t staging_stages = 0;   // sm_90 general: cp.async staging stages (0: the plan's)
  int32_t tiles_per_wave = 0;   // gfx950: 16-row tiles a wave handles per pass (0: the plan's)
};
constexpr int kGemmConfigFields = 8;          // the private op passes these, in this order
constexpr int kKernelInterfaceVersion = 2;    // sglang_fp8ext/kernel_config.py KERNEL_INTERFACE_VERSION

// The sm_90 GEMM kernels address a 32-token chunk of activations with 32-bit byte offsets: its
// rows must lie less than this apart (the torch glue copies a view whose rows do not).
constexpr int64_t kMaxActivationRowBytes = int64_t(1) << 27;

struct GemmParams {
  // Activations [M, K], unit stride along K. smallm_gemm: bf16/fp16, quantized in the kernel;
  // scaled_gemm: e4m3 with x_scale [M, K/128] (fp32 or e8m0 bytes, like w_scale).
  const void* x = nullptr;
  int64_t x_row_stride = 0;  // in elements; below kMaxActivationRowBytes bytes
  ElemType x_type = ElemType::kBF16;
  const void* x_scale = nullptr;
  int64_t x_scale_stride_m = 0, x_scale_stride_kb = 0;  // in elements

  // Weight [N, K] e4m3 bytes, plain row-major or AITER (16,16)-shuffled (SPEC §4).
  const uint8_t* w = nullptr;
  bool w_shuffled = false;
  // Block scales [ceil(N/128), K/128] contiguous: fp32, or e8m0 bytes when e8m0 is set.
  const void* w_scale = nullptr;
  bool e8m0 = false;

  const void* bias = nullptr;  // [N] in out_type, or nullptr
  void* out = nullptr;         // [M, N] contiguous
  ElemType out_type = ElemType::kBF16;

  int64_t M = 0, N = 0, K = 0;
  GemmConfig config;
  // Allow programmatic dependent launch (sm_90): the kernel may start streaming the weight
  // before the previous kernel on the stream has finished (it waits before reading x).
  bool allow_early_weight_prefetch = true;
};

struct QuantParams {
  const void* x = nullptr;  // [rows, K] bf16/fp16, unit stride along K
  ElemType x_type = ElemType::kBF16;
  int64_t rows = 0, K = 0, x_row_stride = 0;
  bool ue8m0 = false;
  uint8_t* q = nullptr;  // [rows, K] contiguous
  void* scale = nullptr;  // fp32 or e8m0 bytes at (row, group) -> row*stride_row + group*stride_group
  int64_t scale_stride_row = 0, scale_stride_group = 0;
};

struct NormQuantParams {
  const void* x = nullptr;         // [rows, K]
  const void* residual = nullptr;  // [rows, K] or nullptr (rmsnorm_quant)
  const void* weight = nullptr;    // [K]
  ElemType x_type = ElemType::kBF16;
  int64_t rows = 0, K = 0, x_row_stride = 0, residual_row_stride = 0;
  float eps = 0.0f;
  bool ue8m0 = false;
  uint8_t* q = nullptr;        // [rows, K] contiguous
  void* scale = nullptr;       // [rows, K/128] contiguous, fp32 or e8m0 bytes
  void* residual_out = nullptr;  // [rows, K] contiguous in x_type, when residual is given
};

// smallm_gemm (x bf16/fp16) and scaled_gemm (x e4m3 + x_scale) share one entry point.
const char* launch_block_scaled_gemm(const GemmParams& p, void* stream);
const char* launch_per1x128_quant(const QuantParams& p, void* stream);
const char* launch_rmsnorm_quant(const NormQuantParams& p, void* stream);

// Whether this build has kernels for the device `device_index` (checked once per device by
// the glue); fills `why` (a static string) when it does not.
bool device_supported(int device_index, const char** why);

}  // namespace sgl_fp8
