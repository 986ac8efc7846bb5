// Small kernels that exercise the emulator's own semantics (not the product's kernels): divergent
// DPP with inactive source lanes, non-uniform readfirstlane, ballot under divergence, a
// partial-wave MFMA, range-checked buffer loads, single MFMAs and fp8 conversions whose results
// tests/test_gfx950_emulated.py checks against independent Python models of the documented
// behaviour. They also show that each counter the product tests assert to be zero can count.
#include <hip/hip_runtime.h>
#include <stdint.h>

namespace {

__global__ void divergent_ops_kernel(int32_t* out, uint64_t* ballots) {
  const int tid = static_cast<int>(__builtin_amdgcn_workitem_id_x());
  const int lane = tid & 63;
  int v;
  uint64_t b;
  if (lane < 20) {  // rows 0 and part of row 1 active: row_mirror, bound_ctrl off
    v = __builtin_amdgcn_update_dpp(-1, lane, 0x140, 0xF, 0xF, false);
    b = __builtin_amdgcn_ballot_w64((lane & 1) != 0);
  } else {  // the rest: row_half_mirror then row_shr:3 (bound_ctrl on), row_mask without row 3
    v = __builtin_amdgcn_update_dpp(-1, lane + 100, 0x141, 0xF, 0xF, true);
    v = __builtin_amdgcn_update_dpp(-2, v, 0x113, 0x7, 0xF, true);
    b = __builtin_amdgcn_ballot_w64(lane > 40);
  }
  out[tid] = v;
  out[64 + tid] = __builtin_amdgcn_readfirstlane(lane < 7 ? 5 : lane);  // uniform only in one branch
  ballots[tid] = b;
}

__global__ void dpp_kernel(int32_t* out, int ctrl_index) {
  // every DPP control the emulator implements, full wave, bound_ctrl on
  const int lane = static_cast<int>(__builtin_amdgcn_workitem_id_x());
  int v = 0;
  switch (ctrl_index) {
    case 0: v = __builtin_amdgcn_update_dpp(-1, lane, 0x1B, 0xF, 0xF, true); break;   // quad_perm [3,2,1,0]
    case 1: v = __builtin_amdgcn_update_dpp(-1, lane, 0xB1, 0xF, 0xF, true); break;   // quad_perm [1,0,3,2]
    case 2: v = __builtin_amdgcn_update_dpp(-1, lane, 0x4E, 0xF, 0xF, true); break;   // quad_perm [2,3,0,1]
    case 3: v = __builtin_amdgcn_update_dpp(-1, lane, 0x101, 0xF, 0xF, true); break;  // row_shl:1
    case 4: v = __builtin_amdgcn_update_dpp(-1, lane, 0x11F, 0xF, 0xF, false); break; // row_shr:15
    case 5: v = __builtin_amdgcn_update_dpp(-1, lane, 0x124, 0xF, 0xF, true); break;  // row_ror:4
    case 6: v = __builtin_amdgcn_update_dpp(-1, lane, 0x140, 0xF, 0xF, true); break;  // row_mirror
    case 7: v = __builtin_amdgcn_update_dpp(-1, lane, 0x141, 0xF, 0xF, true); break;  // row_half_mirror
    case 8: v = __builtin_amdgcn_update_dpp(-1, lane, 0x142, 0xF, 0xF, true); break;  // row_bcast:15
    case 9: v = __builtin_amdgcn_update_dpp(-1, lane, 0x143, 0xF, 0xF, false); break; // row_bcast:31
    case 10: v = __builtin_amdgcn_update_dpp(-1, lane, 0x140, 0x5, 0x6, true); break; // masks
  }
  out[lane] = v;
}

typedef int32_t i32x8 __attribute__((ext_vector_type(8)));
typedef float f32x4 __attribute__((ext_vector_type(4)));

// One MFMA per wave: lane l's operands from a[l], b[l] (8 dwords each), c[l] (4 floats) and its
// scale dwords; results to d[l]. `active` lanes take part (all 64: a full-wave MFMA).
__global__ void mfma_kernel(const int32_t* a, const int32_t* b, const float* c, const int32_t* sa, const int32_t* sb,
                            int opsel_a, int opsel_b, float* d, int active) {
  const int lane = static_cast<int>(__builtin_amdgcn_workitem_id_x());
  if (lane >= active) return;
  i32x8 av, bv;
  for (int j = 0; j < 8; ++j) {
    av[j] = a[lane * 8 + j];
    bv[j] = b[lane * 8 + j];
  }
  const f32x4 cv = {c[lane * 4], c[lane * 4 + 1], c[lane * 4 + 2], c[lane * 4 + 3]};
  f32x4 r;
  switch (opsel_a * 4 + opsel_b) {  // op_sel values are immediates in the ISA
#define EMU_CASE(x, y)                                                                                       \
  case x * 4 + y:                                                                                            \
    r = __builtin_amdgcn_mfma_scale_f32_16x16x128_f8f6f4(av, bv, cv, 0, 0, x, sa[lane], y, sb[lane]);        \
    break;
    EMU_CASE(0, 0) EMU_CASE(1, 2) EMU_CASE(3, 1)
#undef EMU_CASE
    default: r = cv;
  }
  for (int i = 0; i < 4; ++i) d[lane * 4 + i] = r[i];
}

__global__ void cvt_kernel(const float* in, uint32_t* out, int n_pairs) {
  const int i = static_cast<int>(__builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x());
  if (i >= n_pairs) return;
  int packed = __builtin_amdgcn_cvt_pk_fp8_f32(in[4 * i], in[4 * i + 1], 0x5A5A5A5A, false);
  packed = __builtin_amdgcn_cvt_pk_fp8_f32(in[4 * i + 2], in[4 * i + 3], packed, true);
  out[i] = static_cast<uint32_t>(packed);
}

__global__ void buffer_kernel(const uint8_t* base, uint32_t num_records, uint32_t soffset, uint32_t* out) {
  const int lane = static_cast<int>(__builtin_amdgcn_workitem_id_x());
  const EmuBufferRsrc r = __builtin_amdgcn_make_buffer_rsrc(const_cast<uint8_t*>(base), 0, static_cast<int>(num_records),
                                                            0x00020000);
  const auto v = __builtin_amdgcn_raw_buffer_load_b128(r, 16 * lane, static_cast<int>(soffset), 0);
  for (int d = 0; d < 4; ++d) out[4 * lane + d] = v[d];
}

__global__ void lds_race_kernel(float* out) {
  // a cross-wave LDS exchange with its barrier: wave 1 reads what wave 0 wrote
  __shared__ float slot[64];
  const int tid = static_cast<int>(__builtin_amdgcn_workitem_id_x());
  if (tid < 64) slot[tid] = static_cast<float>(tid) * 2.0f;
  __builtin_amdgcn_s_barrier();
  if (tid >= 64) out[tid - 64] = slot[tid - 64];
}

}  // namespace

