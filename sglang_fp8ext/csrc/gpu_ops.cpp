// GPU backend glue of the sgl_fp8 ops (CUDA builds; ROCm builds get it hipified by torch's
// build), on the LibTorch stable ABI: validation (op_checks.h), output allocation with torch's
// allocator (graph-pool safe), the current stream, and the launchers of
// kernels/common/gpu_launch.h.
//
// Nothing here synchronizes the device or allocates outside torch; the only device queries are
// cached once per device (device_supported) on the first call.
#include <torch/csrc/stable/accelerator.h>
#include <torch/headeronly/util/shim_utils.h>

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

ElemType elem_type_of(ScalarType t) {
  switch (t) {
    case ScalarType::BFloat16: return ElemType::kBF16;
    case ScalarType::Half: return ElemType::kFP16;
    case ScalarType::Float8_e4m3fn: return ElemType::kE4M3;
    case ScalarType::Float: return ElemType::kFP32;
    case ScalarType::Float8_e8m0fnu: return ElemType::kE8M0;
    default: throw std::runtime_error("sgl_fp8: unsupported dtype " + dtype_name(t));
  }
}

// Whether this library has kernels for the tensor's device (cached once per device). Where it
// has none (a gfx950 wheel on an MI300, an sm_90a build on an A100), the ops warn once and run
// the pure-torch reference implementation registered by sglang_fp8ext/reference.py instead:
// correct, slow.
bool runs_reference(const char* op, const Tensor& t) {
  SGL_CHECK(t.is_cuda(), op, ": expected a GPU tensor, got one on ", device_str(t));
  static std::mutex mutex;
  static std::array<int8_t, 64> state{};  // 0 unknown, 1 supported, -1 not
  static std::array<const char*, 64> reason{};
  static std::atomic<bool> warned{false};
  const int index = t.get_device();
  SGL_CHECK(index >= 0 && index < 64, op, ": device index ", num(int64_t(index)), " out of range");
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
    const std::string message = concat({"sglang_fp8ext: ", reason[index] ? reason[index] : "no kernels for this device",
                                        " (", device_str(t),
                                        "); the sgl_fp8 ops run their pure-torch reference implementation there "
                                        "(correct, slow)"});
    aoti_torch_warn(op, __FILE__, __LINE__, message.c_str());  // a Python UserWarning
  }
  return true;
}

// Calls the reference implementation `name` (registered from Python at `import sglang_fp8ext`)
// through the dispatcher with the given arguments and returns its `Outputs` results.
template <size_t Outputs, typename... Args>
std::array<Tensor, Outputs> call_reference(const char* name, const Args&... args) {
  constexpr size_t kSlots = sizeof...(Args) > Outputs ? sizeof...(Args) : Outputs;
  std::array<StableIValue, kSlots> stack{torch::stable::detail::from(args)...};
  TORCH_ERROR_CODE_CHECK(torch_call_dispatcher(name, "", stack.data(), TORCH_ABI_VERSION));
  std::array<Tensor, Outputs> out;
  for (size_t i = 0; i < Outputs; ++i) out[i] = torch::stable::detail::to<Tensor>(stack[i]);
  return out;
}

void check_launch(const char* op, const char* error) {
  if (error != nullptr) throw std::runtime_error(concat({op, ": kernel launch failed: ", error}));
}

// The kernels read activations 16 bytes at a time. A view whose base or row stride breaks
// 16-byte alignment, or whose rows lie kMaxActivationRowBytes or more apart, is copied to a fresh
// contiguous tensor first (activations are small; the weight is never copied).
Tensor with_aligned_rows(const Tensor& rows) {
  const bool base_aligned = reinterpret_cast<uintptr_t>(rows.const_data_ptr()) % 16 == 0;
  const int64_t row_bytes = rows.stride(0) * int64_t(rows.element_size());
  const bool stride_aligned = rows.size(0) <= 1 || (row_bytes % 16 == 0 && row_bytes < kMaxActivationRowBytes);
  return base_aligned && stride_aligned ? rows : torch::stable::contiguous(rows);
}

// The current stream of the tensor's device (a HIP stream on ROCm builds).
void* current_stream(const Tensor& t) {
  void* stream = nullptr;
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_current_cuda_stream(t.get_device_index(), &stream));
  return stream;
}

// Makes the tensor's device current for the kernels' runtime calls, restored on scope exit.
using DeviceGuard = torch::stable::accelerator::DeviceGuard;

// SGL_FP8_PDL=0 turns off programmatic dependent launch (the GEMM then waits for the previous
// kernel before streaming its weight). Read per call: a serving process can flip it.
bool early_weight_prefetch_enabled() {
  const char* v = std::getenv("SGL_FP8_PDL");
  return v == nullptr || !(v[0] == '0' && v[1] == '\0');
}

// ---- per1x128_quant -----------------------------------------------------------------------------

