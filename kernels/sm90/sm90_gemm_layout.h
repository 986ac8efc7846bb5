// Index formulas of the sm_90 block-scaled GEMM: which weight bytes each lane loads, where the
// activations sit in shared memory, and how shared memory is carved up. Plain C++ (no CUDA
// types): the kernel uses nothing else for indexing, and tests/test_sm90_layout.py checks these
// formulas on the CPU against SPEC §4 and the PTX fragment layout of mma.m16n8k16.
#pragma once

#include <stdint.h>

#include "../common/fp8_quant_math.h"  // SGL_FP8_HD
#include "../common/weight_layout.h"

namespace sgl_fp8::sm90 {

constexpr int kTileRows = 16;  // weight rows per MMA (its M)
constexpr int kBlockK = 128;   // K per block scale (one work unit)
constexpr int kTokensPerTile = 8;  // tokens per MMA token tile (its N)

// ---- weight (operand A) --------------------------------------------------------------------
// A unit is one 16-row tile x one 128-wide K block (2 KB). Lane (g = lane/4, q = lane%4) loads
// four 16-byte pieces: rows g and g+8 (`half` 0/1) at K bytes [16q, 16q+16) and [64+16q, ...)
// (`chunk` 0/1) of the block. Offsets are relative to the unit's base, which is
// tile * 16 * K + kb * block_stride in both layouts (block_stride 128 plain, 2048 shuffled).
SGL_FP8_HD int unit_k_of(int lane, int chunk) { return 64 * chunk + 16 * (lane & 3); }

SGL_FP8_HD int64_t unit_lane_offset(int lane, int half, int chunk, int64_t K, bool shuffled) {
  return weight_chunk16_offset((lane >> 2) + 8 * half, unit_k_of(lane, chunk), K, shuffled);
}

SGL_FP8_HD int64_t unit_block_stride(bool shuffled) { return shuffled ? 2048 : 128; }
// unit_lane_offset(lane, half, 1, ...) - unit_lane_offset(lane, half, 0, ...) in either layout: the
// second chunk's K is 64 bytes on (two shuffled 32-wide K groups of 512 bytes).
SGL_FP8_HD int64_t unit_chunk_stride(bool shuffled) { return shuffled ? 1024 : 64; }

// The MMA (m16n8k16, f16) consumes the 16 bytes of a piece as 4 words w = 0..3, one K step
// each: in step (chunk, w), A's logical k {2q, 2q+1} is physical byte unit_k_of + 4w + {0, 1}
// and logical k {8+2q, 8+2q+1} is + 4w + {2, 3}. B (the activations) uses the same
// correspondence, so the permutation cancels inside each 128-block.
SGL_FP8_HD int a_physical_k(int lane, int chunk, int word, int logical_k) {
  const int q = lane & 3;
  const int within = logical_k < 8 ? logical_k - 2 * q : logical_k - 8 - 2 * q + 2;  // 0..3
  return unit_k_of(lane, chunk) + 4 * word + within;
}

// ---- activations (operand B), f16 in shared memory --------------------------------------------
// The quantized activations are stored as f16 (exact: every e4m3 value is an f16 value), so
// only the weight needs converting. Token `token` of block lb owns a 256-byte row; physical K
// byte P (0..127) is at 16-byte slot s = 2P / 16, moved to s ^ ((s >> 2) & 2) ^ (token & 1), so
// that the two tokens a quarter-warp serves read 8 different bank groups (unit_k_of: slots 2q + 8c).
SGL_FP8_HD int act_f16_offset(int lb, int token, int token_pad, int P) {
  const int s = (2 * P) >> 4;
  const int slot = s ^ ((s >> 2) & 2) ^ (token & 1);
  return (lb * token_pad + token) * 256 + slot * 16 + ((2 * P) & 15);
}

// ---- weight staging ring (shared memory) ------------------------------------------------------
// Beyond the units a warp holds in registers, each thread may keep `stages` more units in flight
// through cp.async into a private shared-memory slot: per stage, the 4 x 16 weight bytes of
// every thread (piece i of thread t at (i * 256 + t) * 16: a warp's 16-byte pieces are contiguous,
// so its reads are conflict-free) and the 4-byte word holding the unit's block scale.
constexpr int kStageThreads = 256;  // threads per CTA (kGemmThreads)
constexpr int kStageWeightBytes = 4 * 16 * kStageThreads;
constexpr int kStageBytes = kStageWeightBytes + 4 * kStageThreads;
constexpr int kMaxStages = 4;
// Instances with more token tiles than this have no staging code at all: their accumulators and
// activation fragments already fill the 128 registers, and the staging bookkeeping spilled them.
// The plan gives them no stages.
constexpr int kMaxStagedTokenTiles = 2;

SGL_FP8_HD int stage_piece_offset(int stage, int piece, int thread) {
  return stage * kStageBytes + (piece * kStageThreads + thread) * 16;
}
SGL_FP8_HD int stage_scale_offset(int stage, int thread) { return stage * kStageBytes + kStageWeightBytes + 4 * thread; }

// ---- shared memory of one CTA ----------------------------------------------------------------
// [activations f16 [block][token][128]][activation scales fp32 [block][token]]
// [warp partials fp32 [tile][warp_k][16][token]][inbox fp32 [owned tile][cluster rank][16][token]]
// [weight staging ring, `stages` x kStageBytes][the inbox's mbarrier, 8 bytes]
struct GemmSmemLayout {
  int64_t xs_offset, red_offset, inbox_offset, ring_offset, inbox_barrier_offset, total;
  SGL_FP8_HD GemmSmemLayout(int max_blocks, int token_tiles, int max_tiles, int warps_k, int k_split,
                            int stages = 0) {
    const int64_t token_pad = int64_t(token_tiles) * 8;
    const int64_t max_owned = (max_tiles + k_split - 1) / k_split;
    xs_offset = int64_t(max_blocks) * token_pad * 256;
    red_offset = xs_offset + int64_t(max_blocks) * token_pad * 4;
    inbox_offset = red_offset + int64_t(max_tiles) * warps_k * kTileRows * token_pad * 4;
    ring_offset = inbox_offset + max_owned * k_split * kTileRows * token_pad * 4;
    inbox_barrier_offset = ring_offset + int64_t(stages) * kStageBytes;  // a multiple of 16
    total = inbox_barrier_offset + 8;
  }
};

// ---- register-fed kernel (sm90_register_fed_gemm.cuh) -----------------------------------------
// CTAs of one 16-row tile over the whole K, 8 warps, warp w on K blocks [w KB, (w + 1) KB) with
// KB = K / 1024 (K % 1024 == 0). Each lane loads the register kernel's unit pieces above
// (unit_lane_offset, unit_block_stride: plain or shuffled) straight into registers and feeds them
// to the MMAs; the activations sit in shared memory as e4m3 in chunks of 64 K bytes, token after
// token inside a chunk, so that a lane's 16 bytes at unit_k_of are contiguous:
// [e4m3 [K / 64][M][64]][scales fp32 [M][K / 128]][warp partials fp32 [warp][8 token_tiles][16]].
constexpr int kRegisterFedWarps = 8;
constexpr int kRegisterFedBlocksPerWarpMax = 8;  // instances for K = 1024 .. 8192
constexpr int kRegisterFedMaxTokenTiles = 2;     // M <= 16
SGL_FP8_HD int64_t register_fed_act_offset(int64_t chunk, int token, int M) { return (chunk * M + token) * 64; }
SGL_FP8_HD int64_t register_fed_xs_offset(int M, int64_t K) { return int64_t(M) * K; }
SGL_FP8_HD int64_t register_fed_red_offset(int M, int64_t K) {
  return (register_fed_xs_offset(M, K) + int64_t(M) * (K / kBlockK) * 4 + 15) / 16 * 16;
}
SGL_FP8_HD int register_fed_red_index(int warp, int token, int row, int token_tiles) {
  return (warp * 8 * token_tiles + token) * kTileRows + row;
}
SGL_FP8_HD int64_t register_fed_smem_bytes(int M, int64_t K, int token_tiles) {
  return register_fed_red_offset(M, K) + int64_t(kRegisterFedWarps) * 8 * token_tiles * kTileRows * 4;
}

// ---- wgmma ring kernel (sm90_wgmma_ring_gemm.cuh) ---------------------------------------------
// The weight is wgmma's A operand (64 rows x 32 K per instruction) straight from shared memory,
// the e4m3 activations its B operand (8 or 16 tokens): no per-lane loads, no e4m3 -> f16 decode.
// A CTA's tiles stand next to each other inside each K block, so a 64-row window of 4 tiles is
// 8 swizzle atoms 1024 bytes apart (one descriptor): block lb of the CTA at lb * rows * 128,
// row r of it at r * 128 with its 16-byte piece p at p ^ (r & 7) (the TMA's 128-byte swizzle).
// The blocks travel in chunks of chunk_blocks blocks, one tensor copy (box: 128 bytes x the CTA's
// rows x chunk_blocks) and one "full" mbarrier per chunk, every chunk requested at entry.
constexpr int kRingStageAlign = 1024;  // the 128-byte swizzle repeats every 8 rows of 128 bytes
constexpr int kWindowTiles = 4;   // wgmma's 64 rows
constexpr int kMaxWindows = 3;    // up to 12 tiles (192 rows) per CTA (wgmma_max_windows)
constexpr int kMaxWgmmaTokenTiles = 4;  // n8, n16 or n32: M <= 32
constexpr int kWgmmaWarpGroups = 4;  // warpgroups of the CTA, taking K blocks wg, wg + 4, ...
// Windows a CTA may have: each costs the thread 4 x token_tiles accumulator registers, plus as
// many for every block in flight. The co-resident variant (2 warpgroups) stays at 2 (8 tiles).
// The 4-warpgroup kernel has 3, so that a K split of 4 (whose activations fit beside the ring)
// has a CTA's 9-11 tiles of the large shapes (30 clusters of 4 are resident on the H200): at 9-16
// tokens that halves the activations each CTA reads, and from 4-8 tokens the overlapping window's
// reads of the split of 2 cost more than the 12 idle SMs (kWindowReadWeight).
SGL_FP8_HD constexpr int wgmma_max_windows(int token_tiles, int warpgroups) {
  return warpgroups == kWgmmaWarpGroups ? 3 : 2;
}
// Windows an instance is compiled for. Up to 16 tokens a plan of more than 8 tiles a CTA takes an
// instance of its own: the third window's code in the one instance of 16 tokens slowed the plans
// that never use it (cold code in the decode step).
SGL_FP8_HD constexpr int wgmma_instance_windows(int token_tiles, int max_tiles) {
  return token_tiles > 2 || max_tiles > 2 * kWindowTiles ? 3 : 2;
}
// The co-resident variant: 2 warpgroups (256 threads, <= 128 registers) and <= kCoResidentSmem
// bytes of shared memory, so that the next launch's CTA fits on the SM beside this one and
// requests its weight while this one computes; its ring has fewer slots than the CTA has chunks
// and is refilled as chunks are consumed (chunk c in slot c % slots). No config selects it: the
// wgmma plan falls back to it where the 4-warpgroup ring cannot hold a CTA's share (up to 16
// tokens), and to the same instance with the whole shared memory (one CTA per SM) where even its
// ring leaves the activations no room (12288x4096 at M = 16): WgmmaVariant in sm90_gemm_plan.h.
constexpr int kCoResidentWarpGroups = 2;
constexpr int64_t kCoResidentSmem = 113 * 1024;  // 228 KB per SM, 1 KB reserved per CTA
// Paired activations (4-warpgroup wgmma ring kernel, 9-32 tokens, not pre-quantized): clusters of
// k_split x 2 CTAs, whose two row groups of one K slice each quantize half of its tokens and send
// the e4m3 bytes and scales to the other by st.async (counted on its activation mbarrier), so that
// each activation byte is read from L2 by half as many CTAs. GemmConfig.pair_activations asks for
// them wherever they fit (kOn) or leaves them out where the plan would take them by default (kOff).
// The token range [first, first + count) that row-group parity `pair` of a pair quantizes: the
// first half (rounded up) and the rest.
SGL_FP8_HD constexpr int pair_first_token(int pair, int tokens) { return pair ? (tokens + 1) / 2 : 0; }
SGL_FP8_HD constexpr int pair_token_count(int pair, int tokens) {
  return pair ? tokens - (tokens + 1) / 2 : (tokens + 1) / 2;
}
constexpr int kMaxWgBlocks = 4;      // blocks per warpgroup issued in rounds with one wait each (16 per CTA)
constexpr int kChunkTargetBytes = 32 * 1024;  // copies of this size stream near the copy bandwidth

// First tile of window w: windows are 4 tiles wide and never pass the CTA's last tile, so the
// last one may overlap its predecessor and the ones past it repeat it (their rows are computed
// twice and parked once, by the window that owns them: tiles [4w, 4w + 4)). Needs ntiles >= 4.
SGL_FP8_HD int wgmma_window_tile(int w, int ntiles) {
  return kWindowTiles * w < ntiles - kWindowTiles ? kWindowTiles * w : ntiles - kWindowTiles;
}
// Blocks per chunk: about kChunkTargetBytes per copy, at most the CTA's blocks. From 9 tokens (two
// token tiles) a share of three or more blocks takes at least two copies, so that half of it waits
// for the activation loads, as in every larger share (one copy of the whole share queued them
// behind all of it; docs/design/sm90.md).
SGL_FP8_HD int wgmma_chunk_blocks(int max_tiles, int max_blocks, int token_tiles) {
  const int rows_bytes = max_tiles * kTileRows * kBlockK;
  const int most = token_tiles >= 2 && max_blocks >= 3 ? (max_blocks + 1) / 2 : max_blocks;
  const int b = (kChunkTargetBytes + rows_bytes - 1) / rows_bytes;
  return b < 1 ? 1 : (b > most ? most : b);
}
// a / b for small non-negative integers, from b's reciprocal in fp32 (inverse_b = 1.0f / float(b),
// the IEEE division): an integer division by a runtime value is ~20-30 instructions, and the MMA
// loop and the epilogue would run them cold. (a + 0.5) / b lies at
// least 1 / (2b) from an integer, and fp32's relative error here (the reciprocal, then the
// product) is below 2^-23, so the result is exact while (a + 0.5) * 2^-23 < 1/2, i.e. far beyond
// what the kernels divide (below 2^22, the launcher's bounds); tests/sm90_layout_check.cpp tries
// every a < 2^16 for every b < 2^11, and every a < 2^22 for the cluster sizes.
SGL_FP8_HD int small_quotient(int a, float inverse_b) { return int((float(a) + 0.5f) * inverse_b); }
// The e4m3 activations, wgmma's K-major B operand under the 128-byte swizzle: token `token` of
// block lb owns the 128-byte row (lb * token_pad + token), its byte k at piece (k / 16) ^ (token & 7).
SGL_FP8_HD int act_fp8_offset(int lb, int token, int token_pad, int k) {
  return (lb * token_pad + token) * kBlockK + ((((k >> 4) ^ (token & 7))) << 4) + (k & 15);
}
// The prologue's piece p of a lane that holds bytes 8 lg .. + 8 of a 128-group and those
// 8 lanes p further (lg < lanes, lanes a power of 2, lanes x p < 16; quantize_activation_slice):
// byte k = 8 (lg + lanes p) of the same row sits at the lane's first offset XOR 8 lanes p, as the
// swizzle acts on the 16-byte piece index (lg / 2) + (lanes / 2) p, whose bits from lanes / 2 up
// are p's alone. One XOR instead of the offset's index math per piece.
SGL_FP8_HD int act_fp8_piece_offset(int lane_offset, int lanes, int p) { return lane_offset ^ (8 * lanes * p); }
// Where token m's partial sum of tile row `row` (0..15) sits in its row of token_pad floats: in
// the parked partials, the cluster's inbox and the co-resident variant's inbox (every kernel's
// epilogue). The plain order (slot m) put, at 32 tokens, one token of the 16 rows the final read
// takes row-fastest in one bank (16-way conflicts) and the rows g of a warp's parking stores in
// the same banks (8-way); at 16 tokens 8-way and 4-way. The slot m XOR an even per-row constant
// keeps float2 pairs (parking, st.async) and float4 runs (the warps' sum) whole and spreads both
// patterns over all banks (tests/sm90_layout_check.cpp counts them). Pads other than 8, 16 and
// 32 (24: the register kernel's three token tiles) keep the plain order.
SGL_FP8_HD constexpr int partial_token_slot(int row, int m, int token_pad) {
  int x = 0;
  if (token_pad == 8) {
    x = 2 * ((row >> 2) & 3);  // rows r and r + 4k share banks 8 (r % 4) ..: 4 distinct pairs
  } else if (token_pad == 16) {
    const int j = (row >> 1) & 7;  // rows 2j and 2j + 1 fill one 32-bank line
    x = 2 * (((j & 1) << 2) | (j >> 1));
  } else if (token_pad == 32) {
    x = 8 * (row & 3) + 2 * ((row >> 2) & 3);  // a row is a whole bank line
  }
  return m ^ x;
}
// Where weight byte (row, k) of the CTA's block lb sits in the ring (rows = the CTA's rows).
SGL_FP8_HD int64_t wgmma_ring_offset(int lb, int rows, int row, int k) {
  return (int64_t(lb) * rows + row) * kBlockK + ((((k >> 4) ^ (row & 7))) << 4) + (k & 15);
}

// Where the cluster's partial sums arrive: over the activations from 32 tokens on (5120 x 4096:
// the CTA's 11 tiles fit only so, 24 KB of inbox over 32 KB of activations), in a region of their
// own below (the CTA then arrives on the cluster barrier at entry, not after its MMAs, which
// measured faster).
// From 32 tokens the inbox lies over the activations unless the plan finds room for one of its own
// (WgmmaRingSmemLayout's own_inbox): then the async exchange serves 32 tokens too.
SGL_FP8_HD constexpr bool wgmma_inbox_over_activations(int token_tiles) { return token_tiles > 2; }

// The direct exchange (the co-resident variant, K split): each warpgroup stores its partial sums
// straight into its own slot of the inbox of the CTA that finishes the tile (st.async, counted in
// bytes on that CTA's inbox mbarrier), which waits for those bytes: no CTA barrier, no parking of
// the partials, no cluster barrier after the exchange (the same bits as the barrier's; measured
// faster for the co-resident variant). With 4 warpgroups (4x the bytes of one partial per tile,
// the inbox 4x larger) it was not faster: the 4-warpgroup kernel sums its warpgroups first
// (wgmma_async_exchange).
SGL_FP8_HD constexpr bool wgmma_direct_exchange(int warpgroups, bool inbox_over_activations, int k_split) {
  return warpgroups == kCoResidentWarpGroups && !inbox_over_activations && k_split > 1;
}
// The 4-warpgroup kernel's async exchange (K split): the CTA still parks and sums its warpgroups'
// partials, then stores each tile's sum by st.async into the finishing CTA's inbox, counted in
// bytes on that CTA's inbox mbarrier, which it waits for instead of the cluster barrier (whose
// release fence, MEMBAR.ALL.GPU, waited for the DSMEM stores' acknowledgements); measured faster
// at 8-16 tokens and, with an inbox of its own, at 32. Where the inbox lies over the activations
// (32 tokens, no room for one of its own) the cluster barrier after the MMAs stays, as the peers
// may write there only once every CTA has read its activations, and the async exchange replaces
// the second one.
SGL_FP8_HD constexpr bool wgmma_async_exchange(int warpgroups, int k_split) {
  return warpgroups == kWgmmaWarpGroups && k_split > 1;
}
constexpr int kMaxClusterSize = 8;  // portable cluster size limit: the most CTAs a K split has

// Which cluster rank finishes which of a CTA's ntiles tiles in the epilogue: rank r finishes tiles
// [r * ntiles / k_split, (r + 1) * ntiles / k_split), and r holds r * kblocks / k_split .. of the
// K blocks. Found without integer division (small_quotient: k_split <= 8, a CTA's tiles are bounded
// by its shared memory, and the launcher keeps rank x kblocks below 2^22). The owner of tile t is
// the largest r with floor(r * ntiles / k_split) <= t, i.e. r * ntiles <= (t + 1) * k_split - 1.
// The kernels take the reciprocals from the launcher (GemmKernelArgs), computed as here.
struct ExchangeSplit {
  int k_split, ntiles;
  float inverse_k_split, inverse_ntiles;
  SGL_FP8_HD ExchangeSplit(int k_split_, int ntiles_, float inverse_k_split_, float inverse_ntiles_)
      : k_split(k_split_), ntiles(ntiles_), inverse_k_split(inverse_k_split_), inverse_ntiles(inverse_ntiles_) {}
  SGL_FP8_HD ExchangeSplit(int k_split_, int ntiles_)
      : ExchangeSplit(k_split_, ntiles_, 1.0f / float(k_split_), 1.0f / float(ntiles_)) {}
  SGL_FP8_HD int first_tile(int rank) const { return small_quotient(rank * ntiles, inverse_k_split); }
  SGL_FP8_HD int owner(int tile) const { return small_quotient((tile + 1) * k_split - 1, inverse_ntiles); }
  SGL_FP8_HD int first_block(int rank, int kblocks) const { return small_quotient(rank * kblocks, inverse_k_split); }
};
// The direct exchange's inbox slot (of 16 rows x token_pad fp32) for the partials that warpgroup
// wg of cluster rank `rank` computed for the finishing CTA's owned_index-th tile.
SGL_FP8_HD int direct_inbox_slot(int owned_index, int rank, int wg, int k_split, int warpgroups) {
  return (owned_index * k_split + rank) * warpgroups + wg;
}

// [activations e4m3 [block][token][128] | inbox fp32 [owned tile][rank][16][token] from 32 tokens]
// [activation scales fp32 [block][token]][inbox up to 16 tokens: [owned tile][rank]([warpgroup] direct)[16][token]]
// [ring, 1024-aligned: slots x chunk_blocks blocks x max_tiles x 16 rows x 128 | warpgroup partials]
// [a "full" mbarrier per slot (and, refilled, an "empty" one per slot)][the inbox's mbarrier, direct exchange]
// [block scales as loaded [tile][block]]
// A slot per chunk, or (the co-resident variant) fewer, refilled.
// A shared region is the larger of its two users, the second written once the first is read:
//  * the warpgroup partials (fp32 [tile][warpgroup][16][token]) are parked over the ring once
//    every chunk has landed and been read (32 tokens: 80 KB for 10 tiles);
//  * the inbox over the activations is written by the cluster's peers only after the cluster
//    barrier on which every thread arrives after its MMAs (which read the activations).
// The plan computes it once and the kernel reads it from its arguments (GemmKernelArgs): computed
// in the kernel, it was ~180 instructions at every CTA's entry.
struct WgmmaRingSmemLayout {
  int64_t xs_offset = 0, red_offset = 0, inbox_offset = 0, ring_offset = 0, barrier_offset = 0,
          inbox_barrier_offset = 0, scale_offset = 0, total = 0;
  int chunks = 0, slots = 0;  // the CTA's chunks, and the ring's slots (= chunks unless refilled)
  bool direct = false;        // the direct exchange (wgmma_direct_exchange): an inbox slot per warpgroup, and its mbarrier
  bool inbox_barrier = false;  // an mbarrier counts the inbox's bytes (the direct or the async exchange)
  bool inbox_over_activations = false;  // 32 tokens without own_inbox
  bool pair = false;  // paired activations: an mbarrier counts the peer's bytes
  int64_t act_barrier_offset = 0;  // (last, so that the other fields keep their offsets in the kernel arguments)
  WgmmaRingSmemLayout() = default;
  SGL_FP8_HD WgmmaRingSmemLayout(int max_blocks, int token_tiles, int max_tiles, int k_split, int chunk_blocks,
                                 int warpgroups = kWgmmaWarpGroups, int ring_slots = 0, bool own_inbox = false,
                                 bool paired = false) {
    pair = paired;
    const int64_t token_pad = int64_t(token_tiles) * 8;
    const int64_t max_owned = (max_tiles + k_split - 1) / k_split;
    chunks = (max_blocks + chunk_blocks - 1) / chunk_blocks;
    slots = ring_slots > 0 && ring_slots < chunks ? ring_slots : chunks;
    const bool shared = wgmma_inbox_over_activations(token_tiles) && !own_inbox;
    inbox_over_activations = shared;
    direct = wgmma_direct_exchange(warpgroups, shared, k_split);
    inbox_barrier = direct || wgmma_async_exchange(warpgroups, k_split);
    const int64_t act_bytes = int64_t(max_blocks) * token_pad * kBlockK;
    const int64_t inbox_bytes = max_owned * k_split * (direct ? warpgroups : 1) * kTileRows * token_pad * 4;
    xs_offset = shared && inbox_bytes > act_bytes ? inbox_bytes : act_bytes;
    const int64_t xs_end = xs_offset + int64_t(max_blocks) * token_pad * 4;
    inbox_offset = shared ? 0 : xs_end;
    const int64_t low_end = shared ? xs_end : xs_end + inbox_bytes;
    ring_offset = (low_end + kRingStageAlign - 1) / kRingStageAlign * kRingStageAlign;
    red_offset = ring_offset;
    const int64_t ring_bytes = int64_t(slots) * chunk_blocks * max_tiles * kTileRows * kBlockK;
    const int64_t red_bytes = int64_t(max_tiles) * warpgroups * kTileRows * token_pad * 4;
    barrier_offset = ring_offset + (ring_bytes > red_bytes ? ring_bytes : red_bytes);
    // a "full" mbarrier per slot, then (refilled rings) an "empty" one per slot
    inbox_barrier_offset = barrier_offset + int64_t(slots) * 8 * (slots < chunks ? 2 : 1);
    act_barrier_offset = inbox_barrier_offset + (inbox_barrier ? 8 : 0);
    scale_offset = act_barrier_offset + (pair ? 8 : 0);
    total = scale_offset + int64_t(max_tiles) * max_blocks * 4;
  }
};

}  // namespace sgl_fp8::sm90
