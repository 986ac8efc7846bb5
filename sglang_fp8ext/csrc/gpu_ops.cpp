// GPU backend glue of the sgl_fp8 ops (CUDA builds; ROCm builds get it hipified by torch's
// build): validation (op_checks.h), output allocation with torch's allocator (graph-pool
// safe), the current stream, and the launchers of kernels/common/gpu_launch.h.
//
// Nothing here synchronizes the device or allocates outside torch; the only device queries are
// cached once per device (device_supported) on the first call.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <tuple>

#include "../../kernels/common/gpu_launch.h"
#include "op_checks.h"
#include "op_outputs.h"

namespace sgl_fp8 {
namespace {

ElemType elem_type_of(at::ScalarType t) {
  switch (t) {
    case at::kBFloat16: return ElemType::kBF16;
    case at::kHalf: return ElemType::kFP16;
    case at::kFloat8_e4m3fn: return ElemType::kE4M3;
    case at::kFloat: return ElemType::kFP32;
    case at::kFloat8_e8m0fnu: return ElemType::kE8M0;
    default: TORCH_CHECK(false, "sgl_fp8: unsupported dtype ", c10::toString(t));
  }
}

// Whether this library has kernels for the tensor's device (cached once per device). Where it
// has none (a gfx950 wheel on an MI300, an sm_90a build on an A100), the ops warn once and run
// the pure-torch reference implementation registered by sglang_fp8ext/reference.py instead:
// correct, slow.
bool runs_reference(const char* op, const at::Tensor& t) {
  TORCH_CHECK(t.is_cuda(), op, ": expected a GPU tensor, got one on ", device_str(t));
  static std::mutex mutex;
  static std::array<int8_t, 64> state{};  // 0 unknown, 1 supported, -1 not
  static std::array<const char*, 64> reason{};
  static std::atomic<bool> warned{false};
  const int index = t.get_device();
  TORCH_CHECK(index >= 0 && index < 64, op, ": device index ", num(int64_t(index)), " out of range");
  if (state[index] == 0) {
    std::lock_guard<std::mutex> lock(mutex);
    const char* why = nullptr;
    if (state[index] == 0) {
      const bool ok = device_supported(index, &why);
      reason[index] = why;
      state[index] = ok ? 1 : -1;
    }
  }
  if (state[index] == 1) return false;
  if (!warned.exchange(true)) {
    TORCH_WARN("sglang_fp8ext: ", reason[index] ? reason[index] : "no kernels for this device", " (", device_str(t),
               "); the sgl_fp8 ops run their pure-torch reference implementation there (correct, slow)");
  }
  return true;
}

// The reference implementation of `name`, registered from Python at `import sglang_fp8ext`.
template <typename Signature>
c10::TypedOperatorHandle<Signature> reference_op(const char* name) {
  return c10::Dispatcher::singleton()
      .findSchemaOrThrow(name, "")
      .typed<Signature>();
}

void check_launch(const char* op, const char* error) {
  TORCH_CHECK(error == nullptr, op, ": kernel launch failed: ", error);
}

// The kernels read activations 16 bytes at a time. A view whose base or row stride breaks
// 16-byte alignment, or whose rows lie kMaxActivationRowBytes or more apart, is copied to a fresh
// contiguous tensor first (activations are small; the weight is never copied).
at::Tensor with_aligned_rows(const at::Tensor& rows) {
  const bool base_aligned = reinterpret_cast<uintptr_t>(rows.const_data_ptr()) % 16 == 0;
  const int64_t row_bytes = rows.stride(0) * rows.element_size();
  const bool stride_aligned = rows.size(0) <= 1 || (row_bytes % 16 == 0 && row_bytes < kMaxActivationRowBytes);
  return base_aligned && stride_aligned ? rows : rows.contiguous();
}

void* current_stream() { return c10::cuda::getCurrentCUDAStream().stream(); }

// SGL_FP8_PDL=0 turns off programmatic dependent launch (the GEMM then waits for the previous
// kernel before streaming its weight). Read per call: a serving process can flip it.
bool early_weight_prefetch_enabled() {
  const char* v = std::getenv("SGL_FP8_PDL");
  return v == nullptr || !(v[0] == '0' && v[1] == '\0');
}

// ---- per1x128_quant -----------------------------------------------------------------------------

std::tuple<at::Tensor, at::Tensor> per1x128_quant_gpu(const at::Tensor& x, bool ue8m0, bool transpose_scale) {
  constexpr const char* op = "sgl_fp8::per1x128_quant";
  check_quant_args(x, transpose_scale);
  if (runs_reference(op, x))
    return reference_op<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, bool, bool)>(
               "sgl_fp8::_reference_per1x128_quant")
        .call(x, ue8m0, transpose_scale);
  const c10::cuda::CUDAGuard guard(x.device());
  auto [q, scale] = allocate_quant_outputs(x, ue8m0, transpose_scale);
  if (q.numel() == 0) return {q, scale};
  const at::Tensor rows = with_aligned_rows(as_rows(x));
  const at::Tensor scale2 = scale.dim() == 2 ? scale : scale.view({-1, scale.size(-1)});
  QuantParams p;
  p.x = rows.const_data_ptr();
  p.x_type = elem_type_of(x.scalar_type());
  p.rows = rows.size(0);
  p.K = rows.size(1);
  p.x_row_stride = rows.stride(0);
  p.ue8m0 = ue8m0;
  p.q = reinterpret_cast<uint8_t*>(q.data_ptr());
  p.scale = scale2.data_ptr();
  p.scale_stride_row = scale2.stride(0);
  p.scale_stride_group = scale2.stride(1);
  check_launch(op, launch_per1x128_quant(p, current_stream()));
  return {q, scale};
}

// ---- GEMMs --------------------------------------------------------------------------------------

// The private op's config list: none (or empty), or exactly kGemmConfigFields integers in
// GemmConfig's field order (sglang_fp8ext/kernel_config.py KernelConfig.op_args), each checked here.
GemmConfig config_from(const c10::optional<at::IntArrayRef>& config) {
  GemmConfig c;
  if (!config.has_value() || config->empty()) return c;
  const at::IntArrayRef v = *config;
  // Numbers go through num() (op_checks.h), never through an ostream: see op_checks.h.
  TORCH_CHECK(v.size() == size_t(kGemmConfigFields), "sgl_fp8: a GEMM config has exactly " + num(int64_t(kGemmConfigFields)) +
                                                         " fields (engine, k_split, copy_blocks, early_copies, "
                                                         "pair_activations, ctas_per_sm, staging_stages, "
                                                         "tiles_per_wave), got " + num(int64_t(v.size())));
  TORCH_CHECK(v[0] >= 0 && v[0] <= 3,
              "sgl_fp8: GEMM config field 'engine' must be 0..3 (auto, wgmma, general, register_fed), got " + num(v[0]));
  TORCH_CHECK(v[4] >= 0 && v[4] <= 2,
              "sgl_fp8: GEMM config field 'pair_activations' must be 0..2 (auto, on, off), got " + num(v[4]));
  static const char* const kNames[kGemmConfigFields] = {
      "engine", "k_split", "copy_blocks", "early_copies", "pair_activations", "ctas_per_sm", "staging_stages",
      "tiles_per_wave"};
  for (int i = 0; i < kGemmConfigFields; ++i)
    TORCH_CHECK(v[i] >= 0 && v[i] < 65536,
                "sgl_fp8: GEMM config field '" + std::string(kNames[i]) + "' must be in [0, 65536), got " + num(v[i]));
  c.engine = static_cast<GemmEngine>(v[0]);
  c.k_split = int32_t(v[1]);
  c.copy_blocks = int32_t(v[2]);
  c.early_copies = int32_t(v[3]);
  c.pair_activations = static_cast<Toggle>(v[4]);
  c.ctas_per_sm = int32_t(v[5]);
  c.staging_stages = int32_t(v[6]);
  c.tiles_per_wave = int32_t(v[7]);
  return c;
}

at::Tensor run_gemm(const char* op, const GemmShape& s, const at::Tensor& x_in, const c10::optional<at::Tensor>& x_scale,
                    const at::Tensor& w, bool w_shuffled, const at::Tensor& w_scale,
                    const c10::optional<at::Tensor>& bias, at::ScalarType out_dtype, const GemmConfig& config) {
  const c10::cuda::CUDAGuard guard(x_in.device());
  at::Tensor out = at::empty({s.M, s.N}, x_in.options().dtype(out_dtype));
  if (s.M == 0) return out;
  const at::Tensor x = with_aligned_rows(x_in);
  GemmParams p;
  p.x = x.const_data_ptr();
  p.x_row_stride = x.stride(0);
  p.x_type = elem_type_of(x.scalar_type());
  if (x_scale.has_value()) {
    p.x_scale = x_scale->const_data_ptr();
    p.x_scale_stride_m = x_scale->stride(0);
    p.x_scale_stride_kb = x_scale->stride(1);
  }
  p.w = reinterpret_cast<const uint8_t*>(w.const_data_ptr());
  p.w_shuffled = w_shuffled;
  p.w_scale = w_scale.const_data_ptr();
  p.e8m0 = s.e8m0;
  p.bias = bias.has_value() ? bias->const_data_ptr() : nullptr;
  p.out = out.data_ptr();
  p.out_type = elem_type_of(out_dtype);
  p.M = s.M;
  p.N = s.N;
  p.K = s.K;
  p.config = config;
  p.allow_early_weight_prefetch = early_weight_prefetch_enabled();
  check_launch(op, launch_block_scaled_gemm(p, current_stream()));
  return out;
}

using SmallmSignature = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, bool,
                                   const c10::optional<at::Tensor>&);

