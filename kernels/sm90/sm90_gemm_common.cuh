// The pieces every sm_90 GEMM engine shares (the general kernel, sm90_general_gemm.cuh; the wgmma
// ring kernel, sm90_wgmma_ring_gemm.cuh; the register-fed kernel, sm90_register_fed_gemm.cuh; each
// includes this header): the kernel arguments (GemmKernelArgs), block-scale decode, the activation
// prologue (quantize_activation_slice, copy_prequantized_slice, load_activation_slice,
// wait_and_load_activations) and the epilogue (park_partials, store_output, reduce_and_store).
#pragma once

#include <cooperative_groups.h>
#include <cuda.h>  // CUtensorMap (a plain struct; nothing from the driver library is linked)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "../common/fp8_quant_math.h"
#include "../common/gpu_launch.h"
#include "sm90_gemm_layout.h"
#include "sm90_ptx.cuh"
#include "sm90_quant.cuh"  // quantize_8_of_group, unpack_8: the same quantization as per1x128_quant

namespace sgl_fp8::sm90 {

constexpr int kGemmWarps = 8;
constexpr int kGemmThreads = kGemmWarps * 32;
// Activation loads in flight per lane in the prologue: 16 half-warps x 8 = 128 groups per L2
// round trip (kGroupsPerRoundTrip in the plan).
constexpr int kActivationBatch = 8;
// Lanes per 128-group in the prologue's quantization (quantize_activation_slice). The wgmma ring
// kernel: 8 for one token tile, 4 from two (256 groups a CTA at 16 and 32 tokens); the others
// keep 16. Each choice was measured faster than 16 lanes everywhere, and than 4 lanes at one tile
// or 2 from two (docs/design/sm90.md).
constexpr int activation_lanes_per_group(int token_tiles, bool fp8_act) {
  return !fp8_act ? 16 : token_tiles == 1 ? 8 : 4;
}

// Everything the kernel needs, by value (graph-capturable: no device-side state).
struct GemmKernelArgs {
  // The scalars first and the tensor maps last: the kernel reads its arguments from the constant
  // bank at entry, where each cache line is a miss (a visible share of a cold launch's stalls);
  // the maps, read by the TMA unit, then do not split them.
  const void* x;
  int64_t x_row_stride;
  const void* x_scale;
  int64_t x_scale_stride_m, x_scale_stride_kb;
  const uint8_t* w;
  const void* w_scale;
  const void* bias;
  void* out;
  bool x_is_fp16;  // else bf16 (smallm); ignored when pre-quantized
  bool w_shuffled;
  bool e8m0;
  bool out_is_fp16;
  int M, N, K;
  int tiles, kblocks;  // N / 16, K / 128
  int k_split;         // CTAs per cluster (grid.x)
  int warps_k, warps_t;
  int max_tiles_per_cta, max_blocks_per_cta;
  int smem_stages;  // 0..kMaxStages
  int engine;       // the plan's GemmEngine (no kernel branches on it)
  // wgmma ring kernel: blocks per tensor copy, copies requested at entry, ring slots (one per
  // chunk; fewer: the co-resident variant's refilled ring).
  int chunk_blocks, early_chunks;
  int ring_slots;
  // small_quotient's reciprocals (1.0f / float(v), computed by the launcher so that no kernel
  // divides): k_split, chunk_blocks, a CTA's tile count (max_tiles_per_cta or one fewer: the
  // row groups' balanced split gives one or the other; 0 where that is 0) and its K block count
  // (max_blocks_per_cta or one fewer, likewise).
  float inverse_k_split, inverse_chunk_blocks, inverse_max_tiles, inverse_short_tiles, inverse_max_blocks,
      inverse_short_blocks;
  WgmmaRingSmemLayout wgmma_layout;  // the wgmma ring kernel's shared memory, from its plan
  // wgmma ring kernel: the weight as a 3-D tensor [K block][row][128 bytes] with a box of the CTA's
  // tiles over chunk_blocks blocks, and a second map's box one tile shorter (for the CTAs that own
  // one tile fewer than max_tiles_per_cta).
  CUtensorMap weight_map;
  CUtensorMap weight_map_short;
};

// 1 / nblocks for a CTA's K block count (small_quotient).
__device__ __forceinline__ float inverse_of_blocks(const GemmKernelArgs& a, int nblocks) {
  return nblocks == a.max_blocks_per_cta ? a.inverse_max_blocks : a.inverse_short_blocks;
}

// The epilogue's split of a CTA's ntiles tiles over the cluster's ranks.
__device__ __forceinline__ ExchangeSplit exchange_split(const GemmKernelArgs& a, int ntiles) {
  return ExchangeSplit(a.k_split, ntiles, a.inverse_k_split,
                       ntiles == a.max_tiles_per_cta ? a.inverse_max_tiles : a.inverse_short_tiles);
}

// The bytes the inbox of cluster rank `rank` receives in the async exchange: every rank's sums of
// the tiles it finishes (`parts` partial sets a rank: the direct exchange sends each warpgroup's),
// kTokenPad floats a row. An inbox mbarrier is armed with this at entry.
__device__ __forceinline__ uint32_t exchange_inbox_bytes(const GemmKernelArgs& a, int ntiles, int rank, int token_pad,
                                                         int parts = 1) {
  const ExchangeSplit split = exchange_split(a, ntiles);
  const int owned = split.first_tile(rank + 1) - split.first_tile(rank);
  return uint32_t(owned * a.k_split * parts * kTileRows * token_pad * 4);
}

__device__ __forceinline__ float decode_scale(const void* base, int64_t index, bool e8m0) {
  if (e8m0) return e8m0_to_float(static_cast<const uint8_t*>(base)[index]);
  return static_cast<const float*>(base)[index];
}

// A block scale as loaded (fp32 bits, or the e8m0 byte): decoded only when the unit is consumed,
// so that the load's latency is not exposed at the issue point.
__device__ __forceinline__ float decode_scale_bits(uint32_t bits, bool e8m0) {
  return e8m0 ? e8m0_to_float(bits & 0xFFu) : __uint_as_float(bits);
}

// 8 e4m3 bytes -> 8 f16 (16 bytes), exact.
__device__ __forceinline__ uint4 e4m3x8_to_f16x8(uint32_t lo, uint32_t hi) {
  return make_uint4(cvt_e4m3x2_to_f16x2(lo & 0xFFFFu), cvt_e4m3x2_to_f16x2(lo >> 16), cvt_e4m3x2_to_f16x2(hi & 0xFFFFu),
                    cvt_e4m3x2_to_f16x2(hi >> 16));
}

// The prologue visits the groups (token m, K block lb) of the CTA's slice token-major, a fixed
// number of lanes per group and `stride` groups apart, without integer division in the loop
// (two divisions per group were half of a prologue's instructions): the
// (m, lb) pair advances by a fixed step.
struct GroupCursor {
  int m, lb, step_m, step_lb, nblocks;
  // first and stride are below 2^10 (threads / 8): small_quotient, from nblocks' reciprocal.
  __device__ __forceinline__ GroupCursor(int first, int stride, int nblocks_, float inverse_nblocks) : nblocks(nblocks_) {
    m = small_quotient(first, inverse_nblocks);
    lb = first - m * nblocks;
    step_m = small_quotient(stride, inverse_nblocks);
    step_lb = stride - step_m * nblocks;
  }
  __device__ __forceinline__ void advance() {
    m += step_m;
    lb += step_lb;
    if (lb >= nblocks) {
      lb -= nblocks;
      ++m;
    }
  }
  // The block read: lb rotated by `rotation` (< nblocks), so that the grid's CTAs do not all
  // read the same L2 lines at the same moment.
  __device__ __forceinline__ int rotated_block(int rotation) const {
    const int b = lb + rotation;
    return b >= nblocks ? b - nblocks : b;
  }
};

// What the prologue does once its first activation loads are in flight (every thread calls it
// once, the warp converged): nothing, or (the wgmma ring kernel) request the weight copies that
// were held back so as not to queue in front of those loads.
struct NoHook {
  __device__ __forceinline__ void operator()() const {}
};
// Where the prologue's quantized activations go besides this CTA's shared memory: nowhere, or (the
// wgmma ring kernel's paired activations, PeerActivations) the same offsets in the pair peer's.
struct NoPeer {
  __device__ __forceinline__ void bytes(int, uint2) const {}
  __device__ __forceinline__ void scale(int, float) const {}
};

// Quantize this CTA's K slice of tokens [m_first, m_first + tokens) of the chunk into shared memory
// (SPEC §3.1 / §3.2), and hand each group's e4m3 bytes and scale to `peer` as well.
// LANES lanes handle one 128-group: each loads 128 / LANES elements as 16-byte pieces (piece p of
// lane l holds elements 8 (l + LANES p) .. + 8, so that each load instruction reads a group's
// bytes contiguously), amax over the LANES lanes; LOADS 16-byte loads per lane are in flight
// before the first group is quantized. Fewer lanes per group spread a group's fixed work (the
// shuffles, the scale and its reciprocal, the index math) over more of its values, which at 256
// groups a CTA (16 or 32 tokens) is a large share of one SM's issue slots. The warp stays converged (a later run of LANES lanes never has an earlier
// group, so the warp runs while its first run has work; a run past the end computes on nothing
// and stores nothing): the shuffles then take the full mask, which spares the divergence checks a
// per-run mask costs on every one.
template <int THREADS, int LOADS, bool FP16, bool FP8_ACT, int LANES, typename Hook, typename Peer = NoPeer>
__device__ __forceinline__ void quantize_activation_slice(const GemmKernelArgs& a, uint8_t* act, float* xs,
                                                          int token_pad, int m_begin, int tokens, int kb_begin,
                                                          int nblocks, int rotation, const Hook& hook,
                                                          int m_first = 0, const Peer& peer = {}) {
  static_assert(LANES == 2 || LANES == 4 || LANES == 8 || LANES == 16, "2, 4, 8 or 16 lanes per 128-group");
  constexpr int kPieces = 16 / LANES;            // 16-byte loads (8 elements) per lane per group
  constexpr int kBatch = LOADS / kPieces;        // groups per lane per round trip
  static_assert(kBatch >= 1 && kBatch * kPieces == LOADS, "whole groups per batch");
  const int lg = threadIdx.x & (LANES - 1);      // the lane within its group's run
  // A group's address as a 32-bit byte offset from the lane's first element (the launcher keeps
  // rows less than 2^27 bytes apart, kMaxActivationRowBytes): 64-bit index products were ~25
  // instructions per load, all between the grid-dependency wait and the first load.
  const auto* x = static_cast<const uint8_t*>(a.x) +
                  (int64_t(m_begin + m_first) * a.x_row_stride + int64_t(kb_begin) * kBlockK + lg * 8) * 2;
  const uint32_t row_bytes = uint32_t(a.x_row_stride) * 2u;
  GroupCursor cursor(threadIdx.x / LANES, THREADS / LANES, nblocks, inverse_of_blocks(a, nblocks));
  bool hooked = false;
  while (__any_sync(0xFFFFFFFFu, cursor.m < tokens)) {
    // The loads of kBatch groups, then the same groups again (a replayed cursor: cheaper in
    // registers than remembering each group's indices).
    const GroupCursor first = cursor;
    uint4 raw[kBatch][kPieces];
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const uint8_t* group_x =
          x + (uint32_t(cursor.m) * row_bytes + uint32_t(cursor.rotated_block(rotation)) * uint32_t(2 * kBlockK));
#pragma unroll
      for (int p = 0; p < kPieces; ++p) {
        raw[i][p] = make_uint4(0, 0, 0, 0);
        if (cursor.m < tokens) raw[i][p] = load_shared_readonly_16B(group_x + 16 * LANES * p);
      }
      cursor.advance();
    }
    if (!hooked) {
      hook();
      hooked = true;
    }
    GroupCursor group = first;
#pragma unroll
    for (int i = 0; i < kBatch; ++i, group.advance()) {
      const bool valid = group.m < tokens;
      if (!__any_sync(0xFFFFFFFFu, valid)) break;  // m only grows
      const int lb = group.rotated_block(rotation);
      // offsets < LANES: within the run
      const GroupQuantParams params = group_params_over_lanes<LANES>(raw_magnitude_key<FP16>(raw[i]), a.e8m0, 0xFFFFFFFFu);
      if (valid) {
        const int m = m_first + group.m;
        const int first = FP8_ACT ? act_fp8_offset(lb, m, token_pad, 8 * lg) : 0;
#pragma unroll
        for (int p = 0; p < kPieces; ++p) {
          float v[8];
          unpack_8_as<FP16>(raw[i][p], v);
          const uint2 bytes = e4m3x8_of(v, params.inverse_scale);
          if constexpr (FP8_ACT) {
            *reinterpret_cast<uint2*>(act + act_fp8_piece_offset(first, LANES, p)) = bytes;
            peer.bytes(act_fp8_piece_offset(first, LANES, p), bytes);
          } else {
            *reinterpret_cast<uint4*>(act + act_f16_offset(lb, m, token_pad, 8 * (lg + LANES * p))) =
                e4m3x8_to_f16x8(bytes.x, bytes.y);
          }
        }
        if (lg == 0) {
          xs[lb * token_pad + m] = params.scale;
          peer.scale(lb * token_pad + m, params.scale);
        }
      }
    }
  }
  if (!hooked) hook();  // a warp with no group of its own
}

