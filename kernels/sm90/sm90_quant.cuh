// sm_90 producers of FP8 activations: per1x128_quant and (add_)rmsnorm_quant, one launch each.
// Quantization is the shared bit-exact math of kernels/common/fp8_quant_math.h (SPEC §3.1/3.2),
// with the e4m3 rounding done by cvt.rn.satfinite (identical to the CPU's software rounding).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "../common/fp8_quant_math.h"
#include "../common/gpu_launch.h"
#include "sm90_ptx.cuh"

namespace sgl_fp8::sm90 {

constexpr int kQuantThreads = 256;

__device__ __forceinline__ float act_bits_to_f32(uint32_t bits16, bool fp16) {
  return fp16 ? fp16_bits_to_f32(static_cast<uint16_t>(bits16)) : bf16_bits_to_f32(static_cast<uint16_t>(bits16));
}

// fp32 -> bf16/fp16 bits, round-to-nearest-even.
__device__ __forceinline__ uint32_t f32_to_act_bits(float v, bool fp16) {
  if (fp16) return __half_as_ushort(__float2half_rn(v));
  return __bfloat16_as_ushort(__float2bfloat16_rn(v));
}

// A 128-group held by LANES lanes (xor shuffles within aligned runs of LANES lanes; `mask` names
// the lanes taking part): its parameters (SPEC §3.1/§3.2: scale, e8m0 byte, multiplier) from each
// lane's magnitude key (the magnitude_key of its largest value).
template <int LANES>
__device__ __forceinline__ GroupQuantParams group_params_over_lanes(uint32_t key, bool ue8m0, unsigned mask) {
#pragma unroll
  for (int offset = LANES / 2; offset >= 1; offset >>= 1) key = max_key(key, __shfl_xor_sync(mask, key, offset));
  return group_quant_params(key, ue8m0);
}

// 8 values times the group's multiplier, rounded to e4m3 (8 bytes, in the order of v).
__device__ __forceinline__ uint2 e4m3x8_of(const float (&v)[8], float inv) {
  return make_uint2(cvt_e4m3x2_satfinite(v[0] * inv, v[1] * inv) | (cvt_e4m3x2_satfinite(v[2] * inv, v[3] * inv) << 16),
                    cvt_e4m3x2_satfinite(v[4] * inv, v[5] * inv) | (cvt_e4m3x2_satfinite(v[6] * inv, v[7] * inv) << 16));
}

// 8 consecutive values of a 128-group held by one lane of a half-warp (16 lanes per group).
struct Quantized8 {
  uint2 bytes;
  GroupQuantParams params;
};

__device__ __forceinline__ Quantized8 quantize_8_of_group(const float (&v)[8], bool ue8m0, unsigned half_mask) {
  uint32_t key = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) key = max_key(key, magnitude_key(v[j]));
  Quantized8 r;
  r.params = group_params_over_lanes<16>(key, ue8m0, half_mask);
  r.bytes = e4m3x8_of(v, r.params.inverse_scale);
  return r;
}

// magnitude_key of the largest of the bf16 (or fp16) values packed in `raw`, from their 16-bit
// magnitudes two at a time (max.u16x2): a 16-bit float's magnitude bits order as its magnitude,
// NaN above Inf, as magnitude_key's do, and converting to fp32 keeps that order. A third of the
// instructions of a key taken value by value.
template <bool FP16, int N>
__device__ __forceinline__ uint32_t raw_magnitude_key(const uint4 (&raw)[N]) {
  uint32_t m = 0;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    m = __vmaxu2(m, raw[i].x & 0x7FFF7FFFu);
    m = __vmaxu2(m, raw[i].y & 0x7FFF7FFFu);
    m = __vmaxu2(m, raw[i].z & 0x7FFF7FFFu);
    m = __vmaxu2(m, raw[i].w & 0x7FFF7FFFu);
  }
  const uint32_t largest = max(m & 0xFFFFu, m >> 16);
  if constexpr (FP16) return magnitude_key(__half2float(__ushort_as_half(static_cast<unsigned short>(largest))));  // exact
  return largest << 16;  // a bf16 value's fp32 bits are its own, shifted
}

