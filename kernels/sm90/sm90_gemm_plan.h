// Launch plans of the sm_90 block-scaled GEMM and the one function that chooses among them
// (choose_gemm, at the end): which engine serves (N, K, M) and how it is split over clusters, CTAs
// and warps. Plain C++ (no CUDA types) so the host compiler and CPU tests can check it.
//
// The kernels are weight-streaming bound, so every plan balances weight bytes per SM first
// (described here for the general kernel; the others' planners say what differs):
//   * one 8-warp CTA per SM, with registers (<= 128 per thread) and shared memory small enough
//     for a CTA of the next kernel to start streaming beside it (programmatic dependent launch);
//   * row tiles (16 rows) are spread over `row_groups` clusters, K blocks (128) over the
//     `k_split` CTAs of a cluster, and inside a CTA over warps_k x warps_t warps. A warp streams
//     its units independently (no barrier in the main loop), so a CTA is as slow as its busiest
//     warp: ceil(tiles / warps_t) x ceil(blocks / warps_k) units of 2 KB;
//   * every CTA also reads and quantizes its K slice of the activations (tokens x K/S x 2 B,
//     from L2), which favours a larger k_split as M grows; a cluster costs a barrier and a
//     distributed-shared-memory exchange.
// docs/design/sm90.md records the H200 measurements behind the constants.
#pragma once

#include <stdint.h>

#include <initializer_list>

#include "../common/gpu_launch.h"
#include "sm90_gemm_layout.h"