// Pre-quantized input (scaled_gemm): convert the CTA's K slice of xq to f16 (or copy it, FP8_ACT)
// and decode x_scale. Eight lanes (16 bytes each) per 128-byte group.
template <int THREADS, int BATCH, bool FP8_ACT, typename Hook>
__device__ __forceinline__ void copy_prequantized_slice(const GemmKernelArgs& a, uint8_t* act, float* xs,
                                                        int token_pad, int m_begin, int tokens, int kb_begin,
                                                        int nblocks, int rotation, const Hook& hook) {
  const int l8 = threadIdx.x & 7;
  const auto* xq = static_cast<const uint8_t*>(a.x) + int64_t(m_begin) * a.x_row_stride +
                   int64_t(kb_begin) * kBlockK + l8 * 16;
  const uint32_t row_bytes = uint32_t(a.x_row_stride);  // 32-bit offsets, as in quantize_activation_slice
  GroupCursor cursor(threadIdx.x >> 3, THREADS / 8, nblocks, inverse_of_blocks(a, nblocks));
  while (cursor.m < tokens) {
    const GroupCursor first = cursor;
    uint4 raw[BATCH];
#pragma unroll
    for (int i = 0; i < BATCH; ++i) {
      if (cursor.m < tokens)
        raw[i] = load_shared_readonly_16B(
            xq + (uint32_t(cursor.m) * row_bytes + uint32_t(cursor.rotated_block(rotation)) * uint32_t(kBlockK)));
      cursor.advance();
    }
    GroupCursor group = first;
#pragma unroll
    for (int i = 0; i < BATCH; ++i, group.advance()) {
      if (group.m >= tokens) break;
      const int lb = group.rotated_block(rotation), m = group.m;
      if constexpr (FP8_ACT) {
        *reinterpret_cast<uint4*>(act + act_fp8_offset(lb, m, token_pad, 16 * l8)) = raw[i];
      } else {
        *reinterpret_cast<uint4*>(act + act_f16_offset(lb, m, token_pad, 16 * l8)) = e4m3x8_to_f16x8(raw[i].x, raw[i].y);
        *reinterpret_cast<uint4*>(act + act_f16_offset(lb, m, token_pad, 16 * l8 + 8)) =
            e4m3x8_to_f16x8(raw[i].z, raw[i].w);
      }
      if (l8 == 0)
        xs[lb * token_pad + m] = decode_scale(
            a.x_scale, int64_t(m_begin + m) * a.x_scale_stride_m + int64_t(kb_begin + lb) * a.x_scale_stride_kb,
            a.e8m0);
    }
  }
  __syncwarp();
  hook();  // after the loop: its threads take different numbers of turns
}

