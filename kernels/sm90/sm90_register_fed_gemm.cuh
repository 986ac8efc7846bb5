// sm_90 register-fed GEMM: the fused op for 1-16 tokens where a config asks for it (engine
// GemmEngine::kRegisterFed; the tuned table). Not the kernels' own plan anywhere: against it, it is
// faster on some shapes and slower on others; the table takes it where it won.
//
// Why: at 1-2 tokens the wgmma ring kernel's MMAs follow its CTA's last weight copy landing. Many
// small CTAs whose warps consume their own loads as they return overlap the MMAs with the stream
// instead. Measured against the kernels' own plans (docs/design/sm90.md): faster on the smaller
// shapes (4096x1024, 4096x2048) back to back and after a copy kernel, slower on the large ones after
// a copy kernel, as in a decode step; `tune --after copy` puts it in the shipped table where it won.
//
// What it does (sm90_gemm_layout.h, "register-fed kernel", has every offset):
//   CTA x (256 threads, 8 warps; 3 CTAs an SM with 1 token tile up to K = 4096, else 2) owns output
//   rows [16 x, 16 x + 16) over the whole K; warp w owns K blocks [w KB, (w + 1) KB), KB = K / 1024
//   (an instance per KB and token tiles).
//   Weight: each lane loads the register kernel's four 16-byte pieces of each of its blocks (rows g
//   and g + 8 at K bytes [16q, +16) and [64 + 16q, +16); plain weights only) into registers: the
//   first two blocks before griddepcontrol.wait (the weight never depends on the previous kernel), then
//   one as each is consumed (two in flight); the warp's block scales at entry too, a lane a block.
//   Activations, after the wait: the warp quantizes its own K slice of every token (SPEC §3.1/3.2,
//   the quantization kernels' code: bit-exact), a quad of lanes a (token, 128-block) pair, into
//   shared memory as e4m3 with the fp32 (or e8m0-valued) scales beside.
//   Per block: 8 mma.sync m16n8k16 (weight and activations e4m3 -> f16, exact; fp32 accumulate:
//   SPEC §3.4's P) into a fresh accumulator, then total += P * (xs * ws).
//   Epilogue: the 8 warps' partials through shared memory, summed in warp order by one thread an
//   output (no atomics: bitwise reproducible), bias, rounded to bf16 / fp16, stored.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "sm90_gemm_common.cuh"  // GemmKernelArgs, decode_scale_bits, store_output
#include "sm90_gemm_layout.h"
#include "sm90_gemm_plan.h"
#include "sm90_ptx.cuh"
#include "sm90_quant.cuh"

