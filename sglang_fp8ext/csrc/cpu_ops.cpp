// CPU backend of the sgl_fp8 ops: validation, output allocation and threading around the
// torch-free kernels in kernels/cpu (numerics of SPEC §3, bit-exact quantization). Written
// against the LibTorch stable ABI only.
#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Half.h>

#include <tuple>
#include <vector>

#include "../../kernels/cpu/fp8_cpu_kernels.h"
#include "op_checks.h"
#include "op_outputs.h"

namespace sgl_fp8 {
namespace {

// Rows of work per thread task: quantization and norms are cheap per row, so keep tasks large
// enough that parallel_for does not spend more on scheduling than on work.
constexpr int64_t kRowGrain = 16;
constexpr int64_t kColumnGrain = 16;

using BFloat16 = torch::headeronly::BFloat16;
using Half = torch::headeronly::Half;

// Calls f with a value of the C++ type of a bf16/fp16 dtype (checked before any dispatch).
template <typename F>
void dispatch_activation(ScalarType t, F&& f) {
  if (t == ScalarType::BFloat16) {
    f(BFloat16());
  } else {
    SGL_CHECK(t == ScalarType::Half, "sgl_fp8: expected bfloat16 or float16, got ", dtype_name(t));
    f(Half());
  }
}

// Where the K/128 scales of each row go: fp32 or e8m0 storage with (row, group) strides.
struct ScaleOut {
  float* f32 = nullptr;
  uint8_t* e8m0 = nullptr;
  int64_t row_stride = 0, group_stride = 0;
};

ScaleOut scale_out_of(const Tensor& scale, bool ue8m0) {
  const Tensor s2 = scale_rows(scale);
  ScaleOut out;
  if (ue8m0) {
    out.e8m0 = static_cast<uint8_t*>(s2.data_ptr());
  } else {
    out.f32 = static_cast<float*>(s2.data_ptr());
  }
  out.row_stride = s2.stride(0);
  out.group_stride = s2.stride(1);
  return out;
}

template <typename scalar_t>
void load_row(const scalar_t* row, int64_t K, float* out) {
  for (int64_t k = 0; k < K; ++k) out[k] = static_cast<float>(row[k]);
}

template <typename scalar_t>
void quantize_rows_typed(const scalar_t* x, int64_t row_stride, int64_t rows, int64_t K, bool ue8m0,
                         uint8_t* q, const ScaleOut& scale) {
  torch::stable::parallel_for(0, rows, kRowGrain, [&](int64_t begin, int64_t end) {
    std::vector<float> row(K);
    for (int64_t r = begin; r < end; ++r) {
      load_row(x + r * row_stride, K, row.data());
      cpu::quantize_row_1x128(row.data(), K, ue8m0, q + r * K,
                              scale.f32 ? scale.f32 + r * scale.row_stride : nullptr,
                              scale.e8m0 ? scale.e8m0 + r * scale.row_stride : nullptr, scale.group_stride);
    }
  });
}

// Quantizes x viewed as [rows, K]; q is contiguous [rows, K].
void quantize_rows(const Tensor& x_rows, bool ue8m0, uint8_t* q, const ScaleOut& scale) {
  const int64_t rows = x_rows.size(0), K = x_rows.size(1), row_stride = x_rows.stride(0);
  dispatch_activation(x_rows.scalar_type(), [&](auto tag) {
    using scalar_t = decltype(tag);
    quantize_rows_typed(static_cast<const scalar_t*>(x_rows.const_data_ptr()), row_stride, rows, K, ue8m0, q, scale);
  });
}

std::vector<float> scales_as_float(const Tensor& scale) {
  // [R, C] with any strides, fp32 or e8m0, decoded to a dense row-major fp32 array.
  const int64_t R = scale.size(0), C = scale.size(1);
  std::vector<float> out(static_cast<size_t>(R * C));
  const bool e8m0 = scale.scalar_type() == ScalarType::Float8_e8m0fnu;
  const auto* bytes = reinterpret_cast<const uint8_t*>(scale.const_data_ptr());
  const auto* floats = reinterpret_cast<const float*>(scale.const_data_ptr());
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) {
      const int64_t o = r * scale.stride(0) + c * scale.stride(1);
      out[r * C + c] = e8m0 ? e8m0_to_float(bytes[o]) : floats[o];
    }
  return out;
}

template <typename scalar_t>
void store_output(const std::vector<float>& acc, const GemmShape& s, const std::optional<Tensor>& bias,
                  Tensor& out) {
  scalar_t* o = static_cast<scalar_t*>(out.data_ptr());
  const scalar_t* b = bias.has_value() ? static_cast<const scalar_t*>(bias->const_data_ptr()) : nullptr;
  for (int64_t m = 0; m < s.M; ++m)
    for (int64_t n = 0; n < s.N; ++n) {
      const float v = acc[m * s.N + n] + (b ? static_cast<float>(b[n]) : 0.0f);
      o[m * s.N + n] = static_cast<scalar_t>(v);  // round-to-nearest-even
    }
}

// out = cast(bias + sum_kb xs * ws * P) for quantized activations qf (as exact fp32 values).
Tensor block_scaled_gemm(const std::vector<float>& qf, const std::vector<float>& xs, const GemmShape& s,
                         const Tensor& w, bool w_shuffled, const Tensor& w_scale, const std::optional<Tensor>& bias,
                         ScalarType out_dtype) {
  Tensor out = empty_like_device({s.M, s.N}, out_dtype, w);
  if (s.M == 0) return out;
  const std::vector<float> ws = scales_as_float(w_scale);
  std::vector<float> acc(static_cast<size_t>(s.M * s.N));
  const auto* wbytes = reinterpret_cast<const uint8_t*>(w.const_data_ptr());
  torch::stable::parallel_for(0, s.N, kColumnGrain, [&](int64_t begin, int64_t end) {
    std::vector<float> w_row(s.K);
    cpu::block_scaled_gemm_columns(qf.data(), xs.data(), s.M, wbytes, w_shuffled, ws.data(), s.K, s.N, begin, end,
                                   acc.data(), w_row.data());
  });
  dispatch_activation(out_dtype, [&](auto tag) { store_output<decltype(tag)>(acc, s, bias, out); });
  return out;
}

// ---- the ops ----------------------------------------------------------------------------------

std::tuple<Tensor, Tensor> per1x128_quant_cpu(Tensor x, bool ue8m0, bool transpose_scale) {
  check_quant_args(x, transpose_scale);
  auto [q, scale] = allocate_quant_outputs(x, ue8m0, transpose_scale);
  if (q.numel() == 0) return {q, scale};
  quantize_rows(as_rows(x), ue8m0, static_cast<uint8_t*>(q.data_ptr()), scale_out_of(scale, ue8m0));
  return {q, scale};
}

// Quantizes x [M, K] and returns the quantized values and scales decoded to fp32 (dense).
void quantize_for_gemm(const Tensor& x, bool ue8m0, std::vector<float>& qf, std::vector<float>& xs) {
  auto [q, scale] = allocate_quant_outputs(x, ue8m0, /*transpose_scale=*/false);
  quantize_rows(x, ue8m0, static_cast<uint8_t*>(q.data_ptr()), scale_out_of(scale, ue8m0));
  const auto* qb = static_cast<const uint8_t*>(q.const_data_ptr());
  const cpu::E4m3Table& table = cpu::e4m3_table();
  qf.resize(static_cast<size_t>(q.numel()));
  for (int64_t i = 0; i < q.numel(); ++i) qf[i] = table.value[qb[i]];
  xs = scales_as_float(scale);
}

Tensor smallm_gemm_cpu(Tensor x, Tensor w, Tensor w_scale, bool w_shuffled, std::optional<Tensor> bias) {
  const GemmShape s = check_smallm_gemm_args(x, w, w_scale, bias);
  std::vector<float> qf, xs;
  if (s.M > 0) quantize_for_gemm(x, s.e8m0, qf, xs);
  return block_scaled_gemm(qf, xs, s, w, w_shuffled, w_scale, bias, x.scalar_type());
}

// The CPU has a single GEMM implementation: the configuration is a GPU tuning knob.
Tensor smallm_gemm_configured_cpu(Tensor x, Tensor w, Tensor w_scale, bool w_shuffled, std::optional<Tensor> bias,
                                  std::vector<int64_t>) {
  return smallm_gemm_cpu(x, w, w_scale, w_shuffled, bias);
}

Tensor scaled_gemm_cpu(Tensor xq, Tensor x_scale, Tensor w, Tensor w_scale, bool w_shuffled,
                       std::optional<ScalarType> out_dtype, std::optional<Tensor> bias) {
  const ScalarType out_type = scaled_gemm_out_dtype(out_dtype);
  const GemmShape s = check_scaled_gemm_args(xq, x_scale, w, w_scale, out_type, bias);
  std::vector<float> qf(static_cast<size_t>(s.M * s.K)), xs;
  if (s.M > 0) {
    const auto* qb = static_cast<const uint8_t*>(xq.const_data_ptr());
    const cpu::E4m3Table& table = cpu::e4m3_table();
    for (int64_t m = 0; m < s.M; ++m)
      for (int64_t k = 0; k < s.K; ++k) qf[m * s.K + k] = table.value[qb[m * xq.stride(0) + k]];
    xs = scales_as_float(x_scale);
  }
  return block_scaled_gemm(qf, xs, s, w, w_shuffled, w_scale, bias, out_type);
}

// SPEC §3.5 for rows [begin, end): h = x (+ residual); residual_out = cast(h); y = cast(norm(hr) * weight);
// then the 1x128 quant of y.
template <typename scalar_t>
void norm_quant_rows(const Tensor& x_rows, const Tensor* residual_rows, const Tensor& weight, float eps, bool ue8m0,
                     uint8_t* q, const ScaleOut& scale, scalar_t* residual_out) {
  const int64_t rows = x_rows.size(0), K = x_rows.size(1);
  const int64_t x_stride = x_rows.stride(0), res_stride = residual_rows ? residual_rows->stride(0) : 0;
  const scalar_t* x = static_cast<const scalar_t*>(x_rows.const_data_ptr());
  const scalar_t* res = residual_rows ? static_cast<const scalar_t*>(residual_rows->const_data_ptr()) : nullptr;
  const scalar_t* wt = static_cast<const scalar_t*>(weight.const_data_ptr());
  torch::stable::parallel_for(0, rows, kRowGrain, [&](int64_t begin, int64_t end) {
    std::vector<float> hr(K), y(K);
    for (int64_t r = begin; r < end; ++r) {
      const scalar_t* xr = x + r * x_stride;
      for (int64_t k = 0; k < K; ++k) {
        float h = static_cast<float>(xr[k]);
        if (res) h += static_cast<float>(res[r * res_stride + k]);
        const scalar_t rounded = static_cast<scalar_t>(h);
        if (residual_out) residual_out[r * K + k] = rounded;
        hr[k] = static_cast<float>(rounded);
      }
      const float inv_rms = cpu::rms_inverse(hr.data(), K, eps);
      for (int64_t k = 0; k < K; ++k)
        y[k] = static_cast<float>(static_cast<scalar_t>(hr[k] * inv_rms * static_cast<float>(wt[k])));
      cpu::quantize_row_1x128(y.data(), K, ue8m0, q + r * K, scale.f32 ? scale.f32 + r * scale.row_stride : nullptr,
                              scale.e8m0 ? scale.e8m0 + r * scale.row_stride : nullptr, scale.group_stride);
    }
  });
}

std::tuple<Tensor, Tensor, std::optional<Tensor>> norm_quant(const char* op, const Tensor& x, const Tensor* residual,
                                                             const Tensor& weight, double eps, bool ue8m0) {
  check_norm_args(op, x, residual, weight, eps);
  auto [q, scale] = allocate_quant_outputs(x, ue8m0, /*transpose_scale=*/false);
  std::optional<Tensor> residual_out;
  if (residual) residual_out = empty_like_device(x.sizes(), x.scalar_type(), x);
  if (q.numel() == 0) return {q, scale, residual_out};
  const Tensor x_rows = as_rows(x);
  std::optional<Tensor> residual_rows;
  if (residual) residual_rows = as_rows(*residual);
  dispatch_activation(x.scalar_type(), [&](auto tag) {
    using scalar_t = decltype(tag);
    norm_quant_rows<scalar_t>(x_rows, residual_rows ? &*residual_rows : nullptr, weight, static_cast<float>(eps),
                              ue8m0, static_cast<uint8_t*>(q.data_ptr()), scale_out_of(scale, ue8m0),
                              residual_out ? static_cast<scalar_t*>(residual_out->data_ptr()) : nullptr);
  });
  return {q, scale, residual_out};
}

std::tuple<Tensor, Tensor> rmsnorm_quant_cpu(Tensor x, Tensor weight, double eps, bool ue8m0) {
  auto [q, scale, unused] = norm_quant("sgl_fp8::rmsnorm_quant", x, nullptr, weight, eps, ue8m0);
  return {q, scale};
}

std::tuple<Tensor, Tensor, Tensor> add_rmsnorm_quant_cpu(Tensor x, Tensor residual, Tensor weight, double eps,
                                                         bool ue8m0) {
  auto [q, scale, residual_out] = norm_quant("sgl_fp8::add_rmsnorm_quant", x, &residual, weight, eps, ue8m0);
  return {q, scale, *residual_out};
}

}  // namespace
}  // namespace sgl_fp8

STABLE_TORCH_LIBRARY_IMPL(sgl_fp8, CPU, m) {
  m.impl("per1x128_quant", TORCH_BOX(&sgl_fp8::per1x128_quant_cpu));
  m.impl("smallm_gemm", TORCH_BOX(&sgl_fp8::smallm_gemm_cpu));
  m.impl("_smallm_gemm_configured", TORCH_BOX(&sgl_fp8::smallm_gemm_configured_cpu));
  m.impl("scaled_gemm", TORCH_BOX(&sgl_fp8::scaled_gemm_cpu));
  m.impl("rmsnorm_quant", TORCH_BOX(&sgl_fp8::rmsnorm_quant_cpu));
  m.impl("add_rmsnorm_quant", TORCH_BOX(&sgl_fp8::add_rmsnorm_quant_cpu));
}
