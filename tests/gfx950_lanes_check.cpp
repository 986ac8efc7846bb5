// Host-side check of the gfx950 kernels' lane and offset formulas (kernels/gfx950/gfx950_mfma_layout.h)
// against SPEC §4 (weight layouts) and §7 (MFMA operand layout). Built with the host C++ compiler
// by tests/test_gfx950_lanes.py.
//
//   gfx950_lanes_check check             run every check, print "FAIL ..." lines, exit 1 on failure
//   gfx950_lanes_check dump N K shuffled print "tile kb lane half offset" for every weight fragment
//                                        half (the Python test checks them against torch's
//                                        view/permute definition of the shuffle)
//
// The SPEC formulas are written out again here, independently of kernels/common/weight_layout.h.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <map>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "gfx950/gfx950_mfma_layout.h"
#include "gfx950/gfx950_numerics.h"

using namespace sgl_fp8;
using namespace sgl_fp8::gfx950;

static int g_failures = 0;
static int g_checks = 0;

#define CHECK(cond, ...)                   \
  do {                                     \
    ++g_checks;                            \
    if (!(cond)) {                         \
      if (g_failures < 50) {               \
        printf("FAIL %s:%d: ", __FILE__, __LINE__); \
        printf(__VA_ARGS__);               \
        printf("\n");                      \
      }                                    \
      ++g_failures;                        \
    }                                      \
  } while (0)

// ---- SPEC, written out independently ---------------------------------------------------------

// SPEC §7: lane l holds row/col l%16; bytes 0-15 = K 16*(l/16)+j, bytes 16-31 = K 64+16*(l/16)+j.
static int spec7_k(int lane, int byte) { return byte < 16 ? 16 * (lane / 16) + byte : 64 + 16 * (lane / 16) + (byte - 16); }
// SPEC §7: c[i] of lane l = D[4*(l/16)+i][l%16].
static int spec7_d_row(int lane, int i) { return 4 * (lane / 16) + i; }
static int spec7_d_col(int lane) { return lane % 16; }

// SPEC §4: plain n*K + k; shuffled n0*16*K + k0*512 + k1*256 + n1*16 + k2.
static int64_t spec4_offset(int64_t n, int64_t k, int64_t K, bool shuffled) {
  if (!shuffled) return n * K + k;
  const int64_t n0 = n / 16, n1 = n % 16, k0 = k / 32, k1 = (k / 16) % 2, k2 = k % 16;
  return n0 * 16 * K + k0 * 512 + k1 * 256 + n1 * 16 + k2;
}
// Inverse of spec4_offset (by construction of the shuffle), for decoding what a byte holds.
static void spec4_decode(int64_t o, int64_t K, bool shuffled, int64_t* n, int64_t* k) {
  if (!shuffled) {
    *n = o / K;
    *k = o % K;
    return;
  }
  const int64_t n0 = o / (16 * K);
  int64_t r = o % (16 * K);
  const int64_t k0 = r / 512;
  r %= 512;
  const int64_t k1 = r / 256;
  r %= 256;
  const int64_t n1 = r / 16, k2 = r % 16;
  *n = 16 * n0 + n1;
  *k = 32 * k0 + 16 * k1 + k2;
}

// ---- checks -------------------------------------------------------------------------------------

// Fragment map == SPEC §7 for both operands, and each row/col's 128 K values covered once.
static void check_fragment_map() {
  for (int lane = 0; lane < kWaveLanes; ++lane) {
    CHECK(fragment_index(lane) == lane % 16, "fragment_index(%d)", lane);
    for (int byte = 0; byte < kFragmentBytes; ++byte)
      CHECK(fragment_k(lane, byte) == spec7_k(lane, byte), "fragment_k(%d,%d)=%d spec %d", lane, byte,
            fragment_k(lane, byte), spec7_k(lane, byte));
    for (int half = 0; half < 2; ++half) {
      CHECK(fragment_half_k(lane, half) % 16 == 0, "half start not 16-aligned");
      for (int j = 0; j < 16; ++j)
        CHECK(fragment_half_k(lane, half) + j == fragment_k(lane, 16 * half + j), "half %d not contiguous", half);
    }
  }
  for (int idx = 0; idx < 16; ++idx) {
    int count[kBlockK] = {0};
    for (int lane = 0; lane < kWaveLanes; ++lane)
      if (fragment_index(lane) == idx)
        for (int byte = 0; byte < kFragmentBytes; ++byte) ++count[fragment_k(lane, byte)];
    for (int k = 0; k < kBlockK; ++k) CHECK(count[k] == 1, "row/col %d: K %d covered %d times", idx, k, count[k]);
  }
}

