// CPU check of the sm_90 GEMM's index formulas (kernels/sm90/sm90_gemm_layout.h), launch plans and
// engine choice (kernels/sm90/sm90_gemm_plan.h). Built and run by tests/test_sm90_layout.py; prints
// one line per failed check and "checks=N failures=F" last; exits non-zero on any failure.
// With --table it prints instead choose_gemm's answer for every SPEC §6 shape, M = 1..33 and both
// weight layouts, one "choose key=value ..." line each (then the checks' summary line).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <array>
#include <set>
#include <vector>

#include "sm90/sm90_gemm_layout.h"
#include "sm90/sm90_gemm_plan.h"
#include "h200_residency.h"

using namespace sgl_fp8;
using namespace sgl_fp8::sm90;

static long checks = 0, failures = 0;
#define CHECK(cond, ...)                  \
  do {                                    \
    ++checks;                             \
    if (!(cond)) {                        \
      ++failures;                         \
      if (failures < 50) {                \
        std::printf("FAIL: " __VA_ARGS__); \
        std::printf("\n");                \
      }                                   \
    }                                     \
  } while (0)

// SPEC §4, written out here independently of kernels/common/weight_layout.h.
static long long spec_offset(long long n, long long k, long long K, bool shuffled) {
  if (!shuffled) return n * K + k;
  const long long n0 = n / 16, n1 = n % 16, k0 = k / 32, k1 = (k / 16) % 2, k2 = k % 16;
  return n0 * 16 * K + k0 * 512 + k1 * 256 + n1 * 16 + k2;
}

static void check_weight_units() {
  for (bool shuffled : {false, true}) {
    for (long long K : {128LL, 256LL, 1024LL, 7168LL}) {
      for (long long tile : {0LL, 1LL, 5LL}) {
        for (long long kb = 0; kb < K / 128; kb += (K / 128 > 4 ? 3 : 1)) {
          std::set<long long> covered;
          for (int lane = 0; lane < 32; ++lane)
            for (int half = 0; half < 2; ++half)
              for (int chunk = 0; chunk < 2; ++chunk) {
                const long long row = (lane >> 2) + 8 * half;
                const long long k = unit_k_of(lane, chunk);
                // The unit base is affine in (tile, kb) in both layouts, and the lane's 16 bytes
                // are the SPEC bytes of (row, k .. k+15).
                const long long base = tile * 16 * K + kb * unit_block_stride(shuffled);
                const long long got = base + unit_lane_offset(lane, half, chunk, K, shuffled);
                for (int j = 0; j < 16; ++j) {
                  const long long want = spec_offset(16 * tile + row, 128 * kb + k + j, K, shuffled);
                  CHECK(got + j == want, "unit bytes: shuffled=%d K=%lld tile=%lld kb=%lld lane=%d half=%d chunk=%d j=%d",
                        shuffled, K, tile, kb, lane, half, chunk, j);
                  covered.insert(row * 128 + k + j);
                }
              }
          CHECK(covered.size() == 16 * 128, "unit coverage: %zu of 2048 bytes", covered.size());
        }
      }
    }
  }
}

// For each MMA step (chunk c, word w) the A fragment's logical k of lane q maps to the physical
// bytes that B (the activations) supplies for the same logical k: the K permutation is shared.
static void check_k_permutation() {
  std::set<int> all_physical;
  for (int chunk = 0; chunk < 2; ++chunk)
    for (int word = 0; word < 4; ++word) {
      std::set<int> logical, physical;
      for (int q = 0; q < 4; ++q) {
        const int lane = q;  // g does not change k
        const int ks[4] = {2 * q, 2 * q + 1, 8 + 2 * q, 9 + 2 * q};
        for (int i = 0; i < 4; ++i) {
          const int p = a_physical_k(lane, chunk, word, ks[i]);
          // B: b0 holds logical (2q, 2q+1) = f16 pair 4w, 4w+1 of the lane's chunk, b1 holds
          // (8+2q, 9+2q) = pair 4w+2, 4w+3 (sm90_general_gemm.cuh, accumulate_unit).
          const int b_physical = unit_k_of(lane, chunk) + 4 * word + i;
          CHECK(p == b_physical, "k permutation: chunk=%d word=%d q=%d logical=%d A=%d B=%d", chunk, word, q, ks[i], p,
                b_physical);
          for (int g = 1; g < 8; ++g)  // the same K for every row/token of the fragment
            CHECK(a_physical_k(lane + 4 * g, chunk, word, ks[i]) == p, "k depends on g");
          logical.insert(ks[i]);
          physical.insert(p);
          all_physical.insert(p);
        }
      }
      CHECK(logical.size() == 16 && physical.size() == 16, "step covers 16 k: chunk=%d word=%d", chunk, word);
    }
  CHECK(all_physical.size() == 128, "the 8 steps cover the 128-byte block once: %zu", all_physical.size());
}

static void check_activation_smem() {
  for (int token_tiles = 1; token_tiles <= 4; ++token_tiles) {
    const int token_pad = 8 * token_tiles, blocks = 3;
    std::set<int> seen;
    for (int lb = 0; lb < blocks; ++lb)
      for (int token = 0; token < token_pad; ++token)
        for (int P = 0; P < 128; P += 8) {  // 8 f16 = one 16-byte slot
          const int o = act_f16_offset(lb, token, token_pad, P);
          CHECK(o % 16 == 0 && o >= 0 && o < blocks * token_pad * 256, "act slot bounds/alignment: %d", o);
          CHECK(seen.insert(o).second, "act slot written twice: lb=%d token=%d P=%d", lb, token, P);
          for (int j = 1; j < 8; ++j)  // f16 elements inside the slot are contiguous
            CHECK(act_f16_offset(lb, token, token_pad, P + j) == o + 2 * j, "act slot contiguity");
        }
    // A quarter-warp (lanes 8p..8p+7: tokens 2p', 2p'+1 of a token tile, q = 0..3) reads 16-byte
    // slots that hit 8 different bank groups.
    for (int t = 0; t < token_tiles; ++t)
      for (int chunk = 0; chunk < 2; ++chunk)
        for (int half = 0; half < 2; ++half)
          for (int quarter = 0; quarter < 4; ++quarter) {
            std::set<int> banks;
            for (int lane = 8 * quarter; lane < 8 * quarter + 8; ++lane) {
              const int token = 8 * t + (lane >> 2);
              const int o = act_f16_offset(1, token, token_pad, unit_k_of(lane, chunk) + 8 * half);
              banks.insert((o / 16) % 8);
            }
            CHECK(banks.size() == 8, "act read bank conflict: tiles=%d chunk=%d half=%d quarter=%d", token_tiles, chunk,
                  half, quarter);
          }
  }
}

static int max_clusters(int, long long) { return 1 << 20; }
static int general_clusters(int, int, long long) { return 1 << 20; }  // plan_general_gemm's (token tiles first)

// The staging ring: every (stage, piece, thread) 16-byte slot and every scale word is distinct,
// aligned and inside its stage; a warp's pieces are one contiguous 512-byte run (no bank
// conflicts); e8m0 scales are read back from the aligned word that holds them.
static void check_staging() {
  std::set<int> used;
  for (int stage = 0; stage < kMaxStages; ++stage) {
    for (int piece = 0; piece < 4; ++piece)
      for (int t = 0; t < kStageThreads; ++t) {
        const int o = stage_piece_offset(stage, piece, t);
        CHECK(o % 16 == 0 && o >= stage * kStageBytes && o + 16 <= stage * kStageBytes + kStageWeightBytes,
              "piece slot %d out of place", o);
        for (int b = 0; b < 16; b += 4) CHECK(used.insert(o + b).second, "piece slot %d reused", o);
        if (t % 32 == 0)
          CHECK(stage_piece_offset(stage, piece, t + 31) == o + 31 * 16, "warp pieces not contiguous");
      }
    for (int t = 0; t < kStageThreads; ++t) {
      const int o = stage_scale_offset(stage, t);
      CHECK(o % 4 == 0 && o >= stage * kStageBytes + kStageWeightBytes && o + 4 <= (stage + 1) * kStageBytes,
            "scale slot %d out of place", o);
      CHECK(used.insert(o).second, "scale slot %d reused", o);
    }
  }
  // e8m0: byte si lives in the little-endian word at si & ~3, at bit 8 * (si & 3).
  const unsigned char bytes[8] = {0x01, 0x7f, 0x80, 0xfe, 0x10, 0x20, 0x30, 0x40};
  for (int si = 0; si < 8; ++si) {
    unsigned word = 0;
    for (int b = 0; b < 4; ++b) word |= unsigned(bytes[(si & ~3) + b]) << (8 * b);
    CHECK(((word >> (8 * (si & 3))) & 0xFFu) == bytes[si], "e8m0 byte %d from its word", si);
  }
}

// A general plan's balanced partitions (tile_begin/tile_end per group, kb ranges per rank, units per
// warp) cover every (tile, block) of the weight exactly once, its chunks cover the tokens, and it
// fits shared memory.
static void check_general_partition(const GemmPlan& plan, long long N, long long K, long long M) {
  const long long T = N / 16, KB = K / 128;
  CHECK(plan.smem_bytes <= 227 * 1024, "smem %lld", (long long)plan.smem_bytes);
  CHECK(plan.k_split >= 1 && plan.k_split <= 8 && plan.k_split <= KB, "k_split %d", plan.k_split);
  CHECK(plan.warps_k * plan.warps_t == 8, "warps %d x %d", plan.warps_k, plan.warps_t);
  CHECK(plan.row_groups >= 1 && plan.row_groups <= kMaxGridRows, "row groups %d", plan.row_groups);
  CHECK(plan.token_tiles >= 1 && plan.token_tiles <= token_tiles_for(M), "token tiles %d", plan.token_tiles);
  CHECK(plan.chunks == (M + 8 * plan.token_tiles - 1) / (8 * plan.token_tiles), "chunks %d of %d token tiles",
        plan.chunks, plan.token_tiles);
  const GemmSmemLayout layout(plan.max_blocks_per_cta, plan.token_tiles, plan.max_tiles_per_cta, plan.warps_k,
                              plan.k_split, plan.smem_stages);
  CHECK(layout.total == plan.smem_bytes, "smem %lld != layout %lld", (long long)plan.smem_bytes,
        (long long)layout.total);
  CHECK(plan.engine == GemmEngine::kGeneral, "general plan's engine");
  std::vector<int> hits(T * KB, 0);
  for (int group = 0; group < plan.row_groups; ++group) {
    const long long t0 = group * T / plan.row_groups, t1 = (group + 1) * T / plan.row_groups;
    // max_tiles_per_cta or one fewer: the two reciprocals the launcher passes (exchange_split)
    CHECK(t1 - t0 == plan.max_tiles_per_cta || t1 - t0 == plan.max_tiles_per_cta - 1, "tiles per CTA %lld, max %d",
          t1 - t0, plan.max_tiles_per_cta);
    for (int rank = 0; rank < plan.k_split; ++rank) {
      const long long kb0 = rank * KB / plan.k_split, kb1 = (rank + 1) * KB / plan.k_split;
      CHECK(kb1 - kb0 <= plan.max_blocks_per_cta, "blocks per CTA %lld > %d", kb1 - kb0, plan.max_blocks_per_cta);
      const long long ntiles = t1 - t0, nblocks = kb1 - kb0;
      for (int warp = 0; warp < 8; ++warp) {
        const int wk = warp % plan.warps_k, wt = warp / plan.warps_k;
        const long long my_tiles = ntiles > wt ? (ntiles - wt + plan.warps_t - 1) / plan.warps_t : 0;
        const long long my_blocks = nblocks > wk ? (nblocks - wk + plan.warps_k - 1) / plan.warps_k : 0;
        for (long long u = 0; u < my_tiles * my_blocks; ++u) {
          const long long tile = t0 + wt + (u / my_blocks) * plan.warps_t;
          const long long kb = kb0 + wk + (u % my_blocks) * plan.warps_k;
          CHECK(tile < t1 && kb < kb1, "unit outside the CTA's range");
          ++hits[tile * KB + kb];
        }
      }
    }
    // Epilogue ownership: the ranks' owned ranges partition the group's tiles.
    long long owned = 0;
    for (int rank = 0; rank < plan.k_split; ++rank)
      owned += (rank + 1) * (t1 - t0) / plan.k_split - rank * (t1 - t0) / plan.k_split;
    CHECK(owned == t1 - t0, "owned tiles %lld != %lld", owned, t1 - t0);
  }
  long long bad = 0;
  for (int h : hits) bad += h != 1;
  CHECK(bad == 0, "N=%lld K=%lld M=%lld: %lld (tile, block) units not covered exactly once", N, K, M, bad);
}