// Padding tokens (tokens .. TOKEN_PAD) contribute exact zeros; their outputs are never stored.
// A (block, token) row of the activations is ROW_BYTES contiguous bytes (256 for f16,
// act_f16_offset; 128 for e4m3, act_fp8_offset), so the padding rows are cleared whole.
template <int THREADS, int TOKEN_PAD, int ROW_BYTES>
__device__ __forceinline__ void zero_padding_tokens(uint8_t* act, float* xs, int tokens, int nblocks) {
  constexpr int kPieces = ROW_BYTES / 16;
  if (tokens >= TOKEN_PAD) return;
#pragma unroll 1
  for (int i = threadIdx.x; i < nblocks * TOKEN_PAD * kPieces; i += THREADS) {
    const int row = i / kPieces, token = row % TOKEN_PAD;
    if (token < tokens) continue;
    *reinterpret_cast<uint4*>(act + int64_t(i) * 16) = make_uint4(0, 0, 0, 0);
    if (i % kPieces == 0) xs[row] = 0.0f;  // xs is [block][token] too
  }
}


// The CTA's K slice of the chunk's tokens into shared memory (quantized, or copied when
// pre-quantized), padding tokens zeroed, by the first THREADS threads of the CTA. No barrier:
// the caller synchronizes. FP8_ACT: stored as e4m3 (act_fp8_offset, the wgmma ring kernel), else
// as f16 (act_f16_offset).
// Paired activations (the wgmma ring kernel, `peer` a PeerActivations): the CTA quantizes tokens
// [m_first, m_first + quantized) only, and sends them to its peer; padding is still every token
// from `tokens` on.
template <int TOKEN_TILES, bool PREQUANT, int THREADS, bool FP8_ACT = false, typename Hook = NoHook,
          typename Peer = NoPeer>