// Accumulator map == SPEC §7 and each D element held by exactly one (lane, i); output offsets.
static void check_accumulators() {
  int count[16][16] = {{0}};
  for (int lane = 0; lane < kWaveLanes; ++lane)
    for (int i = 0; i < kAccPerLane; ++i) {
      CHECK(acc_row(lane, i) == spec7_d_row(lane, i), "acc_row(%d,%d)", lane, i);
      CHECK(acc_token(lane) == spec7_d_col(lane), "acc_token(%d)", lane);
      ++count[acc_row(lane, i)][acc_token(lane)];
    }
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) CHECK(count[r][c] == 1, "D[%d][%d] held %d times", r, c, count[r][c]);
  const int64_t N = 4096;
  for (int64_t tile : {0, 1, 7, 255})
    for (int64_t m0 : {0, 16, 48})
      for (int lane = 0; lane < kWaveLanes; ++lane)
        for (int i = 0; i < kAccPerLane; ++i) {
          const int64_t o = acc_output_offset(tile, m0, lane, i, N);
          CHECK(o == (m0 + spec7_d_col(lane)) * N + 16 * tile + spec7_d_row(lane, i), "acc_output_offset");
          if (i > 0) CHECK(o == acc_output_offset(tile, m0, lane, 0, N) + i, "accumulators not consecutive in N");
        }
}

// Weight A fragments for every tile and block of an (N, K) weight in one layout: the bytes each
// lane loads hold (row 16*tile + l%16, K 128*kb + fragment_k(l, byte)) per SPEC §4; the uniform /
// per-lane split is exact; every (row, k) of the tile-block is loaded exactly once; loads are
// 16-byte aligned; in the shuffled layout each load instruction (one half, 64 lanes) reads 1024
// contiguous bytes; the block scale index is the row-block's.
static void check_weight_fragments(int64_t N, int64_t K, bool shuffled) {
  const int64_t tiles = N / 16, KB = K / 128;
  std::vector<uint8_t> seen(static_cast<size_t>(N * K), 0);
  for (int64_t tile = 0; tile < tiles; ++tile)
    for (int64_t kb = 0; kb < KB; ++kb) {
      const int64_t base = weight_unit_base(tile, kb, K, shuffled);
      for (int half = 0; half < 2; ++half) {
        int64_t lo = INT64_MAX, hi = INT64_MIN;
        for (int lane = 0; lane < kWaveLanes; ++lane) {
          const int64_t start = base + weight_lane_offset(lane, half, K, shuffled);
          CHECK(start % 16 == 0, "weight load not 16-byte aligned (N=%lld K=%lld)", (long long)N, (long long)K);
          CHECK(weight_lane_offset(lane, half, K, shuffled) < (int64_t{1} << 31), "lane offset exceeds 31 bits");
          lo = start < lo ? start : lo;
          hi = start + 16 > hi ? start + 16 : hi;
          for (int j = 0; j < 16; ++j) {
            const int64_t o = start + j;
            const int64_t n_expect = 16 * tile + fragment_index(lane);
            const int64_t k_expect = 128 * kb + fragment_k(lane, 16 * half + j);
            CHECK(o == spec4_offset(n_expect, k_expect, K, shuffled), "weight byte offset mismatch");
            CHECK(o == weight_chunk16_offset(n_expect, k_expect - (k_expect % 16), K, shuffled) + (k_expect % 16),
                  "split != weight_layout.h");
            int64_t n, k;
            spec4_decode(o, K, shuffled, &n, &k);
            CHECK(n == n_expect && k == k_expect, "decoded (%lld,%lld) expected (%lld,%lld)", (long long)n, (long long)k,
                  (long long)n_expect, (long long)k_expect);
            if (o >= 0 && o < N * K) ++seen[static_cast<size_t>(o)];
          }
        }
        if (shuffled) CHECK(hi - lo == 1024, "shuffled half load spans %lld bytes, expected 1024", (long long)(hi - lo));
      }
      for (int lane = 0; lane < kWaveLanes; ++lane)
        CHECK(weight_scale_index(tile, kb, KB) == ((16 * tile + fragment_index(lane)) / 128) * KB + kb,
              "weight_scale_index");
      // The kernel's buffer starts at its first tile t0 and adds the unit offset of (tile - t0):
      // weight_unit_base is affine in the tile index.
      for (int64_t t0 = 0; t0 <= tile; ++t0)
        CHECK(weight_unit_base(tile, kb, K, shuffled) ==
                  weight_unit_base(t0, 0, K, shuffled) + weight_unit_base(tile - t0, kb, K, shuffled),
              "weight_unit_base not affine in the tile");
    }
  for (int64_t o = 0; o < N * K; ++o)
    CHECK(seen[static_cast<size_t>(o)] == 1, "weight byte %lld loaded %d times (N=%lld K=%lld %s)", (long long)o,
          seen[static_cast<size_t>(o)], (long long)N, (long long)K, shuffled ? "shuffled" : "plain");
}