// The general plans of shapes one wave holds: one wave of chunks of up to 32 tokens, staging within
// its budget.
static void check_plans() {
  const long long shapes[][2] = {{5120, 4096}, {4608, 4096}, {4096, 2048}, {8192, 1024}, {4096, 1024},
                                 {1536, 4096}, {2112, 7168}, {16, 128}, {48, 256}, {272, 1024}};
  for (const auto& s : shapes) {
    const long long N = s[0], K = s[1];
    for (long long M : {1LL, 4LL, 8LL, 13LL, 16LL, 32LL, 33LL, 100LL}) {
      const GemmPlan plan = plan_general_gemm(N, K, M, 132, 227 * 1024, GemmConfig{}, general_clusters);
      CHECK(plan.cost >= 0, "no plan for N=%lld K=%lld M=%lld", N, K, M);
      if (plan.cost < 0) continue;
      check_general_partition(plan, N, K, M);
      CHECK(plan.row_groups * plan.k_split <= 132, "grid %d x %d exceeds one wave", plan.row_groups, plan.k_split);
      CHECK(plan.token_tiles == token_tiles_for(M), "token tiles %d at M=%lld", plan.token_tiles, M);
      // Staging ring: within bounds, after every other region, and never at the cost of the
      // second CTA per SM.
      const GemmSmemLayout layout(plan.max_blocks_per_cta, plan.token_tiles, plan.max_tiles_per_cta, plan.warps_k,
                                  plan.k_split, plan.smem_stages);
      CHECK(plan.smem_stages >= 0 && plan.smem_stages <= kMaxStages, "stages %d", plan.smem_stages);
      CHECK(plan.smem_stages == 0 || plan.smem_bytes <= kSmemBudget, "staging pushed smem to %lld",
            (long long)plan.smem_bytes);
      CHECK(layout.ring_offset % 16 == 0, "ring offset %lld not 16-byte aligned", (long long)layout.ring_offset);
      // The async exchange: st.async of four floats into a 16-byte aligned inbox, counted on an
      // 8-byte mbarrier past the ring.
      CHECK(layout.inbox_offset % 16 == 0 && layout.inbox_barrier_offset % 8 == 0 &&
                layout.inbox_barrier_offset >= layout.ring_offset + int64_t(plan.smem_stages) * kStageBytes &&
                layout.inbox_barrier_offset + 8 == layout.total,
            "general inbox %lld / barrier %lld", (long long)layout.inbox_offset, (long long)layout.inbox_barrier_offset);
      // Instances of more token tiles are compiled without the staging code.
      CHECK(plan.token_tiles <= kMaxStagedTokenTiles || plan.smem_stages == 0, "%d token tiles staged",
            plan.token_tiles);
      // config.staging_stages: more stages where the budget leaves room, never a different partition
      GemmConfig staged{};
      staged.staging_stages = kMaxStages;
      const GemmPlan more = plan_general_gemm(N, K, M, 132, 227 * 1024, staged, general_clusters);
      CHECK(more.smem_stages >= plan.smem_stages && more.smem_stages <= kMaxStages && more.k_split == plan.k_split &&
                more.warps_k == plan.warps_k && more.max_tiles_per_cta == plan.max_tiles_per_cta &&
                (more.smem_stages == 0 || more.smem_bytes <= kSmemBudget),
            "staging_stages must only add stages");
    }
  }
}

// The 128-byte swizzle as the TMA applies it and wgmma reads it (address bits [4, 7) XOR [7, 10)
// of a 1024-byte aligned region): where logical byte `linear` of a region of 128-byte rows lands.
static long long swizzle128(long long linear) {
  const long long row = linear / 128, piece = (linear % 128) / 16;
  return row * 128 + ((piece ^ (row % 8)) * 16) + linear % 16;
}

// The wgmma kernel reads its layout from the plan (GemmKernelArgs.wgmma_layout): it must be the
// one its arguments describe.
static bool same_layout(const WgmmaRingSmemLayout& x, const WgmmaRingSmemLayout& y) {
  return x.xs_offset == y.xs_offset && x.red_offset == y.red_offset && x.inbox_offset == y.inbox_offset &&
         x.ring_offset == y.ring_offset && x.barrier_offset == y.barrier_offset &&
         x.inbox_barrier_offset == y.inbox_barrier_offset && x.scale_offset == y.scale_offset && x.total == y.total &&
         x.chunks == y.chunks && x.slots == y.slots && x.direct == y.direct && x.inbox_barrier == y.inbox_barrier &&
         x.inbox_over_activations == y.inbox_over_activations && x.pair == y.pair &&
         x.act_barrier_offset == y.act_barrier_offset;
}

// Paired activations: the two halves of a pair cover the tokens once; the barrier is 8-byte
// aligned, past the others and before the block scales; the pairs keep the plain plan's partition
// (on the H200 clusters of 4 and of 8 hold as many row groups, 30, at every size: h200_residency.h);
// the default pairs where the plain plan takes the split of 4 and the pairs have at most 1.25x its
// tiles, with the forced pairs' partition.
static void check_pair_activations() {
  for (int tokens = 1; tokens <= 32; ++tokens) {
    const int a0 = pair_first_token(0, tokens), n0 = pair_token_count(0, tokens);
    const int a1 = pair_first_token(1, tokens), n1 = pair_token_count(1, tokens);
    CHECK(a0 == 0 && a1 == n0 && n0 + n1 == tokens && n0 >= n1 && n0 - n1 <= 1, "pair token split at %d tokens", tokens);
  }
  int paired = 0;
  for (long long M : {9LL, 13LL, 16LL, 17LL, 24LL, 32LL})
    for (const auto& s : {std::array<long long, 2>{5120, 4096}, {4608, 4096}, {4096, 4096}, {2048, 2048}}) {
      GemmConfig forced;
      forced.k_split = 4;
      forced.pair_activations = Toggle::kOn;
      const GemmPlan p = plan_wgmma_ring_gemm(s[0], s[1], M, false, 132, 227 * 1024, forced, h200::resident_clusters);
      CHECK(p.engine == GemmEngine::kWgmma && p.pair && p.wgmma_layout.pair, "no paired plan for %lldx%lld M=%lld", s[0],
            s[1], M);
      if (p.engine != GemmEngine::kWgmma) continue;
      GemmConfig plain;
      plain.k_split = 4;
      plain.pair_activations = Toggle::kOff;
      const GemmPlan q = plan_wgmma_ring_gemm(s[0], s[1], M, false, 132, 227 * 1024, plain, h200::resident_clusters);
      const bool same_partition = q.row_groups == p.row_groups && q.max_tiles_per_cta == p.max_tiles_per_cta;
      CHECK(same_partition && !q.pair, "pairs and the partition of %lldx%lld M=%lld", s[0], s[1], M);
      const WgmmaRingSmemLayout& l = p.wgmma_layout;
      CHECK(l.act_barrier_offset % 8 == 0 && l.act_barrier_offset >= l.inbox_barrier_offset + (l.inbox_barrier ? 8 : 0) &&
                l.act_barrier_offset + 8 == l.scale_offset,
            "the activation barrier's place in %lldx%lld M=%lld", s[0], s[1], M);
      CHECK(!same_partition || l.total == q.wgmma_layout.total + 8, "a paired layout is 8 bytes larger (%lldx%lld M=%lld)",
            s[0], s[1], M);
      // the default pairs exactly where its plain plan took the split of 4 (with the H200's residency)
      const GemmPlan d = plan_wgmma_ring_gemm(s[0], s[1], M, false, 132, 227 * 1024, GemmConfig{}, h200::resident_clusters);
      GemmConfig no_pair;
      no_pair.pair_activations = Toggle::kOff;
      const GemmPlan u = plan_wgmma_ring_gemm(s[0], s[1], M, false, 132, 227 * 1024, no_pair, h200::resident_clusters);
      CHECK(d.pair == (u.k_split == 4 && 4 * p.max_tiles_per_cta <= 5 * u.max_tiles_per_cta) && !u.pair &&
                (!d.pair || (d.row_groups == p.row_groups && d.max_tiles_per_cta == p.max_tiles_per_cta)),
            "default pairing of %lldx%lld M=%lld (plain split %d)", s[0], s[1], M,
            u.k_split);
      paired += d.pair;
    }
  CHECK(paired > 0, "no default paired plan");
}

