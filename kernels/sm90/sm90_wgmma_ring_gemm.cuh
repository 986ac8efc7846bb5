// sm_90 fused small-M FP8 block-scale GEMM, wgmma ring kernel (M <= 32, plain weights): the CTA's
// weight share requested through TMA into shared-memory slots, with the tensor cores' own FP8 MMA
// reading both operands from shared memory.
//
// Why (docs/design/sm90.md): an mma.sync kernel fed the same way was bound by instruction issue,
// not by the stream: each 2 KB unit cost ~150 warp instructions (shared-memory loads, the
// e4m3 -> f16 decode, 8 MMAs, the scaling). Here a 64-row x 128-K block is 4 wgmma
// instructions per warpgroup, no operand passes through registers, and the activations stay e4m3:
//  * 16 warps = 4 warpgroups; warpgroup wg takes the CTA's K blocks wg, wg + 4, ... For each it
//    waits for the block's chunk, then for every 64-row window of the CTA's tiles issues
//    m64nNk32 x 4 (N = 8, 16 or 32 tokens) into a fresh fp32 P (SPEC §3.4's per-block product);
//    once a round of its blocks is issued it waits once and adds each P * (xs * ws) to its
//    accumulators in block order. At 32 tokens a CTA of 3 windows runs window-major instead:
//    warpgroup w < 3 takes window w over every block, so that each tile's sum is parked once;
//  * the CTA's tiles stand next to each other inside each block (sm90_gemm_layout.h,
//    wgmma_ring_offset), so a window is one descriptor; a last window that would pass the CTA's
//    rows is moved back to overlap its predecessor (the plan gives every CTA 4-8 tiles up to 8 tokens,
//    4-12 from 9: at 9-16 tokens a plan of more than 8 tiles runs the 3-window instance);
//  * start-up order (each measured on the H200): the block scales into registers before any
//    copy, half the copies at entry, the other half once the first activation loads are in
//    flight (the activation loads queue behind the copies in flight, the whole grid's, not only
//    the CTA's; half at entry is the order that lets them through in time); at 32 tokens, where a
//    CTA's share is at least 96 KB, once the activations are quantized (late_copies);
//  * the prologue quantizes the activations straight into wgmma's swizzled B layout
//    (act_fp8_offset); from 9 tokens, where the plan takes a K split of 4, two row groups of a
//    cluster of k_split x 2 share that work (paired activations, PAIR: each quantizes half of the
//    tokens and st.asyncs them into the other); the epilogue is the other kernels' (reduce_and_store),
//    warpgroups in the role of their warps_k, the partials parked over the ring once it is read (and from 32
//    tokens, where the plan finds no room for an inbox of its own, the cluster's inbox over the
//    activations: WgmmaRingSmemLayout). A K split's sums go by st.async into the finishing CTA's
//    inbox, which waits for their bytes on its mbarrier instead of a cluster barrier
//    (wgmma_async_exchange; at 32 tokens with an inbox of its own, or over the activations after
//    one cluster barrier that frees them); the co-resident
//    variant's warpgroups send their partials so without summing them first
//    (wgmma_direct_exchange).
// The co-resident variant (WGS = 2, M <= 16): two warpgroups and <= 113 KB of
// shared memory, so that the next launch's CTA becomes resident beside this one and requests its
// weight a whole launch early; a CTA whose share does not fit has fewer slots than chunks and
// refills them as its chunks are read. Measured on the H200 (docs/design/sm90.md): slower than
// the 4-warpgroup kernel wherever that kernel's ring holds the CTA's share, at M = 1 too. The
// default takes it where the 4-warpgroup kernel's ring cannot hold a CTA's share (6144x4096,
// 12288x4096, ...; much faster than the register kernel there), and the same instance with the
// whole shared memory (one CTA per SM) where even its 113 KB leave the activations no room
// (WgmmaVariant in sm90_gemm_plan.h; no config selects either).
#pragma once

#include <type_traits>

#include "sm90_gemm_common.cuh"