__device__ __forceinline__ void load_activation_slice(const GemmKernelArgs& a, uint8_t* act, float* xs, int m_begin,
                                                      int tokens, int kb_begin, int nblocks, int rotation,
                                                      const Hook& hook = {}, int m_first = 0, int quantized = -1,
                                                      const Peer& peer = {}) {
  if (quantized < 0) quantized = tokens;
  constexpr int kTokenPad = TOKEN_TILES * kTokensPerTile;
  constexpr int kLanes = activation_lanes_per_group(TOKEN_TILES, FP8_ACT);
  if constexpr (PREQUANT) {
    copy_prequantized_slice<THREADS, kActivationBatch / 2, FP8_ACT>(a, act, xs, kTokenPad, m_begin, tokens, kb_begin,
                                                                    nblocks, rotation, hook);
  } else if (a.x_is_fp16) {
    quantize_activation_slice<THREADS, kActivationBatch, true, FP8_ACT, kLanes>(
        a, act, xs, kTokenPad, m_begin, quantized, kb_begin, nblocks, rotation, hook, m_first, peer);
  } else {
    quantize_activation_slice<THREADS, kActivationBatch, false, FP8_ACT, kLanes>(
        a, act, xs, kTokenPad, m_begin, quantized, kb_begin, nblocks, rotation, hook, m_first, peer);
  }
  zero_padding_tokens<THREADS, kTokenPad, FP8_ACT ? kBlockK : 2 * kBlockK>(act, xs, tokens, nblocks);
}