static void check_wgmma_ring() {
  // Weight: a box {128 bytes, rows, chunk_blocks} landing at chunk c * chunk_blocks * rows * 128
  // holds weight byte (row, K block lb, k) at the swizzled linear offset (lb * rows + row) * 128 + k;
  // wgmma_ring_offset must say the same, and a window's 8-row atoms must be 1024 bytes apart.
  for (int rows = 64; rows <= 128; rows += 16)
    for (int lb = 0; lb < 12; ++lb)
      for (int row = 0; row < rows; ++row)
        for (int k = 0; k < 128; k += 5) {
          const long long linear = ((long long)lb * rows + row) * 128 + k;
          CHECK(wgmma_ring_offset(lb, rows, row, k) == swizzle128(linear), "wgmma ring byte rows=%d lb=%d row=%d k=%d",
                rows, lb, row, k);
        }
  // Activations: token `token` of block lb is row lb * token_pad + token of the B operand (K-major,
  // 128-byte swizzle); every byte of the region exactly once.
  for (int token_pad : {8, 16, 32})
    for (int nblocks : {1, 7, 16}) {
      std::vector<int> seen(size_t(nblocks) * token_pad * 128, 0);
      for (int lb = 0; lb < nblocks; ++lb)
        for (int token = 0; token < token_pad; ++token)
          for (int k = 0; k < 128; ++k) {
            const long long o = act_fp8_offset(lb, token, token_pad, k);
            CHECK(o == swizzle128(((long long)lb * token_pad + token) * 128 + k), "act fp8 byte lb=%d token=%d k=%d", lb,
                  token, k);
            if (o >= 0 && o < (long long)seen.size()) ++seen[size_t(o)];
          }
      for (size_t i = 0; i < seen.size(); ++i) CHECK(seen[i] == 1, "act fp8 coverage at %zu", i);
    }
  // The prologue's pieces: lane lg of a run of `lanes` stores its piece p (bytes 8 (lg + lanes p)
  // .. + 8) at act_fp8_piece_offset of its first offset; each must be the byte's own offset.
  for (int lanes : {2, 4, 8, 16})
    for (int token_pad : {8, 16, 32})
      for (int lb = 0; lb < 3; ++lb)
        for (int token = 0; token < token_pad; ++token)
          for (int lg = 0; lg < lanes; ++lg)
            for (int p = 0; p < 16 / lanes; ++p)
              for (int j = 0; j < 8; ++j) {
                const int k = 8 * (lg + lanes * p) + j;
                CHECK(act_fp8_piece_offset(act_fp8_offset(lb, token, token_pad, 8 * lg), lanes, p) + j ==
                          act_fp8_offset(lb, token, token_pad, k),
                      "act fp8 piece lanes=%d token=%d lg=%d p=%d j=%d", lanes, token, lg, p, j);
              }
  // Windows: for 4..12 tiles, every window lies inside the CTA's tiles and every tile is parked
  // exactly once (by the window that owns it: tile >= 4 w).
  CHECK(wgmma_max_windows(1, kWgmmaWarpGroups) == kMaxWindows && wgmma_max_windows(2, kWgmmaWarpGroups) == kMaxWindows &&
            wgmma_max_windows(4, kWgmmaWarpGroups) == kMaxWindows && wgmma_max_windows(1, kCoResidentWarpGroups) == 2 &&
            wgmma_max_windows(2, kCoResidentWarpGroups) == 2,
        "windows per plan");
  // The launcher's instance has at least the plan's windows: an 8- or 16-token plan of more than 8
  // tiles takes the 3-window instance, every other plan the default one (2 up to 16 tokens, 3 at 32).
  for (int token_tiles : {1, 2, 4})
    for (int tiles = kWindowTiles; tiles <= kWindowTiles * wgmma_max_windows(token_tiles, kWgmmaWarpGroups); ++tiles)
      CHECK(wgmma_instance_windows(token_tiles, tiles) * kWindowTiles >= tiles &&
                wgmma_instance_windows(token_tiles, tiles) <= wgmma_max_windows(token_tiles, kWgmmaWarpGroups) &&
                (tiles > 2 * kWindowTiles || wgmma_instance_windows(token_tiles, tiles) ==
                                                 wgmma_instance_windows(token_tiles, 0)),
            "instance windows token_tiles=%d tiles=%d", token_tiles, tiles);
  for (int ntiles = kWindowTiles; ntiles <= kWindowTiles * kMaxWindows; ++ntiles) {
    const int windows = (ntiles + kWindowTiles - 1) / kWindowTiles;
    std::vector<int> parked(size_t(ntiles), 0);
    for (int w = 0; w < windows; ++w) {
      const int first = wgmma_window_tile(w, ntiles);
      CHECK(first >= 0 && first + kWindowTiles <= ntiles, "window %d of %d tiles", w, ntiles);
      for (int wq = 0; wq < kWindowTiles; ++wq)
        if (first + wq >= kWindowTiles * w) ++parked[size_t(first + wq)];
    }
    for (int t = 0; t < ntiles; ++t) CHECK(parked[size_t(t)] == 1, "tile %d of %d parked %d times", t, ntiles, parked[size_t(t)]);
  }
  // Plans: every SPEC §6 shape (and four DeepSeek-style weights whose plans pair or drop the split
  // over more than 8 K blocks) takes the wgmma ring kernel at M <= 32 with plain weights, never
  // with shuffled ones or above 32 tokens; each CTA has 4 .. 4 x wgmma_max_windows tiles, the grid
  // is one wave, the partition covers every (tile, block) once, the chunks cover the CTA's blocks,
  // and the partials parked over the ring fit in its region.
  const long long shapes[][2] = {{5120, 4096}, {4608, 4096}, {4096, 2048}, {8192, 1024}, {4096, 1024},
                                 {1536, 4096}, {2112, 7168}, {16, 128},    {48, 256},   {272, 1024},
                                 {7168, 2048}, {6144, 1536}, {8192, 2048}, {7168, 2304}};
  for (const auto& s : shapes)
    for (bool shuffled : {false, true})
      for (long long M : {1LL, 5LL, 8LL, 9LL, 16LL, 17LL, 24LL, 25LL, 32LL, 33LL, 64LL}) {
        const long long N = s[0], K = s[1], T = N / 16, KB = K / 128;
        const GemmPlan plan = plan_wgmma_ring_gemm(N, K, M, shuffled, 132, 227 * 1024, GemmConfig{}, max_clusters);
        const bool wgmma = plan.engine == GemmEngine::kWgmma;
        if (shuffled || M > 32 || T < kWindowTiles) {
          CHECK(plan.cost < 0 && !wgmma, "wgmma plan where it cannot run: N=%lld shuffled=%d M=%lld", N, shuffled, M);
          continue;
        }
        if (N >= 1024) CHECK(wgmma, "no wgmma plan for N=%lld K=%lld M=%lld", N, K, M);
        if (!wgmma) continue;
        CHECK(!plan.co_resident, "the 4-warpgroup variant's plan is not co-resident");
        CHECK(plan.token_tiles == (M <= 8 ? 1 : M <= 16 ? 2 : 4), "wgmma token tiles %d at M=%lld", plan.token_tiles, M);
        CHECK(plan.max_tiles_per_cta <= kWindowTiles * wgmma_max_windows(plan.token_tiles, kWgmmaWarpGroups), "wgmma tiles %d at M=%lld",
              plan.max_tiles_per_cta, M);
        // From 32 tokens with a K split the plan gives the CTA an inbox of its own where it fits
        // (every cluster count fits here: max_clusters is unbounded).
        const bool own_inbox = plan.token_tiles == 4 && plan.k_split > 1 &&
                               WgmmaRingSmemLayout(plan.max_blocks_per_cta, plan.token_tiles, plan.max_tiles_per_cta,
                                                   plan.k_split, plan.chunk_blocks, kWgmmaWarpGroups, 0, true, plan.pair)
                                       .total <= 227 * 1024;
        const WgmmaRingSmemLayout layout(plan.max_blocks_per_cta, plan.token_tiles, plan.max_tiles_per_cta, plan.k_split,
                                         plan.chunk_blocks, kWgmmaWarpGroups, 0, own_inbox, plan.pair);
        // Paired activations by default only from 9 tokens, in pairs of row groups: at a K split of
        // 4; from 17 tokens at a split of 2 whose CTAs have more than one window; or without a split
        // where a CTA is one window over at most kNoSplitMaxBlocks blocks (kWideNoSplitMaxBlocks up
        // to 16 tokens) and those CTAs cover at least kPairedNoSplitMinSmFraction of the SMs.
        const int no_split_blocks = plan.token_tiles <= 2 ? kWideNoSplitMaxBlocks : kNoSplitMaxBlocks;
        const bool paired_no_split = plan.k_split == 1 && plan.max_tiles_per_cta == kWindowTiles &&
                                     plan.max_blocks_per_cta <= no_split_blocks &&
                                     plan.row_groups >= kPairedNoSplitMinSmFraction * 132;
        const bool paired_split2 = plan.k_split == 2 && plan.token_tiles == 4 && plan.max_tiles_per_cta > kWindowTiles;
        CHECK(!plan.pair || ((plan.k_split == 4 || paired_split2 || paired_no_split) && plan.token_tiles >= 2 &&
                             plan.row_groups % 2 == 0),
              "paired plan N=%lld K=%lld M=%lld: k_split %d, row groups %d", N, K, M, plan.k_split, plan.row_groups);
        CHECK(layout.total == plan.smem_bytes && plan.smem_bytes <= 227 * 1024, "wgmma smem %lld", (long long)plan.smem_bytes);
        CHECK(same_layout(layout, plan.wgmma_layout), "the kernel reads the plan's layout");
        // From 9 tokens a share of 3 or more blocks is streamed by two copies or more, half of them
        // held back behind the activation loads.
        if (plan.token_tiles >= 2 && plan.max_blocks_per_cta >= 3)
          CHECK(layout.chunks >= 2 && plan.early_chunks == (layout.chunks + 1) / 2,
                "one copy of a %d-block share at M=%lld (N=%lld K=%lld)", plan.max_blocks_per_cta, M, N, K);
        CHECK(layout.ring_offset % 1024 == 0 && layout.barrier_offset % 8 == 0 && layout.xs_offset % 16 == 0 &&
                  layout.inbox_offset % 16 == 0,
              "wgmma alignment");
        const long long ring_bytes = (long long)layout.chunks * plan.chunk_blocks * plan.max_tiles_per_cta * kTileRows * kBlockK;
        const long long red_bytes = (long long)plan.max_tiles_per_cta * kWgmmaWarpGroups * kTileRows * plan.token_tiles * 8 * 4;
        // [activations (| inbox from 32 tokens)] from 0, the activation scales, (the inbox up to 16
        // tokens), then [ring | partials]
        const long long act_bytes = (long long)plan.max_blocks_per_cta * plan.token_tiles * 8 * kBlockK;
        const long long inbox_bytes = (long long)((plan.max_tiles_per_cta + plan.k_split - 1) / plan.k_split) *
                                      plan.k_split * kTileRows * plan.token_tiles * 8 * 4;
        CHECK(layout.red_offset == layout.ring_offset && layout.barrier_offset - layout.ring_offset >= ring_bytes &&
                  layout.barrier_offset - layout.ring_offset >= red_bytes && layout.xs_offset >= act_bytes &&
                  layout.ring_offset >= layout.xs_offset + (long long)plan.max_blocks_per_cta * plan.token_tiles * 8 * 4,
              "wgmma regions overlap");
        const bool over = layout.inbox_over_activations;
        CHECK(over == (plan.token_tiles == 4 && !own_inbox), "inbox placement");
        if (over)
          CHECK(layout.inbox_offset == 0 && layout.xs_offset >= inbox_bytes, "wgmma inbox over the activations");
        else
          CHECK(layout.inbox_offset >= layout.xs_offset + (long long)plan.max_blocks_per_cta * plan.token_tiles * 8 * 4 &&
                    layout.inbox_offset + inbox_bytes <= layout.ring_offset,
                "wgmma inbox apart");
        // The async exchange (K split; with the inbox over the activations too): an
        // inbox mbarrier after the ring's; the inbox 16-byte aligned (st.async of four floats at
        // 16-byte steps).
        const bool async_exchange = plan.k_split > 1;
        CHECK(layout.inbox_barrier == async_exchange && !layout.direct &&
                  layout.act_barrier_offset - layout.inbox_barrier_offset == (async_exchange ? 8 : 0) &&
                  layout.scale_offset - layout.act_barrier_offset == (plan.pair ? 8 : 0) &&
                  layout.inbox_barrier_offset % 8 == 0 && layout.inbox_offset % 16 == 0,
              "async exchange barrier");
        CHECK(plan.warps_k == kWgmmaWarpGroups && plan.k_split <= kMaxClusterSize && plan.chunks == 1, "wgmma warps");
        CHECK(plan.row_groups * plan.k_split <= 132, "wgmma grid %d x %d", plan.row_groups, plan.k_split);
        CHECK(plan.chunk_blocks >= 1 && layout.chunks * plan.chunk_blocks >= plan.max_blocks_per_cta, "chunks");
        CHECK(plan.early_chunks >= 1 && plan.early_chunks <= layout.chunks, "early chunks %d of %d", plan.early_chunks,
              layout.chunks);
        CHECK(plan.max_tiles_per_cta * kTileRows <= 256, "box rows");
        std::vector<int> owner(size_t(T * KB), 0);
        for (int g = 0; g < plan.row_groups; ++g) {
          const long long t0 = g * T / plan.row_groups, t1 = (g + 1) * T / plan.row_groups;
          CHECK(t1 - t0 >= kWindowTiles && t1 - t0 <= plan.max_tiles_per_cta &&
                    (t1 - t0 == plan.max_tiles_per_cta || t1 - t0 == plan.max_tiles_per_cta - 1),
                "CTA tiles %lld (max %d)", t1 - t0, plan.max_tiles_per_cta);
          for (int r = 0; r < plan.k_split; ++r) {
            const long long b0 = r * KB / plan.k_split, b1 = (r + 1) * KB / plan.k_split;
            CHECK(b1 - b0 <= plan.max_blocks_per_cta, "CTA blocks");
            for (long long t = t0; t < t1; ++t)
              for (long long b = b0; b < b1; ++b) ++owner[size_t(t * KB + b)];
          }
        }
        for (size_t i = 0; i < owner.size(); ++i) CHECK(owner[i] == 1, "wgmma partition: (tile, block) %zu owned %d times", i, owner[i]);
      }
  // The co-resident variant (WgmmaVariant::kCoResident): up to 16 tokens, 2 warpgroups, at most
  // kCoResidentSmem bytes (227 KB as kWholeSmem), one block per warpgroup per chunk, >= 2
  // slots (or one per chunk), every slot's copy at entry, every CTA's K blocks a multiple of 2;
  // none at 32 tokens. The large shares the launcher hands it (the 4-warpgroup plan does not fit)
  // are among the shapes.
  const long long large_shares[][2] = {{6144, 4096}, {12288, 4096}, {4096, 12288}, {8192, 8192}, {7168, 16384}};
  for (const auto& s : large_shares)
    for (long long M : {1LL, 8LL, 16LL}) {
      const GemmPlan refilled = plan_wgmma_ring_gemm(s[0], s[1], M, false, 132, 227 * 1024, GemmConfig{}, max_clusters,
                                                     WgmmaVariant::kWholeSmem);
      CHECK(refilled.engine == GemmEngine::kWgmma && refilled.co_resident,
            "no whole-smem co-resident plan for %lldx%lld M=%lld", s[0], s[1], M);
      if (s[0] == 12288 || s[1] == 12288) {
        const GemmPlan four = plan_wgmma_ring_gemm(s[0], s[1], M, false, 132, 227 * 1024, GemmConfig{}, max_clusters);
        CHECK(four.engine != GemmEngine::kWgmma, "4-warpgroup plan for %lldx%lld", s[0], s[1]);
      }
    }
  int co_plans = 0;
  std::vector<std::array<long long, 2>> co_cases[2];
  for (const auto& s : shapes) co_cases[0].push_back({s[0], s[1]});
  for (const auto& s : large_shares) co_cases[1].push_back({s[0], s[1]});
  for (int whole_smem = 0; whole_smem < 2; ++whole_smem)
  for (const auto& s : co_cases[whole_smem])
    for (long long M : {1LL, 8LL, 16LL, 32LL}) {
      const long long cap = whole_smem ? 227 * 1024 : kCoResidentSmem;
      const long long N = s[0], K = s[1], KB = K / 128;
      const GemmPlan plan = plan_wgmma_ring_gemm(N, K, M, false, 132, 227 * 1024, GemmConfig{}, max_clusters,
                                                 whole_smem ? WgmmaVariant::kWholeSmem : WgmmaVariant::kCoResident);
      if (M > 16) {
        CHECK(plan.engine != GemmEngine::kWgmma, "co-resident plan at M=%lld", M);
        continue;
      }
      if (plan.engine != GemmEngine::kWgmma) continue;
      CHECK(plan.co_resident, "co-resident plan flagged");
      ++co_plans;
      const WgmmaRingSmemLayout layout(plan.max_blocks_per_cta, plan.token_tiles, plan.max_tiles_per_cta, plan.k_split,
                                       plan.chunk_blocks, plan.warps_k, plan.ring_slots);
      CHECK(plan.warps_k == kCoResidentWarpGroups && plan.chunk_blocks == kCoResidentWarpGroups, "co-resident warps");
      CHECK(layout.total == plan.smem_bytes && plan.smem_bytes <= cap, "co-resident smem %lld",
            (long long)plan.smem_bytes);
      CHECK(same_layout(layout, plan.wgmma_layout), "the kernel reads the plan's layout (co-resident)");
      CHECK(layout.slots == plan.ring_slots && (plan.ring_slots >= 2 || plan.ring_slots == layout.chunks),
            "co-resident slots %d of %d", plan.ring_slots, layout.chunks);
      CHECK(plan.early_chunks == plan.ring_slots, "co-resident copies at entry");
      CHECK(KB % plan.k_split == 0 && (KB / plan.k_split) % kCoResidentWarpGroups == 0, "co-resident blocks");
      const long long red_bytes = (long long)plan.max_tiles_per_cta * plan.warps_k * kTileRows * plan.token_tiles * 8 * 4;
      const bool direct = plan.k_split > 1;  // the co-resident variant's direct exchange
      CHECK(layout.direct == direct && layout.inbox_barrier == direct, "direct exchange where K is split");
      CHECK(layout.barrier_offset - layout.ring_offset >= red_bytes &&
                layout.barrier_offset - layout.ring_offset >=
                    (long long)layout.slots * plan.chunk_blocks * plan.max_tiles_per_cta * kTileRows * kBlockK &&
                layout.inbox_barrier_offset - layout.barrier_offset ==
                    8LL * layout.slots * (layout.slots < layout.chunks ? 2 : 1) &&
                layout.scale_offset - layout.inbox_barrier_offset == (direct ? 8 : 0),
            "co-resident regions");
      // The inbox holds a slot per (owned tile, rank, warpgroup), between the activation scales
      // and the ring, 8-byte aligned (st.async of two floats).
      const long long token_pad = plan.token_tiles * 8LL;
      const long long max_owned = (plan.max_tiles_per_cta + plan.k_split - 1) / plan.k_split;
      const long long inbox_bytes = max_owned * plan.k_split * (direct ? plan.warps_k : 1) * kTileRows * token_pad * 4;
      CHECK(layout.inbox_offset % 8 == 0 &&
                layout.inbox_offset >= layout.xs_offset + (long long)plan.max_blocks_per_cta * token_pad * 4 &&
                layout.inbox_offset + inbox_bytes <= layout.ring_offset,
            "co-resident inbox apart");
    }
  CHECK(co_plans >= 10, "co-resident plans: %d", co_plans);

  // The direct exchange: every (rank, warpgroup, tile) of a cluster sends its partials to one
  // slot of the finishing CTA's inbox, each slot of the inbox is written exactly once, and the
  // bytes a CTA expects on its inbox barrier (owned tiles x k_split x warpgroups slots) are the
  // bytes sent to it.
  for (int k_split = 2; k_split <= kMaxClusterSize; ++k_split)
    for (int ntiles = kWindowTiles; ntiles <= kWindowTiles * 2; ++ntiles) {
      const int wgs = kCoResidentWarpGroups, max_owned = (ntiles + k_split - 1) / k_split;
      std::vector<int> written(size_t(k_split) * size_t(max_owned * k_split * wgs), 0);
      for (int rank = 0; rank < k_split; ++rank)
        for (int wg = 0; wg < wgs; ++wg)
          for (int tile = 0; tile < ntiles; ++tile) {
            const int owner = ExchangeSplit(k_split, ntiles).owner(tile);
            CHECK(owner * ntiles / k_split <= tile && tile < (owner + 1) * ntiles / k_split, "exchange owner");
            const int owned_index = tile - owner * ntiles / k_split;
            const int slot = direct_inbox_slot(owned_index, rank, wg, k_split, wgs);
            CHECK(slot >= 0 && slot < max_owned * k_split * wgs, "direct inbox slot %d", slot);
            ++written[size_t(owner) * size_t(max_owned * k_split * wgs) + size_t(slot)];
          }
      for (int owner = 0; owner < k_split; ++owner) {
        const int owned = (owner + 1) * ntiles / k_split - owner * ntiles / k_split;
        int received = 0;
        for (int slot = 0; slot < max_owned * k_split * wgs; ++slot) {
          const int w = written[size_t(owner) * size_t(max_owned * k_split * wgs) + size_t(slot)];
          CHECK(w == (slot < owned * k_split * wgs ? 1 : 0), "inbox slot %d of rank %d written %d times", slot, owner, w);
          received += w;
        }
        CHECK(received == owned * k_split * wgs, "bytes expected on the inbox barrier");
        // the finishing CTA reads rank r's warpgroups at direct_inbox_slot(owned, r, 0) + wg
        for (int o = 0; o < owned; ++o)
          for (int r = 0; r < k_split; ++r)
            for (int wg = 0; wg < wgs; ++wg)
              CHECK(direct_inbox_slot(o, r, 0, k_split, wgs) + wg == direct_inbox_slot(o, r, wg, k_split, wgs),
                    "inbox read order");
      }
    }
}