at::Tensor smallm_gemm_gpu(const at::Tensor& x, const at::Tensor& w, const at::Tensor& w_scale, bool w_shuffled,
                           const c10::optional<at::Tensor>& bias) {
  const GemmShape s = check_smallm_gemm_args(x, w, w_scale, bias);
  if (runs_reference("sgl_fp8::smallm_gemm", x))
    return reference_op<SmallmSignature>("sgl_fp8::_reference_smallm_gemm").call(x, w, w_scale, w_shuffled, bias);
  return run_gemm("sgl_fp8::smallm_gemm", s, x, c10::nullopt, w, w_shuffled, w_scale, bias, x.scalar_type(), {});
}

at::Tensor smallm_gemm_configured_gpu(const at::Tensor& x, const at::Tensor& w, const at::Tensor& w_scale,
                                      bool w_shuffled, const c10::optional<at::Tensor>& bias, at::IntArrayRef config) {
  const GemmShape s = check_smallm_gemm_args(x, w, w_scale, bias);
  if (runs_reference("sgl_fp8::_smallm_gemm_configured", x))
    return reference_op<SmallmSignature>("sgl_fp8::_reference_smallm_gemm").call(x, w, w_scale, w_shuffled, bias);
  return run_gemm("sgl_fp8::_smallm_gemm_configured", s, x, c10::nullopt, w, w_shuffled, w_scale, bias,
                  x.scalar_type(), config_from(config));
}

