// Argument validation shared by every backend of the sgl_fp8 ops (SPEC §2), written against the
// LibTorch stable ABI (torch/csrc/stable, torch/headeronly) only.
//
// Every failure raises RuntimeError whose message names the op, the argument and what was
// expected, so bad input never reaches a kernel. The fake implementations in
// sglang_fp8ext/ops.py restate the same rules with torch._check for compile-time tracing.
#pragma once

#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>

#include <cstdio>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

namespace sgl_fp8 {

using Tensor = torch::stable::Tensor;
using ScalarType = torch::headeronly::ScalarType;
using IntArrayRef = torch::headeronly::IntHeaderOnlyArrayRef;

// Messages are built from strings only: numbers go through num(), never through an ostream.
// With torch 2.11.0+cu130 and a libstdc++ linked statically into the extension, formatting an
// integer through std::ostream crashed inside std::ostream::_M_insert<long>.
inline std::string num(int64_t v) { return std::to_string(v); }

inline std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

inline std::string concat(std::initializer_list<std::string_view> parts) {
  std::string s;
  for (std::string_view p : parts) s.append(p.data(), p.size());
  return s;
}

// The project's own check: the message is exactly the concatenated parts (STD_TORCH_CHECK would
// prefix function, file and line). Raised as std::runtime_error, which torch reports to Python
// as RuntimeError.
#define SGL_CHECK(cond, ...)                                                 \
  do {                                                                       \
    if (!(cond)) throw std::runtime_error(::sgl_fp8::concat({__VA_ARGS__})); \
  } while (0)

inline std::string dtype_name(ScalarType t) { return torch::headeronly::toString(t); }

inline std::string shape_str(IntArrayRef dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

inline std::string device_str(const Tensor& t) {
  using torch::headeronly::DeviceType;
  const torch::stable::Device d = t.device();
  std::string type;
  switch (d.type()) {
    case DeviceType::CPU: type = "cpu"; break;
    case DeviceType::CUDA: type = "cuda"; break;  // ROCm tensors are "cuda" tensors too
    case DeviceType::Meta: type = "meta"; break;
    default: type = "device type " + num(int64_t(d.type())); break;
  }
  return d.index() >= 0 ? type + ":" + num(int64_t(d.index())) : type;
}

inline bool is_activation_dtype(ScalarType t) { return t == ScalarType::BFloat16 || t == ScalarType::Half; }

inline bool is_scale_dtype(ScalarType t) { return t == ScalarType::Float || t == ScalarType::Float8_e8m0fnu; }

inline bool same_sizes(IntArrayRef a, IntArrayRef b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return false;
  return true;
}

// All named tensors must live on the device of the first one.
inline void check_same_device(const char* op, std::initializer_list<std::pair<const char*, const Tensor*>> tensors) {
  const auto& first = *tensors.begin();
  for (const auto& [name, tensor] : tensors) {
    SGL_CHECK(tensor->device() == first.second->device(), op, ": expected ", name, " on ", device_str(*first.second),
              " (the device of ", first.first, "), but it is on ", device_str(*tensor),
              "; tensors are never copied between devices implicitly");
  }
}

inline void check_activation(const char* op, const char* name, const Tensor& x, bool two_dim) {
  SGL_CHECK(is_activation_dtype(x.scalar_type()), op, ": expected ", name, " to be bfloat16 or float16, but got ",
            dtype_name(x.scalar_type()));
  if (two_dim) {
    SGL_CHECK(x.dim() == 2, op, ": expected ", name, " to be 2-D [M, K], but got ", num(x.dim()), "-D shape ",
              shape_str(x.sizes()));
  } else {
    SGL_CHECK(x.dim() >= 1, op, ": expected ", name, " to have at least one dimension [..., K]");
  }
  const int64_t K = x.size(-1);
  SGL_CHECK(K > 0 && K % 128 == 0, op, ": expected the last dimension of ", name,
            " (K) to be a positive multiple of 128, but got K = ", num(K));
  SGL_CHECK(x.stride(-1) == 1, op, ": expected ", name, " to have a unit stride in its last dimension, but got ",
            "stride ", num(x.stride(-1)));
}

struct GemmShape {
  int64_t M, N, K;
  bool e8m0;  // w_scale (and x_scale) are float8_e8m0fnu
};

// w [N, K] e4m3 contiguous, w_scale [ceil(N/128), K/128] contiguous fp32|e8m0, optional bias [N].
inline GemmShape check_weight_args(const char* op, int64_t M, int64_t K, const Tensor& w, const Tensor& w_scale,
                                   const std::optional<Tensor>& bias, ScalarType out_dtype) {
  SGL_CHECK(w.scalar_type() == ScalarType::Float8_e4m3fn, op, ": expected w to be float8_e4m3fn, but got ",
            dtype_name(w.scalar_type()));
  SGL_CHECK(w.dim() == 2, op, ": expected w to be 2-D [N, K], but got ", num(w.dim()), "-D shape ", shape_str(w.sizes()));
  const int64_t N = w.size(0);
  SGL_CHECK(w.size(1) == K, op, ": expected w to have K = ", num(K), " columns (the activations' last dimension), ",
            "but got w of shape ", shape_str(w.sizes()));
  SGL_CHECK(N > 0 && N % 16 == 0, op, ": expected N = w.size(0) to be a positive multiple of 16, but got N = ", num(N));
  SGL_CHECK(w.is_contiguous(), op, ": expected w to be contiguous ([N, K] row-major, or AITER-shuffled), ",
            "but got strides ", shape_str(w.strides()));
  SGL_CHECK(is_scale_dtype(w_scale.scalar_type()), op, ": expected w_scale to be float32 or float8_e8m0fnu, ",
            "but got ", dtype_name(w_scale.scalar_type()));
  const int64_t NB = (N + 127) / 128, KB = K / 128;
  SGL_CHECK(w_scale.dim() == 2 && w_scale.size(0) == NB && w_scale.size(1) == KB, op,
            ": expected w_scale of shape [ceil(N/128), K/128] = [", num(NB), ", ", num(KB), "], but got ",
            shape_str(w_scale.sizes()));
  SGL_CHECK(w_scale.is_contiguous(), op, ": expected w_scale to be contiguous, but got strides ",
            shape_str(w_scale.strides()));
  if (bias.has_value()) {
    const Tensor& b = *bias;
    SGL_CHECK(b.dim() == 1 && b.size(0) == N, op, ": expected bias of shape [N] = [", num(N), "], but got ",
              shape_str(b.sizes()));
    SGL_CHECK(b.scalar_type() == out_dtype, op, ": expected bias to have the output dtype ", dtype_name(out_dtype),
              ", but got ", dtype_name(b.scalar_type()));
    SGL_CHECK(b.stride(0) == 1, op, ": expected bias to be contiguous, but got stride ", num(b.stride(0)));
  }
  return GemmShape{M, N, K, w_scale.scalar_type() == ScalarType::Float8_e8m0fnu};
}

inline GemmShape check_smallm_gemm_args(const Tensor& x, const Tensor& w, const Tensor& w_scale,
                                        const std::optional<Tensor>& bias) {
  constexpr const char* op = "sgl_fp8::smallm_gemm";
  check_activation(op, "x", x, /*two_dim=*/true);
  if (bias.has_value()) {
    check_same_device(op, {{"x", &x}, {"w", &w}, {"w_scale", &w_scale}, {"bias", &*bias}});
  } else {
    check_same_device(op, {{"x", &x}, {"w", &w}, {"w_scale", &w_scale}});
  }
  return check_weight_args(op, x.size(0), x.size(1), w, w_scale, bias, x.scalar_type());
}

inline ScalarType scaled_gemm_out_dtype(const std::optional<ScalarType>& out_dtype) {
  const ScalarType t = out_dtype.value_or(ScalarType::BFloat16);
  SGL_CHECK(is_activation_dtype(t), "sgl_fp8::scaled_gemm: expected out_dtype to be bfloat16 or float16, but got ",
            dtype_name(t));
  return t;
}

inline GemmShape check_scaled_gemm_args(const Tensor& xq, const Tensor& x_scale, const Tensor& w,
                                        const Tensor& w_scale, ScalarType out_dtype,
                                        const std::optional<Tensor>& bias) {
  constexpr const char* op = "sgl_fp8::scaled_gemm";
  SGL_CHECK(xq.scalar_type() == ScalarType::Float8_e4m3fn, op, ": expected xq to be float8_e4m3fn, but got ",
            dtype_name(xq.scalar_type()));
  SGL_CHECK(xq.dim() == 2, op, ": expected xq to be 2-D [M, K], but got ", num(xq.dim()), "-D shape ",
            shape_str(xq.sizes()));
  const int64_t M = xq.size(0), K = xq.size(1);
  SGL_CHECK(K > 0 && K % 128 == 0, op, ": expected K = xq.size(1) to be a positive multiple of 128, but got K = ",
            num(K));
  SGL_CHECK(xq.stride(1) == 1, op, ": expected xq to have a unit stride in its last dimension, but got stride ",
            num(xq.stride(1)));
  if (bias.has_value()) {
    check_same_device(op, {{"xq", &xq}, {"x_scale", &x_scale}, {"w", &w}, {"w_scale", &w_scale}, {"bias", &*bias}});
  } else {
    check_same_device(op, {{"xq", &xq}, {"x_scale", &x_scale}, {"w", &w}, {"w_scale", &w_scale}});
  }
  const GemmShape shape = check_weight_args(op, M, K, w, w_scale, bias, out_dtype);
  SGL_CHECK(x_scale.scalar_type() == w_scale.scalar_type(), op, ": expected x_scale in the same format as ",
            "w_scale (", dtype_name(w_scale.scalar_type()), "), but got ", dtype_name(x_scale.scalar_type()));
  SGL_CHECK(x_scale.dim() == 2 && x_scale.size(0) == M && x_scale.size(1) == K / 128, op,
            ": expected x_scale of shape [M, K/128] = [", num(M), ", ", num(K / 128), "], but got ",
            shape_str(x_scale.sizes()));
  return shape;
}

inline void check_quant_args(const Tensor& x, bool transpose_scale) {
  constexpr const char* op = "sgl_fp8::per1x128_quant";
  check_activation(op, "x", x, /*two_dim=*/false);
  SGL_CHECK(!transpose_scale || x.dim() == 2, op, ": transpose_scale=True needs a 2-D x [M, K], but got ",
            num(x.dim()), "-D shape ", shape_str(x.sizes()));
}

inline void check_norm_args(const char* op, const Tensor& x, const Tensor* residual, const Tensor& weight, double eps) {
  check_activation(op, "x", x, /*two_dim=*/false);
  SGL_CHECK(eps >= 0.0 && eps < 1e30, op, ": expected eps to be a finite non-negative number, but got ", num(eps));
  const int64_t K = x.size(-1);
  SGL_CHECK(weight.dim() == 1 && weight.size(0) == K, op, ": expected weight of shape [K] = [", num(K), "], but got ",
            shape_str(weight.sizes()));
  SGL_CHECK(weight.scalar_type() == x.scalar_type(), op, ": expected weight to have x's dtype ",
            dtype_name(x.scalar_type()), ", but got ", dtype_name(weight.scalar_type()));
  SGL_CHECK(weight.stride(0) == 1, op, ": expected weight to be contiguous, but got stride ", num(weight.stride(0)));
  if (residual) {
    SGL_CHECK(same_sizes(residual->sizes(), x.sizes()), op, ": expected residual of x's shape ", shape_str(x.sizes()),
              ", but got ", shape_str(residual->sizes()));
    SGL_CHECK(residual->scalar_type() == x.scalar_type(), op, ": expected residual to have x's dtype ",
              dtype_name(x.scalar_type()), ", but got ", dtype_name(residual->scalar_type()));
    SGL_CHECK(residual->stride(-1) == 1, op, ": expected residual to have a unit stride in its last dimension, ",
              "but got stride ", num(residual->stride(-1)));
    check_same_device(op, {{"x", &x}, {"residual", residual}, {"weight", &weight}});
  } else {
    check_same_device(op, {{"x", &x}, {"weight", &weight}});
  }
}

}  // namespace sgl_fp8