// 32 tokens: the plan keeps the inbox over the activations where an inbox of its own would leave
// fewer clusters resident than the partition needs (a hypothetical residency here: 33 clusters of
// 4 below 200 KB); else it takes its own. Either way the async exchange counts the inbox on an
// mbarrier.
static void check_own_inbox() {
  // (a residency that ignores the cluster size: without paired activations, whose clusters of 8 it
  // would overcount)
  auto fewer_above_200k = [](int, long long smem) { return smem > 200 * 1024 ? 30 : 33; };
  GemmConfig unpaired;
  unpaired.pair_activations = Toggle::kOff;
  const GemmPlan big = plan_wgmma_ring_gemm(5120, 4096, 32, false, 132, 227 * 1024, unpaired, fewer_above_200k);
  // (the async exchange serves the inbox over the activations too: its mbarrier)
  CHECK(big.engine == GemmEngine::kWgmma && big.row_groups == 33 && big.k_split == 4 && big.wgmma_layout.inbox_over_activations &&
            big.wgmma_layout.inbox_barrier && big.smem_bytes <= 200 * 1024,
        "5120x4096 M=32 keeps its partition and the inbox over the activations");
  const GemmPlan own = plan_wgmma_ring_gemm(5120, 4096, 32, false, 132, 227 * 1024, unpaired, max_clusters);
  CHECK(own.engine == GemmEngine::kWgmma && own.row_groups == big.row_groups && own.k_split == big.k_split &&
            own.max_tiles_per_cta == big.max_tiles_per_cta && !own.wgmma_layout.inbox_over_activations &&
            own.wgmma_layout.inbox_barrier && own.smem_bytes > big.smem_bytes,
        "5120x4096 M=32 with room: the same partition, an inbox of its own and the async exchange");
  const GemmPlan small = plan_wgmma_ring_gemm(4096, 2048, 32, false, 132, 227 * 1024, GemmConfig{}, fewer_above_200k);
  CHECK(small.engine == GemmEngine::kWgmma && small.k_split > 1 && !small.wgmma_layout.inbox_over_activations && small.wgmma_layout.inbox_barrier,
        "4096x2048 M=32: an inbox of its own");
}