// Pre-quantized activations (scaled_gemm): lane l's B bytes hold (token m0 + l%16, K 128*kb +
// fragment_k(l, byte)): the same K map as the weight fragment.
static void check_activation_fragments() {
  for (int64_t stride : {128, 384, 4096 + 256})
    for (int64_t m0 : {0, 16})
      for (int64_t kb : {0, 1, 2}) {
        if ((kb + 1) * 128 > stride) continue;
        for (int lane = 0; lane < kWaveLanes; ++lane)
          for (int half = 0; half < 2; ++half)
            for (int j = 0; j < 16; ++j) {
              const int64_t o = activation_fragment_offset(m0, kb, lane, half, stride) + j;
              CHECK(o / stride == m0 + fragment_index(lane), "activation row");
              CHECK(o % stride == 128 * kb + fragment_k(lane, 16 * half + j), "activation K differs from weight K");
            }
      }
}

// In-kernel quantization (bf16/fp16 -> e4m3 via LDS): simulate the steps of one piece for every
// token count 1..16 and blocks 1..2^shift, and check that
//  * each group's 16 lanes load its 128 consecutive elements exactly once (8 per lane),
//  * the LDS bytes each lane's B fragment reads hold (token l%16, K fragment_k(l, byte)) of its
//    block, i.e. the same K map as the weight fragment, and the zero row for padding tokens,
//  * the scale dword a lane reads is its (token, block) group's,
//  * every access is aligned and inside the staging area.
static void check_quant_staging() {
  const int64_t stride = 1000;  // any row stride: offsets decode by division
  for (int tokens = 1; tokens <= 16; ++tokens) {
    const int shift = quant_piece_shift(tokens);
    CHECK((tokens << shift) <= kLdsMaxRows, "piece exceeds LDS rows");
    const int steps = quant_steps(tokens, shift);
    CHECK(steps <= 4, "more than 4 steps per piece");
    for (int blocks = 1; blocks <= (1 << shift); ++blocks) {
      // lds[byte] = encoded (token, block, k) + 1; 0 = never written.
      std::vector<int> lds(kLdsQuantBytes, -1);
      for (int b = 0; b < kLdsRowBytes; ++b) lds[lds_zero_row() * kLdsRowBytes + b] = 0;  // zero row
      lds[lds_scale_offset(lds_zero_row())] = 0;
      std::map<std::pair<int, int>, int> elems_loaded;  // (token, block) -> elements
      std::set<std::tuple<int, int, int>> loaded;
      for (int s = 0; s < steps; ++s)
        for (int lane = 0; lane < kWaveLanes; ++lane) {
          const int slot = quant_group_slot(s, lane);
          const int token = quant_slot_token(slot, shift), block = quant_slot_block(slot, shift);
          const int64_t off = quant_load_offset(s, lane, shift, stride);
          // what the load reads, relative to (m0, kb0)
          const int64_t t_load = off / stride, k_load = off % stride;
          CHECK(t_load == token, "quant load row != slot token");
          CHECK(k_load / 128 == block, "quant load block != slot block");
          CHECK(k_load % 8 == 0, "quant load not 16-byte aligned");
          if (token >= tokens || block >= blocks) continue;  // slot past the piece: not stored
          for (int e = 0; e < kQuantElemsPerLane; ++e) {
            const int k = quant_elem_k(lane, e);
            CHECK(k_load % 128 + e == k, "element order");
            CHECK(loaded.insert({token, block, k}).second, "element loaded twice");
          }
          elems_loaded[std::make_pair(token, block)] += kQuantElemsPerLane;
          const int row = lds_row(token, block, shift);
          CHECK(row < kLdsMaxRows, "row out of range");
          const int w = lds_quant_write_offset(row, lane);
          const bool in_range = w >= 0 && w % 8 == 0 && w + 8 <= kLdsScaleBase && row >= 0 && row < kLdsMaxRows;
          CHECK(in_range, "LDS write misaligned / out of the row area");
          if (!in_range) continue;
          for (int e = 0; e < 8; ++e) lds[w + e] = 1 + ((token * 4 + block) * 128 + quant_elem_k(lane, e));
          if ((lane & 15) == 0) lds[lds_scale_offset(row)] = 1 + (token * 4 + block);
        }
      for (int t = 0; t < tokens; ++t)
        for (int b = 0; b < blocks; ++b) {
          const int have = elems_loaded[std::make_pair(t, b)];
          CHECK(have == 128, "group (%d,%d) has %d elements", t, b, have);
        }
      for (int b = 0; b < blocks; ++b)
        for (int lane = 0; lane < kWaveLanes; ++lane) {
          const int row = lds_fragment_row(b, lane, tokens, shift);
          const int token = fragment_index(lane);
          const bool row_ok = row >= 0 && row <= lds_zero_row() && lds_scale_offset(row) % 4 == 0 &&
                              lds_scale_offset(row) + 4 <= kLdsQuantBytes;
          CHECK(row_ok, "fragment row / scale slot out of range");
          if (!row_ok) continue;
          const int sv = lds[lds_scale_offset(row)];
          if (token < tokens) CHECK(sv == 1 + (token * 4 + b), "scale of token %d block %d: %d", token, b, sv);
          else CHECK(sv == 0, "padding token scale not the zero slot");
          for (int half = 0; half < 2; ++half) {
            const int r = lds_fragment_read_offset(row, lane, half);
            const bool read_ok = r >= 0 && r % 16 == 0 && r + 16 <= kLdsScaleBase;
            CHECK(read_ok, "LDS fragment read misaligned / out of range");
            if (!read_ok) continue;
            for (int j = 0; j < 16; ++j) {
              const int v = lds[r + j];
              if (token < tokens)
                CHECK(v == 1 + ((token * 4 + b) * 128 + fragment_k(lane, 16 * half + j)),
                      "tokens=%d blocks=%d lane %d half %d byte %d holds %d", tokens, blocks, lane, half, j, v);
              else
                CHECK(v == 0, "padding token lane %d reads non-zero", lane);
            }
          }
        }
    }
  }
  // The zero row is cleared exactly by lanes 0..kLdsZeroRowLanes-1; each group has one leader.
  {
    std::vector<int> hits(kLdsQuantBytes, 0);
    for (int lane = 0; lane < kLdsZeroRowLanes; ++lane)
      for (int b = 0; b < 16; ++b) ++hits[lds_zero_row_offset(lane) + b];
    for (int b = 0; b < kLdsQuantBytes; ++b) {
      const bool in_zero_row = b >= lds_zero_row() * kLdsRowBytes && b < (lds_zero_row() + 1) * kLdsRowBytes;
      CHECK(hits[b] == (in_zero_row ? 1 : 0), "zero row clear covers byte %d %d times", b, hits[b]);
    }
    std::map<int, int> leaders;
    for (int lane = 0; lane < kWaveLanes; ++lane)
      if (quant_group_leader(lane)) ++leaders[quant_group_slot(0, lane)];
    CHECK(leaders.size() == static_cast<size_t>(kQuantGroupsPerStep), "groups with a leader");
    for (const auto& kv : leaders) CHECK(kv.second == 1, "group %d has %d leaders", kv.first, kv.second);
  }
  // 16 rows one fragment-load instruction touches (16 lanes, one token each) start in distinct
  // bank groups (64 banks x 4 bytes): the 144-byte pitch.
  for (int half = 0; half < 2; ++half)
    for (int g = 0; g < 4; ++g) {
      std::set<int> banks;
      for (int t = 0; t < 16; ++t) {
        const int r = lds_fragment_read_offset(lds_row(t, 0, 0), 16 * g + t, half);
        for (int d = 0; d < 4; ++d) banks.insert((r / 4 + d) % 64);
      }
      CHECK(banks.size() == 64, "fragment read of 16 lanes hits %zu of 64 banks", banks.size());
    }
}

