// CPU kernels of the sgl_fp8 ops, free of torch headers. The host glue (csrc/cpu_ops.cpp)
// validates arguments, converts bf16/fp16 rows to fp32, and splits work across threads; these
// functions do the numerics of SPEC §3 on plain arrays.
#pragma once

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../common/fp8_quant_math.h"
#include "../common/weight_layout.h"

namespace sgl_fp8::cpu {

// Quantizes one row of K fp32 values (K % 128 == 0) in 1x128 groups (SPEC §3.1 / §3.2).
// Writes K e4m3 bytes to q and K/128 scales to scale_f32 (fp32 path) or scale_e8m0 (ue8m0
// path) at stride scale_stride between consecutive groups.
inline void quantize_row_1x128(const float* row, int64_t K, bool ue8m0, uint8_t* q, float* scale_f32,
                               uint8_t* scale_e8m0, int64_t scale_stride) {
  for (int64_t g = 0; g < K / kGroupSize; ++g) {
    const float* a = row + g * kGroupSize;
    uint32_t key = 0;
    for (int i = 0; i < kGroupSize; ++i) key = max_key(key, magnitude_key(a[i]));
    const GroupQuantParams p = group_quant_params(key, ue8m0);
    uint8_t* qg = q + g * kGroupSize;
    for (int i = 0; i < kGroupSize; ++i) qg[i] = e4m3fn_from_f32_satfinite(a[i] * p.inverse_scale);
    if (ue8m0) {
      scale_e8m0[g * scale_stride] = static_cast<uint8_t>(p.e8m0_exponent);
    } else {
      scale_f32[g * scale_stride] = p.scale;
    }
  }
}

// The 256 e4m3fn byte values as fp32, for dequantizing operands before the fp32 dot products.
struct E4m3Table {
  float value[256];
  E4m3Table() {
    for (int b = 0; b < 256; ++b) value[b] = e4m3fn_to_f32(static_cast<uint32_t>(b));
  }
};

inline const E4m3Table& e4m3_table() {
  static const E4m3Table table;
  return table;
}

// Dot product of 128 fp32 values in 16 independent lanes, so the compiler can keep it in SIMD
// registers without reassociating (no -ffast-math). The order is fixed: results are
// reproducible from run to run.
inline float dot128(const float* a, const float* b) {
  float lane[16] = {0};
  for (int i = 0; i < kGroupSize; i += 16)
    for (int j = 0; j < 16; ++j) lane[j] += a[i + j] * b[i + j];
  for (int w = 8; w >= 1; w /= 2)
    for (int j = 0; j < w; ++j) lane[j] += lane[j + w];
  return lane[0];
}

// Block-scaled GEMM over the output columns [n_begin, n_end) (SPEC §3.4):
//   acc[m, n] = sum_kb xs[m, kb] * ws[n / 128, kb] * sum_{k in kb} qf[m, k] * w[n, k]
// qf: M x K dequantized activations (row stride K); xs: M x KB (row stride KB) as fp32;
// w: e4m3 bytes in the plain or shuffled layout; ws: ceil(N/128) x KB as fp32.
// acc: M x N fp32 (row stride N). w_row_buffer: K floats of scratch.
inline void block_scaled_gemm_columns(const float* qf, const float* xs, int64_t M, const uint8_t* w,
                                      bool w_shuffled, const float* ws, int64_t K, int64_t N,
                                      int64_t n_begin, int64_t n_end, float* acc,
                                      float* w_row_buffer) {
  const E4m3Table& table = e4m3_table();
  const int64_t KB = K / kGroupSize;
  for (int64_t n = n_begin; n < n_end; ++n) {
    for (int64_t k = 0; k < K; k += kShuffleChunk) {
      const uint8_t* chunk = w + weight_chunk16_offset(n, k, K, w_shuffled);
      for (int j = 0; j < kShuffleChunk; ++j) w_row_buffer[k + j] = table.value[chunk[j]];
    }
    const float* w_scale_row = ws + (n / kGroupSize) * KB;
    for (int64_t m = 0; m < M; ++m) {
      float sum = 0.0f;
      for (int64_t kb = 0; kb < KB; ++kb) {
        const float partial = dot128(qf + m * K + kb * kGroupSize, w_row_buffer + kb * kGroupSize);
        sum += (xs[m * KB + kb] * w_scale_row[kb]) * partial;
      }
      acc[m * N + n] = sum;
    }
  }
}

// RMSNorm of one row (SPEC §3.5) up to the cast of y: given h = x (+ residual) already rounded
// to the activation dtype and back (hr), returns 1/sqrt(mean(hr^2) + eps). The sum is in
// double: the contract is a tolerance, and this is the accurate side of it.
inline float rms_inverse(const float* hr, int64_t K, float eps) {
  double sum = 0.0;
  for (int64_t k = 0; k < K; ++k) sum += static_cast<double>(hr[k]) * hr[k];
  const float mean = static_cast<float>(sum / static_cast<double>(K));
  return 1.0f / sqrtf(mean + eps);
}

}  // namespace sgl_fp8::cpu