// The default wgmma plan's K split at each measured point: {N, K, M, fastest measured k_split}.
template <size_t n>
static void check_default_k_splits(const long long (&measured)[n][4]) {
  for (const auto& m : measured) {
    const GemmPlan plan = plan_wgmma_ring_gemm(m[0], m[1], m[2], false, 132, 227 * 1024, GemmConfig{}, h200::resident_clusters);
    CHECK(plan.engine == GemmEngine::kWgmma && plan.k_split == m[3], "%lldx%lld M=%lld: k_split %d, measured fastest %lld", m[0], m[1], m[2],
          plan.k_split, m[3]);
  }
}

// The wgmma plan's K split against the fastest of the splits measured on the H200, where the
// measurement was clear (clearly faster after a copy kernel and not slower back to back, or the
// fastest in both orders; docs/design/sm90.md), with the H200's cluster residency
// (h200_residency.h). The 17-32-token points were measured among splits 2, 4 and 8.
// Not listed: points where the plan still misses the fastest split (2560x4096 at 17-20 tokens
// takes 4, 8 is faster), and 4096x2048 at 24-32 tokens, where the plan's 4 with paired
// activations measured level with 2.
static void check_measured_k_splits() {
  const long long measured[][4] = {  // N, K, M, fastest measured k_split (of the splits in the comment)
      {5120, 4096, 1, 2},  {5120, 4096, 12, 4}, {5120, 4096, 16, 4},  // 2, 4
      {4608, 4096, 4, 4},  {4608, 4096, 8, 4},  {4608, 4096, 12, 4}, {4608, 4096, 16, 4},  // 2, 3, 4
      {4096, 4096, 1, 2},  {4096, 4096, 4, 2},  {4096, 4096, 8, 2},  {4096, 4096, 12, 2}, {4096, 4096, 16, 2},  // 2, 3, 4
      {2112, 7168, 4, 8},  {2112, 7168, 8, 8},  {2112, 7168, 16, 8},  // 3, 4, 5, 8
      {5120, 4096, 17, 4}, {5120, 4096, 24, 4}, {5120, 4096, 28, 4},  // 2, 4, 8
      {4608, 4096, 17, 4}, {4608, 4096, 24, 4},  // 2, 4, 8
      {4096, 4096, 17, 4}, {4096, 4096, 24, 4}, {4096, 4096, 28, 4},  // 2, 4, 8
      {4096, 2048, 17, 2},  // 2, 4, 8
      {2560, 4096, 1, 2},  {2560, 4096, 16, 8}, {2560, 4096, 24, 8}, {2560, 4096, 28, 8},  // 2, 4, 8
      {1536, 4096, 4, 4},  {1536, 4096, 8, 4},  {1536, 4096, 16, 4}, {1536, 4096, 24, 4},  // 2, 4, 6, 8
      {1024, 4096, 1, 4},  {1024, 4096, 8, 4},  {1024, 4096, 16, 4}};  // 2, 4, 6, 8
  check_default_k_splits(measured);
}

// The default's K split up to 16 tokens against the split-free plan and the split of 2 where a
// 4-tile CTA holds a whole K row, measured on the H200: the points where one was faster in both
// orders. (From 9 tokens the split-free plan pairs: check_measured_pairing; the unpaired one lost
// to the split of 2 on 8192x2048 at 16 tokens, whose default now pairs without a split.)
static void check_measured_no_split() {
  const long long measured[][4] = {  // N, K, M, fastest measured k_split (of 1 and the default's 2)
      {8192, 1024, 1, 1}, {8192, 1024, 4, 1}, {8192, 1024, 8, 1},  {6144, 1024, 1, 1}, {6144, 1024, 4, 1},
      {6144, 1024, 8, 1}, {4096, 1024, 1, 1}, {4096, 1024, 4, 1},  {4096, 1024, 8, 1},
      {5120, 1024, 1, 1}, {5120, 1024, 8, 1}, {3072, 1024, 1, 1},  {3072, 1024, 4, 1}, {6144, 768, 1, 1},
      {6144, 768, 8, 1},  {8192, 512, 4, 1},  {8192, 512, 8, 1},
      {2048, 1024, 8, 2}, {4096, 1536, 8, 2}, {4096, 1536, 16, 2}, {3072, 1536, 8, 2},
      {3072, 1536, 16, 2}, {2048, 2048, 1, 2}, {2048, 2048, 4, 2}, {2048, 2048, 8, 2},  {4096, 2048, 1, 2},
      {4096, 2048, 4, 2},  {4096, 2048, 8, 2}, {8192, 2048, 1, 1}};
  check_default_k_splits(measured);
}

// Paired activations from 9 tokens against the plan they would replace, measured on the H200 (the
// median of 3 rounds in each order, after a copy kernel and back to back): the points where one was
// faster in both orders. {N, K, M, k_split, pair} of the faster. The split-free pairs against the
// split of 2: faster with 96-128 CTAs (6144-8192 x 1024, 8192x512), slower with 48 or fewer
// (3072-2048 x 1024, 4096x512 at 32 tokens); with 64 (4096x1024) faster back to back and level or
// slower after a copy kernel in three of four runs, not listed. The paired split of 4 against the
// split of 8 (its CTAs one window: 1536x4096, 1024x4096; of 5 tiles or more: 2048x7168); the
// split-free pairs against the split of 2 over 12 and 16 K blocks (6144x1536, 8192x2048 at 9-16).
// Left wrong: 6144x1536 at 17-32 tokens (the split-free pairs were faster than the split of 2; the
// default takes the paired split of 2, not compared with them on the H200) and 2048x4096 at 16 (the
// paired split of 4 is 1.5 % faster; its CTAs have 5 tiles).
static void check_measured_pairing() {
  const long long measured[][5] = {
      {8192, 1024, 9, 1, 1},  {8192, 1024, 16, 1, 1}, {8192, 1024, 20, 1, 1}, {8192, 1024, 32, 1, 1},
      {7168, 1024, 9, 1, 1},  {7168, 1024, 16, 1, 1}, {7168, 1024, 24, 1, 1}, {7168, 1024, 32, 1, 1},
      {6144, 1024, 9, 1, 1},  {6144, 1024, 16, 1, 1}, {6144, 1024, 24, 1, 1}, {6144, 1024, 32, 1, 1},
      {8192, 512, 9, 1, 1},   {8192, 512, 16, 1, 1},  {8192, 512, 32, 1, 1},
      {3072, 1024, 9, 2, 0},  {3072, 1024, 16, 2, 0}, {3072, 1024, 24, 2, 0}, {2560, 1024, 9, 2, 0},
      {2560, 1024, 16, 2, 0}, {2048, 1024, 9, 2, 0},  {2048, 1024, 16, 2, 0}, {2048, 1024, 24, 2, 0},
      {4096, 512, 32, 2, 0},
      {1536, 4096, 25, 4, 1}, {1536, 4096, 28, 4, 1}, {1536, 4096, 32, 4, 1},
      {1024, 4096, 24, 4, 1}, {1024, 4096, 28, 4, 1}, {1024, 4096, 32, 4, 1},
      {2048, 7168, 9, 8, 0},  {2048, 7168, 16, 8, 0}, {2048, 7168, 32, 8, 0},
      {6144, 1536, 9, 1, 1},  {6144, 1536, 16, 1, 1}, {8192, 2048, 9, 1, 1},  {8192, 2048, 16, 1, 1}};
  for (const auto& m : measured) {
    const GemmPlan plan = plan_wgmma_ring_gemm(m[0], m[1], m[2], false, 132, 227 * 1024, GemmConfig{}, h200::resident_clusters);
    CHECK(plan.engine == GemmEngine::kWgmma && plan.k_split == m[3] && int(plan.pair) == m[4],
          "%lldx%lld M=%lld: k_split %d pair %d, measured fastest %lld pair %lld", m[0], m[1], m[2], plan.k_split,
          int(plan.pair), m[3], m[4]);
  }
}