at::Tensor scaled_gemm_gpu(const at::Tensor& xq, const at::Tensor& x_scale, const at::Tensor& w,
                           const at::Tensor& w_scale, bool w_shuffled, c10::optional<at::ScalarType> out_dtype,
                           const c10::optional<at::Tensor>& bias) {
  const at::ScalarType out_type = scaled_gemm_out_dtype(out_dtype);
  const GemmShape s = check_scaled_gemm_args(xq, x_scale, w, w_scale, out_type, bias);
  if (runs_reference("sgl_fp8::scaled_gemm", xq))
    return reference_op<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, bool,
                                   c10::optional<at::ScalarType>, const c10::optional<at::Tensor>&)>(
               "sgl_fp8::_reference_scaled_gemm")
        .call(xq, x_scale, w, w_scale, w_shuffled, out_dtype, bias);
  return run_gemm("sgl_fp8::scaled_gemm", s, xq, x_scale, w, w_shuffled, w_scale, bias, out_type, {});
}

// ---- norms --------------------------------------------------------------------------------------

std::tuple<at::Tensor, at::Tensor, at::Tensor> norm_quant_gpu(const char* op, const at::Tensor& x,
                                                              const at::Tensor* residual, const at::Tensor& weight,
                                                              double eps, bool ue8m0) {
  check_norm_args(op, x, residual, weight, eps);
  if (runs_reference(op, x)) {
    if (residual)
      return reference_op<std::tuple<at::Tensor, at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                                          const at::Tensor&, double, bool)>(
                 "sgl_fp8::_reference_add_rmsnorm_quant")
          .call(x, *residual, weight, eps, ue8m0);
    auto [q, scale] = reference_op<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, double,
                                                                      bool)>("sgl_fp8::_reference_rmsnorm_quant")
                          .call(x, weight, eps, ue8m0);
    return {q, scale, at::Tensor()};
  }
  const c10::cuda::CUDAGuard guard(x.device());
  auto [q, scale] = allocate_quant_outputs(x, ue8m0, /*transpose_scale=*/false);
  at::Tensor residual_out = residual ? at::empty(x.sizes(), x.options()) : at::Tensor();
  if (q.numel() == 0) return {q, scale, residual_out};
  const at::Tensor rows = with_aligned_rows(as_rows(x));
  const at::Tensor residual_rows = residual ? with_aligned_rows(as_rows(*residual)) : at::Tensor();
  NormQuantParams p;
  p.x = rows.const_data_ptr();
  p.residual = residual ? residual_rows.const_data_ptr() : nullptr;
  p.weight = weight.const_data_ptr();
  p.x_type = elem_type_of(x.scalar_type());
  p.rows = rows.size(0);
  p.K = rows.size(1);
  p.x_row_stride = rows.stride(0);
  p.residual_row_stride = residual ? residual_rows.stride(0) : 0;
  p.eps = static_cast<float>(eps);
  p.ue8m0 = ue8m0;
  p.q = reinterpret_cast<uint8_t*>(q.data_ptr());
  p.scale = scale.data_ptr();
  p.residual_out = residual ? residual_out.data_ptr() : nullptr;
  check_launch(op, launch_rmsnorm_quant(p, current_stream()));
  return {q, scale, residual_out};
}