namespace sgl_fp8::sm90 {

// CTAs an SM the launch bounds ask for: 3 (80 registers a thread; ptxas -v spills 16 bytes at 4 blocks) with 1
// token tile and up to 4 K blocks a warp (every SPEC §6 shape but 2112x7168, whose 132 CTAs take one SM each
// anyway); else 2, 128 registers (at 3 an SM ptxas spilled 96 bytes at 1 token tile with 5 blocks, 144 with 8,
// 332 at 2 tiles with 8).
constexpr int register_fed_ctas_per_sm(int token_tiles, int kb) { return token_tiles == 1 && kb <= 4 ? 3 : 2; }
// Blocks of a lane's weight requested before the wait (the quantization's registers are live until the first
// MMA), and in flight from the first MMA on (one more requested as each is consumed). Two in flight, not four:
// measured no slower, and no instance spills (ptxas -v), where with four some did at 4, 7 and 8 blocks.
constexpr int kRegisterFedAtEntry = 2;
constexpr int kRegisterFedInFlight = 2;

// Block b of the warp (plain weights): piece [2 chunk + half] = row g + 8 half at unit_k_of(lane, chunk), at
// row[half] + chunk * unit_chunk_stride + b * unit_block_stride (compile-time offsets: with the shuffled
// layout's strides as runtime values ptxas held every address in registers and spilled).
__device__ __forceinline__ void load_register_fed_block(uint4 (&dst)[4], const uint8_t* const (&row)[2], int b) {
#pragma unroll
  for (int c = 0; c < 2; ++c)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      dst[2 * c + h] = load_streaming_16B(row[h] + c * unit_chunk_stride(false) + b * unit_block_stride(false));
}

// Lane b < KB of the warp holds the scale of the warp's block b as loaded (fp32 bits, or the e8m0 byte), loaded at
// entry with the weight (neither depends on the previous kernel); block b's MMAs take it by a shuffle
// (decode_scale_bits): one register a lane, not KB. Loaded in the block loop behind the e8m0 branch instead,
// each block's scale was requested only after the previous block's MMAs, a global load a block exposed in
// the loop (measurably slower on the large shapes).
template <int KB>
__device__ __forceinline__ uint32_t load_register_fed_scale(const GemmKernelArgs& a, int64_t first) {
  const int lane = threadIdx.x & 31;
  if (lane >= KB) return 0u;
  return a.e8m0 ? uint32_t(static_cast<const uint8_t*>(a.w_scale)[first + lane])
                : static_cast<const uint32_t*>(a.w_scale)[first + lane];
}

// The wait for the previous grid, with the weight and scale loads issued before it kept above it. ptxas
// (CUDA 13.0, -O3) moves loads whose results are first used after griddepcontrol.wait below it, so that
// they would wait for the previous launch to end. A use of them on a branch that is never taken (the launcher never launches M < 1) keeps them
// above the wait; .ci/check_sm90.py checks the SASS. Returns true on that branch.
template <int AHEAD, int BLOCKS>
__device__ __forceinline__ bool wait_after_register_fed_loads(const uint4 (&wbuf)[BLOCKS][4], uint32_t scale_bits,
                                                              const GemmKernelArgs& a) {
  if (a.M < 1) {
    uint32_t fold = 0;
#pragma unroll
    for (int b = 0; b < AHEAD; ++b)
#pragma unroll
      for (int i = 0; i < 4; ++i) fold ^= wbuf[b][i].x ^ wbuf[b][i].y ^ wbuf[b][i].z ^ wbuf[b][i].w;
    fold ^= scale_bits;
    static_cast<uint32_t*>(a.out)[threadIdx.x] = fold;
    return true;
  }
  wait_for_previous_grid();
  return false;
}

// The warp's K slice (blocks [kb0, kb0 + KB)) of every token, quantized into shared memory: e4m3 at
// register_fed_act_offset, scales (as fp32 values) at xs[token][block]. Pass p: pair 8 p + g (the warp's
// block pair / M, token pair % M), lane q of the quad its 32 values at 32 q.
template <int KB>
__device__ __forceinline__ void quantize_register_fed_activations(const GemmKernelArgs& a, uint8_t* act, float* xs,
                                                                  int kb0) {
  const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  const int M = a.M, kblocks = a.kblocks;
  const int pairs = M * KB;
  for (int pass = 0; pass < (pairs + 7) / 8; ++pass) {
    const int pair = 8 * pass + g;
    const bool live = pair < pairs;
    const int token = live ? pair % M : 0, kb = kb0 + (live ? pair / M : 0);
    const uint16_t* src = static_cast<const uint16_t*>(a.x) + token * a.x_row_stride + kb * kBlockK + 32 * q;
    uint4 bytes[2];
    const GroupQuantParams qp = a.x_is_fp16 ? quantize_quad_share<true>(src, live, a.e8m0, bytes)
                                            : quantize_quad_share<false>(src, live, a.e8m0, bytes);
    if (live) {
      uint8_t* dst = act + register_fed_act_offset(2 * kb + (q >> 1), token, M) + 32 * (q & 1);
      *reinterpret_cast<uint4*>(dst) = bytes[0];
      *reinterpret_cast<uint4*>(dst + 16) = bytes[1];
      if (q == 0) xs[token * kblocks + kb] = qp.scale;
    }
  }
}

template <int TOKEN_TILES, int KB>
__global__ void __launch_bounds__(kRegisterFedThreads, register_fed_ctas_per_sm(TOKEN_TILES, KB))
    register_fed_gemm_sm90(const GemmKernelArgs a) {
  static_assert(TOKEN_TILES >= 1 && TOKEN_TILES <= kRegisterFedMaxTokenTiles, "1 or 2 token tiles (M <= 16)");
  static_assert(KB >= 1 && KB <= kRegisterFedBlocksPerWarpMax, "K / 1024 blocks a warp");
  constexpr int kAtEntry = KB < kRegisterFedAtEntry ? KB : kRegisterFedAtEntry;
  constexpr int kInFlight = KB < kRegisterFedInFlight ? KB : kRegisterFedInFlight;
  extern __shared__ __align__(16) uint8_t smem[];
  allow_next_grid_launch();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  const int M = a.M, kblocks = a.kblocks, row0 = int(blockIdx.x) * kTileRows, kb0 = warp * KB;
  const uint8_t* row[2];  // this lane's chunk-0 pieces of the warp's first block (plain weights only)
#pragma unroll
  for (int h = 0; h < 2; ++h)
    row[h] = a.w + int64_t(blockIdx.x) * kTileRows * a.K + kb0 * unit_block_stride(false) +
             unit_lane_offset(lane, h, 0, a.K, false);

  uint4 wbuf[KB][4];  // fully unrolled: block b's registers live from its load to its use
#pragma unroll
  for (int b = 0; b < kAtEntry; ++b) load_register_fed_block(wbuf[b], row, b);
  const uint32_t ws_bits = load_register_fed_scale<KB>(a, int64_t(row0 / kBlockK) * kblocks + kb0);
  if (wait_after_register_fed_loads<kAtEntry>(wbuf, ws_bits, a)) return;

  uint8_t* act = smem;
  float* xs = reinterpret_cast<float*>(smem + register_fed_xs_offset(M, a.K));
  quantize_register_fed_activations<KB>(a, act, xs, kb0);
#pragma unroll
  for (int b = kAtEntry; b < kInFlight; ++b) load_register_fed_block(wbuf[b], row, b);
  __syncwarp();  // each warp reads back only its own slice
  float total[TOKEN_TILES][4];
#pragma unroll
  for (int t = 0; t < TOKEN_TILES; ++t)
#pragma unroll
    for (int i = 0; i < 4; ++i) total[t][i] = 0.f;

#pragma unroll
  for (int b = 0; b < KB; ++b) {
    const int kb = kb0 + b;
    uint4 cur[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) cur[i] = wbuf[b][i];
    if (b + kInFlight < KB) load_register_fed_block(wbuf[b + kInFlight], row, b + kInFlight);
    const float w_scale = decode_scale_bits(__shfl_sync(0xffffffffu, ws_bits, b), a.e8m0);
    float x_scale[TOKEN_TILES][2];  // tokens 8 t + 2 q, + 1 of this block (0 past M)
#pragma unroll
    for (int t = 0; t < TOKEN_TILES; ++t)
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int token = 8 * t + 2 * q + j;
        x_scale[t][j] = token < M ? xs[token * kblocks + kb] : 0.f;
      }
    float4 acc[TOKEN_TILES];
#pragma unroll
    for (int t = 0; t < TOKEN_TILES; ++t) acc[t] = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      uint4 x16[TOKEN_TILES];  // token 8 t + g's 16 e4m3 bytes at unit_k_of(lane, c) (zeros past M)
#pragma unroll
      for (int t = 0; t < TOKEN_TILES; ++t) {
        const int token = 8 * t + g;
        x16[t] = token < M ? *reinterpret_cast<const uint4*>(act + register_fed_act_offset(2 * kb + c, token, M) +
                                                             unit_k_of(lane, c) - 64 * c)
                           : make_uint4(0u, 0u, 0u, 0u);
      }
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        // step s: A's logical k {2q, 2q + 1} = bytes 4s, 4s + 1 of the piece, {2q + 8, 2q + 9} = 4s + 2, 4s + 3
        // (a_physical_k); B takes the same bytes of the activations
        const uint32_t wg = word_of(cur[2 * c], s), wg8 = word_of(cur[2 * c + 1], s);
        const uint32_t a0 = cvt_e4m3x2_to_f16x2(wg), a2 = cvt_e4m3x2_to_f16x2(wg >> 16);
        const uint32_t a1 = cvt_e4m3x2_to_f16x2(wg8), a3 = cvt_e4m3x2_to_f16x2(wg8 >> 16);
#pragma unroll
        for (int t = 0; t < TOKEN_TILES; ++t) {
          const uint32_t x = word_of(x16[t], s);
          mma_f16_16x8x16(acc[t], a0, a1, a2, a3, cvt_e4m3x2_to_f16x2(x), cvt_e4m3x2_to_f16x2(x >> 16));
        }
      }
    }
