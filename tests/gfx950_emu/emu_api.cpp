// C API of the emulated gfx950 library for the Python tests (ctypes): each entry fills the
// gpu_launch.h parameter struct exactly as the torch glue does and calls the same launcher
// (launch_per1x128_quant, launch_rmsnorm_quant, launch_block_scaled_gemm, device_supported),
// which runs the unmodified kernels of kernels/gfx950 under the emulator.
#include <hip/hip_runtime.h>
#include <stdint.h>

#include "emu_runtime.h"
#include "kernels/common/gpu_launch.h"

// Storage of the GEMM kernel's `extern __shared__ uint8_t lds[]` (dynamic LDS): one 160 KiB
// arena per OS thread, i.e. per workgroup in flight. The launcher poisons it at every block start.
namespace sgl_fp8 {
namespace gfx950 {
alignas(16) thread_local uint8_t lds[emu::kLdsArenaBytes];
}  // namespace gfx950
}  // namespace sgl_fp8

uint8_t* emu::lds_arena() { return sgl_fp8::gfx950::lds; }

extern "C" {

void emu_configure(int threads, int schedule, uint64_t seed) {
  emu::g_options.threads = threads;
  emu::g_options.schedule = schedule;
  emu::g_options.seed = seed;
}
void emu_reset() { emu::reset(); }
int emu_counter_count() { return emu::kNumCounters; }
const char* emu_counter_name(int i) { return emu::kCounterNames[i]; }
uint64_t emu_counter(int i) { return emu::counters().v[i]; }
const char* emu_error_detail() { return emu::error_detail(); }
void emu_set_region(int slot, const void* p, uint64_t bytes) { emu::set_region(slot, p, bytes); }
void emu_set_arch(const char* arch) { emu::set_arch(arch); }
int emu_launch_count() { return static_cast<int>(emu::launches().size()); }
// grid x/y/z, block x/y/z, dynamic LDS bytes of launch i
void emu_launch_record(int i, uint64_t* out7) {
  const emu::LaunchRecord& r = emu::launches()[i];
  out7[0] = r.gx; out7[1] = r.gy; out7[2] = r.gz; out7[3] = r.bx; out7[4] = r.by; out7[5] = r.bz;
  out7[6] = r.dynamic_lds;
}

const char* emu_per1x128_quant(const void* x, int x_type, int64_t rows, int64_t K, int64_t x_row_stride, int ue8m0,
                               uint8_t* q, void* scale, int64_t scale_stride_row, int64_t scale_stride_group) {
  sgl_fp8::QuantParams p;
  p.x = x;
  p.x_type = static_cast<sgl_fp8::ElemType>(x_type);
  p.rows = rows;
  p.K = K;
  p.x_row_stride = x_row_stride;
  p.ue8m0 = ue8m0 != 0;
  p.q = q;
  p.scale = scale;
  p.scale_stride_row = scale_stride_row;
  p.scale_stride_group = scale_stride_group;
  return sgl_fp8::launch_per1x128_quant(p, nullptr);
}

const char* emu_rmsnorm_quant(const void* x, const void* residual, const void* weight, int x_type, int64_t rows,
                              int64_t K, int64_t x_row_stride, int64_t residual_row_stride, float eps, int ue8m0,
                              uint8_t* q, void* scale, void* residual_out) {
  sgl_fp8::NormQuantParams p;
  p.x = x;
  p.residual = residual;
  p.weight = weight;
  p.x_type = static_cast<sgl_fp8::ElemType>(x_type);
  p.rows = rows;
  p.K = K;
  p.x_row_stride = x_row_stride;
  p.residual_row_stride = residual_row_stride;
  p.eps = eps;
  p.ue8m0 = ue8m0 != 0;
  p.q = q;
  p.scale = scale;
  p.residual_out = residual_out;
  return sgl_fp8::launch_rmsnorm_quant(p, nullptr);
}

const char* emu_block_scaled_gemm(const void* x, int64_t x_row_stride, int x_type, const void* x_scale,
                                  int64_t x_scale_stride_m, int64_t x_scale_stride_kb, const uint8_t* w,
                                  int w_shuffled, const void* w_scale, int e8m0, const void* bias, void* out,
                                  int out_type, int64_t M, int64_t N, int64_t K, int k_split, int tiles_per_wave) {
  sgl_fp8::GemmParams p;
  p.x = x;
  p.x_row_stride = x_row_stride;
  p.x_type = static_cast<sgl_fp8::ElemType>(x_type);
  p.x_scale = x_scale;
  p.x_scale_stride_m = x_scale_stride_m;
  p.x_scale_stride_kb = x_scale_stride_kb;
  p.w = w;
  p.w_shuffled = w_shuffled != 0;
  p.w_scale = w_scale;
  p.e8m0 = e8m0 != 0;
  p.bias = bias;
  p.out = out;
  p.out_type = static_cast<sgl_fp8::ElemType>(out_type);
  p.M = M;
  p.N = N;
  p.K = K;
  p.config.k_split = k_split;
  p.config.tiles_per_wave = tiles_per_wave;
  return sgl_fp8::launch_block_scaled_gemm(p, nullptr);
}

int emu_device_supported(int device, const char** why) { return sgl_fp8::device_supported(device, why) ? 1 : 0; }

}  // extern "C"
