// Host stand-in for <hip/hip_runtime.h>: lets kernels/gfx950/*.hip compile, unmodified, as host
// C++ (clang++-16 -x c++) and run under the wave64 SIMT emulator of tests/gfx950_emu/.
//
// Only what the kernels use is provided. Every __builtin_amdgcn_* the kernels call is declared
// here as an ordinary external function (on an x86 target these names are not compiler
// builtins) and implemented in emu_runtime.cpp from the documented hardware semantics. Those
// functions are never inlined, so each call keeps its own call site in the (fully inlined)
// kernel body: the emulator groups the lanes of a wave that wait at the same call site, which
// is how it models the EXEC mask of divergent control flow.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <utility>

#define __global__ __attribute__((noinline))
#define __device__
#define __host__
#define __forceinline__ __attribute__((always_inline)) inline
#define __launch_bounds__(...)
// LDS. Block-scope `__shared__ T x[n];` becomes an implicitly static thread_local: all
// work-items of a workgroup run as fibers of one OS thread, so they share it, and workgroups
// run one after another on a thread. `extern __shared__ T x[];` (dynamic LDS) names storage that
// emu_api.cpp defines as the 160 KiB per-thread LDS arena the launcher poisons at block start.
#define __shared__ thread_local

typedef enum hipError_t { hipSuccess = 0, hipErrorInvalidValue = 1, hipErrorInvalidConfiguration = 9,
                          hipErrorLaunchFailure = 719 } hipError_t;
typedef struct ihipStream_t* hipStream_t;

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

struct hipDeviceProp_t {
  char name[256];
  char gcnArchName[256];
  int warpSize;
  size_t sharedMemPerBlock;
  int maxThreadsPerBlock;
};

hipError_t hipGetLastError();
const char* hipGetErrorString(hipError_t);
hipError_t hipGetDeviceProperties(hipDeviceProp_t* prop, int device);

static __forceinline__ uint32_t __float_as_uint(float f) { return __builtin_bit_cast(uint32_t, f); }
static __forceinline__ float __uint_as_float(uint32_t u) { return __builtin_bit_cast(float, u); }

// ---- AMDGCN builtins (emu_runtime.cpp) ----------------------------------------------------
typedef int32_t emu_i32x8 __attribute__((ext_vector_type(8)));
typedef float emu_f32x4 __attribute__((ext_vector_type(4)));
typedef uint32_t emu_u32x4 __attribute__((ext_vector_type(4)));
// Buffer resource (V#): what __builtin_amdgcn_make_buffer_rsrc packs.
struct EmuBufferRsrc {
  const void* base;
  uint32_t num_records;  // bytes (raw buffer, stride 0)
  int32_t stride;
  int32_t flags;
};
typedef EmuBufferRsrc __amdgpu_buffer_rsrc_t;

// Wave-level operations are `convergent`, as on the device: the optimizer may not sink or hoist
// them across control flow (e.g. merge the calls of two branches into one), which would change
// the set of lanes that reach a call site together.
#define EMU_CONVERGENT __attribute__((convergent, nomerge))
extern "C++" {
unsigned __builtin_amdgcn_workitem_id_x();
unsigned __builtin_amdgcn_workitem_id_y();
unsigned __builtin_amdgcn_workitem_id_z();
unsigned __builtin_amdgcn_workgroup_id_x();
unsigned __builtin_amdgcn_workgroup_id_y();
unsigned __builtin_amdgcn_workgroup_id_z();
EMU_CONVERGENT int __builtin_amdgcn_readfirstlane(int v);
EMU_CONVERGENT int __builtin_amdgcn_update_dpp(int old, int src, int dpp_ctrl, int row_mask, int bank_mask,
                                               bool bound_ctrl);
EMU_CONVERGENT uint64_t __builtin_amdgcn_ballot_w64(bool pred);
EMU_CONVERGENT void __builtin_amdgcn_wave_barrier();
EMU_CONVERGENT void __builtin_amdgcn_s_barrier();
void __builtin_amdgcn_fence(int order, const char* scope);
void __builtin_amdgcn_sched_barrier(int mask);
float __builtin_amdgcn_fmed3f(float a, float b, float c);
int __builtin_amdgcn_cvt_pk_fp8_f32(float a, float b, int old, bool word_sel);
int __builtin_amdgcn_cvt_pk_bf8_f32(float a, float b, int old, bool word_sel);
float __builtin_amdgcn_cvt_f32_fp8(int src, int byte_sel);
EMU_CONVERGENT emu_f32x4 __builtin_amdgcn_mfma_scale_f32_16x16x128_f8f6f4(emu_i32x8 a, emu_i32x8 b, emu_f32x4 c,
                                                                          int a_fmt, int b_fmt, int opsel_a,
                                                                          int scale_a, int opsel_b, int scale_b);
EmuBufferRsrc __builtin_amdgcn_make_buffer_rsrc(void* base, short stride, int num_records, int flags);
emu_u32x4 __builtin_amdgcn_raw_buffer_load_b128(EmuBufferRsrc rsrc, int voffset, int soffset, int aux);
}

// ---- launch -----------------------------------------------------------------------------
namespace emu {
struct LaunchShape {
  dim3 grid, block;
  size_t dynamic_lds;
};
// Runs the whole grid before returning (the emulated stream is synchronous). `body` runs one
// work-item; it is called on the work-item's fiber.
void run_grid(const LaunchShape& shape, void (*body)(void*), void* ctx);

template <typename... KArgs, typename... Args>
void launch_kernel(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t shmem, hipStream_t, const Args&... args) {
  struct Ctx {
    void (*kernel)(KArgs...);
    const void* args[sizeof...(Args)];
  };
  Ctx ctx{kernel, {static_cast<const void*>(&args)...}};
  auto body = [](void* p) {
    Ctx* c = static_cast<Ctx*>(p);
    // Each work-item gets its own by-value copy of the kernel arguments, like the kernarg segment.
    [&]<size_t... I>(std::index_sequence<I...>) {
      c->kernel(*static_cast<const Args*>(c->args[I])...);
    }(std::index_sequence_for<Args...>{});
  };
  run_grid(LaunchShape{grid, block, shmem}, body, &ctx);
}
}  // namespace emu

#define hipLaunchKernelGGL(kernel, grid, block, shmem, stream, ...) \
  ::emu::launch_kernel(kernel, grid, block, shmem, stream, __VA_ARGS__)