std::tuple<Tensor, Tensor> per1x128_quant_gpu(Tensor x, bool ue8m0, bool transpose_scale) {
  constexpr const char* op = "sgl_fp8::per1x128_quant";
  check_quant_args(x, transpose_scale);
  if (runs_reference(op, x)) {
    auto [q, scale] = call_reference<2>("sgl_fp8::_reference_per1x128_quant", x, ue8m0, transpose_scale);
    return {q, scale};
  }
  const DeviceGuard guard(x.get_device_index());
  auto [q, scale] = allocate_quant_outputs(x, ue8m0, transpose_scale);
  if (q.numel() == 0) return {q, scale};
  const Tensor rows = with_aligned_rows(as_rows(x));
  const Tensor scale2 = scale_rows(scale);
  QuantParams p;
  p.x = rows.const_data_ptr();
  p.x_type = elem_type_of(x.scalar_type());
  p.rows = rows.size(0);
  p.K = rows.size(1);
  p.x_row_stride = rows.stride(0);
  p.ue8m0 = ue8m0;
  p.q = static_cast<uint8_t*>(q.data_ptr());
  p.scale = scale2.data_ptr();
  p.scale_stride_row = scale2.stride(0);
  p.scale_stride_group = scale2.stride(1);
  check_launch(op, launch_per1x128_quant(p, current_stream(x)));
  return {q, scale};
}

// ---- GEMMs --------------------------------------------------------------------------------------