// Wait for the previous grid (the activations are its output), then load the CTA's K slice of x
// into shared memory. No barrier: the caller synchronizes the threads that load.
template <int TOKEN_TILES, bool PREQUANT, int THREADS, bool FP8_ACT = false, typename Hook = NoHook,
          typename Peer = NoPeer>
__device__ __forceinline__ void wait_and_load_activations(const GemmKernelArgs& a, uint8_t* act, float* xs,
                                                          int m_begin, int tokens, int kb_begin, int nblocks,
                                                          int group, int rank, const Hook& hook = {},
                                                          int m_first = 0, int quantized = -1, const Peer& peer = {}) {
  wait_for_previous_grid();
  // (group * 7 + rank * 3) mod nblocks: below 2^11 with group < 132 and rank < 8 (small_quotient)
  const int turn = group * 7 + rank * 3;
  const int rotation = turn - small_quotient(turn, inverse_of_blocks(a, nblocks)) * nblocks;
  load_activation_slice<TOKEN_TILES, PREQUANT, THREADS, FP8_ACT>(a, act, xs, m_begin, tokens, kb_begin, nblocks,
                                                                 rotation, hook, m_first, quantized, peer);
}

// After a warp's last block of a tile: park its partial sums (slot [local_tile][wk]; token m of a
// row at partial_token_slot) and clear them.
template <int TOKEN_TILES>
__device__ __forceinline__ void park_partials(float* red, float4 (&acc)[TOKEN_TILES], int local_tile, int warps_k,
                                              int wk, int lane) {
  constexpr int kTokenPad = TOKEN_TILES * kTokensPerTile;
  // Rows g and g + 8, tokens 8t + 2q and + 1: slot (2q's slot in row g) XOR 8t, and row g + 8's
  // slots differ from row g's by a constant (partial_token_slot).
  constexpr int kLowerHalf = partial_token_slot(8, 0, kTokenPad);
  const int g = lane >> 2, q = lane & 3;
  const int slot = partial_token_slot(g, 2 * q, kTokenPad);
  float* dst = red + (local_tile * warps_k + wk) * kTileRows * kTokenPad + g * kTokenPad;
#pragma unroll
  for (int t = 0; t < TOKEN_TILES; ++t) {
    const int s = slot ^ (t * kTokensPerTile);
    *reinterpret_cast<float2*>(dst + s) = make_float2(acc[t].x, acc[t].y);
    *reinterpret_cast<float2*>(dst + 8 * kTokenPad + (s ^ kLowerHalf)) = make_float2(acc[t].z, acc[t].w);
    acc[t] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
}

// Output (m, n) = sum + bias[n], rounded to the output type.
__device__ __forceinline__ void store_output(const GemmKernelArgs& a, float sum, int m, int n) {
  const int64_t o = int64_t(m) * a.N + n;
  if (a.out_is_fp16) {
    if (a.bias) sum += fp16_bits_to_f32(static_cast<const uint16_t*>(a.bias)[n]);
    static_cast<__half*>(a.out)[o] = __float2half_rn(sum);
  } else {
    if (a.bias) sum += bf16_bits_to_f32(static_cast<const uint16_t*>(a.bias)[n]);
    static_cast<__nv_bfloat16*>(a.out)[o] = __float2bfloat16_rn(sum);
  }
}

// Outputs (m, n .. n + 7) = sums + bias, rounded to the output type, as one 16-byte store (the
// output is the op's own contiguous [M, N] tensor, N a multiple of 16 and n of 8: 16-byte aligned).
__device__ __forceinline__ void store_8_outputs(const GemmKernelArgs& a, float (&sums)[8], int m, int n) {
  const uint16_t* bias = static_cast<const uint16_t*>(a.bias);
  uint32_t packed[4];
#pragma unroll
  for (int j = 0; j < 8; j += 2) {
    float s0 = sums[j], s1 = sums[j + 1];
    if (a.out_is_fp16) {
      if (bias) {  // exact conversions (the hardware's, not fp16_bits_to_f32's software path: less code)
        s0 += __half2float(__ushort_as_half(bias[n + j]));
        s1 += __half2float(__ushort_as_half(bias[n + j + 1]));
      }
      const __half2 h = __halves2half2(__float2half_rn(s0), __float2half_rn(s1));
      packed[j / 2] = *reinterpret_cast<const uint32_t*>(&h);
    } else {
      if (bias) {
        s0 += bf16_bits_to_f32(bias[n + j]);
        s1 += bf16_bits_to_f32(bias[n + j + 1]);
      }
      const __nv_bfloat162 h = __halves2bfloat162(__float2bfloat16_rn(s0), __float2bfloat16_rn(s1));
      packed[j / 2] = *reinterpret_cast<const uint32_t*>(&h);
    }
  }
  *reinterpret_cast<uint4*>(static_cast<uint16_t*>(a.out) + int64_t(m) * a.N + n) =
      make_uint4(packed[0], packed[1], packed[2], packed[3]);
}

// Epilogue, fixed order (bitwise reproducible, no atomics): sum the warps_k partials of each
// tile in warp order, push the sum into the inbox of the cluster CTA that finishes the tile
// (rank r finishes tiles [r*n/S, (r+1)*n/S)), one cluster barrier (or the inbox's mbarrier:
// ASYNC_CAPABLE below), then sum the ranks in order,
// add the bias, round and store. Every thread of the CTA calls it (the barriers); only the
// WORKERS `worker` threads move data (kGemmThreads; the wgmma ring kernel all of its 512). The caller has synchronized the CTA and, for
// clusters, arrived on the cluster barrier (at entry; the wgmma ring kernel after its MMAs where
// its inbox lies over its activations).
// ASYNC_CAPABLE (the general kernel and the 4-warpgroup wgmma ring kernel): where `async_exchange`
// (a K split; the wgmma plan's wgmma_async_exchange), the sums go to the finishing CTA's inbox by
// st.async, counted on its mbarrier `inbox_bar` (armed at entry with the bytes it receives), and
// the CTA waits on its own barrier instead of the cluster barrier, whose release after the
// stores cost a call more than the whole async exchange. One copy of the code serves both
// exchanges: a second inlined copy of this function cost more in the cold code than the exchange
// saved.
// Paired activations (the wgmma ring kernel): the cluster's K ranks of this CTA's row group are
// cluster CTAs cluster_rank_base + r, and where the prologue already completed the phase begun at
// entry, entry_phase_pending is false.
// UNSPLIT_DIRECT (the wgmma ring kernel): without a K split the final sums read the parked partials
// directly. At 32 tokens a thread sums and stores eight outputs at once (store_8_outputs).
template <int TOKEN_TILES, int WORKERS = kGemmThreads, int MAX_WARPS_K = kGemmWarps, bool ASYNC_CAPABLE = false,
          bool UNSPLIT_DIRECT = false>
__device__ __forceinline__ void reduce_and_store(const GemmKernelArgs& a, float* red, float* inbox, int tile_begin,
                                                 int ntiles, int nblocks, int rank, int m_begin, int tokens,
                                                 bool worker, bool async_exchange = false, uint32_t inbox_bar = 0,
                                                 int cluster_rank_base = 0, bool entry_phase_pending = true) {
  namespace cg = cooperative_groups;
  constexpr int kTokenPad = TOKEN_TILES * kTokensPerTile;
  cg::cluster_group cluster = cg::this_cluster();
  if (a.k_split > 1 && entry_phase_pending) cluster_wait();  // completes the barrier phase the caller began
  const int active_wk = min(a.warps_k, nblocks);
  const int tile_outputs = kTileRows * kTokenPad;
  const ExchangeSplit split = exchange_split(a, ntiles);
  // UNSPLIT_DIRECT, without a K split: the CTA owns all its tiles, so the final sums read the warps'
  // partials straight from where they are parked (the same order, the same bits), with no inbox
  // round trip or barrier. Compile-time: in the general kernel the longer final loop (up to 8 warps'
  // partials) made ptxas spill in its K loop.
  const bool k_split = a.k_split > 1, exchange = !UNSPLIT_DIRECT || k_split;
#pragma unroll 1
  for (int i = threadIdx.x; worker && exchange && i < ntiles * (tile_outputs / 4); i += WORKERS) {
    const int local_tile = i / (tile_outputs / 4), within = (i % (tile_outputs / 4)) * 4;
    const float* slot = red + local_tile * a.warps_k * tile_outputs + within;
    float4 sum = *reinterpret_cast<const float4*>(slot);
    // A compile-time bound: with a runtime one, ptxas unrolled this loop 16 times over (cold code).
#pragma unroll
    for (int k = 1; k < MAX_WARPS_K; ++k) {
      if (k < active_wk) {
        const float4 v = *reinterpret_cast<const float4*>(slot + k * tile_outputs);
        sum.x += v.x;
        sum.y += v.y;
        sum.z += v.z;
        sum.w += v.w;
      }
    }
    const int owner = split.owner(local_tile);
    const int owned_index = local_tile - split.first_tile(owner);
    if (ASYNC_CAPABLE && async_exchange) {
      const uint32_t dst = shared_address(inbox + (owned_index * a.k_split + rank) * tile_outputs + within);
      const uint32_t owner_rank = uint32_t(cluster_rank_base + owner);
      store_async_to_cluster(cluster_address(dst, owner_rank), sum, cluster_address(inbox_bar, owner_rank));
      continue;
    }
    float* dst = (a.k_split > 1 ? cluster.map_shared_rank(inbox, cluster_rank_base + owner) : inbox) +
                 (owned_index * a.k_split + rank) * tile_outputs + within;
    *reinterpret_cast<float4*>(dst) = sum;
  }
  if (ASYNC_CAPABLE && async_exchange) {
    mbarrier_wait</*CLUSTER_ACQUIRE=*/true>(inbox_bar, 0);
  } else if (k_split) {
    cluster.sync();
  } else if (exchange) {
    __syncthreads();
  }

  const int owned_begin = split.first_tile(rank), owned_end = split.first_tile(rank + 1);
  // An owned tile's partials: the ranks' sums in rank order, or (no K split) the warps' in warp order.
  auto tile_slots = [&](int owned) {
    return exchange ? inbox + owned * a.k_split * tile_outputs : red + owned * a.warps_k * tile_outputs;
  };
  if constexpr (TOKEN_TILES == 4) {
    // 32 tokens: eight rows of one token a thread, stored as one 16-byte piece (scalar stores cost
    // about 0.2 us for each output a thread stores); threads 2j and 2j + 1 take rows 0-7 and 8-15 of
    // one token, a 32-byte sector. The same sums in the same order as the scalar path: the same bits.
#pragma unroll 1
    for (int i = threadIdx.x; worker && i < (owned_end - owned_begin) * 2 * kTokenPad; i += WORKERS) {
      const int half = i & 1, rest = i >> 1;
      const int m = rest % kTokenPad, owned = rest / kTokenPad;
      if (m >= tokens) continue;
      const float* slots = tile_slots(owned);
      const int parts = exchange ? a.k_split : active_wk;
      int cell[8];
      float sums[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int row = 8 * half + j;
        cell[j] = row * kTokenPad + partial_token_slot(row, m, kTokenPad);
        sums[j] = slots[cell[j]];
      }
#pragma unroll 1
      for (int r = 1; r < parts; ++r) {  // in order; eight independent loads a turn
        const float* rank_slots = slots + r * tile_outputs;
#pragma unroll
        for (int j = 0; j < 8; ++j) sums[j] += rank_slots[cell[j]];
      }
      store_8_outputs(a, sums, m_begin + m, (tile_begin + owned_begin + owned) * kTileRows + 8 * half);
    }
  } else {
    // Row fastest (consecutive threads store consecutive outputs); the token index runs over the
    // compile-time padding, so that no integer division by `tokens` is needed.
    constexpr int kMaxParts = UNSPLIT_DIRECT && MAX_WARPS_K > kMaxClusterSize ? MAX_WARPS_K : kMaxClusterSize;
#pragma unroll 1
    for (int i = threadIdx.x; worker && i < (owned_end - owned_begin) * kTileRows * kTokenPad; i += WORKERS) {
      const int row = i % kTileRows, rest = i / kTileRows;
      const int m = rest % kTokenPad, owned = rest / kTokenPad;
      if (m >= tokens) continue;
      const float* slots = tile_slots(owned) + row * kTokenPad + partial_token_slot(row, m, kTokenPad);
      const int parts = exchange ? a.k_split : active_wk;
      float sum = slots[0];
#pragma unroll
      for (int r = 1; r < kMaxParts; ++r)  // a compile-time bound, as above
        if (r < parts) sum += slots[r * tile_outputs];
      const int n = (tile_begin + owned_begin + owned) * kTileRows + row;
      store_output(a, sum, m_begin + m, n);
    }
  }
}

}  // namespace sgl_fp8::sm90