namespace sgl_fp8::sm90 {

// One block's WINDOWS 64-row windows: P[w] = A(window w of block lb) x B(block lb), K 128 in 4
// steps. WINDOWS is a compile-time count (the kernel branches once, outside its block loop): a
// branch around a wgmma makes ptxas serialize them all. The operands are given as their
// descriptors' low words (smem_descriptor_sw128_lo): a window or a K step further is an add.
template <int TOKEN_TILES, int WINDOWS>
__device__ __forceinline__ void wgmma_block(float4 (&P)[WINDOWS][TOKEN_TILES], uint32_t a_block_lo,
                                            uint32_t b_block_lo, int ntiles) {
  static_assert(TOKEN_TILES == 1 || TOKEN_TILES == 2 || TOKEN_TILES == 4, "m64n8, m64n16 or m64n32");
  wgmma_fence();
#pragma unroll
  for (int w = 0; w < WINDOWS; ++w) {
    const uint32_t a_window_lo = a_block_lo + uint32_t(wgmma_window_tile(w, ntiles) * (kTileRows * kBlockK / 16));
#pragma unroll
    for (int ks = 0; ks < kBlockK / 32; ++ks) {
      const uint64_t da = smem_descriptor_sw128_from_lo(a_window_lo + 2 * ks);  // 32 bytes of K further
      const uint64_t db = smem_descriptor_sw128_from_lo(b_block_lo + 2 * ks);
      if constexpr (TOKEN_TILES == 1)
        wgmma_m64n8k32_e4m3(P[w][0], da, db, ks > 0);
      else if constexpr (TOKEN_TILES == 2)
        wgmma_m64n16k32_e4m3(P[w][0], P[w][1], da, db, ks > 0);
      else
        wgmma_m64n32k32_e4m3(P[w], da, db, ks > 0);
    }
  }
  wgmma_commit();
}

// Blocks a warpgroup issues before it waits, each into its own P of windows x token_tiles x 4
// registers. Up to 16 tokens P may take 64 registers (4 blocks); at 32
// tokens 48 (3, 1 or 1 blocks for 1, 2 or 3 windows): with 64 the pre-quantized instance spilled.
constexpr int wgmma_blocks_per_wait(int windows, int token_tiles) {
  const int blocks = (token_tiles > 2 ? 12 : 16) / (windows * token_tiles);
  return blocks < kMaxWgBlocks ? blocks : kMaxWgBlocks;
}
// A window-major warpgroup (one window over every block: the kernel's window_major) keeps 4 x
// token_tiles accumulators instead of 3 windows' 12 x token_tiles, so its P may take 64 registers
// at 32 tokens too, and it issues up to 8 blocks a wait (the 8 K blocks of a K split of 4 of the
// large shapes: one round).
constexpr int window_major_blocks_per_wait(int token_tiles) { return 16 / token_tiles < 8 ? 16 / token_tiles : 8; }

// The finishing CTA's side of the direct exchange (wgmma_direct_exchange). Once its inbox barrier
// has counted every partial of its tiles (k_split ranks x WGS warpgroups), sum them in the order
// reduce_and_store does (within a rank the warpgroups that had K blocks, in order; then the ranks
// in order: the same bits), add the bias, round and store. Nothing else reads or writes this
// CTA's shared memory by then, so it may exit as soon as it has stored; it does not wait for its
// own st.async to land in its peers (they carry their data, and each peer waits for them before
// it exits). compute-sanitizer (memcheck, racecheck) is clean over this exchange.
template <int TOKEN_TILES, int WGS>
__device__ __forceinline__ void finish_direct_exchange(const GemmKernelArgs& a, const float* inbox, uint32_t inbox_bar,
                                                       int tile_begin, int ntiles, int rank, int tokens) {
  constexpr int kTokenPad = TOKEN_TILES * kTokensPerTile;
  constexpr int kTileOutputs = kTileRows * kTokenPad;
  mbarrier_wait</*CLUSTER_ACQUIRE=*/true>(inbox_bar, 0);
  const ExchangeSplit split = exchange_split(a, ntiles);
  const int owned_begin = split.first_tile(rank), owned_end = split.first_tile(rank + 1);
#pragma unroll 1
  for (int i = threadIdx.x; i < (owned_end - owned_begin) * kTileOutputs; i += WGS * 128) {
    const int row = i % kTileRows, rest = i / kTileRows;
    const int m = rest % kTokenPad, owned = rest / kTokenPad;
    if (m >= tokens) continue;
    const float* cell = inbox + row * kTokenPad + partial_token_slot(row, m, kTokenPad);
    float sum = 0.f;
    // Compile-time loop bounds (with runtime ones ptxas unrolls each loop 16 times over: cold code).
#pragma unroll
    for (int r = 0; r < kMaxClusterSize; ++r) {
      if (r < a.k_split) {
        const float* rank_slots = cell + direct_inbox_slot(owned, r, 0, a.k_split, WGS) * kTileOutputs;
        // rank r's warpgroups with K blocks (the others sent zeros, which reduce_and_store leaves out)
        const int active_wk = min(WGS, split.first_block(r + 1, a.kblocks) - split.first_block(r, a.kblocks));
        float part = rank_slots[0];
#pragma unroll
        for (int k = 1; k < WGS; ++k)
          if (k < active_wk) part += rank_slots[k * kTileOutputs];
        sum = r == 0 ? part : sum + part;
      }
    }
    const int n = (tile_begin + owned_begin + owned) * kTileRows + row;
    store_output(a, sum, m, n);
  }
}

// Paired activations (PAIR): the prologue's e4m3 bytes and scales also go,
// by st.async at the same offsets, into the shared memory of the pair peer (the CTA of the same K
// slice in the other row group of the cluster), counted on the peer's activation mbarrier.
struct PeerActivations {
  uint32_t act, xs, bar;  // the peer's activations, scales and mbarrier (shared::cluster addresses)
  __device__ __forceinline__ void bytes(int offset, uint2 v) const {
    store_async_to_cluster(act + uint32_t(offset), __uint_as_float(v.x), __uint_as_float(v.y), bar);
  }
  __device__ __forceinline__ void scale(int index, float s) const {
    store_async_to_cluster(xs + 4 * uint32_t(index), s, bar);
  }
};

// WGS warpgroups: 4 (one CTA per SM, the whole of its weight share in its ring), or 2 (the
// co-resident variant: two CTAs per SM, a refilled ring; see kCoResidentWarpGroups).
// WINDOWS: the most 64-row windows a CTA of this instance has (wgmma_instance_windows).
// PAIR: paired activations (clusters of k_split x 2 CTAs, the grid's row groups in pairs): this
// CTA quantizes half of the tokens (pair_first_token) and receives the other half from its peer.
template <int TOKEN_TILES, bool PREQUANT, int WGS = kWgmmaWarpGroups,
          int WINDOWS = wgmma_instance_windows(TOKEN_TILES, 0), bool PAIR = false>
__global__ void __launch_bounds__(WGS * 128, WGS == kCoResidentWarpGroups ? 2 : 1)
    wgmma_ring_gemm_sm90(const __grid_constant__ GemmKernelArgs a) {
  static_assert(!PAIR || (!PREQUANT && WGS == kWgmmaWarpGroups && TOKEN_TILES >= 2),
                "paired activations: the 4-warpgroup kernel from 9 tokens, bf16/fp16 input");
  static_assert(TOKEN_TILES <= kMaxWgmmaTokenTiles, "the wgmma ring kernel serves one chunk of <= 32 tokens");
  static_assert(WGS == kWgmmaWarpGroups || WGS == kCoResidentWarpGroups, "4 or 2 warpgroups");
  constexpr int kThreads = WGS * 128, kWarps = WGS * 4;
  constexpr int kTokenPad = TOKEN_TILES * kTokensPerTile;
  static_assert(WINDOWS <= wgmma_max_windows(TOKEN_TILES, WGS), "windows this kernel's registers allow");
  constexpr int kMaxWin = WINDOWS;
  // From 32 tokens the inbox may lie over the activations (the plan's layout says).
  const bool inbox_over_activations = wgmma_inbox_over_activations(TOKEN_TILES) && a.wgmma_layout.inbox_over_activations;
  extern __shared__ __align__(kRingStageAlign) uint8_t wgmma_kernel_smem[];
  uint8_t* smem = wgmma_kernel_smem;

  const int rank = blockIdx.x;   // K slice within the cluster
  const int group = blockIdx.y;  // range of row tiles
  const int tokens = min(kTokenPad, a.M);
  // Paired activations: this CTA is cluster CTA rank + k_split x pair; its peer has the other pair.
  const int pair = PAIR ? (group & 1) : 0;
  const int cluster_rank_base = a.k_split * pair;

  // The CTA's tiles and K blocks. 32-bit: the launcher keeps row_groups x tiles below 2^32 (an
  // int64 division is a ~70-instruction subroutine, run cold at entry); the K split by
  // small_quotient (rank x kblocks < 2^22: the launcher keeps K below 2^26).
  const int tile_begin = int(unsigned(group) * unsigned(a.tiles) / gridDim.y);
  const int tile_end = int(unsigned(group + 1) * unsigned(a.tiles) / gridDim.y);
  const int kb_begin = small_quotient(rank * a.kblocks, a.inverse_k_split);
  const int kb_end = small_quotient((rank + 1) * a.kblocks, a.inverse_k_split);
  const int ntiles = tile_end - tile_begin, nblocks = kb_end - kb_begin;
  const int rows = ntiles * kTileRows;

  const WgmmaRingSmemLayout& layout = a.wgmma_layout;  // the plan's
  // The direct exchange (wgmma_direct_exchange): compiled into the co-resident instances only.
  const bool direct = WGS == kCoResidentWarpGroups && layout.direct;
  // The async exchange (wgmma_async_exchange): the 4-warpgroup instances, wherever the layout gives
  // the inbox a region of its own (up to 16 tokens; at 32 where the plan found room).
  constexpr bool kAsyncExchange = WGS == kWgmmaWarpGroups;
  const bool async_exchange = kAsyncExchange && layout.inbox_barrier;
  const bool inbox_barrier = direct || async_exchange;
  const uint32_t inbox_bar = shared_address(smem + layout.inbox_barrier_offset);
  const uint32_t act_bar = PAIR ? shared_address(smem + layout.act_barrier_offset) : 0;  // the peer's activations
  uint8_t* act = smem;
  float* xs = reinterpret_cast<float*>(smem + layout.xs_offset);
  float* red = reinterpret_cast<float*>(smem + layout.red_offset);  // over the ring, once it is read
  float* inbox = reinterpret_cast<float*>(smem + layout.inbox_offset);  // over the activations, once they are read
  const uint32_t act_address = shared_address(smem);
  const uint32_t ring_address = shared_address(smem + layout.ring_offset);
  // The block scales of the CTA's (tile, block) pairs, decoded to fp32 bits as they reach shared
  // memory: decoded on every use in the MMA loop (an e8m0 byte's NaN and subnormal cases), the
  // e8m0 path was measurably slower at M = 1 (the same bits).
  uint32_t* unit_scales = reinterpret_cast<uint32_t*>(smem + layout.scale_offset);  // [tile][block]
  const int chunk_blocks = a.chunk_blocks;
  const int chunks = small_quotient(nblocks + chunk_blocks - 1, a.inverse_chunk_blocks);
  const uint32_t chunk_bytes = uint32_t(chunk_blocks) * uint32_t(rows) * kBlockK;
  // Chunk c lands in slot c % slots. Every chunk has its own slot, or (the co-resident plans:
  // chunk_blocks == WGS, every CTA's nblocks a multiple of WGS, slots >= 2) the ring is refilled:
  // a slot's next chunk is requested once every warp has released the slot's current one.
  const int slots = layout.slots < chunks ? layout.slots : chunks;
  const bool refill = WGS == kCoResidentWarpGroups && slots < chunks;
  const uint32_t full = shared_address(smem + layout.barrier_offset);  // + 8 * slot
  const uint32_t empty = full + 8 * uint32_t(layout.slots);             // + 8 * slot, refilled rings only

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;

  if (!PAIR && !inbox_over_activations && a.k_split > 1 && !inbox_barrier)
    cluster_arrive_relaxed();  // matched in reduce_and_store

  // 0. The block scales of every (tile, block) into registers, first of all: they are as cold as
  //    the weight, and a load issued behind the CTA's weight copies waits for the DRAM queue
  //    those fill (a blocking scale loop there took a large share of the launch). They reach shared memory (decoded) after the activations, when they have long arrived.
  constexpr int kScaleRegs = 2;
  uint32_t scale_regs[kScaleRegs];
  const float inverse_nblocks = inverse_of_blocks(a, nblocks);
  auto scale_index = [&](int i) {  // i < ntiles x nblocks < 2^22
    const int s = small_quotient(i, inverse_nblocks), lb = i - s * nblocks;
    return int64_t((tile_begin + s) * kTileRows / 128) * a.kblocks + kb_begin + lb;
  };
  auto load_scale = [&](int i) -> uint32_t {
    return a.e8m0 ? uint32_t(__ldg(static_cast<const uint8_t*>(a.w_scale) + scale_index(i)))
                  : __ldg(static_cast<const uint32_t*>(a.w_scale) + scale_index(i));
  };
#pragma unroll
  for (int r = 0; r < kScaleRegs; ++r) {
    const int i = threadIdx.x + r * kThreads;
    scale_regs[r] = i < ntiles * nblocks ? load_scale(i) : 0u;
  }
  if (threadIdx.x == 0) {
#pragma unroll 1
    for (int c = 0; c < slots; ++c) mbarrier_init(full + 8 * c, 1);
    if (refill)
#pragma unroll 1
      for (int c = 0; c < slots; ++c) mbarrier_init(empty + 8 * c, kWarps);  // lane 0 of every warp
    if (inbox_barrier) mbarrier_init(inbox_bar, 1);
    if (PAIR) mbarrier_init(act_bar, 1);
    mbarrier_init_fence();
#pragma unroll 1
    for (int c = 0; c < slots; ++c) mbarrier_arrive_expect_tx(full + 8 * c, chunk_bytes);
    if (inbox_barrier) {  // every rank (direct: every warpgroup of every rank) sends each tile this CTA finishes
      mbarrier_arrive_expect_tx(inbox_bar, exchange_inbox_bytes(a, ntiles, rank, kTokenPad, direct ? WGS : 1));
    }
    if (PAIR) {  // the peer's tokens: e4m3 bytes and a scale per K block
      const int peer_tokens = pair_token_count(pair ^ 1, tokens);
      mbarrier_arrive_expect_tx(act_bar, uint32_t(peer_tokens * nblocks * (kBlockK + 4)));
    }
  }
  __syncthreads();
  // The direct or async exchange's peers store into this CTA's inbox and count on its barrier: they
  // may do so once this arrival (after the barrier's initialisation and its fence) is matched by
  // their wait (cluster_wait before their first st.async). With the inbox over the activations the
  // CTA arrives after its MMAs instead (below), which orders the initialisation as well. Paired
  // activations: every CTA arrives here, and waits in the prologue before it stores to its peer.
  if (PAIR || (inbox_barrier && !inbox_over_activations)) cluster_arrive_relaxed();
  allow_next_grid_launch();

  // 1. The first `slots` chunks (one per slot), chunk c from lane 0 of warp c % kWarps: the first
  //    `early` at once, the others once the first activation loads are in flight (a.early_chunks,
  //    the plan's; 0: all at once): the activation loads queue behind the copies the grid has
  //    already requested. A chunk always spans chunk_blocks blocks (the last one may read a neighbour's
  //    blocks, or zeros past K, and ignore them); the box is the CTA's rows: the full map, or the
  //    one a tile shorter.
  const void* map = ntiles == a.max_tiles_per_cta ? &a.weight_map : &a.weight_map_short;
  const int early = a.early_chunks > 0 && a.early_chunks < slots ? a.early_chunks : slots;
  // Chunk c's copy into ring slot `slot`, counted on the slot's full barrier.
  auto copy_chunk = [&](int c, int slot) {
    tensor_copy_3d_to_shared(ring_address + uint32_t(slot) * chunk_bytes, map, 0, tile_begin * kTileRows,
                             kb_begin + c * chunk_blocks, full + 8 * slot);
  };
  auto request_chunks = [&](int first, int end) {
    if (lane == 0) {
#pragma unroll 1
      for (int c = first + (warp - first % kWarps + kWarps) % kWarps; c < end; c += kWarps) copy_chunk(c, c);
    }
    __syncwarp();
  };
  request_chunks(0, early);
  // 32 tokens, a CTA share of >= 96 KB: the copies held back are requested by thread 0 once the
  // activations are in shared memory, not from inside the prologue (a warp's tensor copy does not
  // issue while the CTA's earlier copies stream, and the prologue's CTA barrier waits for that
  // warp). Measured faster at M = 32 on the large shares and slower on small ones (64 KB) and at
  // M = 4-16, where the other instances keep the prologue's order (docs/design/sm90.md).
  const bool late_copies =
      WGS == kWgmmaWarpGroups && TOKEN_TILES == 4 && uint32_t(slots) * chunk_bytes >= 96u * 1024u;

  // 2. The activations (after the previous grid), then the block scales into shared memory.
  // Else the copies held back are requested as soon as the first activation loads are in flight.
  if constexpr (PAIR) {
    const uint32_t peer_rank = uint32_t(rank + a.k_split * (pair ^ 1));
    const PeerActivations peer{cluster_address(act_address, peer_rank), cluster_address(shared_address(xs), peer_rank),
                               cluster_address(act_bar, peer_rank)};
    wait_and_load_activations<TOKEN_TILES, PREQUANT, kThreads, true>(
        a, act, xs, 0, tokens, kb_begin, nblocks, group, rank,
        [&] {
          if (!late_copies) request_chunks(early, slots);
          cluster_wait();  // the peer has initialised its activation barrier (its entry arrival)
        },
        pair_first_token(pair, tokens), pair_token_count(pair, tokens), peer);
  } else {
    wait_and_load_activations<TOKEN_TILES, PREQUANT, kThreads, true>(
        a, act, xs, 0, tokens, kb_begin, nblocks, group, rank, [&] {
          if (!late_copies) request_chunks(early, slots);
        });
  }
#pragma unroll
  for (int r = 0; r < kScaleRegs; ++r) {
    const int i = threadIdx.x + r * kThreads;
    if (i < ntiles * nblocks)
      unit_scales[i] = __float_as_uint(decode_scale_bits(scale_regs[r], a.e8m0));
  }
#pragma unroll 1
  for (int i = threadIdx.x + kScaleRegs * kThreads; i < ntiles * nblocks; i += kThreads)
    unit_scales[i] = __float_as_uint(decode_scale_bits(load_scale(i), a.e8m0));  // beyond 2 x kThreads pairs
  fence_proxy_async_shared();  // the activations were stored by threads; wgmma reads them
  __syncthreads();             // activations and unit scales written
  if (late_copies && threadIdx.x == 0) {
#pragma unroll 1
    for (int c = early; c < slots; ++c) copy_chunk(c, c);
  }
  if (PAIR) {  // the peer's half of the tokens (st.async, released at cluster scope), then wgmma reads them
    mbarrier_wait</*CLUSTER_ACQUIRE=*/true>(act_bar, 0);
    fence_proxy_async_shared();
  }

  // 3. Blocks as their chunks land: warpgroup wg takes blocks wg, wg + WGS, ...
  const int wg = warp / 4, wq = warp % 4, q = lane & 3;
  // The wgmma operands of block lb, as descriptors' low words (wgmma_block).
  const uint32_t ring_lo = smem_descriptor_sw128_lo(ring_address), act_lo = smem_descriptor_sw128_lo(act_address);
  auto a_block = [&](int lb) { return ring_lo + uint32_t(lb * rows * (kBlockK / 16)); };
  auto b_block = [&](int lb) { return act_lo + uint32_t(lb * kTokenPad * (kBlockK / 16)); };
  auto chunk_of = [&](int lb) { return small_quotient(lb, a.inverse_chunk_blocks); };  // lb / chunk_blocks
  // Where every warpgroup has the same number of blocks (nblocks % WGS == 0, all the shapes of
  // SPEC §6), a warpgroup issues the MMAs of up to wgmma_blocks_per_wait of its blocks, each into
  // its own P, before it waits: a wgmma group's latency (a few hundred cycles) is paid once per
  // round, not per block (one round up to 16 tokens with 4 warpgroups and 16 blocks; a CTA with
  // more blocks, or 2 warpgroups, takes several rounds). The sum is still taken in
  // block order. The conditions are uniform over the CTA (ptxas serializes wgmma under a branch
  // it cannot prove uniform). The accumulators are sized by the compile-time window count, so
  // that an instance's registers hold only the windows it uses.
  const int per_wg = nblocks % WGS == 0 ? nblocks / WGS : 0;
  // Window-major (32 tokens, 9-12 tiles): each window goes to one warpgroup over all of the CTA's
  // K blocks instead of each warpgroup taking every window of a quarter of the blocks, so that each
  // tile's sum is parked once instead of once per warpgroup (90 KB of shared-memory stores and as
  // many loads fewer on 5120x4096's 11 tiles); warpgroup 3 has no MMAs. Measured faster or level
  // at 24-32 tokens, slower at 8-16 tokens, which is why the 8- and 16-token instances keep the
  // K-block order (docs/design/sm90.md).
  const int windows = (ntiles + kWindowTiles - 1) / kWindowTiles;  // 1 .. kMaxWin (the plan)
  constexpr bool kWindowMajor = WGS == kWgmmaWarpGroups && TOKEN_TILES == kMaxWgmmaTokenTiles && kMaxWin >= kMaxWindows;
  const bool window_major = kWindowMajor && windows == kMaxWindows;
  // A refilled ring: chunk c's slot is released by lane 0 of every warp once its warpgroup's MMAs
  // on it have completed; thread 0 then waits for all of them and requests chunk c + slots into
  // it (the TMA writes what the MMAs read: the mbarrier orders the two async-proxy accesses).
  auto release_and_refill = [&](int c) {
    const int slot = c % slots;
    if (lane == 0) mbarrier_arrive(empty + 8 * slot);
    if (threadIdx.x == 0 && c + slots < chunks) {
      mbarrier_wait(empty + 8 * slot, (c / slots) & 1);
      mbarrier_arrive_expect_tx(full + 8 * slot, chunk_bytes);
      copy_chunk(c + slots, slot);
    }
  };
  auto stream_and_park = [&](auto windows) {
    constexpr int kWindows = decltype(windows)::value;
    constexpr int kPerWait = wgmma_blocks_per_wait(kWindows, TOKEN_TILES);
    float4 acc[kWindows][TOKEN_TILES];
#pragma unroll
    for (int w = 0; w < kWindows; ++w)
#pragma unroll
      for (int t = 0; t < TOKEN_TILES; ++t) acc[w][t] = make_float4(0.f, 0.f, 0.f, 0.f);
    // acc_w += Pw * (xs * ws) for block lb of the window whose first tile is window_tile: this
    // thread's rows (tile window_tile + wq) and tokens 2q, 2q + 1.
    auto apply_window = [&](float4 (&acc_w)[TOKEN_TILES], int lb, int window_tile, const float4 (&Pw)[TOKEN_TILES]) {
      const float ws = __uint_as_float(unit_scales[(window_tile + wq) * nblocks + lb]);
#pragma unroll
      for (int t = 0; t < TOKEN_TILES; ++t) {
        const float2 xs2 = *reinterpret_cast<const float2*>(xs + lb * kTokenPad + t * kTokensPerTile + 2 * q);
        const float f0 = xs2.x * ws, f1 = xs2.y * ws;
        acc_w[t].x += Pw[t].x * f0;
        acc_w[t].y += Pw[t].y * f1;
        acc_w[t].z += Pw[t].z * f0;
        acc_w[t].w += Pw[t].w * f1;
      }
    };
    // The same for every window of the CTA (tiles wgmma_window_tile(w) + wq).
    auto apply = [&](int lb, const float4 (&P)[kWindows][TOKEN_TILES]) {
#pragma unroll
      for (int w = 0; w < kWindows; ++w) apply_window(acc[w], lb, wgmma_window_tile(w, ntiles), P[w]);
    };
    if (refill) {
      // Chunk c holds block c * WGS + wg of each warpgroup: wait for it, its MMAs, wait for them,
      // apply, release the slot. The other warpgroup's MMAs run while this one waits (issuing the
      // next chunk's before waiting made ptxas serialize the wgmma: warning C7514).
      if constexpr (WGS == kCoResidentWarpGroups) {
        float4 P[kWindows][TOKEN_TILES];
        for (int c = 0; c < chunks; ++c) {
          const int slot = c % slots;
          mbarrier_wait(full + 8 * slot, (c / slots) & 1);
          const uint32_t a_lo = ring_lo + (uint32_t(slot) * chunk_bytes + uint32_t(wg * rows * kBlockK)) / 16;
          wgmma_block<TOKEN_TILES, kWindows>(P, a_lo, b_block(c * WGS + wg), ntiles);
          wgmma_wait<0>();
          apply(c * WGS + wg, P);
          release_and_refill(c);
        }
      }
    } else if (window_major) {
      // Warpgroup wg < 3 takes window wg over every block of the CTA's K slice; warpgroup 3 has no
      // MMAs. The conditions around the wgmma are uniform over a warpgroup.
      if constexpr (kWindows == 1) {
        constexpr int kPerWait = window_major_blocks_per_wait(TOKEN_TILES);
        if (wg < kMaxWindows) {
          const int window_tile = wgmma_window_tile(wg, ntiles);
          const uint32_t window_lo = uint32_t(window_tile * (kTileRows * kBlockK / 16));
          for (int first = 0; first < nblocks; first += kPerWait) {
            float4 P[kPerWait][1][TOKEN_TILES];
#pragma unroll
            for (int i = 0; i < kPerWait; ++i) {
              if (first + i < nblocks) {
                const int lb = first + i;
                mbarrier_wait(full + 8 * chunk_of(lb), 0);  // the chunk's only phase
                wgmma_block<TOKEN_TILES, 1>(P[i], a_block(lb) + window_lo, b_block(lb), ntiles);
              }
            }
            wgmma_wait<0>();
#pragma unroll
            for (int i = 0; i < kPerWait; ++i)
              if (first + i < nblocks) apply_window(acc[0], first + i, window_tile, P[i][0]);
          }
        }
      }
    } else if (per_wg > 0) {
      for (int first = 0; first < per_wg; first += kPerWait) {
        float4 P[kPerWait][kWindows][TOKEN_TILES];
#pragma unroll
        for (int i = 0; i < kPerWait; ++i) {
          if (first + i < per_wg) {
            const int lb = wg + WGS * (first + i);
            mbarrier_wait(full + 8 * chunk_of(lb), 0);  // the chunk's only phase
            wgmma_block<TOKEN_TILES, kWindows>(P[i], a_block(lb), b_block(lb), ntiles);
          }
        }
        wgmma_wait<0>();
#pragma unroll
        for (int i = 0; i < kPerWait; ++i)
          if (first + i < per_wg) apply(wg + WGS * (first + i), P[i]);
      }
    } else {  // one block at a time
      float4 P[kWindows][TOKEN_TILES];
      for (int lb = wg; lb < nblocks; lb += WGS) {
        mbarrier_wait(full + 8 * chunk_of(lb), 0);
        wgmma_block<TOKEN_TILES, kWindows>(P, a_block(lb), b_block(lb), ntiles);
        wgmma_wait<0>();
        apply(lb, P);
      }
    }
    if (direct) {
      // No CTA barrier, no parking: each warp stores its tile's partial sums straight into inbox
      // slot [owned tile][rank][warpgroup] of the CTA that finishes the tile (itself included).
      cluster_wait();  // the peers have initialised their inbox barriers
      const uint32_t inbox_address = shared_address(inbox);
      const int g = lane >> 2;
      const ExchangeSplit split = exchange_split(a, ntiles);
#pragma unroll
      for (int w = 0; w < kWindows; ++w) {
        const int tile = wgmma_window_tile(w, ntiles) + wq;
        if (tile < kWindowTiles * w) continue;  // owned by the previous window
        const int owner = split.owner(tile);
        const int owned_index = tile - split.first_tile(owner);
        const int slot = direct_inbox_slot(owned_index, rank, wg, a.k_split, WGS);
        const uint32_t base = inbox_address + uint32_t(slot * kTileRows * kTokenPad + g * kTokenPad) * 4;
        const uint32_t remote = cluster_address(base, uint32_t(owner));
        const uint32_t remote_bar = cluster_address(inbox_bar, uint32_t(owner));
#pragma unroll
        for (int t = 0; t < TOKEN_TILES; ++t) {  // rows g and g + 8, tokens 8t + 2q and + 1 (as park_partials)
          const int s = partial_token_slot(g, 2 * q, kTokenPad) ^ (t * kTokensPerTile);
          store_async_to_cluster(remote + uint32_t(s) * 4, acc[w][t].x, acc[w][t].y, remote_bar);
          store_async_to_cluster(remote + uint32_t(8 * kTokenPad + (s ^ partial_token_slot(8, 0, kTokenPad))) * 4,
                                 acc[w][t].z, acc[w][t].w, remote_bar);
        }
      }
      return;
    }
    // Park each tile once, from the window that owns it (tiles [4w, 4w + 4)); a window that
    // overlaps its predecessor owns only the tiles past it. The partials go over the ring: every
    // chunk has landed (each was waited for by a warpgroup that reads it) and every wgmma that
    // read it has completed (wgmma_wait<0> of each warpgroup) once all threads pass this barrier.
    __syncthreads();
    if (window_major) {  // one partial a tile: slot 0 (reduce_and_store is told of one block)
      if constexpr (kWindows == 1) {
        const int tile = wgmma_window_tile(wg, ntiles) + wq;
        if (wg < kMaxWindows && tile >= kWindowTiles * wg) park_partials(red, acc[0], tile, WGS, 0, lane);
      }
      return;
    }
#pragma unroll
    for (int w = 0; w < kWindows; ++w) {
      const int tile = wgmma_window_tile(w, ntiles) + wq;
      if (tile >= kWindowTiles * w) park_partials(red, acc[w], tile, WGS, wg, lane);
    }
  };
  // (At 32 tokens three windows always run window-major: one window a warpgroup.)
  if (windows == 1 || window_major) {
    stream_and_park(std::integral_constant<int, 1>{});
  } else if (kWindowMajor || kMaxWin == 2 || windows == 2) {
    stream_and_park(std::integral_constant<int, 2>{});
  } else {
    if constexpr (kMaxWin >= 3 && !kWindowMajor) stream_and_park(std::integral_constant<int, 3>{});
  }
  if (direct) {  // this CTA's partials are sent (no CTA barrier before the finish)
    finish_direct_exchange<TOKEN_TILES, WGS>(a, inbox, inbox_bar, tile_begin, ntiles, rank, tokens);
    return;
  }
  // With the inbox over the activations (32 tokens, no room for one of its own), the cluster's
  // peers may write it once every thread has arrived here, after its MMAs; reduce_and_store waits
  // for theirs before writing to them. Else the inbox has its own region and the CTA arrived at
  // entry (or uses the async exchange): arriving here made the cluster's partial sums wait for
  // its slowest CTA. The arrival is relaxed: the only accesses the peers' writes must follow are
  // the wgmma reads of the activations, complete once the thread's wgmma_wait<0> has returned
  // (before it arrives); a release arrival orders no async-proxy read, and cost 0.4-0.5 us a call
  // here (docs/design/sm90.md).
  if (inbox_over_activations && a.k_split > 1) cluster_arrive_relaxed();
  __syncthreads();

  // 4./5. Partials across warpgroups and the cluster, bias, output (a.warps_k = WGS).
  // (Paired activations: the phase begun at entry was completed in the prologue; with the inbox
  // over the activations the one begun after the MMAs is pending.)
  // (Window-major: one partial a tile, in slot 0, as after a single block.)
  reduce_and_store<TOKEN_TILES, kThreads, WGS, kAsyncExchange, /*UNSPLIT_DIRECT=*/true>(
      a, red, inbox, tile_begin, ntiles, window_major ? 1 : nblocks, rank, 0, tokens, true, async_exchange, inbox_bar,
      cluster_rank_base, !PAIR || inbox_over_activations);
}

}  // namespace sgl_fp8::sm90