// Cross-wave reduction slots: distinct, 16-byte aligned, inside W regions, and the region holds
// the staging area when quantizing.
static void check_reduction() {
  for (int chunks = 1; chunks <= 2; ++chunks)
    for (int R = 1; R <= 2; ++R)
      for (int quant = 0; quant <= 1; ++quant) {
        const int region = lds_wave_region_bytes(chunks, R, quant != 0);
        CHECK(region % 16 == 0, "region not 16-byte multiple");
        if (quant) CHECK(region >= kLdsQuantBytes, "region smaller than the staging area");
        CHECK(region >= chunks * R * kLdsReduceUnitBytes, "region smaller than the partials");
        for (int W = 1; W <= kMaxWaves; W *= 2) {
          std::set<int> slots;
          for (int w = 0; w < W; ++w)
            for (int u = 0; u < chunks * R; ++u)
              for (int lane = 0; lane < kWaveLanes; ++lane) {
                const int o = lds_reduce_offset(w, u, lane, region);
                CHECK(o % 16 == 0 && o + 16 <= W * region, "reduce slot out of range");
                CHECK(o >= w * region && o + 16 <= (w + 1) * region, "reduce slot outside its wave's region");
                CHECK(slots.insert(o).second, "reduce slot reused");
              }
          CHECK(W * region <= 160 * 1024, "LDS over the gfx950 160 KiB");
        }
      }
}