// The same comparisons on an H100 (its cluster residency is the H200's: the same 132-SM die), for
// weights of 6144-8192 x 1536-3072 whose CTAs hold more than 8 K blocks without a split: the split
// of 2 (the cost's choice), no split (paired from 9 tokens) and the paired split of 2, medians of 3
// rounds after a copy kernel and back to back; {N, K, M, k_split, pair} of the fastest in both
// orders. Left wrong (the split-free pairs as fast or faster than the paired split of 2): 7168x1536,
// 6144x1536 and 8192x1536 at 17-32 tokens; not listed where no candidate was fastest in both orders.
static void check_measured_on_h100() {
  const long long measured[][5] = {
      {7168, 2048, 1, 1, 0},  {7168, 2048, 4, 1, 0},  {7168, 2048, 8, 1, 0},  {8192, 2048, 1, 1, 0},
      {8192, 2048, 8, 1, 0},  {6144, 2048, 1, 1, 0},  {6144, 2048, 8, 1, 0},  {7168, 1536, 1, 1, 0},
      {7168, 1536, 8, 1, 0},  {8192, 1536, 1, 1, 0},  {8192, 1536, 8, 1, 0},  {6144, 1536, 1, 1, 0},
      {6144, 1536, 4, 1, 0},
      {7168, 2048, 9, 1, 1},  {7168, 2048, 16, 1, 1}, {7168, 1536, 9, 1, 1},  {7168, 1536, 16, 1, 1},
      {6144, 1536, 9, 1, 1},  {6144, 1536, 16, 1, 1}, {6144, 2048, 9, 1, 1},  {8192, 2048, 9, 1, 1},
      {8192, 2048, 16, 1, 1}, {8192, 1536, 9, 1, 1},  {8192, 1536, 16, 1, 1},
      {7168, 2048, 17, 2, 1}, {7168, 2048, 24, 2, 1}, {7168, 2048, 32, 2, 1}, {6144, 2048, 17, 2, 1},
      {6144, 2048, 24, 2, 1}, {6144, 2048, 32, 2, 1}, {8192, 2048, 24, 2, 1}, {8192, 2048, 32, 2, 1},
      {7168, 2304, 17, 2, 1}, {7168, 2304, 24, 2, 1}, {7168, 2304, 32, 2, 1},
      {4096, 2048, 9, 2, 0},  {4096, 2048, 16, 2, 0}, {7168, 3072, 24, 2, 0}, {7168, 3072, 32, 2, 0}};
  for (const auto& m : measured) {
    const GemmPlan plan = plan_wgmma_ring_gemm(m[0], m[1], m[2], false, 132, 227 * 1024, GemmConfig{}, h200::resident_clusters);
    CHECK(plan.engine == GemmEngine::kWgmma && plan.k_split == m[3] && int(plan.pair) == m[4],
          "%lldx%lld M=%lld: k_split %d pair %d, measured fastest on an H100 %lld pair %lld", m[0], m[1], m[2],
          plan.k_split, int(plan.pair), m[3], m[4]);
  }
}

// 17152x1024 at 17-32 tokens: 132 CTAs of 9 tiles and no K split, so window-major CTAs whose tiles'
// sums stay in the CTA (no cluster, no inbox barrier). tests/test_gpu.py runs this plan on the GPU.
static void check_window_major_without_a_split() {
  for (long long M : {17, 24, 32}) {
    const GemmPlan plan = plan_wgmma_ring_gemm(17152, 1024, M, false, 132, 227 * 1024, GemmConfig{}, h200::resident_clusters);
    const int windows = (plan.max_tiles_per_cta + kWindowTiles - 1) / kWindowTiles;
    CHECK(plan.engine == GemmEngine::kWgmma && plan.k_split == 1 && !plan.pair && windows == kMaxWindows,
          "17152x1024 M=%lld: k_split %d pair %d windows %d, expected 1, 0, %d", M, plan.k_split, int(plan.pair),
          windows, kMaxWindows);
  }
}

// Launches the H200 recorded: the CPU plan with h200_residency.h must give each one's K split,
// row groups, pairing and shared memory (the CPU residency table once disagreed with the device's
// for small CTAs, and the CPU plan of 4096x2048 at 24-32 tokens was not the one it launched).
static void check_recorded_launches() {
  // (config: forced k_split, and pair_activations 1 = on, as the configs the launches ran with asked)
  const long long recorded[][9] = {  // N, K, M, forced k_split, pair -> k_split, row groups, pair, smem
      {2560, 4096, 16, 0, 0, 8, 15, 0, 115912},
      {2560, 4096, 16, 0, 1, 2, 40, 1, 169264},
      {2560, 4096, 16, 2, 1, 2, 40, 1, 169264},
      {2560, 4096, 16, 4, 0, 4, 30, 1, 136424},
      {2560, 4096, 16, 4, 1, 4, 30, 1, 136424},
      {2560, 4096, 24, 0, 0, 8, 15, 0, 140488},
      {2560, 4096, 24, 0, 1, 4, 30, 1, 161000},
      {2560, 4096, 24, 2, 1, 2, 40, 1, 207152},
      {2560, 4096, 24, 4, 0, 4, 30, 1, 161000},
      {2560, 4096, 24, 4, 1, 4, 30, 1, 161000},
      {2560, 4096, 32, 0, 0, 8, 15, 0, 140488},
      {2560, 4096, 32, 0, 1, 4, 30, 1, 161000},
      {2560, 4096, 32, 2, 1, 2, 40, 1, 207152},
      {2560, 4096, 32, 4, 0, 4, 30, 1, 161000},
      {2560, 4096, 32, 4, 1, 4, 30, 1, 161000},
      {4096, 2048, 1, 0, 0, 2, 64, 0, 76952},
      {4096, 2048, 8, 0, 0, 2, 64, 0, 76952},
      {4096, 2048, 16, 0, 0, 2, 64, 0, 87192},
      {4096, 2048, 16, 0, 1, 2, 60, 1, 105664},
      {4096, 2048, 16, 2, 1, 2, 60, 1, 105664},
      {4096, 2048, 16, 4, 0, 4, 30, 1, 95408},
      {4096, 2048, 16, 4, 1, 4, 30, 1, 95408},
      {4096, 2048, 17, 0, 0, 2, 64, 0, 107672},
      {4096, 2048, 17, 2, 0, 2, 64, 0, 107672},
      {4096, 2048, 24, 0, 0, 4, 30, 1, 115888},
      {4096, 2048, 24, 0, 1, 4, 30, 1, 115888},
      {4096, 2048, 24, 2, 1, 2, 60, 1, 128192},
      {4096, 2048, 24, 4, 0, 4, 30, 1, 115888},
      {4096, 2048, 24, 4, 1, 4, 30, 1, 115888},
      {4096, 2048, 32, 0, 0, 4, 30, 1, 115888},
      {4096, 2048, 32, 0, 1, 4, 30, 1, 115888},
      {4096, 2048, 32, 2, 0, 2, 64, 0, 107672},
      {4096, 2048, 32, 2, 1, 2, 60, 1, 128192},
      {4096, 2048, 32, 4, 0, 4, 30, 1, 115888},
      {4096, 2048, 32, 4, 1, 4, 30, 1, 115888},
  };
  for (const auto& r : recorded) {
    GemmConfig config;
    config.k_split = int(r[3]);
    config.pair_activations = Toggle(r[4]);
    const GemmPlan p = plan_wgmma_ring_gemm(r[0], r[1], r[2], false, 132, 227 * 1024, config, h200::resident_clusters);
    CHECK(p.engine == GemmEngine::kWgmma && p.k_split == r[5] && p.row_groups == r[6] && int(p.pair) == r[7] && p.smem_bytes == r[8],
          "%lldx%lld M=%lld [%lld,..,%lld]: plan k_split %d, %d row groups, pair %d, %lld B; the H200 launched %lld, %lld, "
          "%lld, %lld B",
          r[0], r[1], r[2], r[3], r[4], p.k_split, p.row_groups, int(p.pair), (long long)p.smem_bytes, r[5], r[6], r[7], r[8]);
  }
}

// The MMA loop and the epilogue divide by runtime values through the reciprocal in fp32
// (small_quotient): exact for every a < 2^16 and b < 2^11, and every a < 2^22 for b <= 8, with
// the reciprocal rounded as the kernels compute it (an IEEE fp32 division). A wrong result is
// reported once per divisor.
static void check_small_quotient() {
  for (int b = 1; b < 2048; ++b) {
    const float inverse = 1.0f / float(b);
    int wrong = -1;
    for (int a = 0; a < 65536 && wrong < 0; ++a)
      if (small_quotient(a, inverse) != a / b) wrong = a;
    CHECK(wrong < 0, "small_quotient(%d, 1/%d)", wrong, b);
  }
  // The K split's ranks (b = k_split) over the launcher's whole range: rank x kblocks < 2^22.
  for (int b = 1; b <= kMaxClusterSize; ++b) {
    const float inverse = 1.0f / float(b);
    int wrong = -1;
    for (int a = 0; a < (1 << 22) && wrong < 0; ++a)
      if (small_quotient(a, inverse) != a / b) wrong = a;
    CHECK(wrong < 0, "small_quotient(%d, 1/%d)", wrong, b);
  }
}

// Which rank finishes which tile, and where each rank's K blocks begin: against the definitions
// (integer division, and the owner as the last rank whose first tile is not past the tile),
// for every cluster size, every tile count a CTA may have and more.
static void check_exchange_split() {
  for (int k_split = 1; k_split <= kMaxClusterSize; ++k_split)
    for (int ntiles = 1; ntiles <= 512; ++ntiles) {
      const ExchangeSplit split(k_split, ntiles);
      for (int r = 0; r <= k_split; ++r) CHECK(split.first_tile(r) == r * ntiles / k_split, "first tile of rank %d", r);
      for (int tile = 0; tile < ntiles; ++tile) {
        int owner = k_split - 1;
        while (owner > 0 && owner * ntiles / k_split > tile) --owner;
        CHECK(split.owner(tile) == owner, "owner of tile %d of %d, k_split %d", tile, ntiles, k_split);
      }
      for (int kblocks = 1; kblocks <= 1024; kblocks += 7)
        for (int r = 0; r <= k_split; ++r)
          CHECK(split.first_block(r, kblocks) == r * kblocks / k_split, "first block of rank %d", r);
    }
}

// The partial sums' token slots (partial_token_slot): a bijection of each tile row's token_pad
// floats that keeps float2 pairs whole, with the two relations park_partials and the direct
// exchange use, and the banks of the two access patterns it is for: a warp's parking stores
// (lane = 4 g + q writes tokens 8t + 2q, 2q + 1 of row g, and of row g + 8 in a second store)
// and the epilogue's final read (lane l reads row l % 16, token m0 + l / 16). A pattern's cost is
// the most distinct 4-byte words it asks of one bank (its shared-memory wavefronts): 2 for the
// 256 bytes of a parking store, 1 for the 128 of a read. The plain order (slot m) is measured
// too, so that the count is seen to catch the conflicts it had.
static int words_per_bank(const std::vector<long long>& words) {
  std::array<std::set<long long>, 32> banks;
  for (long long w : words) banks[w % 32].insert(w);
  size_t most = 0;
  for (const auto& b : banks) most = b.size() > most ? b.size() : most;
  return int(most);
}
static void check_partial_token_slots() {
  for (int pad : {8, 16, 24, 32}) {
    for (int row = 0; row < kTileRows; ++row) {
      std::set<int> seen;
      for (int m = 0; m < pad; ++m) {
        const int s = partial_token_slot(row, m, pad);
        CHECK(s >= 0 && s < pad, "partial_token_slot(%d, %d, %d) = %d out of the row", row, m, pad, s);
        seen.insert(s);
        if (m % 2 == 1) CHECK(s == partial_token_slot(row, m - 1, pad) + 1, "pad %d row %d: tokens %d, %d not a float2", pad, row, m - 1, m);
        if (row < 8)
          CHECK(partial_token_slot(row + 8, m, pad) == (s ^ partial_token_slot(8, 0, pad)), "pad %d: row %d + 8's slot of %d", pad, row, m);
        CHECK(s == (partial_token_slot(row, m % 8, pad) ^ (m / 8 * 8)), "pad %d row %d: token %d's slot from its tile's", pad, row, m);
      }
      CHECK(int(seen.size()) == pad, "pad %d row %d: not a bijection", pad, row);
    }
    if (pad == 24) continue;  // the plain order (the register kernel's 3 token tiles)
    for (bool plain : {false, true}) {
      auto slot = [&](int row, int m) { return plain ? m : partial_token_slot(row, m, pad); };
      int park = 0, read = 0;
      for (int t = 0; t < pad / 8; ++t)
        for (int half = 0; half < 2; ++half) {
          std::vector<long long> words;
          for (int lane = 0; lane < 32; ++lane) {
            const int row = (lane >> 2) + 8 * half, m = 8 * t + 2 * (lane & 3);
            words.push_back(row * pad + slot(row, m));
            words.push_back(row * pad + slot(row, m + 1));
          }
          const int w = words_per_bank(words);
          park = w > park ? w : park;
        }
      for (int m0 = 0; m0 < pad; m0 += 2) {
        std::vector<long long> words;
        for (int lane = 0; lane < 32; ++lane) words.push_back((lane % 16) * pad + slot(lane % 16, m0 + lane / 16));
        const int w = words_per_bank(words);
        read = w > read ? w : read;
      }
      if (plain) {  // what the plain order cost: 2 / 4 / 8-way parking stores, 4 / 8 / 16-way reads
        CHECK(park == pad / 4 && read == pad / 2, "pad %d plain order: park %d read %d", pad, park, read);
      } else {
        CHECK(park == 2 && read == 1, "pad %d: park %d words a bank (2 is the least), read %d (1)", pad, park, read);
      }
    }
  }
}