__device__ __forceinline__ void store_group_scale(void* scale, int64_t index, const GroupQuantParams& p, bool ue8m0) {
  if (ue8m0) {
    static_cast<uint8_t*>(scale)[index] = static_cast<uint8_t>(p.e8m0_exponent);
  } else {
    static_cast<float*>(scale)[index] = p.scale;
  }
}

__device__ __forceinline__ void unpack_8(const uint4 raw, bool fp16, float (&v)[8]) {
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    v[2 * j] = act_bits_to_f32(words[j] & 0xFFFFu, fp16);
    v[2 * j + 1] = act_bits_to_f32(words[j] >> 16, fp16);
  }
}

// 8 activation values (16 bytes of bf16 or fp16) as fp32, exact.
template <bool FP16>
__device__ __forceinline__ void unpack_8_as(const uint4 raw, float (&v)[8]) {
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    if constexpr (FP16) {
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&words[j]));  // cvt.f32.f16: exact
      v[2 * j] = f.x;
      v[2 * j + 1] = f.y;
    } else {
      v[2 * j] = __uint_as_float(words[j] << 16);
      v[2 * j + 1] = __uint_as_float(words[j] & 0xFFFF0000u);
    }
  }
}

// Lane q of a quad quantizes the 32 values at 32 q of a 128-group (`src` points at them; a lane that
// is not `live` brings zeros, and every lane of the warp takes part in the shuffles): its 32 e4m3
// bytes in K order into `bytes`, and the group's parameters. The register-fed GEMM's quantization.
template <bool FP16>
__device__ __forceinline__ GroupQuantParams quantize_quad_share(const void* src, bool live, bool ue8m0,
                                                                uint4 (&bytes)[2]) {
  uint4 raw[4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
    raw[i] = live ? load_shared_readonly_16B(static_cast<const uint4*>(src) + i) : make_uint4(0u, 0u, 0u, 0u);
  const GroupQuantParams qp = group_params_over_lanes<4>(raw_magnitude_key<FP16, 4>(raw), ue8m0, 0xffffffffu);
  uint2 q[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float v[8];
    // fp16 by cvt.f32.f16 (unpack_8_as): unpack_8's portable decode compiled to a branch region a value here
    if constexpr (FP16)
      unpack_8_as<true>(raw[i], v);
    else
      unpack_8(raw[i], false, v);
    q[i] = e4m3x8_of(v, qp.inverse_scale);
  }
  bytes[0] = make_uint4(q[0].x, q[0].y, q[1].x, q[1].y);
  bytes[1] = make_uint4(q[2].x, q[2].y, q[3].x, q[3].y);
  return qp;
}

// One half-warp per 128-group, grid-stride over rows x K/128 groups.
__global__ void __launch_bounds__(kQuantThreads) per1x128_quant_sm90(const QuantParams p) {
  wait_for_previous_grid();
  allow_next_grid_launch();  // a dependent kernel still waits for this grid to finish
  const int64_t groups_per_row = p.K / 128;
  const int64_t groups = p.rows * groups_per_row;
  const int l16 = threadIdx.x & 15;
  const unsigned half_mask = 0xFFFFu << (threadIdx.x & 16);
  const bool fp16 = p.x_type == ElemType::kFP16;
  const auto* x = static_cast<const uint16_t*>(p.x);
  for (int64_t gidx = (int64_t(blockIdx.x) * kQuantThreads + threadIdx.x) / 16; gidx < groups;
       gidx += int64_t(gridDim.x) * (kQuantThreads / 16)) {
    const int64_t row = gidx / groups_per_row, group = gidx - row * groups_per_row;
    float v[8];
    unpack_8(load_shared_readonly_16B(x + row * p.x_row_stride + group * 128 + l16 * 8), fp16, v);
    const Quantized8 q = quantize_8_of_group(v, p.ue8m0, half_mask);
    if (l16 == 0) store_group_scale(p.scale, row * p.scale_stride_row + group * p.scale_stride_group, q.params, p.ue8m0);
    *reinterpret_cast<uint2*>(p.q + row * p.K + group * 128 + l16 * 8) = q.bytes;
  }
}

// One CTA per row. Pass 1: h = x (+ residual) in fp32, residual_out = round(h), sum of hr^2.
// Pass 2 (row re-read from L2): y = round(hr * inv_rms * weight), 1x128 quant of y (SPEC §3.5).
__global__ void __launch_bounds__(kQuantThreads) rmsnorm_quant_sm90(const NormQuantParams p) {
  __shared__ float warp_sums[kQuantThreads / 32];
  wait_for_previous_grid();
  allow_next_grid_launch();  // a dependent kernel still waits for this grid to finish
  const int64_t row = blockIdx.x;
  const bool fp16 = p.x_type == ElemType::kFP16;
  const auto* x = static_cast<const uint16_t*>(p.x) + row * p.x_row_stride;
  const auto* res = p.residual ? static_cast<const uint16_t*>(p.residual) + row * p.residual_row_stride : nullptr;
  const auto* weight = static_cast<const uint16_t*>(p.weight);
  auto* res_out = p.residual ? static_cast<uint16_t*>(p.residual_out) + row * p.K : nullptr;

  // h rounded to the activation dtype, as fp32 (hr), for the 8 elements at `offset`.
  auto load_hr = [&](int64_t offset, float (&hr)[8], bool store_residual) {
    float xv[8];
    unpack_8(load_shared_readonly_16B(x + offset), fp16, xv);
    if (res) {
      float rv[8];
      unpack_8(load_shared_readonly_16B(res + offset), fp16, rv);
      uint32_t out_words[4];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const uint32_t bits = f32_to_act_bits(xv[j] + rv[j], fp16);
        hr[j] = act_bits_to_f32(bits, fp16);
        if (j & 1) {
          out_words[j / 2] |= bits << 16;
        } else {
          out_words[j / 2] = bits;
        }
      }
      if (store_residual)
        *reinterpret_cast<uint4*>(res_out + offset) = make_uint4(out_words[0], out_words[1], out_words[2], out_words[3]);
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) hr[j] = xv[j];  // x is already in the activation dtype
    }
  };

  float sum = 0.0f;
  for (int64_t offset = int64_t(threadIdx.x) * 8; offset < p.K; offset += kQuantThreads * 8) {
    float hr[8];
    load_hr(offset, hr, /*store_residual=*/true);
#pragma unroll
    for (int j = 0; j < 8; ++j) sum += hr[j] * hr[j];
  }