// End to end on the CPU: build the A and B fragments exactly as the kernel does (weights through
// weight_unit_base/weight_lane_offset in either layout, activations through the quantization
// staging or the direct e4m3 path), run an MFMA emulator whose hardware K order is a parameter
// (the SPEC §7 order, and two other permutations), and compare D with W . X^T computed directly.
// Integer-valued data, so the comparison is exact.
static void check_mfma_emulation() {
  std::mt19937 rng(12345);
  const int64_t N = 48, K = 384, M = 16;
  std::vector<int> w(N * K), x(M * K);
  for (auto& v : w) v = static_cast<int>(rng() % 15) - 7;
  for (auto& v : x) v = static_cast<int>(rng() % 15) - 7;
  for (int layout = 0; layout < 2; ++layout) {
    const bool shuffled = layout == 1;
    std::vector<int> wmem(N * K);  // the weight in memory, per SPEC §4
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) wmem[spec4_offset(n, k, K, shuffled)] = w[n * K + k];
    for (int hw = 0; hw < 3; ++hw) {
      // Hardware K of (lane, byte): SPEC §7, "32 consecutive per lane group", and reversed.
      auto hw_k = [&](int lane, int byte) {
        if (hw == 0) return spec7_k(lane, byte);
        if (hw == 1) return 32 * (lane / 16) + byte;
        return 127 - spec7_k(lane, byte);
      };
      for (int64_t tile = 0; tile < N / 16; ++tile) {
        long long D[16][16] = {{0}};
        for (int64_t kb = 0; kb < K / 128; ++kb) {
          int A[64][32], B[64][32];
          for (int lane = 0; lane < 64; ++lane)
            for (int half = 0; half < 2; ++half)
              for (int j = 0; j < 16; ++j) {
                A[lane][16 * half + j] =
                    wmem[weight_unit_base(tile, kb, K, shuffled) + weight_lane_offset(lane, half, K, shuffled) + j];
                B[lane][16 * half + j] = x[activation_fragment_offset(0, kb, lane, half, K) + j];
              }
          // D[r][c] += sum over hardware K: A's row r and B's col c contribute the byte whose hw K matches.
          for (int r = 0; r < 16; ++r)
            for (int c = 0; c < 16; ++c) {
              long long s = 0;
              int a_at[128], b_at[128];
              for (int lane = 0; lane < 64; ++lane)
                for (int byte = 0; byte < 32; ++byte) {
                  if (lane % 16 == r) a_at[hw_k(lane, byte)] = A[lane][byte];
                  if (lane % 16 == c) b_at[hw_k(lane, byte)] = B[lane][byte];
                }
              for (int k = 0; k < 128; ++k) s += static_cast<long long>(a_at[k]) * b_at[k];
              D[r][c] += s;
            }
        }
        for (int lane = 0; lane < 64; ++lane)
          for (int i = 0; i < 4; ++i) {
            const int64_t n = 16 * tile + acc_row(lane, i), m = acc_token(lane);
            long long ref = 0;
            for (int64_t k = 0; k < K; ++k) ref += static_cast<long long>(w[n * K + k]) * x[m * K + k];
            const long long got = D[spec7_d_row(lane, i)][spec7_d_col(lane)];
            CHECK(got == ref, "emulated MFMA %s hw-order %d: out[%lld][%lld] = %lld, reference %lld",
                  shuffled ? "shuffled" : "plain", hw, (long long)m, (long long)n, got, ref);
          }
      }
    }
  }
}