namespace sgl_fp8::sm90 {

struct GemmPlan {
  GemmEngine engine = GemmEngine::kAuto;  // the engine that runs it (kAuto: nothing fits)
  int k_split = 1;     // CTAs per cluster, each owning a K slice (grid.x)
  int row_groups = 1;  // clusters along N (grid.y)
  int warps_k = 8, warps_t = 1;
  int token_tiles = 1;  // 8-token MMA tiles per launch chunk (1..4)
  int chunks = 1;       // chunks of token_tiles x 8 tokens (grid.z), each re-streaming the weight
  int max_tiles_per_cta = 1, max_blocks_per_cta = 1;
  int smem_stages = 0;  // general kernel: weight units per thread staged in shared memory (cp.async),
                        // beyond registers
  bool co_resident = false;  // wgmma ring kernel: its 2-warpgroup instance (WgmmaVariant kCoResident or kWholeSmem)
  int chunk_blocks = 0;  // wgmma ring kernel: K blocks per tensor copy
  int early_chunks = 0;  // wgmma ring kernel: copies requested before the activations are read
  int ring_slots = 0;    // wgmma ring kernel: ring slots (= its chunks, or fewer: refilled)
  bool pair = false;     // wgmma ring kernel: paired activations (clusters of k_split x 2)
  WgmmaRingSmemLayout wgmma_layout;  // wgmma ring kernel: its shared memory (smem_bytes = .total)
  int64_t smem_bytes = 0;
  double cost = -1;  // the model's estimate in bytes-equivalent per SM; < 0: nothing fits
  const char* error = nullptr;  // choose_gemm, where nothing fits: why (a static string)
};

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The partition every plan records for its best candidate: clusters of k_split CTAs over
// row_groups, warps (or warpgroups) per CTA, and the most tiles and K blocks a CTA owns.
inline void set_partition(GemmPlan& plan, int k_split, int64_t row_groups, int warps_k, int warps_t, int64_t tiles,
                          int64_t blocks) {
  plan.k_split = k_split;
  plan.row_groups = int(row_groups);
  plan.warps_k = warps_k;
  plan.warps_t = warps_t;
  plan.max_tiles_per_cta = int(tiles);
  plan.max_blocks_per_cta = int(blocks);
}

constexpr int kWarpsPerCta = 8;
constexpr int kGeneralThreads = kWarpsPerCta * 32;  // the general kernel's CTA (kGemmThreads)
// Activation groups (token x 128-K block) a CTA quantizes per L2 round trip: 16 half-warps x 8
// loads in flight each (kActivationBatch in the kernel).
constexpr int kGroupsPerRoundTrip = 128;
// Cost-model weights, in bytes-equivalent of weight streamed per SM, fitted to an H200 sweep of
// k_split x M (docs/design/sm90.md): an activation byte costs twice a weight byte (its loads sit
// in the exposed prologue), each further round trip of the prologue about a microsecond, clusters beyond 2 CTAs
// measurably slow start-up and the exchange, and a CTA whose shared memory leaves no room for
// the next kernel's CTA gives up the launch overlap.
constexpr double kActivationByteWeight = 2.0;
constexpr double kRoundTripCost = 40 * 1024;
constexpr double kClusterCost[kMaxClusterSize + 1] = {0, 0, 0, 32 * 1024, 48 * 1024, 64 * 1024,
                                                      64 * 1024, 64 * 1024, 64 * 1024};
constexpr double kNoOverlapCost = 24 * 1024;
// wgmma ring kernel, 1-16 tokens: each tile a CTA's windows read beyond its own (the last window
// overlapping its predecessor, or past a CTA of 5 tiles) costs 0.6 of a streamed tile (the MMAs'
// cost follows their shared-memory reads), and a cluster of 3 costs more than one of 4
// (kWgmmaClusterCost; the other kernels keep kClusterCost, fitted for them). Fitted to an H200
// sweep of K splits 2 / 3 / 4 on the large shapes at 1-16 tokens, after a copy kernel and back to
// back (docs/design/sm90.md): the split of 3 was measured no faster than 2 and 4 on them.
// tests/sm90_layout_check.cpp pins the default plans this gives.
constexpr double kWindowReadWeight = 0.6;
// wgmma ring kernel, K split more than 4 ways: a CTA's K slice shorter than 8 blocks costs 8 KB
// for each block it lacks (its 4 warpgroups get 1-2 blocks each). Fitted to an H200 sweep of
// splits 2 / 4 / 6 / 8: on 1536x4096 and 1024x4096 the split of 4 (4 tiles, 8 blocks) beat 6 and
// 8 (4-6 blocks) at 1-32 tokens, on 2560x4096 from 17 tokens. It leaves 2560x4096 at 9-12 tokens
// on the split of 4, slightly slower there than 8 (docs/design/sm90.md).
constexpr int kShortSliceBlocks = 8;
constexpr double kShortSliceBlockCost = 8 * 1024;
constexpr double kWgmmaClusterCost[kMaxClusterSize + 1] = {0, 0, 0, 80 * 1024, 48 * 1024, 64 * 1024,
                                                           64 * 1024, 64 * 1024, 64 * 1024};
// wgmma ring kernel, 17-32 tokens (the n32 instance): an activation byte costs 3 weight bytes (2
// up to 16 tokens), the windows' extra reads 0.3 of a streamed tile (0.6), a short K slice twice
// as much as up to 16 tokens, and the cluster's cost counts twice only where the candidate's inbox
// must lie over its activations (its exchange then waits on a cluster barrier after the MMAs).
// Fitted to an H200 sweep of splits 2 / 4 / 8 at 17-32 tokens on 10 shapes (docs/design/sm90.md):
// charging every candidate its cluster twice and no window reads made the large shapes take the
// split of 2, each CTA quantizing up to 28 tokens x 2048 K, measured slower than 4. Known misses:
// 2560x4096 at 17-20 tokens (takes 4, 8 is faster). (1024x4096 at 20 took 8 where 4 is faster; the
// paired split of 4 now replaces it: plan_wgmma_ring_gemm.)
// wgmma ring kernel, no K split by default (plan_wgmma_ring_gemm): K blocks a CTA at most,
// and the least share of the SMs its row groups must cover.
constexpr int kNoSplitMaxBlocks = 8;
constexpr double kNoSplitMinSmFraction = 0.3;
// From 9 tokens the split-free partition with paired activations, where its CTAs hold one window
// over at most kNoSplitMaxBlocks blocks and cover at least this share of the SMs: with fewer (64 or
// 48 CTAs) the split of 2, whose grid has twice the CTAs, was measured as fast or faster after a
// copy kernel.
constexpr double kPairedNoSplitMinSmFraction = 0.7;
// Up to 16 tokens, CTAs covering at least kPairedNoSplitMinSmFraction of the SMs go without a K
// split (paired from 9 tokens) over up to this many K blocks.
constexpr int kWideNoSplitMaxBlocks = 16;
constexpr double kActivationByteWeight32 = 3.0;
constexpr double kWindowReadWeight32 = 0.3;
constexpr double kShortSliceBlockCost32 = 2 * kShortSliceBlockCost;
constexpr int64_t kSmemBudget = 110 * 1024;
constexpr int kDefaultStages = 1;  // two CTAs per SM (228 KB, 1 KB reserved each)
constexpr int64_t kMaxGridRows = 65535;  // grid.y: the row groups of one launch

inline int token_tiles_for(int64_t M) { return M >= 32 ? 4 : int(ceil_div(M < 1 ? 1 : M, 8)); }

// max_clusters(S, smem): clusters of S CTAs with smem bytes each that can be resident at once
// (cudaOccupancyMaxActiveClusters); return a large number for "no limit".
//
// Every plan tries first to keep its grid to one resident wave (the wgmma kernel's kWaves variant: a
// max_clusters that counts several; the general plan leaves it where nothing fits one wave):
// `groups` clusters of S CTAs over T row tiles, shrunk to the clusters that
// fit at once, and `tiles` = the most tiles a CTA then owns. False where nothing fits
// (`fits(tiles)`: the plan's own limits, shared memory among them).
template <typename Fits, typename SmemFor, typename MaxClusters>
bool fit_one_wave(int64_t T, int S, int64_t& groups, int64_t& tiles, Fits&& fits, SmemFor&& smem_for,
                  MaxClusters&& max_clusters) {
  tiles = ceil_div(T, groups);
  if (!fits(tiles)) return false;
  const int64_t resident = max_clusters(S, smem_for(tiles));
  if (groups > resident) {
    groups = resident;
    if (groups < 1) return false;
    tiles = ceil_div(T, groups);
    if (!fits(tiles)) return false;
  }
  return true;
}

// The general kernel's partitions for chunks of `token_tiles` x 8 tokens: one resident wave
// (fit_one_wave); with `several_waves`, where one wave cannot hold a candidate's tiles in shared
// memory, as many row groups as the tiles a CTA can hold need, over several waves (no CTA waits on
// another cluster, so an SM runs a later wave's CTA as an earlier one ends); the cost counts the
// waves the busiest SM runs. plan_general_gemm asks for several waves only where no candidate
// fits one.
template <typename MaxClusters>
GemmPlan plan_general_partition(int64_t N, int64_t K, int64_t M, int token_tiles, bool several_waves, int num_sms,
                                int64_t max_smem, const GemmConfig& config, MaxClusters&& max_clusters) {
  const int64_t T = N / 16, KB = K / 128;
  const int64_t chunk_tokens = int64_t(token_tiles) * kTokensPerTile;
  const int64_t tokens = M >= chunk_tokens ? chunk_tokens : (M < 1 ? 1 : M);
  const int64_t slots = int64_t(num_sms) * (config.ctas_per_sm > 0 ? config.ctas_per_sm : 1);
  auto clusters = [&](int S, int64_t smem) -> int64_t { return max_clusters(token_tiles, S, smem); };
  GemmPlan best;
  for (int S = 1; S <= kMaxClusterSize; ++S) {
    if (config.k_split && S != config.k_split) continue;
    if (S > KB) break;
    const int64_t blocks = ceil_div(KB, S);
    int64_t groups = slots / S;
    if (groups > T) groups = T;
    if (groups < 1) continue;
    for (int wk : {8, 4, 2, 1}) {
      const int wt = kWarpsPerCta / wk;
      int64_t g = groups, tiles = 0, waves = 1;
      auto smem_for = [&](int64_t t) { return GemmSmemLayout(int(blocks), token_tiles, int(t), wk, S).total; };
      auto fits = [&](int64_t t) { return smem_for(t) <= max_smem; };
      if (!fit_one_wave(T, S, g, tiles, fits, smem_for, clusters)) {
        if (!several_waves || !fits(1)) continue;
        int64_t most = 1, over = ceil_div(T, groups) + 1;  // fits(most), !fits(over) or past every need
        while (over - most > 1) {
          const int64_t mid = (most + over) / 2;
          (fits(mid) ? most : over) = mid;
        }
        g = ceil_div(T, most);
        if (g > kMaxGridRows) continue;
        tiles = ceil_div(T, g);
        const int64_t resident = clusters(S, smem_for(tiles));
        if (resident < 1) continue;
        waves = ceil_div(g, resident);
      }
      const int64_t smem = smem_for(tiles);
      const int64_t warp_units = ceil_div(tiles, wt) * ceil_div(blocks, wk);
      const int64_t round_trips = ceil_div(tokens * blocks, kGroupsPerRoundTrip);
      const double cost = double(waves) * (double(warp_units) * kWarpsPerCta * 2048 +
                                           kActivationByteWeight * double(tokens) * double(blocks) * 256 +
                                           kRoundTripCost * double(round_trips - 1)) +
                          kClusterCost[S] + (smem > kSmemBudget ? kNoOverlapCost : 0);
      if (best.cost < 0 || cost < best.cost) {
        set_partition(best, S, g, wk, wt, tiles, blocks);
        best.smem_bytes = smem;
        best.cost = cost;
      }
    }
  }
  best.token_tiles = token_tiles;
  best.chunks = int(ceil_div(M < 1 ? 1 : M, chunk_tokens));
  return best;
}

// The general kernel's plan: one resident wave of chunks of up to 32 tokens where it fits; else
// several waves (weights of ~100 MB and more from 17 tokens); else, where even one tile a CTA
// leaves the chunk's activations no room (K above ~25600 at 32 tokens), chunks of fewer token
// tiles, each re-streaming the weight. So every shape with K < ~100000 has a plan.
// max_clusters(token_tiles, S, smem): clusters of S CTAs of that instance that fit at once.
template <typename MaxClusters>
GemmPlan plan_general_gemm(int64_t N, int64_t K, int64_t M, int num_sms, int64_t max_smem,
                                const GemmConfig& config, MaxClusters&& max_clusters) {
  GemmPlan best;
  for (int token_tiles = token_tiles_for(M); token_tiles >= 1 && best.cost < 0; --token_tiles)
    for (bool several_waves : {false, true}) {
      best = plan_general_partition(N, K, M, token_tiles, several_waves, num_sms, max_smem, config, max_clusters);
      if (best.cost >= 0) break;
    }
  if (best.cost < 0) return best;
  // Weight staging stages in the shared memory left under the two-CTAs-per-SM budget: more
  // bytes in flight per SM, and more of the next launch's weight requested before it waits for
  // this one. One stage was measured faster than none, two or three slower, so one is the
  // default (docs/design/sm90.md); config.staging_stages
  // (up to kMaxStages) overrides it. Instances of more than kMaxStagedTokenTiles token tiles are
  // compiled without staging.
  if (best.token_tiles <= kMaxStagedTokenTiles) {
    const int64_t base = best.smem_bytes;
    int stages = base <= kSmemBudget ? int((kSmemBudget - base) / kStageBytes) : 0;
    const int cap = config.staging_stages > 0
                        ? (config.staging_stages < kMaxStages ? config.staging_stages : kMaxStages)
                        : kDefaultStages;
    if (stages > cap) stages = cap;
    while (stages > 0 && base + int64_t(stages) * kStageBytes > max_smem) --stages;
    best.smem_stages = stages;
    best.smem_bytes = base + int64_t(stages) * kStageBytes;
  }
  best.engine = GemmEngine::kGeneral;
  return best;
}

// wgmma ring kernel (M <= 32, plain weights): one CTA of 4 warpgroups per SM, clusters of up to 8
// CTAs splitting K. Its MMAs take 64-row windows of the CTA's tiles, so every CTA needs >= 4
// tiles (row_groups <= T / 4) and at most wgmma_max_windows windows; all of the CTA's weight is
// requested at entry (every chunk has its own slot). The cost is the weight
// bytes of the busiest CTA (its MMAs hide behind the stream), the activation bytes it quantizes
// and the cluster's cost. Returns cost < 0 where it does not apply.
// Token tiles of the wgmma instances: n8, n16 or n32 (17-24 tokens take n32, padded).
inline int wgmma_token_tiles(int64_t M) {
  const int t = token_tiles_for(M);
  return t > 2 ? kMaxWgmmaTokenTiles : t;
}

// The variants of the wgmma ring kernel, tried in this order (choose_gemm): the 4-warpgroup kernel,
// one CTA per SM, whose ring holds the CTA's whole share, in one resident wave; where it cannot
// (shares of 6144x4096 and larger), up to 16 tokens the co-resident variant: 2 warpgroups, at most
// kCoResidentSmem bytes, so that two CTAs share an SM, chunks of one block per warpgroup, as many
// ring slots as fit (>= 2; where the whole share fits, one per chunk) and every one of them
// requested at entry, every CTA's K blocks a multiple of 2 (the refilled ring's block order); where
// even that ring leaves the activations no room (12288x4096 at 16 tokens), the same instance with
// the whole shared memory (one CTA per SM); and last (from 17 tokens, where the 2-warpgroup
// variants leave the activations no room) the 4-warpgroup kernel over a grid of 2 to kMaxWaves
// resident waves, the fewest whose CTAs' shares fit: an SM runs the CTAs of later waves as earlier
// ones end (no CTA waits on another cluster). Measured faster than the general kernel from 17
// tokens and slower than the co-resident variant up to 16, which keeps those (docs/design/sm90.md).
// No config selects a variant: each is the plan's answer to the share's size.
enum class WgmmaVariant { kFourWarpgroups, kCoResident, kWholeSmem, kWaves };
// The variants that run the 2-warpgroup instance (kCoResidentWarpGroups), up to 16 tokens.
constexpr bool two_warpgroup_variant(WgmmaVariant v) {
  return v == WgmmaVariant::kCoResident || v == WgmmaVariant::kWholeSmem;
}
constexpr int kMaxWaves = 8;

template <typename MaxClusters>
GemmPlan plan_wgmma_ring_gemm(int64_t N, int64_t K, int64_t M, bool shuffled, int num_sms, int64_t max_smem,
                              const GemmConfig& config, MaxClusters&& max_clusters,
                              WgmmaVariant variant = WgmmaVariant::kFourWarpgroups, int waves = 1) {
  GemmPlan best;
  if (shuffled || M > kMaxWgmmaTokenTiles * 8) return best;
  const int token_tiles = wgmma_token_tiles(M);
  const bool co_resident = two_warpgroup_variant(variant);
  if (co_resident && token_tiles > 2) return best;  // 32 tokens: the activations leave no room
  if ((variant == WgmmaVariant::kWaves) != (waves > 1)) return best;  // several waves: that variant only
  const int warpgroups = co_resident ? kCoResidentWarpGroups : kWgmmaWarpGroups;
  // Paired activations: two row groups of a K slice share their quantized activations, so their
  // clusters hold k_split x 2 CTAs; `resident_groups` counts row groups of k_split CTAs that fit.
  const bool pair = config.pair_activations == Toggle::kOn && !co_resident && token_tiles >= 2;
  auto wave_groups = [&](int s, int64_t smem) -> int64_t {  // in one resident wave
    return pair ? 2 * int64_t(max_clusters(2 * s, smem)) : int64_t(max_clusters(s, smem));
  };
  auto resident_groups = [&](int s, int64_t smem) -> int64_t { return waves * wave_groups(s, smem); };
  const bool whole_smem = variant == WgmmaVariant::kWholeSmem;
  const int64_t smem_cap = co_resident && !whole_smem && kCoResidentSmem < max_smem ? kCoResidentSmem : max_smem;
  const int max_tiles = kWindowTiles * wgmma_max_windows(token_tiles, warpgroups);
  const int64_t T = N / 16, KB = K / 128;
  const int64_t tokens = M < 1 ? 1 : M;
  for (int S = 1; S <= kMaxClusterSize; ++S) {
    if (config.k_split && S != config.k_split) continue;
    if (S > KB) break;
    if (co_resident && (KB % S != 0 || (KB / S) % warpgroups != 0)) continue;
    if (pair && 2 * S > kMaxClusterSize) continue;
    const int64_t blocks = ceil_div(KB, S);
    int64_t groups = int64_t(waves) * num_sms / S;
    if (groups > T / kWindowTiles) groups = T / kWindowTiles;
    if (pair) groups &= ~int64_t(1);  // row groups in pairs
    if (groups < 1) continue;
    auto chunk_for = [&](int64_t tiles) {
      if (co_resident) return warpgroups;
      return config.copy_blocks > 0 ? (config.copy_blocks < blocks ? config.copy_blocks : int(blocks))
                                    : wgmma_chunk_blocks(int(tiles), int(blocks), token_tiles);
    };
    auto layout_for = [&](int64_t tiles, int slots) {
      return WgmmaRingSmemLayout(int(blocks), token_tiles, int(tiles), S, chunk_for(tiles), warpgroups, slots, false,
                                 pair);
    };
    // Ring slots: one per chunk, or (co-resident) as many as fit under the cap, 0 if not 2.
    auto slots_for = [&](int64_t tiles) {
      const int chunks = layout_for(tiles, 0).chunks;
      if (!co_resident) return chunks;
      for (int slots = chunks; slots >= 2 || slots == chunks; --slots)
        if (layout_for(tiles, slots).total <= smem_cap) return slots;
      return 0;
    };
    auto smem_for = [&](int64_t tiles) { return layout_for(tiles, slots_for(tiles)).total; };
    int64_t tiles = 0;
    auto fits = [&](int64_t t) { return t <= max_tiles && slots_for(t) > 0 && smem_for(t) <= smem_cap; };
    if (!fit_one_wave(T, S, groups, tiles, fits, smem_for, resident_groups)) continue;
    if (pair && (groups & 1)) {  // a resident wave of an odd count of row groups: one fewer
      if (--groups < 2) continue;
      tiles = ceil_div(T, groups);
      if (!fits(tiles)) continue;
    }
    // From 17 tokens a CTA's partial sums are 4x those of 8 tokens, and where its inbox lies over
    // its activations (no room for one of its own, below) the cluster waits for its slowest CTA's
    // MMAs before exchanging them (about twice as long as at one token). The cluster's cost counts
    // twice there.
    const bool n32 = wgmma_inbox_over_activations(token_tiles);
    // 17-32 tokens with a K split: an inbox of its own where the partition still fits with it, in
    // shared memory and in one resident wave (its async exchange, wgmma_async_exchange, needs no
    // cluster barrier after the MMAs). On the H200 5120x4096 M = 32's partition (30 clusters of 4,
    // 11 tiles) does not fit with it in shared memory; giving every 32-token plan an inbox of its
    // own moved that plan and was measured much slower.
    WgmmaRingSmemLayout own;
    bool own_fits = false;
    if (n32 && S > 1) {
      own = WgmmaRingSmemLayout(int(blocks), token_tiles, int(tiles), S, chunk_for(tiles), warpgroups, slots_for(tiles),
                                /*own_inbox=*/true, pair);
      own_fits = own.total <= smem_cap && resident_groups(S, own.total) >= groups;
    }
    const bool over_activations = n32 && S > 1 && !own_fits;
    const double cluster_cost = kWgmmaClusterCost[S] * (over_activations ? 2 : 1);
    const int64_t read_tiles = ceil_div(tiles, kWindowTiles) * kWindowTiles;  // what the windows read
    const double window_cost =
        (n32 ? kWindowReadWeight32 : kWindowReadWeight) * double(read_tiles - tiles) * double(blocks) * 2048;
    const double short_slice_cost =
        S > 4 && blocks < kShortSliceBlocks
            ? (n32 ? kShortSliceBlockCost32 : kShortSliceBlockCost) * double(kShortSliceBlocks - blocks)
            : 0;
    // Several waves: an SM runs its CTAs one after another, so the busiest SM's cost is a CTA's
    // times the waves the grid takes.
    const int64_t per_wave = wave_groups(S, smem_for(tiles));
    const int64_t used_waves = waves > 1 && per_wave > 0 ? ceil_div(groups, per_wave) : 1;
    const double cost = double(used_waves) * (double(tiles) * double(blocks) * 2048 + window_cost +
                                              (n32 ? kActivationByteWeight32 : kActivationByteWeight) *
                                                  (pair ? 0.5 : 1.0) * double(tokens) * double(blocks) * 256 +
                                              cluster_cost + short_slice_cost);
    if (best.cost < 0 || cost < best.cost) {
      set_partition(best, S, groups, warpgroups, 1, tiles, blocks);
      best.chunk_blocks = chunk_for(tiles);
      best.ring_slots = slots_for(tiles);
      // Half the copies at entry, the rest once the activation loads are issued: they queue behind
      // the weight copies the whole grid has requested, not only the CTA's own (half was measured
      // faster than all or a quarter). Co-resident: every slot's copy at entry, as the CTA then
      // waits a whole launch for the previous one to end.
      const int first_copies = co_resident ? best.ring_slots : (best.ring_slots + 1) / 2;
      best.early_chunks = config.early_copies > 0 ? config.early_copies : first_copies;
      best.smem_stages = 0;
      best.wgmma_layout = own_fits ? own : layout_for(tiles, best.ring_slots);
      best.pair = pair;
      best.smem_bytes = best.wgmma_layout.total;
      best.cost = cost;
    }
  }
  if (best.cost >= 0) {
    best.engine = GemmEngine::kWgmma;
    best.co_resident = co_resident;
  }
  best.token_tiles = token_tiles;
  best.chunks = 1;
  // No K split by default where a CTA of one window (4 tiles) holds a whole K row of at most
  // kNoSplitMaxBlocks blocks (64 KB) and those CTAs cover enough of the SMs: no cluster, no
  // partial-sum exchange. The cost above weighs the busiest CTA's bytes and so prefers the split
  // of 2, whose CTAs hold half as much (docs/design/sm90.md).
  //  * Up to 8 tokens, from kNoSplitMinSmFraction of the SMs: measured faster than the split of 2
  //    on 8192x1024, 6144x1024, 4096x1024 and 3072x1024 at 1-8 tokens; slower where its CTAs were
  //    fewer (32) or held more of K (1536 and up). The bound lies between 32 and 48 CTAs of 132
  //    (nothing between was measured).
  //  * From 9 tokens (where each CTA quantizing every token of its K row was slower) with paired
  //    activations: clusters of the two row groups, each CTA quantizing half of the tokens, from
  //    kPairedNoSplitMinSmFraction of the SMs. Measured faster than the split of 2 at 9-32 tokens,
  //    after a copy kernel and back to back, on 8192x1024, 7168x1024, 6144x1024 and 8192x512
  //    (96-128 CTAs); with 64 CTAs or fewer as fast or slower after a copy kernel (4096x1024,
  //    4096x512, 3072x1024, 2560x1024, 2048x1024).
  //  * Up to 16 tokens (paired from 9), one wave of CTAs covering kPairedNoSplitMinSmFraction of
  //    the SMs, over up to kWideNoSplitMaxBlocks blocks: measured faster than the split of 2 on an
  //    H100 on 6144-8192 x 1536-2048 (96-128 CTAs); over 18 or 24 blocks (7168x2304, 7168x3072)
  //    level or slower, and from 17 tokens slower on K = 2048 (the paired split of 2, below, is
  //    faster there).
  const bool paired_whole_k = token_tiles >= 2;
  if (best.engine == GemmEngine::kWgmma && !co_resident && config.k_split == 0 && best.k_split > 1 &&
      (!paired_whole_k || config.pair_activations != Toggle::kOff)) {
    GemmConfig whole_k = config;
    whole_k.k_split = 1;
    if (paired_whole_k) whole_k.pair_activations = Toggle::kOn;
    const GemmPlan whole =
        plan_wgmma_ring_gemm(N, K, M, shuffled, num_sms, max_smem, whole_k, max_clusters, variant, waves);
    const double min_sm_fraction = paired_whole_k ? kPairedNoSplitMinSmFraction : kNoSplitMinSmFraction;
    const bool wide = waves == 1 && token_tiles <= 2 && whole.max_blocks_per_cta <= kWideNoSplitMaxBlocks &&
                      double(whole.row_groups) >= kPairedNoSplitMinSmFraction * num_sms;
    if (whole.engine == GemmEngine::kWgmma && whole.max_tiles_per_cta == kWindowTiles &&
        ((whole.max_blocks_per_cta <= kNoSplitMaxBlocks && double(whole.row_groups) >= min_sm_fraction * num_sms) ||
         wide))
      return whole;
  }
  // Paired activations by default from 9 tokens (the same bits): where the plan took a K split of 4
  // and the pairs (clusters of 8) fit with at most 1.25x its tiles a CTA, measured faster at 9-32
  // tokens on the large shapes; on the H200 the pairs keep the partition (clusters of 8 and of 4
  // both hold 30 row groups). And in place of a split of 8 where the paired split of 4 has CTAs of
  // one window: measured faster on 1536x4096 at 25-32 tokens and 1024x4096 at 24-32; where its
  // CTAs had more tiles (2560x4096, 2048x4096, 2112x7168, 2048x7168) the split of 8 was level or
  // faster (docs/design/sm90.md). From 17 tokens also the paired split of 2 (clusters of 4) in place
  // of the unpaired one where its CTAs have more than one window and the pairs fit one wave with at
  // most 1.25x their tiles: measured faster on an H100 on 6144-8192 x 1536-2304 (2-12 % after a
  // copy kernel); not where the CTAs are one window (4096x2048, 4096x1024: the pairs' 5 tiles
  // against 4 were slower).
  const bool replace_split8 = best.k_split == 8 && config.k_split == 0;
  const bool pair_split4 = (best.k_split == 4 || replace_split8) && token_tiles >= 2;
  const bool pair_split2 =
      waves == 1 && best.k_split == 2 && token_tiles > 2 && best.max_tiles_per_cta > kWindowTiles;
  if (best.engine == GemmEngine::kWgmma && (pair_split4 || pair_split2) && !pair && !co_resident &&
      config.pair_activations != Toggle::kOff) {
    GemmConfig paired_config = config;
    paired_config.k_split = pair_split4 ? 4 : 2;
    paired_config.pair_activations = Toggle::kOn;
    const GemmPlan paired =
        plan_wgmma_ring_gemm(N, K, M, shuffled, num_sms, max_smem, paired_config, max_clusters, variant, waves);
    if (paired.engine == GemmEngine::kWgmma &&
        (replace_split8 ? paired.max_tiles_per_cta == kWindowTiles
                        : 4 * paired.max_tiles_per_cta <= 5 * best.max_tiles_per_cta))
      return paired;
  }
  return best;
}

// ---- the register-fed kernel (sm90_register_fed_gemm.cuh) ------------------------------------
// Only where a config asks for it (engine GemmEngine::kRegisterFed; the shipped H200 table does at some
// 1-2-token points): after a copy kernel, as in a decode step, it is slower than the kernels' own plans on the large Qwen
// shapes (docs/design/sm90.md), so no plan takes it by default.
constexpr int kRegisterFedThreads = kRegisterFedWarps * 32;

// Whether the kernel can run (N, K, M): plain weights, K a multiple of 1024 up to 8192, at most 16
// tokens, its shared memory within the device's (one 16-row tile a CTA along grid.x).
// (Not shuffled weights: with the shuffled layout's strides as runtime values ptxas held every
// weight address in registers and spilled.)
inline bool register_fed_applies(int64_t N, int64_t K, int64_t M, bool shuffled, int64_t max_smem) {
  const int64_t kb_per_warp = K / (kRegisterFedWarps * kBlockK);
  return !shuffled && K % (kRegisterFedWarps * kBlockK) == 0 && kb_per_warp >= 1 && kb_per_warp <= kRegisterFedBlocksPerWarpMax &&
         M >= 1 && M <= kRegisterFedMaxTokenTiles * 8 && N % kTileRows == 0 && N / kTileRows >= 1 &&
         N / kTileRows < (int64_t(1) << 31) && register_fed_smem_bytes(int(M), K, token_tiles_for(M)) <= max_smem;
}

// Its plan: N / 16 CTAs (row_groups; launched along grid.x), no cluster; cost < 0 where it does not apply.
inline GemmPlan plan_register_fed_gemm(int64_t N, int64_t K, int64_t M, bool shuffled, int64_t max_smem) {
  GemmPlan plan;
  if (!register_fed_applies(N, K, M, shuffled, max_smem)) return plan;
  set_partition(plan, 1, N / kTileRows, kRegisterFedWarps, 1, 1, K / kBlockK);
  plan.token_tiles = token_tiles_for(M);
  plan.engine = GemmEngine::kRegisterFed;
  plan.smem_bytes = register_fed_smem_bytes(int(M), K, plan.token_tiles);
  plan.cost = 0;
  return plan;
}

// ---- the choice ------------------------------------------------------------------------------
// The wgmma ring kernel's index math is 32-bit: row groups x tiles below 2^32 (row groups <= SMs),
// K blocks x k_split below 2^22.
inline bool wgmma_index_range(int64_t N, int64_t K, int num_sms) {
  return N / kTileRows * num_sms < (int64_t(1) << 32) && K < (int64_t(1) << 26);
}

constexpr const char* kRegisterFedPlanError =
    "no sm_90 GEMM plan fits: engine register_fed needs bf16/fp16 input, plain weights, K a multiple of 1024 up to "
    "8192, M <= 16 and N a multiple of 16";
constexpr const char* kWgmmaPlanError =
    "no sm_90 GEMM plan fits: engine wgmma needs plain weights, M <= 32, a partition that fits (config too "
    "restrictive?) and a weight the driver can map";
constexpr const char* kGeneralPlanError =
    "no sm_90 GEMM plan fits this shape in shared memory (config too restrictive?)";

// Which engine serves (N, K, M) and its plan: the only place that decides it. Pure, so that the
// CPU tests read its answer for every shape (tests/sm90_layout_check.cpp, --table).
//  1. engine kRegisterFed: its plan where it applies (bf16/fp16 input, plain weights, K % 1024 == 0,
//     K <= 8192, M <= 16), else an error;
//  2. engine kAuto or kWgmma: the wgmma ring kernel for M <= 32, plain weights and its index range,
//     trying the 4-warpgroup plan, then (up to 16 tokens) the co-resident and the
//     whole-shared-memory variants, then the 4-warpgroup kernel over several waves (WgmmaVariant);
//     a plan that fits also needs maps_ok (the driver encodes its tensor maps). Paired activations
//     never with pre-quantized input. Engine kWgmma where none of this holds: an error, not another
//     engine;
//  3. else (engine kAuto or kGeneral) the general kernel: shuffled weights, M > 32, shares the wgmma
//     plans cannot hold, maps the driver declines; an error where even its plan does not fit.
// max_clusters(engine, token_tiles, cluster, threads, smem): clusters of `cluster` CTAs of
// `threads` threads and `smem` bytes of the engine's instance for `token_tiles` that can be
// resident at once (the launcher asks cudaOccupancyMaxActiveClusters; a test, h200_residency.h).
// maps_ok(rows, chunk_blocks): whether the wgmma plan's two tensor maps (boxes of `rows` and
// rows - 16 rows over chunk_blocks K blocks) encode (the launcher encodes them there).
// A plan with cost < 0 carries `error`.
template <typename Residency, typename MapsOk>
GemmPlan choose_gemm(int64_t N, int64_t K, int64_t M, bool shuffled, bool prequant, int num_sms, int64_t max_smem,
                     const GemmConfig& c, Residency&& max_clusters, MapsOk&& maps_ok) {
  if (c.engine == GemmEngine::kRegisterFed) {
    GemmPlan plan = prequant ? GemmPlan{} : plan_register_fed_gemm(N, K, M, shuffled, max_smem);
    if (plan.cost < 0) plan.error = kRegisterFedPlanError;
    return plan;
  }
  if (c.engine == GemmEngine::kAuto || c.engine == GemmEngine::kWgmma) {
    if (!shuffled && M <= int64_t(kMaxWgmmaTokenTiles) * 8 && wgmma_index_range(N, K, num_sms * kMaxWaves)) {
      GemmConfig wc = c;
      if (prequant) wc.pair_activations = Toggle::kOff;  // paired activations quantize in the kernel
      const int token_tiles = wgmma_token_tiles(M);
      for (WgmmaVariant v : {WgmmaVariant::kFourWarpgroups, WgmmaVariant::kCoResident, WgmmaVariant::kWholeSmem,
                             WgmmaVariant::kWaves}) {
        const bool co_resident = two_warpgroup_variant(v);
        if (co_resident && token_tiles > 2) continue;  // 17-32 tokens: 4 warpgroups only
        const int threads = (co_resident ? kCoResidentWarpGroups : kWgmmaWarpGroups) * 128;
        auto residency = [&](int cluster, int64_t smem) -> int64_t {
          return max_clusters(GemmEngine::kWgmma, token_tiles, cluster, threads, smem);
        };
        const bool several = v == WgmmaVariant::kWaves;
        for (int waves = several ? 2 : 1; waves <= (several ? kMaxWaves : 1); ++waves) {
          const GemmPlan plan = plan_wgmma_ring_gemm(N, K, M, shuffled, num_sms, max_smem, wc, residency, v, waves);
          if (plan.cost >= 0 && maps_ok(plan.max_tiles_per_cta * kTileRows, plan.chunk_blocks)) return plan;
        }
      }
    }
    if (c.engine == GemmEngine::kWgmma) {
      GemmPlan none;
      none.error = kWgmmaPlanError;
      return none;
    }
  }
  GemmPlan plan = plan_general_gemm(N, K, M, num_sms, max_smem, c, [&](int token_tiles, int cluster, int64_t smem) {
    return int64_t(max_clusters(GemmEngine::kGeneral, token_tiles, cluster, kGeneralThreads, smem));
  });
  if (plan.cost < 0) plan.error = kGeneralPlanError;
  return plan;
}

}  // namespace sgl_fp8::sm90
