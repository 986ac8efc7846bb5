// gfx950 (MI355X) activation producers: the standalone 1x128 FP8 quantization
// (sgl_fp8::per1x128_quant, SPEC §3.1/§3.2, bit-exact) and the fused RMSNorm (+ residual add)
// + quantization (sgl_fp8::rmsnorm_quant / add_rmsnorm_quant, SPEC §3.5), plus
// device_supported().
//
// Both use the GEMM's quantization step (gfx950_device.h): one 128-group = 16 lanes x 8
// consecutive elements (one 16-byte load), amax by DPP inside a 16-lane row, the fp32 scale's
// inverse by IEEE division, +-448 clamp then v_cvt_pk_fp8_f32, NaN fix-up for non-finite groups.
// Memory-bound: every element is read once (the norm reads x twice; the second read hits cache)
// and written once.

#include <hip/hip_runtime.h>
#include <stdint.h>
#include <string.h>

#include "../common/fp8_quant_math.h"
#include "../common/gpu_launch.h"
#include "gfx950_device.h"
#include "gfx950_mfma_layout.h"
#include "gfx950_numerics.h"

namespace sgl_fp8 {
namespace gfx950 {

constexpr int kQuantThreads = 256;                                      // 4 waves
constexpr int kGroupsPerBlockStep = kQuantThreads / kQuantLanesPerGroup;  // 16 groups per step

struct QuantKernelArgs {
  const void* x;  // [rows, K], unit stride along K
  uint8_t* q;     // [rows, K] contiguous
  void* scale;    // fp32 or e8m0 at row*stride_row + group*stride_group
  int64_t x_row_stride;
  int64_t scale_stride_row, scale_stride_group;
  int32_t rows;  // rows of this launch
  int32_t KB;    // K / 128
  int32_t groups;  // rows * KB (< 2^31, checked by the launcher)
  int32_t grid_groups;  // groups covered by one pass of the whole grid
};

SGL_DEV void store_scale(void* scale, int64_t index, uint32_t bits, bool ue8m0) {
  if (ue8m0) {
    static_cast<uint8_t*>(scale)[index] = static_cast<uint8_t>(bits);
  } else {
    static_cast<uint32_t*>(scale)[index] = bits;
  }
}

// SPEC §3.1/§3.2 per (row, group): 16 lanes per group, 16 groups per workgroup step, grid-stride
// over the flattened (row, group) index.
template <bool kFp16, bool kE8m0>
__global__ __launch_bounds__(kQuantThreads) void gfx950_per1x128_quant_kernel(QuantKernelArgs a) {
  const int lane = lane_id();
  const int tid = thread_id();
  for (int g = block_id_x() * kGroupsPerBlockStep + tid / kQuantLanesPerGroup; g < a.groups; g += a.grid_groups) {
    const int row = g / a.KB;
    const int group = g - row * a.KB;
    const int64_t k = static_cast<int64_t>(group) * kBlockK + quant_elem_k(lane, 0);
    const u32x4 raw = load16(static_cast<const uint16_t*>(a.x) + row * a.x_row_stride + k);
    bool finite;
    const GroupQuantParams p = group_params_row16(key16_to_key32<kFp16>(key16_of_8(raw)), kE8m0, finite);
    float v[8];
    unpack8<kFp16>(raw, v);
    const u32x2 q = quantize8(v, p.inverse_scale, finite);
    *reinterpret_cast<u32x2*>(a.q + static_cast<int64_t>(row) * a.KB * kBlockK + k) = q;
    if (quant_group_leader(lane))
      store_scale(a.scale, row * a.scale_stride_row + group * a.scale_stride_group, stored_scale_bits(p, kE8m0), kE8m0);
  }
}

struct NormKernelArgs {
  const void* x;
  const void* residual;  // or nullptr
  const void* weight;    // [K]
  uint8_t* q;            // [rows, K]
  void* scale;           // [rows, KB]
  void* residual_out;    // [rows, K] when residual is given
  int64_t x_row_stride, residual_row_stride;
  int32_t rows, K, KB;
  int32_t grid_rows;  // rows covered by one pass of the grid
  float eps;
};

// h = x (+ residual) in fp32, rounded to the activation dtype: exactly the CPU backend's
// residual_out and hr. Returns the 8 rounded values of this lane's 16-byte slice as bits.
template <bool kFp16, bool kResidual>
SGL_DEV u32x4 rounded_h8(const NormKernelArgs& a, int row, int64_t k, float (&hr)[8]) {
  const u32x4 xr = load16(static_cast<const uint16_t*>(a.x) + row * a.x_row_stride + k);
  if constexpr (!kResidual) {
    unpack8<kFp16>(xr, hr);
    return xr;
  } else {
    const u32x4 rr = load16(static_cast<const uint16_t*>(a.residual) + row * a.residual_row_stride + k);
    float xf[8], rf[8];
    unpack8<kFp16>(xr, xf);
    unpack8<kFp16>(rr, rf);
    u32x4 out;
#pragma unroll
    for (int e = 0; e < 8; e += 2) {
      const uint32_t lo = f32_to_half_bits<kFp16>(xf[e] + rf[e]);
      const uint32_t hi = f32_to_half_bits<kFp16>(xf[e + 1] + rf[e + 1]);
      out[e >> 1] = lo | (hi << 16);
    }
    unpack8<kFp16>(out, hr);
    return out;
  }
}

// SPEC §3.5, one row per workgroup (grid-stride over rows): pass 1 forms h, writes residual_out
// and the sum of squares; a fixed-order reduction (DPP inside 16-lane rows, then the 16 row
// partials in LDS summed in index order) gives 1/rms; pass 2 recomputes h (same operations,
// same bits), forms y = cast(hr * inv_rms * w) and quantizes it.
template <bool kFp16, bool kE8m0, bool kResidual>
__global__ __launch_bounds__(kQuantThreads) void gfx950_rmsnorm_quant_kernel(NormKernelArgs a) {
  __shared__ float partial[kGroupsPerBlockStep];
  const int lane = lane_id();
  const int tid = thread_id();
  const int slot = tid / kQuantLanesPerGroup;  // 16-lane row of the workgroup
  for (int row = block_id_x(); row < a.rows; row += a.grid_rows) {
    float sumsq = 0.0f;
    for (int g = slot; g < a.KB; g += kGroupsPerBlockStep) {
      const int64_t k = static_cast<int64_t>(g) * kBlockK + quant_elem_k(lane, 0);
      float hr[8];
      const u32x4 hbits = rounded_h8<kFp16, kResidual>(a, row, k, hr);
      if constexpr (kResidual) *reinterpret_cast<u32x4*>(static_cast<uint16_t*>(a.residual_out) + static_cast<int64_t>(row) * a.K + k) = hbits;
#pragma unroll
      for (int e = 0; e < 8; ++e) sumsq = __builtin_fmaf(hr[e], hr[e], sumsq);
    }
    sumsq = row16_sum_f32(sumsq);
    __builtin_amdgcn_s_barrier();  // the previous row's readers of `partial` are done
    if (quant_group_leader(lane)) partial[slot] = sumsq;
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
    __builtin_amdgcn_s_barrier();
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
    float total = 0.0f;
#pragma unroll
    for (int i = 0; i < kGroupsPerBlockStep; ++i) total += partial[i];
    const float mean = total / static_cast<float>(a.K);
    const float inv_rms = 1.0f / __builtin_sqrtf(mean + a.eps);

    for (int g = slot; g < a.KB; g += kGroupsPerBlockStep) {
      const int64_t k = static_cast<int64_t>(g) * kBlockK + quant_elem_k(lane, 0);
      float hr[8], w[8], y[8];
      rounded_h8<kFp16, kResidual>(a, row, k, hr);
      unpack8<kFp16>(load16(static_cast<const uint16_t*>(a.weight) + k), w);
      uint32_t key = 0;
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const uint32_t bits = f32_to_half_bits<kFp16>((hr[e] * inv_rms) * w[e]);  // y in the activation dtype
        y[e] = kFp16 ? fp16_bits_to_f32(static_cast<uint16_t>(bits)) : bf16_bits_to_f32(static_cast<uint16_t>(bits));
        key = max_key(key, magnitude_key(y[e]));
      }
      bool finite;
      const GroupQuantParams p = group_params_row16(key, kE8m0, finite);
      const u32x2 q = quantize8(y, p.inverse_scale, finite);
      *reinterpret_cast<u32x2*>(a.q + static_cast<int64_t>(row) * a.K + k) = q;
      if (quant_group_leader(lane)) store_scale(a.scale, static_cast<int64_t>(row) * a.KB + g, stored_scale_bits(p, kE8m0), kE8m0);
    }
  }
}

// ---- host side ---------------------------------------------------------------------------------

inline unsigned grid_for(int64_t work_items, int64_t per_block, int64_t cap) {
  int64_t blocks = (work_items + per_block - 1) / per_block;
  if (blocks > cap) blocks = cap;
  if (blocks < 1) blocks = 1;
  return static_cast<unsigned>(blocks);
}

// Enough workgroups to fill 256 CUs several times over; the kernels grid-stride past that.
constexpr int64_t kMaxQuantBlocks = 256 * 16;

template <bool kFp16, bool kE8m0>
const char* launch_quant_instance(const QuantKernelArgs& args, unsigned blocks, hipStream_t stream) {
  hipLaunchKernelGGL((gfx950_per1x128_quant_kernel<kFp16, kE8m0>), dim3(blocks), dim3(kQuantThreads), 0, stream, args);
  return launch_error();
}

template <bool kFp16, bool kE8m0, bool kResidual>
const char* launch_norm_instance(const NormKernelArgs& args, unsigned blocks, hipStream_t stream) {
  hipLaunchKernelGGL((gfx950_rmsnorm_quant_kernel<kFp16, kE8m0, kResidual>), dim3(blocks), dim3(kQuantThreads), 0,
                     stream, args);
  return launch_error();
}

}  // namespace gfx950