#pragma unroll
    for (int t = 0; t < TOKEN_TILES; ++t) {
      const float s0 = x_scale[t][0] * w_scale, s1 = x_scale[t][1] * w_scale;
      total[t][0] += acc[t].x * s0;  // row g, token 8 t + 2 q
      total[t][1] += acc[t].y * s1;  // row g, token 8 t + 2 q + 1
      total[t][2] += acc[t].z * s0;  // row g + 8
      total[t][3] += acc[t].w * s1;
    }
  }

  // The 8 warps' partials, summed in warp order by one thread an output.
  float* red = reinterpret_cast<float*>(smem + register_fed_red_offset(M, a.K));
#pragma unroll
  for (int t = 0; t < TOKEN_TILES; ++t) {
    const int token = 8 * t + 2 * q;
    red[register_fed_red_index(warp, token, g, TOKEN_TILES)] = total[t][0];
    red[register_fed_red_index(warp, token + 1, g, TOKEN_TILES)] = total[t][1];
    red[register_fed_red_index(warp, token, g + 8, TOKEN_TILES)] = total[t][2];
    red[register_fed_red_index(warp, token + 1, g + 8, TOKEN_TILES)] = total[t][3];
  }
  __syncthreads();
  for (int i = threadIdx.x; i < kTileRows * M; i += kRegisterFedThreads) {
    const int token = i / kTileRows, row = i % kTileRows;
    float sum = 0.f;
#pragma unroll
    for (int w = 0; w < kRegisterFedWarps; ++w) sum += red[register_fed_red_index(w, token, row, TOKEN_TILES)];
    store_output(a, sum, token, row0 + row);
  }
}

}  // namespace sgl_fp8::sm90