std::tuple<at::Tensor, at::Tensor> rmsnorm_quant_gpu(const at::Tensor& x, const at::Tensor& weight, double eps,
                                                     bool ue8m0) {
  auto [q, scale, unused] = norm_quant_gpu("sgl_fp8::rmsnorm_quant", x, nullptr, weight, eps, ue8m0);
  return {q, scale};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> add_rmsnorm_quant_gpu(const at::Tensor& x, const at::Tensor& residual,
                                                                     const at::Tensor& weight, double eps,
                                                                     bool ue8m0) {
  return norm_quant_gpu("sgl_fp8::add_rmsnorm_quant", x, &residual, weight, eps, ue8m0);
}

}  // namespace
}  // namespace sgl_fp8

TORCH_LIBRARY_IMPL(sgl_fp8, CUDA, m) {
  m.impl("per1x128_quant", &sgl_fp8::per1x128_quant_gpu);
  m.impl("smallm_gemm", &sgl_fp8::smallm_gemm_gpu);
  m.impl("_smallm_gemm_configured", &sgl_fp8::smallm_gemm_configured_gpu);
  m.impl("scaled_gemm", &sgl_fp8::scaled_gemm_gpu);
  m.impl("rmsnorm_quant", &sgl_fp8::rmsnorm_quant_gpu);
  m.impl("add_rmsnorm_quant", &sgl_fp8::add_rmsnorm_quant_gpu);
}