// Numeric helpers: the packed 16-bit magnitude keys order exactly like the fp32 keys of the
// converted values (all 32768 magnitudes of bf16 and of fp16), the bf16 rounding matches the
// c10 reference, the e8m0 operand replicates the byte.
static void check_numerics() {
  for (int fmt = 0; fmt < 2; ++fmt) {
    uint32_t prev = 0;
    for (uint32_t h = 0; h < 0x8000u; ++h) {
      const uint32_t key32 = fmt == 0 ? bf16_key16_to_key32(h) : fp16_key16_to_key32(h);
      const float f = fmt == 0 ? bf16_bits_to_f32(static_cast<uint16_t>(h)) : fp16_bits_to_f32(static_cast<uint16_t>(h));
      CHECK(key32 == magnitude_key(f), "key32 of %s %04x", fmt ? "fp16" : "bf16", h);
      CHECK(magnitude_key16(h | 0x8000u) == magnitude_key16(h), "sign not dropped");
      if (h > 0) CHECK(key32 > prev, "%s key not increasing at %04x", fmt ? "fp16" : "bf16", h);
      prev = key32;
    }
    CHECK(magnitude_key16x2(0xFFFF8001u) == 0x7FFF0001u, "packed key");
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) {
    const uint32_t u = static_cast<uint32_t>(rng());
    const float f = f32_from_bits(u);
    uint32_t ref;
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) ref = 0x7FC0u;
    else ref = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    CHECK(bf16_bits_from_f32_rne(f) == ref, "bf16 rne %08x", u);
  }
  CHECK(bf16_bits_from_f32_rne(f32_from_bits(0x3F808000u)) == 0x3F80u, "tie to even (down)");
  CHECK(bf16_bits_from_f32_rne(f32_from_bits(0x3F818000u)) == 0x3F82u, "tie to even (up)");
  CHECK(e8m0_scale_operand(127) == 0x7F7F7F7Fu, "e8m0 operand");
  CHECK(group_is_finite(0x7F7FFFFFu) && !group_is_finite(0x7F800000u) && !group_is_finite(0x7FC00000u), "finite");
}

static int run_checks() {
  check_fragment_map();
  check_accumulators();
  const int64_t shapes[][2] = {{16, 128}, {48, 384}, {128, 256}, {144, 1024}, {256, 2048}};
  for (const auto& s : shapes)
    for (int sh = 0; sh < 2; ++sh) check_weight_fragments(s[0], s[1], sh == 1);
  check_activation_fragments();
  check_quant_staging();
  check_reduction();
  check_mfma_emulation();
  check_numerics();
  printf("%d checks, %d failures\n", g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  if (argc >= 2 && strcmp(argv[1], "check") == 0) return run_checks();
  if (argc == 5 && strcmp(argv[1], "dump") == 0) {
    const int64_t N = atoll(argv[2]), K = atoll(argv[3]);
    const bool shuffled = atoi(argv[4]) != 0;
    for (int64_t tile = 0; tile < N / 16; ++tile)
      for (int64_t kb = 0; kb < K / 128; ++kb)
        for (int lane = 0; lane < kWaveLanes; ++lane)
          for (int half = 0; half < 2; ++half)
            printf("%lld %lld %d %d %lld\n", (long long)tile, (long long)kb, lane, half,
                   (long long)(weight_unit_base(tile, kb, K, shuffled) + weight_lane_offset(lane, half, K, shuffled)));
    return 0;
  }
  fprintf(stderr, "usage: %s check | dump N K shuffled\n", argv[0]);
  return 2;
}