#pragma unroll
  for (int o = 16; o >= 1; o >>= 1) sum += __shfl_xor_sync(0xFFFFFFFFu, sum, o);
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = sum;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < kQuantThreads / 32; ++w) total += warp_sums[w];  // same order in every thread
  const float inv_rms = 1.0f / sqrtf(total / float(p.K) + p.eps);

  const int l16 = threadIdx.x & 15;
  const unsigned half_mask = 0xFFFFu << (threadIdx.x & 16);
  const int64_t groups = p.K / 128;
  for (int64_t group = threadIdx.x / 16; group < groups; group += kQuantThreads / 16) {
    const int64_t offset = group * 128 + l16 * 8;
    float hr[8], wv[8], y[8];
    load_hr(offset, hr, /*store_residual=*/false);
    unpack_8(load_shared_readonly_16B(weight + offset), fp16, wv);
#pragma unroll
    for (int j = 0; j < 8; ++j) y[j] = act_bits_to_f32(f32_to_act_bits(hr[j] * inv_rms * wv[j], fp16), fp16);
    const Quantized8 q = quantize_8_of_group(y, p.ue8m0, half_mask);
    if (l16 == 0) store_group_scale(p.scale, row * groups + group, q.params, p.ue8m0);
    *reinterpret_cast<uint2*>(p.q + row * p.K + offset) = q.bytes;
  }
}

}  // namespace sgl_fp8::sm90