// The private op's config list: empty, or exactly kGemmConfigFields integers in GemmConfig's
// field order (sglang_fp8ext/kernel_config.py KernelConfig.op_args), each checked here.
GemmConfig config_from(const std::vector<int64_t>& v) {
  GemmConfig c;
  if (v.empty()) return c;
  SGL_CHECK(v.size() == size_t(kGemmConfigFields), "sgl_fp8: a GEMM config has exactly ",
            num(int64_t(kGemmConfigFields)),
            " fields (engine, k_split, copy_blocks, early_copies, pair_activations, ctas_per_sm, staging_stages, "
            "tiles_per_wave), got ",
            num(int64_t(v.size())));
  SGL_CHECK(v[0] >= 0 && v[0] <= 3,
            "sgl_fp8: GEMM config field 'engine' must be 0..3 (auto, wgmma, general, register_fed), got ", num(v[0]));
  SGL_CHECK(v[4] >= 0 && v[4] <= 2, "sgl_fp8: GEMM config field 'pair_activations' must be 0..2 (auto, on, off), got ",
            num(v[4]));
  static const char* const kNames[kGemmConfigFields] = {
      "engine", "k_split", "copy_blocks", "early_copies", "pair_activations", "ctas_per_sm", "staging_stages",
      "tiles_per_wave"};
  for (int i = 0; i < kGemmConfigFields; ++i)
    SGL_CHECK(v[i] >= 0 && v[i] < 65536, "sgl_fp8: GEMM config field '", kNames[i], "' must be in [0, 65536), got ",
              num(v[i]));
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

Tensor run_gemm(const char* op, const GemmShape& s, const Tensor& x_in, const std::optional<Tensor>& x_scale,
                const Tensor& w, bool w_shuffled, const Tensor& w_scale, const std::optional<Tensor>& bias,
                ScalarType out_dtype, const GemmConfig& config) {
  const DeviceGuard guard(x_in.get_device_index());
  Tensor out = empty_like_device({s.M, s.N}, out_dtype, x_in);
  if (s.M == 0) return out;
  const Tensor x = with_aligned_rows(x_in);
  GemmParams p;
  p.x = x.const_data_ptr();
  p.x_row_stride = x.stride(0);
  p.x_type = elem_type_of(x.scalar_type());
  if (x_scale.has_value()) {
    p.x_scale = x_scale->const_data_ptr();
    p.x_scale_stride_m = x_scale->stride(0);
    p.x_scale_stride_kb = x_scale->stride(1);
  }
  p.w = static_cast<const uint8_t*>(w.const_data_ptr());
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
  check_launch(op, launch_block_scaled_gemm(p, current_stream(x_in)));
  return out;
}

Tensor smallm_gemm_gpu(Tensor x, Tensor w, Tensor w_scale, bool w_shuffled, std::optional<Tensor> bias) {
  const GemmShape s = check_smallm_gemm_args(x, w, w_scale, bias);
  if (runs_reference("sgl_fp8::smallm_gemm", x))
    return call_reference<1>("sgl_fp8::_reference_smallm_gemm", x, w, w_scale, w_shuffled, bias)[0];
  return run_gemm("sgl_fp8::smallm_gemm", s, x, std::nullopt, w, w_shuffled, w_scale, bias, x.scalar_type(), {});
}

Tensor smallm_gemm_configured_gpu(Tensor x, Tensor w, Tensor w_scale, bool w_shuffled, std::optional<Tensor> bias,
                                  std::vector<int64_t> config) {
  const GemmShape s = check_smallm_gemm_args(x, w, w_scale, bias);
  if (runs_reference("sgl_fp8::_smallm_gemm_configured", x))
    return call_reference<1>("sgl_fp8::_reference_smallm_gemm", x, w, w_scale, w_shuffled, bias)[0];
  return run_gemm("sgl_fp8::_smallm_gemm_configured", s, x, std::nullopt, w, w_shuffled, w_scale, bias,
                  x.scalar_type(), config_from(config));
}

Tensor scaled_gemm_gpu(Tensor xq, Tensor x_scale, Tensor w, Tensor w_scale, bool w_shuffled,
                       std::optional<ScalarType> out_dtype, std::optional<Tensor> bias) {
  const ScalarType out_type = scaled_gemm_out_dtype(out_dtype);
  const GemmShape s = check_scaled_gemm_args(xq, x_scale, w, w_scale, out_type, bias);
  if (runs_reference("sgl_fp8::scaled_gemm", xq))
    return call_reference<1>("sgl_fp8::_reference_scaled_gemm", xq, x_scale, w, w_scale, w_shuffled, out_dtype,
                             bias)[0];
  return run_gemm("sgl_fp8::scaled_gemm", s, xq, x_scale, w, w_shuffled, w_scale, bias, out_type, {});
}

// ---- norms --------------------------------------------------------------------------------------

// rmsnorm_quant when residual is null (no third output), add_rmsnorm_quant otherwise.
std::tuple<Tensor, Tensor, std::optional<Tensor>> norm_quant_gpu(const char* op, const Tensor& x,
                                                                 const Tensor* residual, const Tensor& weight,
                                                                 double eps, bool ue8m0) {
  check_norm_args(op, x, residual, weight, eps);
  if (runs_reference(op, x)) {
    if (residual) {
      auto [q, scale, residual_out] =
          call_reference<3>("sgl_fp8::_reference_add_rmsnorm_quant", x, *residual, weight, eps, ue8m0);
      return {q, scale, residual_out};
    }
    auto [q, scale] = call_reference<2>("sgl_fp8::_reference_rmsnorm_quant", x, weight, eps, ue8m0);
    return {q, scale, std::nullopt};
  }
  const DeviceGuard guard(x.get_device_index());
  auto [q, scale] = allocate_quant_outputs(x, ue8m0, /*transpose_scale=*/false);
  std::optional<Tensor> residual_out;
  if (residual) residual_out = empty_like_device(x.sizes(), x.scalar_type(), x);
  if (q.numel() == 0) return {q, scale, residual_out};
  const Tensor rows = with_aligned_rows(as_rows(x));
  std::optional<Tensor> residual_rows;
  if (residual) residual_rows = with_aligned_rows(as_rows(*residual));
  NormQuantParams p;
  p.x = rows.const_data_ptr();
  p.residual = residual ? residual_rows->const_data_ptr() : nullptr;
  p.weight = weight.const_data_ptr();
  p.x_type = elem_type_of(x.scalar_type());
  p.rows = rows.size(0);
  p.K = rows.size(1);
  p.x_row_stride = rows.stride(0);
  p.residual_row_stride = residual ? residual_rows->stride(0) : 0;
  p.eps = static_cast<float>(eps);
  p.ue8m0 = ue8m0;
  p.q = static_cast<uint8_t*>(q.data_ptr());
  p.scale = scale.data_ptr();
  p.residual_out = residual ? residual_out->data_ptr() : nullptr;
  check_launch(op, launch_rmsnorm_quant(p, current_stream(x)));
  return {q, scale, residual_out};
}

std::tuple<Tensor, Tensor> rmsnorm_quant_gpu(Tensor x, Tensor weight, double eps, bool ue8m0) {
  auto [q, scale, unused] = norm_quant_gpu("sgl_fp8::rmsnorm_quant", x, nullptr, weight, eps, ue8m0);
  return {q, scale};
}

std::tuple<Tensor, Tensor, Tensor> add_rmsnorm_quant_gpu(Tensor x, Tensor residual, Tensor weight, double eps,
                                                         bool ue8m0) {
  auto [q, scale, residual_out] = norm_quant_gpu("sgl_fp8::add_rmsnorm_quant", x, &residual, weight, eps, ue8m0);
  return {q, scale, *residual_out};
}

}  // namespace
}  // namespace sgl_fp8

STABLE_TORCH_LIBRARY_IMPL(sgl_fp8, CUDA, m) {
  m.impl("per1x128_quant", TORCH_BOX(&sgl_fp8::per1x128_quant_gpu));
  m.impl("smallm_gemm", TORCH_BOX(&sgl_fp8::smallm_gemm_gpu));
  m.impl("_smallm_gemm_configured", TORCH_BOX(&sgl_fp8::smallm_gemm_configured_gpu));
  m.impl("scaled_gemm", TORCH_BOX(&sgl_fp8::scaled_gemm_gpu));
  m.impl("rmsnorm_quant", TORCH_BOX(&sgl_fp8::rmsnorm_quant_gpu));
  m.impl("add_rmsnorm_quant", TORCH_BOX(&sgl_fp8::add_rmsnorm_quant_gpu));
}