const char* launch_per1x128_quant(const QuantParams& p, void* stream) {
  using namespace gfx950;
  if (p.rows <= 0) return nullptr;
  if (p.K <= 0 || p.K % kBlockK != 0) return "gfx950 per1x128_quant: K must be a positive multiple of 128";
  if (p.x_type != ElemType::kBF16 && p.x_type != ElemType::kFP16) return "gfx950 per1x128_quant: x must be bf16 or fp16";
  const int64_t KB = p.K / kBlockK;
  if (KB >= (int64_t{1} << 30)) return "gfx950 per1x128_quant: K too large";
  hipStream_t s = static_cast<hipStream_t>(stream);
  // Launches of at most 2^30 groups keep the flattened group index in int32.
  const int64_t rows_per_launch = ((int64_t{1} << 30) / KB) > 0 ? ((int64_t{1} << 30) / KB) : 1;
  for (int64_t r0 = 0; r0 < p.rows; r0 += rows_per_launch) {
    const int64_t rows = p.rows - r0 < rows_per_launch ? p.rows - r0 : rows_per_launch;
    QuantKernelArgs args;
    const int64_t x_stride = p.rows == 1 ? p.K : p.x_row_stride;  // a size-1 dim may carry any stride
    args.x = static_cast<const uint16_t*>(p.x) + r0 * x_stride;
    args.q = p.q + r0 * p.K;
    const int64_t scale_elem = p.ue8m0 ? 1 : 4;
    args.scale = static_cast<uint8_t*>(p.scale) + r0 * p.scale_stride_row * scale_elem;
    args.x_row_stride = x_stride;
    args.scale_stride_row = p.scale_stride_row;
    args.scale_stride_group = p.scale_stride_group;
    args.rows = static_cast<int32_t>(rows);
    args.KB = static_cast<int32_t>(KB);
    args.groups = static_cast<int32_t>(rows * KB);
    const unsigned blocks = grid_for(rows * KB, kGroupsPerBlockStep, kMaxQuantBlocks);
    args.grid_groups = static_cast<int32_t>(blocks) * kGroupsPerBlockStep;
    const bool fp16 = p.x_type == ElemType::kFP16;
    const char* err = fp16 ? (p.ue8m0 ? launch_quant_instance<true, true>(args, blocks, s)
                                      : launch_quant_instance<true, false>(args, blocks, s))
                           : (p.ue8m0 ? launch_quant_instance<false, true>(args, blocks, s)
                                      : launch_quant_instance<false, false>(args, blocks, s));
    if (err != nullptr) return err;
  }
  return nullptr;
}