// The register-fed kernel (sm90_register_fed_gemm.cuh): its weight pieces are the register
// kernel's (check_weight_units, check_k_permutation; plain weights, at unit_chunk_stride and
// unit_block_stride past its first); here its e4m3 activations, scales and partials in shared
// memory, and its plan rule.
static void check_register_fed() {
  const long long smem_max = 232448;
  for (int M = 1; M <= 16; ++M)
    for (long long K : {1024LL, 2048LL, 7168LL, 8192LL}) {
      const int tiles = token_tiles_for(M);
      std::set<long long> seen;
      // a warp's lane q of token g, chunk c reads the 16 bytes at unit_k_of(lane, c) of its block
      for (long long chunk = 0; chunk < K / 64; ++chunk)
        for (int token = 0; token < M; ++token)
          for (int q = 0; q < 4; ++q) {
            const long long o = register_fed_act_offset(chunk, token, M) + unit_k_of(q, int(chunk % 2)) - 64 * (chunk % 2);
            CHECK(o % 16 == 0 && o >= 0 && o + 16 <= register_fed_xs_offset(M, K), "act piece bounds M=%d K=%lld", M, K);
            CHECK(seen.insert(o).second, "act piece twice M=%d K=%lld chunk=%lld token=%d", M, K, chunk, token);
            // lane q of the quantizing quad stores K bytes [32 q, 32 q + 32) of block kb = chunk / 2 at 32 (q % 2) of
            // chunk 2 kb + q / 2 (sm90_register_fed_gemm.cuh): where the readers above find byte k of the block
            if (chunk % 2 == 0)
              for (int j = 0; j < 32; ++j) {
                const long long k = 32 * q + j, kb = chunk / 2;
                CHECK(register_fed_act_offset(2 * kb + q / 2, token, M) + 32 * (q % 2) + j ==
                          register_fed_act_offset(2 * kb + k / 64, token, M) + k % 64,
                      "quad store M=%d q=%d j=%d", M, q, j);
              }
          }
      CHECK((long long)seen.size() * 16 == M * K, "act covered M=%d K=%lld: %zu", M, K, seen.size());
      CHECK(register_fed_red_offset(M, K) >= register_fed_xs_offset(M, K) + M * (K / 128) * 4 &&
                register_fed_red_offset(M, K) % 16 == 0,
            "scales before partials M=%d K=%lld", M, K);
      std::set<int> red;
      for (int w = 0; w < kRegisterFedWarps; ++w)
        for (int token = 0; token < 8 * tiles; ++token)
          for (int row = 0; row < 16; ++row) {
            const int i = register_fed_red_index(w, token, row, tiles);
            CHECK(red.insert(i).second && register_fed_red_offset(M, K) + 4LL * (i + 1) <= register_fed_smem_bytes(M, K, tiles),
                  "partial slot M=%d w=%d token=%d row=%d", M, w, token, row);
          }
      const GemmPlan plan = plan_register_fed_gemm(5120, K, M, false, smem_max);
      CHECK(plan.engine == GemmEngine::kRegisterFed && plan.cost >= 0 && plan.row_groups == 320 && plan.k_split == 1 &&
                plan.smem_bytes == register_fed_smem_bytes(M, K, tiles),
            "plan M=%d K=%lld", M, K);
    }
  // where it applies: K a multiple of 1024 up to 8192, 1-16 tokens, N a multiple of 16
  CHECK(plan_register_fed_gemm(4096, 1536, 1, false, smem_max).cost < 0, "K 1536");
  CHECK(plan_register_fed_gemm(4096, 9216, 1, false, smem_max).cost < 0, "K 9216");
  CHECK(plan_register_fed_gemm(4096, 4096, 17, false, smem_max).cost < 0, "17 tokens");
  CHECK(plan_register_fed_gemm(4104, 4096, 1, false, smem_max).cost < 0, "N 4104");
  CHECK(plan_register_fed_gemm(2112, 7168, 2, false, smem_max).row_groups == 132, "2112x7168");
  CHECK(plan_register_fed_gemm(4096, 4096, 1, true, smem_max).cost < 0, "shuffled weights");
  // the second chunk's pieces sit unit_chunk_stride past the first's, in both layouts
  for (bool shuffled : {false, true})
    for (int lane = 0; lane < 32; ++lane)
      for (int half = 0; half < 2; ++half)
        CHECK(unit_lane_offset(lane, half, 1, 4096, shuffled) ==
                  unit_lane_offset(lane, half, 0, 4096, shuffled) + unit_chunk_stride(shuffled),
              "chunk stride shuffled=%d lane=%d half=%d", shuffled, lane, half);
}

// ---- the engine choice (choose_gemm) ---------------------------------------------------------
// The H200 residency model for every engine (h200_residency.h: measured for the 512-thread,
// one-CTA-an-SM instances; the general kernel and the co-resident variant may fit more).
static long long h200_residency(GemmEngine, int, int cluster, int, long long smem) {
  return h200::resident_clusters(cluster, smem);
}
static bool maps_encode(int, int) { return true; }
static bool maps_declined(int, int) { return false; }

static const char* engine_name(GemmEngine e) {
  switch (e) {
    case GemmEngine::kWgmma: return "wgmma";
    case GemmEngine::kGeneral: return "general";
    case GemmEngine::kRegisterFed: return "register_fed";
    default: return "none";
  }
}

static const long long kSpecShapes[][2] = {{5120, 4096}, {4608, 4096}, {4096, 2048}, {8192, 1024},
                                           {4096, 1024}, {1536, 4096}, {2112, 7168}};

static GemmPlan choose_h200(long long N, long long K, long long M, bool shuffled, const GemmConfig& c,
                            bool prequant = false, bool maps = true) {
  return maps ? choose_gemm(N, K, M, shuffled, prequant, 132, 227 * 1024, c, h200_residency, maps_encode)
              : choose_gemm(N, K, M, shuffled, prequant, 132, 227 * 1024, c, h200_residency, maps_declined);
}

static void print_choice(const char* config, long long N, long long K, long long M, bool shuffled, const GemmPlan& p) {
  std::printf(
      "choose config=%s N=%lld K=%lld M=%lld weight=%s engine=%s k_split=%d row_groups=%d tiles_per_cta=%d "
      "blocks_per_cta=%d pair=%d co_resident=%d chunks=%d smem=%lld\n",
      config, N, K, M, shuffled ? "shuffled" : "plain", p.cost >= 0 ? engine_name(p.engine) : "error", p.k_split,
      p.row_groups, p.max_tiles_per_cta, p.max_blocks_per_cta, int(p.pair), int(p.co_resident), p.chunks,
      (long long)p.smem_bytes);
}

// Shares the 4-warpgroup ring cannot hold in one resident wave (6144x4096 and larger): up to 16
// tokens the co-resident variants; from 17 tokens, where those leave the activations no room, the
// 4-warpgroup kernel over the fewest of 2..kMaxWaves waves whose CTAs' shares fit (WgmmaVariant::
// kWaves), every (tile, block) owned once; where not even kMaxWaves waves hold it, no wgmma plan. A one-wave variant never plans several waves, nor the several-waves one a single wave.
static void check_several_waves(bool print) {
  auto residency = [](int cluster, long long smem) -> long long { return h200::resident_clusters(cluster, smem); };
  const long long shares[][2] = {{6144, 4096},  {7168, 4096},  {4608, 7168}, {10240, 4096},
                                 {12288, 4096}, {4096, 12288}, {8192, 8192}, {7168, 16384}, {16384, 16384}};
  int co_resident_plans = 0, waves_plans = 0, beyond = 0;
  for (const auto& s : shares)
    for (long long M : {1LL, 8LL, 16LL, 17LL, 24LL, 32LL}) {
      const long long N = s[0], K = s[1], T = N / 16, KB = K / 128;
      const GemmPlan p = choose_h200(N, K, M, false, GemmConfig{});
      if (print) print_choice("auto", N, K, M, false, p);
      CHECK(plan_wgmma_ring_gemm(N, K, M, false, 132, 227 * 1024, GemmConfig{}, residency).cost < 0,
            "%lldx%lld M=%lld: one wave holds the share", N, K, M);
      CHECK(plan_wgmma_ring_gemm(N, K, M, false, 132, 227 * 1024, GemmConfig{}, residency,
                                 WgmmaVariant::kFourWarpgroups, 2).cost < 0 &&
                plan_wgmma_ring_gemm(N, K, M, false, 132, 227 * 1024, GemmConfig{}, residency, WgmmaVariant::kWaves, 1)
                        .cost < 0,
            "%lldx%lld M=%lld: waves outside their variant", N, K, M);
      if (M <= 16 && (plan_wgmma_ring_gemm(N, K, M, false, 132, 227 * 1024, GemmConfig{}, residency,
                                           WgmmaVariant::kCoResident).cost >= 0 ||
                      plan_wgmma_ring_gemm(N, K, M, false, 132, 227 * 1024, GemmConfig{}, residency,
                                           WgmmaVariant::kWholeSmem).cost >= 0)) {
        CHECK(p.engine == GemmEngine::kWgmma && p.co_resident, "%lldx%lld M=%lld: co-resident, got %s", N, K, M,
              engine_name(p.engine));
        ++co_resident_plans;
        continue;
      }
      int fewest = 0;
      for (int w = 2; w <= kMaxWaves && !fewest; ++w)
        if (plan_wgmma_ring_gemm(N, K, M, false, 132, 227 * 1024, GemmConfig{}, residency, WgmmaVariant::kWaves, w).cost >= 0)
          fewest = w;
      if (!fewest) {
        CHECK(p.engine != GemmEngine::kWgmma, "%lldx%lld M=%lld: a wgmma plan beyond the waves", N, K, M);
        ++beyond;
        continue;
      }
      ++waves_plans;
      CHECK(p.engine == GemmEngine::kWgmma && !p.co_resident && p.warps_k == kWgmmaWarpGroups && p.chunks == 1 &&
                p.smem_bytes <= 227 * 1024,
            "%lldx%lld M=%lld: the 4-warpgroup kernel, got %s co_resident=%d", N, K, M, engine_name(p.engine),
            int(p.co_resident));
      const int cluster = p.k_split * (p.pair ? 2 : 1);
      const long long per_wave = residency(cluster, p.smem_bytes) * cluster, ctas = (long long)p.row_groups * p.k_split;
      CHECK(ctas > per_wave && ctas <= fewest * per_wave, "%lldx%lld M=%lld: %lld CTAs, %lld a wave, %d waves", N, K, M,
            ctas, per_wave, fewest);
      std::vector<int> owner(size_t(T * KB), 0);
      for (int g = 0; g < p.row_groups; ++g) {
        const long long t0 = g * T / p.row_groups, t1 = (g + 1) * T / p.row_groups;
        CHECK(t1 - t0 >= kWindowTiles && (t1 - t0 == p.max_tiles_per_cta || t1 - t0 == p.max_tiles_per_cta - 1),
              "%lldx%lld M=%lld: CTA tiles %lld (max %d)", N, K, M, t1 - t0, p.max_tiles_per_cta);
        for (int r = 0; r < p.k_split; ++r)
          for (long long t = t0; t < t1; ++t)
            for (long long b = r * KB / p.k_split; b < (r + 1) * KB / p.k_split; ++b) ++owner[size_t(t * KB + b)];
      }
      for (size_t i = 0; i < owner.size(); ++i)
        CHECK(owner[i] == 1, "%lldx%lld M=%lld: (tile, block) %zu owned %d times", N, K, M, i, owner[i]);
    }
  CHECK(co_resident_plans == 26 && waves_plans == 24 && beyond == 4, "co-resident plans %d, several-waves %d, beyond %d",
        co_resident_plans, waves_plans, beyond);
}