extern "C" {
void emu_selftest_divergent(int32_t* out, uint64_t* ballots) {
  hipLaunchKernelGGL(divergent_ops_kernel, dim3(1), dim3(64), 0, nullptr, out, ballots);
}
void emu_selftest_dpp(int32_t* out, int ctrl_index) {
  hipLaunchKernelGGL(dpp_kernel, dim3(1), dim3(64), 0, nullptr, out, ctrl_index);
}
void emu_selftest_mfma(const int32_t* a, const int32_t* b, const float* c, const int32_t* sa, const int32_t* sb,
                       int opsel_a, int opsel_b, float* d, int active) {
  hipLaunchKernelGGL(mfma_kernel, dim3(1), dim3(64), 0, nullptr, a, b, c, sa, sb, opsel_a, opsel_b, d, active);
}
void emu_selftest_cvt(const float* in, uint32_t* out, int n_pairs) {
  hipLaunchKernelGGL(cvt_kernel, dim3((n_pairs + 63) / 64), dim3(64), 0, nullptr, in, out, n_pairs);
}
void emu_selftest_buffer(const uint8_t* base, uint32_t num_records, uint32_t soffset, uint32_t* out) {
  hipLaunchKernelGGL(buffer_kernel, dim3(1), dim3(64), 0, nullptr, base, num_records, soffset, out);
}
void emu_selftest_lds(float* out) { hipLaunchKernelGGL(lds_race_kernel, dim3(1), dim3(128), 0, nullptr, out); }
}