const char* launch_rmsnorm_quant(const NormQuantParams& p, void* stream) {
  using namespace gfx950;
  if (p.rows <= 0) return nullptr;
  if (p.K <= 0 || p.K % kBlockK != 0 || p.K >= (int64_t{1} << 30))
    return "gfx950 rmsnorm_quant: K must be a positive multiple of 128";
  if (p.x_type != ElemType::kBF16 && p.x_type != ElemType::kFP16) return "gfx950 rmsnorm_quant: x must be bf16 or fp16";
  if (p.residual != nullptr && p.residual_out == nullptr) return "gfx950 rmsnorm_quant: residual needs residual_out";
  hipStream_t s = static_cast<hipStream_t>(stream);
  constexpr int64_t kRowsPerLaunch = int64_t{1} << 30;
  for (int64_t r0 = 0; r0 < p.rows; r0 += kRowsPerLaunch) {
    const int64_t rows = p.rows - r0 < kRowsPerLaunch ? p.rows - r0 : kRowsPerLaunch;
    NormKernelArgs args;
    const int64_t x_stride = p.rows == 1 ? p.K : p.x_row_stride;  // a size-1 dim may carry any stride
    const int64_t r_stride = p.rows == 1 ? p.K : p.residual_row_stride;
    args.x = static_cast<const uint16_t*>(p.x) + r0 * x_stride;
    args.residual = p.residual == nullptr ? nullptr : static_cast<const uint16_t*>(p.residual) + r0 * r_stride;
    args.weight = p.weight;
    args.q = p.q + r0 * p.K;
    args.scale = static_cast<uint8_t*>(p.scale) + r0 * (p.K / kBlockK) * (p.ue8m0 ? 1 : 4);
    args.residual_out = p.residual_out == nullptr ? nullptr : static_cast<uint16_t*>(p.residual_out) + r0 * p.K;
    args.x_row_stride = x_stride;
    args.residual_row_stride = r_stride;
    args.rows = static_cast<int32_t>(rows);
    args.K = static_cast<int32_t>(p.K);
    args.KB = static_cast<int32_t>(p.K / kBlockK);
    args.eps = p.eps;
    const unsigned blocks = grid_for(rows, 1, kMaxQuantBlocks);
    args.grid_rows = static_cast<int32_t>(blocks);
    const bool fp16 = p.x_type == ElemType::kFP16;
    const bool res = p.residual != nullptr;
    const char* err;
    if (fp16) {
      if (p.ue8m0) err = res ? launch_norm_instance<true, true, true>(args, blocks, s) : launch_norm_instance<true, true, false>(args, blocks, s);
      else err = res ? launch_norm_instance<true, false, true>(args, blocks, s) : launch_norm_instance<true, false, false>(args, blocks, s);
    } else {
      if (p.ue8m0) err = res ? launch_norm_instance<false, true, true>(args, blocks, s) : launch_norm_instance<false, true, false>(args, blocks, s);
      else err = res ? launch_norm_instance<false, false, true>(args, blocks, s) : launch_norm_instance<false, false, false>(args, blocks, s);
    }
    if (err != nullptr) return err;
  }
  return nullptr;
}

// gfx950 only: the kernels use OCP e4m3 conversions and v_mfma_scale_f32_16x16x128_f8f6f4,
// which gfx942 (e4m3fnuz) and older do not have. The glue calls this once per device.
bool device_supported(int device_index, const char** why) {
  hipDeviceProp_t prop;
  if (hipGetDeviceProperties(&prop, device_index) != hipSuccess) {
    if (why != nullptr) *why = "sglang-fp8ext: hipGetDeviceProperties failed for this device";
    return false;
  }
  // gcnArchName looks like "gfx950:sramecc+:xnack-".
  const char* arch = prop.gcnArchName;
  if (strncmp(arch, "gfx950", 6) == 0 && (arch[6] == '\0' || arch[6] == ':')) return true;
  if (why != nullptr)
    *why = "sglang-fp8ext: this wheel's HIP kernels are built for gfx950 (MI350X/MI355X) only; this GPU is a "
           "different architecture (gfx942/MI300 uses e4m3fnuz, out of scope). The CPU ops and the fallbacks still work.";
  return false;
}

}  // namespace sgl_fp8