// Shares no plan holds in one resident wave: the general kernel over several waves, and over chunks
// of fewer tokens where a CTA of one tile leaves a 32-token chunk's activations no room; every
// (tile, block) still covered once (check_general_partition). The five points test_gpu.py runs
// take the path its docstring names; every weight up to 131072 rows and K 98304 has a plan, fused
// or pre-quantized, at every token count.
static void check_general_beyond_one_wave() {
  struct Point { long long N, K, M; bool several_waves; int token_tiles; };
  const Point gpu_test_points[] = {{1024, 25600, 32, true, 4}, {1024, 25600, 33, true, 4}, {2048, 53248, 16, true, 2},
                                   {1024, 26624, 40, false, 3}, {1024, 40960, 17, false, 2}};
  for (const Point& t : gpu_test_points)
    for (bool prequant : {false, true}) {
      const GemmPlan p = choose_h200(t.N, t.K, t.M, false, GemmConfig{}, prequant);
      CHECK(p.cost >= 0 && p.engine == GemmEngine::kGeneral, "%lldx%lld M=%lld: the general engine", t.N, t.K, t.M);
      if (p.cost < 0) continue;
      check_general_partition(p, t.N, t.K, t.M);
      const long long resident = h200::resident_clusters(p.k_split, p.smem_bytes);
      CHECK((p.row_groups > resident) == t.several_waves && p.token_tiles == t.token_tiles,
            "%lldx%lld M=%lld: %d row groups, %lld resident, %d token tiles", t.N, t.K, t.M, p.row_groups, resident,
            p.token_tiles);
    }
  int several = 0, fewer = 0;
  for (long long N : {1024LL, 4096LL, 16384LL, 51200LL, 131072LL})
    for (long long K : {1024LL, 7168LL, 16384LL, 25600LL, 36864LL, 65536LL, 98304LL})
      for (long long M : {1LL, 8LL, 16LL, 17LL, 24LL, 32LL, 33LL, 64LL, 200LL})
        for (bool prequant : {false, true}) {
          const GemmPlan p = choose_h200(N, K, M, false, GemmConfig{}, prequant);
          CHECK(p.cost >= 0, "%lldx%lld M=%lld prequant=%d: no plan", N, K, M, int(prequant));
          if (p.cost < 0 || p.engine != GemmEngine::kGeneral) continue;
          if (N * K <= 64LL << 20) check_general_partition(p, N, K, M);  // (the coverage walk is per unit)
          several += p.row_groups > h200::resident_clusters(p.k_split, p.smem_bytes);
          fewer += p.token_tiles < token_tiles_for(M);
        }
  CHECK(several > 0 && fewer > 0, "several waves %d, fewer token tiles %d", several, fewer);
}

// For every SPEC §6 shape, M = 1..33 and both layouts: the default config gives the wgmma ring
// kernel (its 4-warpgroup variant) for plain weights up to 32 tokens and the general kernel for
// shuffled weights and from 33 tokens; engine register_fed gives that kernel where it applies (K a
// multiple of 1024 up to 8192, M <= 16, plain weights) and an error elsewhere; engine wgmma on a
// shuffled weight (or from 33 tokens) is an error, never another engine; engine general is the
// general kernel everywhere. `print` writes the default config's answers (and register_fed's).
static void check_choose_gemm(bool print) {
  GemmConfig auto_config, fed, wgmma, general;
  fed.engine = GemmEngine::kRegisterFed;
  wgmma.engine = GemmEngine::kWgmma;
  general.engine = GemmEngine::kGeneral;
  for (const auto& s : kSpecShapes)
    for (bool shuffled : {false, true})
      for (long long M = 1; M <= 33; ++M) {
        const long long N = s[0], K = s[1];
        const GemmPlan p = choose_h200(N, K, M, shuffled, auto_config);
        if (print) print_choice("auto", N, K, M, shuffled, p);
        CHECK(p.cost >= 0 && p.error == nullptr, "%lldx%lld M=%lld shuffled=%d: no plan", N, K, M, shuffled);
        const GemmEngine want = !shuffled && M <= 32 ? GemmEngine::kWgmma : GemmEngine::kGeneral;
        CHECK(p.engine == want && !p.co_resident, "%lldx%lld M=%lld shuffled=%d: engine %s, want %s", N, K, M, shuffled,
              engine_name(p.engine), engine_name(want));
        CHECK(p.row_groups * p.k_split <= 132, "%lldx%lld M=%lld: %d x %d CTAs, more than one wave", N, K, M, p.row_groups,
              p.k_split);

        const GemmPlan f = choose_h200(N, K, M, shuffled, fed);
        if (print) print_choice("register_fed", N, K, M, shuffled, f);
        const bool fed_applies = !shuffled && K % 1024 == 0 && K <= 8192 && M <= 16;
        if (fed_applies)
          CHECK(f.cost >= 0 && f.engine == GemmEngine::kRegisterFed && f.row_groups == N / 16,
                "%lldx%lld M=%lld: register_fed asked, got %s", N, K, M, engine_name(f.engine));
        else
          CHECK(f.cost < 0 && f.error != nullptr && std::strstr(f.error, "no sm_90 GEMM plan fits") == f.error,
                "%lldx%lld M=%lld shuffled=%d: register_fed asked where it does not apply, got %s", N, K, M, shuffled,
                engine_name(f.engine));
        // pre-quantized input (scaled_gemm never passes a config, but the chooser refuses it)
        CHECK(choose_h200(N, K, M, shuffled, fed, /*prequant=*/true).cost < 0, "register_fed with e4m3 input");

        const GemmPlan w = choose_h200(N, K, M, shuffled, wgmma);
        if (!shuffled && M <= 32)
          CHECK(w.cost >= 0 && w.engine == GemmEngine::kWgmma && w.k_split == p.k_split && w.pair == p.pair,
                "%lldx%lld M=%lld: engine wgmma differs from the default's", N, K, M);
        else
          CHECK(w.cost < 0 && w.error != nullptr, "%lldx%lld M=%lld shuffled=%d: engine wgmma asked, got %s", N, K, M,
                shuffled, engine_name(w.engine));

        const GemmPlan g = choose_h200(N, K, M, shuffled, general);
        CHECK(g.cost >= 0 && g.engine == GemmEngine::kGeneral && g.chunks == (M + 31) / 32,
              "%lldx%lld M=%lld: engine general asked, got %s", N, K, M, engine_name(g.engine));

        if (!shuffled && M <= 32) {
          // maps the driver declines: the general kernel by default, an error where wgmma is asked
          CHECK(choose_h200(N, K, M, false, auto_config, false, false).engine == GemmEngine::kGeneral, "maps declined");
          CHECK(choose_h200(N, K, M, false, wgmma, false, false).cost < 0, "maps declined, wgmma asked");
          // pre-quantized input: the wgmma kernel, never paired
          const GemmPlan q = choose_h200(N, K, M, false, auto_config, /*prequant=*/true);
          CHECK(q.engine == GemmEngine::kWgmma && !q.pair, "%lldx%lld M=%lld: e4m3 input", N, K, M);
        }
      }
  // Shares the 4-warpgroup ring cannot hold in one wave: check_several_waves.
  check_several_waves(print);
  // Knobs reach the plans: copy_blocks and early_copies the wgmma plan, k_split every engine's,
  // pair_activations off where the default pairs.
  GemmConfig knobs;
  knobs.copy_blocks = 2;
  knobs.early_copies = 1;
  const GemmPlan k = choose_h200(5120, 4096, 4, false, knobs);
  CHECK(k.engine == GemmEngine::kWgmma && k.chunk_blocks == 2 && k.early_chunks == 1, "copy_blocks / early_copies");
  GemmConfig split8;
  split8.k_split = 8;
  CHECK(choose_h200(5120, 4096, 4, false, split8).k_split == 8, "forced k_split");
  GemmConfig unpaired;
  unpaired.pair_activations = Toggle::kOff;
  CHECK(choose_h200(5120, 4096, 16, false, auto_config).pair && !choose_h200(5120, 4096, 16, false, unpaired).pair,
        "pair_activations off");
}

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--table") == 0) {
    check_choose_gemm(/*print=*/true);
    std::printf("checks=%ld failures=%ld\n", checks, failures);
    return failures ? 1 : 0;
  }
  check_weight_units();
  check_k_permutation();
  check_activation_smem();
  check_plans();
  check_general_beyond_one_wave();
  check_staging();
  check_wgmma_ring();
  check_own_inbox();
  check_pair_activations();
  check_measured_k_splits();
  check_recorded_launches();
  check_measured_no_split();
  check_measured_pairing();
  check_measured_on_h100();
  check_window_major_without_a_split();
  check_small_quotient();
  check_exchange_split();
  check_partial_token_slots();
  check_register_fed();
  check_choose_gemm(/*print=*/false);
  std::printf("checks=%ld failures=%ld\n", checks, failures);
  return failures ? 1 : 0;
}
