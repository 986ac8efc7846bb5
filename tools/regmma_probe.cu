// A probe of a design the fused op has not tried (session 35): the weight read straight into
// registers by many small CTAs (16 rows each, 3 an SM), decoded e4m3 -> f16 in registers and
// multiplied by mma.sync m16n8k16 (f16 in, fp32 accumulate), with no shared-memory weight ring,
// no TMA, no cluster and no K-split exchange across CTAs.
//
// Why: sessions 26-34 measured that the TMA + wgmma design's MMAs follow a CTA's last landing (a
// share requested at once lands in a burst near the end), and `tools/stream_ceiling.py`'s ldg
// kernels read the same weight bytes with plain 16-byte loads at 0.84-0.93 of the floor when 2-4
// CTAs share an SM (h200_stream_ceiling.json). Earlier register-fed kernels (v1-v5, the RS wgmma
// probe of session 20) ran one fat CTA an SM. Here every warp consumes its own loads as they return,
// so its work overlaps the stream rather than following it.
//
// What it does (everything of smallm_gemm but the activation quantization and bias):
//   CTA b (256 threads, 8 warps) owns output rows [16 b, 16 b + 16) over the whole K; warp w owns
//   K slice [w K / 8, (w + 1) K / 8): K_BLOCKS = K / 1024 blocks of 128.
//   Thread (g = lane / 4, t = lane % 4) loads 16 contiguous bytes of rows g and g + 8 at K offset
//   64 c + 16 t of each 64-K chunk c. Inside a chunk, mma s (0..3) takes bytes 4 s .. 4 s + 3 of
//   the thread's piece: bytes 4 s, 4 s + 1 as the A pair of logical k {2t, 2t + 1}, bytes 4 s + 2,
//   4 s + 3 as {2t + 8, 2t + 9}. The activations (e4m3, already quantized, in shared memory) are
//   read under the same K order, so the products pair the right k (a K permutation, no data moved).
//   Per 128-K block: 8 mma into a fresh fp32 accumulator, then total += acc * xs[m][kb] * ws[n/128][kb].
//   The 8 warps' partials are summed through shared memory in a fixed order (no atomics) and
//   written as bf16.
//   PDL as the fused kernel: the first two blocks of weight loads before griddepcontrol.wait; the
//   activations, scales and output after it.
//
// Inputs: w e4m3 [n][k] row-major; ws fp32 [ceil(n/128)][k/128]; act e4m3 as [k/64][m][64]
// (token-major inside each 64-K chunk); xs fp32 [m][k/128]; out bf16 [m][n].
// Limits (checked): n % 16 == 0, k in {2048, 4096}, 1 <= m <= 16.
//
// Plain CUDA, built and called by tools/regmma_probe.py through ctypes.

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

// The library's own wrappers: the streaming load, cvt e4m3x2 -> f16x2, mma.sync m16n8k16, griddepcontrol.
#include "../kernels/sm90/sm90_ptx.cuh"
// kQuantize: the library's bit-exact 1x128 quantization (SPEC §3.1): magnitude keys, group parameters, e4m3x8_of.
#include "../kernels/sm90/sm90_quant.cuh"

namespace {

using namespace sgl_fp8::sm90;
using sgl_fp8::GroupQuantParams;

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

// One 128-K block of this thread's two rows: chunk c's row-g piece in [2c], row g + 8's in [2c + 1].
__device__ __forceinline__ void load_block(uint4 (&dst)[4], const uint8_t* row_g, const uint8_t* row_g8, int block) {
#pragma unroll
  for (int c = 0; c < 2; ++c) {
    dst[2 * c] = load_streaming_16B(row_g + block * 128 + c * 64);
    dst[2 * c + 1] = load_streaming_16B(row_g8 + block * 128 + c * 64);
  }
}

// kRows4: load i (0..3) of a 16-row block, or (0..1) of an 8-row one: rows 4i .. 4i + 3, 128 bytes each.
__device__ __forceinline__ uint4 load_rows4(const uint8_t* w, int k, int row0, int k0, int block, int i) {
  const int lane = threadIdx.x & 31;
  return load_streaming_16B(w + (size_t)(row0 + 4 * i + lane / 8) * k + k0 + 128 * block + 16 * (lane % 8));
}

// kContiguous: the warp's load j (of its 16-row x `slice` region, row-major) is the 512 bytes at offset
// 512 j; this lane's 16 of them. Same byte count and load count as the fragment pattern.
__device__ __forceinline__ uint4 load_contiguous(const uint8_t* w, int k, int row0, int k0, int slice, int j) {
  const int o = j * 512 + 16 * (threadIdx.x & 31);
  return load_streaming_16B(w + (size_t)(row0 + o / slice) * k + k0 + o % slice);
}

// Diagnostic variants (garbage outputs): what each part of the work costs in this structure.
enum Diag : int {
  kFull = 0,       // the GEMM
  kNoDecode = 1,   // the raw e4m3 words go into the mma as if f16 (no cvt)
  kNoMma = 2,      // the decoded words are folded into the accumulators with XOR + add (no mma)
  kLoadsOnly = 3,  // the raw words are folded (no cvt, no mma); activations, scales and reduction kept
  kBare = 4,       // 8-row kernel only: the weight loads and nothing else (no activations, scales, reduction or
                   // output but one XOR word a warp): the probe's geometry as a read-only kernel (session 36)
};

// Options (bits of OPTS).
enum Opt : int {
  kAct16 = 1,       // the warp decodes its activations to f16 once, into shared memory, not in the loop
  kAllAtEntry = 2,  // three weight blocks of the thread in flight before the wait (all of them where k = 2048;
                    // four spill at 3 CTAs an SM), else two; then one a block
  kNoActivations = 4,  // diagnostic: no activations, no xs (zeros; nothing read after the wait but the output)
  kContiguous = 8,     // diagnostic, with kLoadsOnly: the same bytes and loads, but each warp instruction reads
                       // 512 contiguous bytes (one or two whole rows of the warp's K slice) instead of the
                       // mma fragments' 8 rows x 64 bytes: is the fragment pattern what slows the stream?
  kRows4 = 16,         // diagnostic, with kLoadsOnly: each warp instruction reads 4 rows x 128 bytes (one
                       // K block of each, whole cache lines), block by block as the GEMM consumes them: the
                       // pattern a block-pipelined GEMM could load and then move into fragment order
  kTranspose = 32,     // with kRows4, the GEMM itself: each block's 4 x 128 pieces go through 2 KB of shared
                       // memory a warp (16-byte units of row r XOR-swizzled by (r & 1) << 2: conflict-free
                       // stores and fragment reads) and come back in the fragment pattern
  kHeadroom = 64,      // fewer registers a thread (launch bounds of 4 CTAs an SM for the 16-row kernel, 7 for
                       // the 8-row one: 8 spill), so the grid leaves room on each SM for the next launch's CTAs to
                       // start under PDL and put their loads in flight while this launch finishes (session 36)
  kRotateK = 128,      // fragment pattern, either kernel: CTA b's warps walk the K blocks rotated by b (mod k / 128):
                       // warp w's step i takes block (w K_BLOCKS + i + b) mod (k / 128), so CTAs that run at once do
                       // not read from the same offsets of their 32 KB shares together (session 36, call 8:
                       // staggering the bare reads was worth 0.8-1.0 us); a K permutation, so the GEMM is the same
  kRotateBy4 = 256,    // with kRotateK: CTA b's rotation is 4 b blocks (512 b bytes of each row, mod k), the stagger
                       // of bare variant 419, not b blocks (session 37)
  kPlainWait = 1024,   // the plain griddepcontrol.wait every instance had before session 37, which ptxas schedules
                       // above the weight loads written before it (see the SASS): the loads wait for the previous
                       // launch. Without it they stay above it (wait_after_entry_loads).
  kQuantize = 2048,    // 16-row kernel (session 37): `act` is the bf16 activations x [m][k], quantized in the kernel per
                       // SPEC §3.1 (fp32 scales) into the shared-memory layout the e4m3 input had, scales beside it;
                       // pairs (token, block) of the warp's slice go to its 8 lane quads (lane t: 32 values), in
                       // passes of 8 pairs, all after the wait and before the first block's MMAs
  kQuantFast = 4096,   // with kQuantize: 8 lanes a pair (16 values a lane, 4 pairs a pass: every lane busy at 1 token)
                       // and the next pass's bf16 loads issued before this pass's math (one L2 latency, not one a pass)
  kQuantCluster = 8192,  // with kQuantize: clusters of 8 CTAs share the quantization: CTA rank r quantizes K blocks
                         // [r, r + 1) k / 1024 for every token, one pair (token, block) a lane quad, and stores them
                         // into all 8 CTAs' shared memory (st.shared::cluster), then a cluster barrier: each CTA
                         // quantizes an eighth of the activations, not all of them
  kSmemCap = 512,      // unused dynamic shared memory up to the SM's share of the kernel's CTAs an SM (3 / 5), as
                       // bare_rows_kernel has (session 37, call 2: the same addresses read at 0.86 there and 0.72 in
                       // the 8-row kernel: is it the L1 / shared split, or the CTAs an SM?)
};

constexpr int kQuantClusterSize = 8;

// 16 bytes / 4 bytes into the shared memory of a CTA of the cluster (a shared::cluster address from mapa).
__device__ __forceinline__ void store_to_cluster(uint32_t address, uint4 v) {
  asm volatile("st.shared::cluster.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(address), "r"(v.x), "r"(v.y), "r"(v.z),
               "r"(v.w)
               : "memory");
}
__device__ __forceinline__ void store_to_cluster(uint32_t address, float v) {
  asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(address), "f"(v) : "memory");
}

// kQuantize: lane t of a quad quantizes the 32 bf16 values at 32 t of token tok's 128-group kb of x [m][k] (SPEC
// §3.1, fp32 scale: the library's quantize_quad_share), the quad's 4 lanes together the group; every lane of the
// warp takes part in the shuffles (a lane that is not `live` brings zeros). Its 32 e4m3 bytes in K order into `bytes`.
__device__ __forceinline__ GroupQuantParams quantize_32_of_group(const uint8_t* act, int k, int tok, int kb, int t,
                                                                 bool live, uint4 (&bytes)[2]) {
  return quantize_quad_share<false>(act + ((size_t)tok * k + (size_t)kb * 128 + 32 * t) * 2, live, false, bytes);
}

// The wait for the previous grid, with the weight loads issued at entry kept above it (session 37). ptxas
// (CUDA 13.0, -O3) moves loads whose results are first used after griddepcontrol.wait below it, so they wait
// for the previous launch to end: every instance before session 37 did (kPlainWait keeps that). A use of
// them on a branch that is never taken (m < 1; `valid` requires m >= 1) keeps them above the wait: ptxas does
// not sink them into both paths (checked in the SASS: tests/test_tools.py). Returns true on that branch.
template <int OPTS, int AHEAD, int BLOCKS, int PIECES>
__device__ __forceinline__ bool wait_after_entry_loads(const uint4 (&buf)[BLOCKS][PIECES], int m, void* out) {
  if constexpr ((OPTS & kPlainWait) == 0) {
    if (m < 1) {
      uint32_t fold = 0;
#pragma unroll
      for (int b = 0; b < AHEAD; ++b)
#pragma unroll
        for (int i = 0; i < PIECES; ++i) fold ^= buf[b][i].x ^ buf[b][i].y ^ buf[b][i].z ^ buf[b][i].w;
      static_cast<uint32_t*>(out)[blockIdx.x * blockDim.x + threadIdx.x] = fold;
      return true;
    }
  }
  wait_for_previous_grid();
  return false;
}

// Dynamic shared memory a CTA with kSmemCap: stream_ceiling.py's cap_smem(ctas) = (228 KB / ctas - 2 KB) rounded
// down to 128 B (1 KB reserved a CTA, 1 KB of static shared memory), less the static memory past 1 KB.
constexpr size_t capped_smem(int ctas, size_t static_bytes) {
  return ((size_t)233472 / ctas - 2048) / 128 * 128 - (static_bytes > 1024 ? static_bytes - 1024 : 0);
}

// The K blocks CTA b's kRotateK rotation starts at (mod the k / 128 blocks).
template <int OPTS>
__device__ __forceinline__ int rotation_blocks(int all_blocks) {
  return int(((OPTS & kRotateBy4) ? 4u * blockIdx.x : blockIdx.x) % unsigned(all_blocks));
}

// CTAs an SM each kernel's launch bounds ask for (kHeadroom: more, with fewer registers a thread).
constexpr int min_ctas_16row(int opts) { return (opts & kHeadroom) ? 4 : 3; }
constexpr int min_ctas_8row(int opts) { return (opts & kHeadroom) ? 7 : 5; }

// NT = token tiles of 8 (1: m <= 8, 2: m <= 16); K_BLOCKS = 128-K blocks a warp (k / 1024).
template <int NT, int K_BLOCKS, int DIAG, int OPTS>
__global__ void __launch_bounds__(kThreads, min_ctas_16row(OPTS))
    regmma_kernel(const uint8_t* __restrict__ w, const float* __restrict__ ws, const uint8_t* __restrict__ act,
                  const float* __restrict__ xs, __nv_bfloat16* __restrict__ out, int n, int k, int m) {
  extern __shared__ __align__(16) uint8_t smem[];  // activations [k/64][m][64] (e4m3, or f16), then the partials
  constexpr bool ACT16 = (OPTS & kAct16) != 0, NO_ACT = (OPTS & kNoActivations) != 0;
  constexpr int kAhead = (OPTS & kAllAtEntry) ? (K_BLOCKS < 3 ? K_BLOCKS : 3) : (K_BLOCKS < 2 ? K_BLOCKS : 2);
  constexpr bool CONTIG = (OPTS & kContiguous) != 0, ROWS4 = (OPTS & kRows4) != 0;
  constexpr bool TRANSPOSE = (OPTS & kTranspose) != 0;
  constexpr bool ROTATE = (OPTS & kRotateK) != 0;
  constexpr bool QUANT = (OPTS & kQuantize) != 0;
  constexpr bool QCLUSTER = (OPTS & kQuantCluster) != 0;
  static_assert(!QCLUSTER || (QUANT && !ROTATE && !(OPTS & kQuantFast)), "kQuantCluster is kQuantize's alternative");
  static_assert(!QUANT || !(ACT16 || NO_ACT || CONTIG || ROWS4), "kQuantize writes e4m3 in the fragment layout");
  static_assert(!TRANSPOSE || ROWS4, "the transpose takes the 4 x 128 pattern");
  static_assert(!ROTATE || !(CONTIG || ROWS4 || ACT16), "the rotation is the fragment pattern's, e4m3 activations");
  static_assert(!(CONTIG || ROWS4) || DIAG == kLoadsOnly || TRANSPOSE,
                "the other load patterns are loads-only diagnostics unless transposed");
  constexpr int kActBytes = ACT16 ? 2 : 1;
  allow_next_grid_launch();
  if (QCLUSTER) cluster_arrive_relaxed();  // peers may store into this CTA's shared memory once every CTA has arrived
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int row0 = blockIdx.x * 16;
  const int k0 = warp * K_BLOCKS * 128;
  const uint8_t* row_g = w + (size_t)(row0 + g) * k + (ROTATE ? 0 : k0) + 16 * t;
  const uint8_t* row_g8 = row_g + (size_t)8 * k;
  // kRotateK (session 36): warp w's step b takes K block (w K_BLOCKS + b + CTA) mod (k / 128) instead of k0 / 128 + b
  constexpr int kAllBlocks = 8 * K_BLOCKS;  // k / 128
  auto block_of = [&](int b) { return (warp * K_BLOCKS + b + rotation_blocks<OPTS>(kAllBlocks)) % kAllBlocks; };
  auto step_block = [&](int b) { return ROTATE ? block_of(b) : b; };  // load_block's block past row_g

  // The weight never depends on the previous kernel: two blocks in flight before the wait.
  uint4 wbuf[K_BLOCKS][4];  // fully unrolled: block b's registers are live from its load to its use
#pragma unroll
  for (int b = 0; b < kAhead; ++b) {
    if (CONTIG) {
#pragma unroll
      for (int i = 0; i < 4; ++i) wbuf[b][i] = load_contiguous(w, k, row0, k0, K_BLOCKS * 128, 4 * b + i);
    } else if (ROWS4) {
#pragma unroll
      for (int i = 0; i < 4; ++i) wbuf[b][i] = load_rows4(w, k, row0, k0, b, i);
    } else {
      load_block(wbuf[b], row_g, row_g8, step_block(b));
    }
  }
  if (wait_after_entry_loads<OPTS, kAhead>(wbuf, m, out)) return;

  // This warp's activations (its own chunks only) into shared memory: 16-byte units.
  const int chunk0 = k0 / 64;
  const int kblocks = k / 128;
  float* xs_smem = reinterpret_cast<float*>(smem + (size_t)m * k + (size_t)kWarps * 8 * NT * 16 * sizeof(float));
  // kQuantize: pass p quantizes pairs 8 p .. 8 p + 7 (pair i: the warp's block i / m, token i % m), quad g the
  // pair 8 p + g, lane t of it the 32 values at 32 t of the 128: e4m3 into smem at chunk 2 kb + t / 2, byte
  // 32 (t % 2) of the token's 64, and the scale (lane t = 0) into xs_smem[token][kb].
  auto quantize_pass = [&](int pass) {
    const int pair = 8 * pass + g;
    const bool live = pair < m * K_BLOCKS;
    const int bl = live ? pair / m : 0, tok = live ? pair % m : 0;
    const int kb = ROTATE ? block_of(bl) : k0 / 128 + bl;
    uint4 bytes[2];
    const GroupQuantParams qp = quantize_32_of_group(act, k, tok, kb, t, live, bytes);
    if (live) {
      uint8_t* dst = smem + ((size_t)(2 * kb + (t >> 1)) * m + tok) * 64 + 32 * (t & 1);
      *reinterpret_cast<uint4*>(dst) = bytes[0];
      *reinterpret_cast<uint4*>(dst + 16) = bytes[1];
      if (t == 0) xs_smem[tok * kblocks + kb] = qp.scale;
    }
  };
  // kQuantFast: pass p's lane run r = lane / 8 takes pair 4 p + r, lane l8 = lane % 8 of it the 16 values at
  // 16 l8: e4m3 at chunk 2 kb + l8 / 4, byte 16 (l8 % 4) of the token's 64; the next pass's loads go first.
  const int l8 = lane & 7;
  auto fast_pair = [&](int pass, int& kb, int& tok) {
    const int pair = 4 * pass + (lane >> 3);
    const bool live = pair < m * K_BLOCKS;
    kb = ROTATE ? block_of(live ? pair / m : 0) : k0 / 128 + (live ? pair / m : 0);
    tok = live ? pair % m : 0;
    return live;
  };
  auto fast_load = [&](int pass, uint4 (&raw)[2]) {
    int kb, tok;
    const bool live = fast_pair(pass, kb, tok);
    const uint4* src = reinterpret_cast<const uint4*>(act + ((size_t)tok * k + (size_t)kb * 128 + 16 * l8) * 2);
#pragma unroll
    for (int i = 0; i < 2; ++i) raw[i] = live ? load_shared_readonly_16B(src + i) : make_uint4(0u, 0u, 0u, 0u);
  };
  auto fast_quantize = [&](int pass, const uint4 (&raw)[2]) {
    int kb, tok;
    const bool live = fast_pair(pass, kb, tok);
    const GroupQuantParams qp = group_params_over_lanes<8>(raw_magnitude_key<false, 2>(raw), false, 0xffffffffu);
    float v[8];
    unpack_8(raw[0], false, v);
    const uint2 lo = e4m3x8_of(v, qp.inverse_scale);
    unpack_8(raw[1], false, v);
    const uint2 hi = e4m3x8_of(v, qp.inverse_scale);
    if (live) {
      *reinterpret_cast<uint4*>(smem + ((size_t)(2 * kb + (l8 >> 2)) * m + tok) * 64 + 16 * (l8 & 3)) =
          make_uint4(lo.x, lo.y, hi.x, hi.y);
      if (l8 == 0) xs_smem[tok * kblocks + kb] = qp.scale;
    }
  };
  if (QCLUSTER) {
    // this CTA's eighth: K blocks [rank bpr, (rank + 1) bpr); quad q = 8 warp + g the pair (token q % m, block q / m)
    const int rank = int(blockIdx.x % kQuantClusterSize), bpr = kblocks / kQuantClusterSize;
    const int quad = warp * 8 + g;
    const bool live = quad < m * bpr;
    const int kb = rank * bpr + (live ? quad / m : 0), tok = live ? quad % m : 0;
    uint4 bytes[2];
    const GroupQuantParams qp = quantize_32_of_group(act, k, tok, kb, t, live, bytes);
    const uint32_t dst = shared_address(smem + ((size_t)(2 * kb + (t >> 1)) * m + tok) * 64 + 32 * (t & 1));
    const uint32_t scale_dst = shared_address(xs_smem + tok * kblocks + kb);
    cluster_wait();  // every CTA of the cluster has started
    if (live) {
#pragma unroll
      for (int r = 0; r < kQuantClusterSize; ++r) {
        store_to_cluster(cluster_address(dst, r), bytes[0]);
        store_to_cluster(cluster_address(dst + 16, r), bytes[1]);
        if (t == 0) store_to_cluster(cluster_address(scale_dst, r), qp.scale);
      }
    }
    cluster_arrive_release();
    cluster_wait();  // every CTA's eighth has landed here
  } else if (QUANT && (OPTS & kQuantFast)) {
    const int passes = (m * K_BLOCKS + 3) / 4;
    uint4 cur[2];
    fast_load(0, cur);
    for (int pass = 0; pass < passes; ++pass) {
      uint4 next[2] = {make_uint4(0u, 0u, 0u, 0u), make_uint4(0u, 0u, 0u, 0u)};
      if (pass + 1 < passes) fast_load(pass + 1, next);
      fast_quantize(pass, cur);
      cur[0] = next[0];
      cur[1] = next[1];
    }
  } else if (QUANT) {  // every pass before the first block (run inside the block loop, they kept it from unrolling)
    for (int pass = 0; pass < (m * K_BLOCKS + 7) / 8; ++pass) quantize_pass(pass);
  } else if (ROTATE) {  // the activations of this warp's (rotated) blocks: 2 m 4 16-byte units a block, as [k/64][m][64]
    const int per_block = 2 * m * 4;
    for (int i = lane; i < (NO_ACT ? 0 : K_BLOCKS * per_block); i += 32) {
      const size_t unit = (size_t)block_of(i / per_block) * per_block + i % per_block;
      reinterpret_cast<uint4*>(smem)[unit] = reinterpret_cast<const uint4*>(act)[unit];
    }
  } else {
    const int units = K_BLOCKS * 2 * m * 4;
    const uint4* src = reinterpret_cast<const uint4*>(act + (size_t)chunk0 * m * 64);
    uint4* dst = reinterpret_cast<uint4*>(smem + (size_t)chunk0 * m * 64 * kActBytes);
    for (int i = lane; i < (NO_ACT ? 0 : units); i += 32) {
      const uint4 v = src[i];
      if (ACT16) {
        dst[2 * i] = make_uint4(cvt_e4m3x2_to_f16x2(v.x), cvt_e4m3x2_to_f16x2(v.x >> 16), cvt_e4m3x2_to_f16x2(v.y),
                                cvt_e4m3x2_to_f16x2(v.y >> 16));
        dst[2 * i + 1] = make_uint4(cvt_e4m3x2_to_f16x2(v.z), cvt_e4m3x2_to_f16x2(v.z >> 16), cvt_e4m3x2_to_f16x2(v.w),
                                    cvt_e4m3x2_to_f16x2(v.w >> 16));
      } else {
        dst[i] = v;
      }
    }
  }
  const float* ws_row = ws + (size_t)(row0 / 128) * kblocks + (ROTATE ? 0 : k0 / 128);
  __syncwarp();

  float total[NT][4];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) total[nt][i] = 0.f;

#pragma unroll
  for (int b = 0; b < K_BLOCKS; ++b) {
    uint4 cur[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) cur[i] = wbuf[b][i];
    if (TRANSPOSE) {  // piece i of this lane: row 4i + lane / 8, unit lane % 8 -> fragment pieces
      uint8_t* stage = smem + (size_t)m * k * kActBytes + (size_t)kWarps * 8 * NT * 16 * sizeof(float) + warp * 2048;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int r = 4 * i + (lane >> 3);
        *reinterpret_cast<uint4*>(stage + r * 128 + (((lane & 7) ^ ((r & 1) << 2)) * 16)) = cur[i];
      }
      __syncwarp();
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int unit = (4 * c + t) ^ ((g & 1) << 2);  // rows g and g + 8 have the same parity
        cur[2 * c] = *reinterpret_cast<const uint4*>(stage + g * 128 + unit * 16);
        cur[2 * c + 1] = *reinterpret_cast<const uint4*>(stage + (g + 8) * 128 + unit * 16);
      }
      __syncwarp();  // every lane has read the block before the next one is stored
    }
    if (b + kAhead < K_BLOCKS) {
      if (CONTIG) {
#pragma unroll
        for (int i = 0; i < 4; ++i)
          wbuf[b + kAhead][i] = load_contiguous(w, k, row0, k0, K_BLOCKS * 128, 4 * (b + kAhead) + i);
      } else if (ROWS4) {
#pragma unroll
        for (int i = 0; i < 4; ++i) wbuf[b + kAhead][i] = load_rows4(w, k, row0, k0, b + kAhead, i);
      } else {
        load_block(wbuf[b + kAhead], row_g, row_g8, step_block(b + kAhead));
      }
    }
    float x_scale[NT][2];  // xs of tokens 8 nt + 2t, + 1 for this block (0 past m)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int tok = 8 * nt + 2 * t + j;
        x_scale[nt][j] = !(tok < m && !NO_ACT) ? 0.f
                         : QUANT           ? xs_smem[tok * kblocks + (ROTATE ? block_of(b) : k0 / 128 + b)]
                         : ROTATE          ? xs[(size_t)tok * kblocks + block_of(b)]
                                           : xs[(size_t)tok * kblocks + k0 / 128 + b];
      }

    float4 acc[NT];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) acc[nt] = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      // this thread's 16 activation values of token 8 nt + g in the chunk (zeros past m)
      uint4 act_lo[NT], act_hi[NT];  // e4m3: act_lo holds all 16; f16: 8 each
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int tok = 8 * nt + g;
        const uint8_t* at =
            smem + (((size_t)(ROTATE ? 2 * block_of(b) + c : chunk0 + 2 * b + c) * m + tok) * 64 + 16 * t) * kActBytes;
        act_lo[nt] = tok < m && !NO_ACT ? *reinterpret_cast<const uint4*>(at) : make_uint4(0u, 0u, 0u, 0u);
        act_hi[nt] = ACT16 && !NO_ACT && tok < m ? *reinterpret_cast<const uint4*>(at + 16) : make_uint4(0u, 0u, 0u, 0u);
      }
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        const uint32_t wg = word_of(cur[2 * c], s), wg8 = word_of(cur[2 * c + 1], s);
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          uint32_t b0, b1;
          if (ACT16) {  // f16 pairs: words 2s, 2s + 1 of the 16 values
            b0 = word_of(s < 2 ? act_lo[nt] : act_hi[nt], (2 * s) & 3);
            b1 = word_of(s < 2 ? act_lo[nt] : act_hi[nt], (2 * s + 1) & 3);
          } else if (DIAG == kNoDecode || DIAG == kLoadsOnly) {
            b0 = b1 = word_of(act_lo[nt], s);
          } else {
            const uint32_t x = word_of(act_lo[nt], s);
            b0 = cvt_e4m3x2_to_f16x2(x);
            b1 = cvt_e4m3x2_to_f16x2(x >> 16);
          }
          if (DIAG == kLoadsOnly) {
            acc[nt].x += __uint_as_float((wg ^ wg8 ^ b0) & 0x3c003c00u);
          } else if (DIAG == kNoDecode) {
            mma_f16_16x8x16(acc[nt], wg & 0x3c003c00u, wg8 & 0x3c003c00u, wg & 0x3c00u, wg8 & 0x3c00u, b0, b1);
          } else {
            const uint32_t a0 = cvt_e4m3x2_to_f16x2(wg), a2 = cvt_e4m3x2_to_f16x2(wg >> 16);
            const uint32_t a1 = cvt_e4m3x2_to_f16x2(wg8), a3 = cvt_e4m3x2_to_f16x2(wg8 >> 16);
            if (DIAG == kNoMma) {
              acc[nt].x += __uint_as_float((a0 ^ a1 ^ a2 ^ a3 ^ b0 ^ b1) & 0x3c003c00u);
            } else {
              mma_f16_16x8x16(acc[nt], a0, a1, a2, a3, b0, b1);
            }
          }
        }
      }
    }
    const float wsc = ws_row[ROTATE ? block_of(b) : b];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const float s0 = x_scale[nt][0] * wsc, s1 = x_scale[nt][1] * wsc;
      total[nt][0] += acc[nt].x * s0;  // row g, token 2t
      total[nt][1] += acc[nt].y * s1;  // row g, token 2t + 1
      total[nt][2] += acc[nt].z * s0;  // row g + 8, token 2t
      total[nt][3] += acc[nt].w * s1;  // row g + 8, token 2t + 1
    }
  }

  // The 8 warps' partials: red[warp][token][row], summed in warp order by one thread an output.
  float* red = reinterpret_cast<float*>(smem + (size_t)m * k * kActBytes);
  constexpr int kTok = 8 * NT;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int tok = 8 * nt + 2 * t;
    red[(warp * kTok + tok) * 16 + g] = total[nt][0];
    red[(warp * kTok + tok + 1) * 16 + g] = total[nt][1];
    red[(warp * kTok + tok) * 16 + g + 8] = total[nt][2];
    red[(warp * kTok + tok + 1) * 16 + g + 8] = total[nt][3];
  }
  __syncthreads();
  for (int i = threadIdx.x; i < 16 * m; i += kThreads) {
    const int tok = i / 16, row = i % 16;
    float sum = 0.f;
#pragma unroll
    for (int w2 = 0; w2 < kWarps; ++w2) sum += red[(w2 * kTok + tok) * 16 + row];
    out[(size_t)tok * n + row0 + row] = __float2bfloat16_rn(sum);
  }
}

size_t smem_bytes(int m, int k, int nt, bool act16, bool transpose = false, bool quantize = false) {
  return (size_t)m * k * (act16 ? 2 : 1) + (size_t)kWarps * 8 * nt * 16 * sizeof(float) +
         (transpose ? (size_t)kWarps * 2048 : 0) + (quantize ? (size_t)m * (k / 128) * sizeof(float) : 0);
}

// Launches `kernel` (grid CTAs of `threads`, `smem` bytes of dynamic shared memory, programmatic dependent
// launch where pdl), or with regs != nullptr describes it instead: registers, local (spill) bytes, CTAs an SM.
template <typename Kernel>
int launch_or_describe(Kernel kernel, unsigned grid, unsigned threads, size_t smem, int pdl, cudaStream_t stream,
                       int* regs, int* spill_bytes, int* ctas_per_sm, const void* w, const void* ws, const void* act,
                       const void* xs, void* out, int n, int k, int m, int cluster = 1) {
  if (smem > 0)
    if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
        e != cudaSuccess)
      return int(e);
  if (regs != nullptr) {
    cudaFuncAttributes a;
    if (cudaError_t e = cudaFuncGetAttributes(&a, kernel); e != cudaSuccess) return int(e);
    *regs = a.numRegs;
    *spill_bytes = int(a.localSizeBytes);
    return int(cudaOccupancyMaxActiveBlocksPerMultiprocessor(ctas_per_sm, kernel, int(threads), smem));
  }
  cudaLaunchAttribute attrs[2];
  attrs[0].id = cudaLaunchAttributeClusterDimension;
  attrs[0].val.clusterDim.x = unsigned(cluster);
  attrs[0].val.clusterDim.y = 1;
  attrs[0].val.clusterDim.z = 1;
  attrs[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attrs[1].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(grid, 1, 1);
  config.blockDim = dim3(threads, 1, 1);
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = cluster > 1 ? attrs : attrs + 1;
  config.numAttrs = (cluster > 1 ? 1 : 0) + (pdl ? 1 : 0);
  return int(cudaLaunchKernelEx(&config, kernel, static_cast<const uint8_t*>(w), static_cast<const float*>(ws),
                                static_cast<const uint8_t*>(act), static_cast<const float*>(xs),
                                static_cast<__nv_bfloat16*>(out), n, k, m));
}

template <int NT, int K_BLOCKS, int DIAG, int OPTS>
int launch(const void* w, const void* ws, const void* act, const void* xs, void* out, int n, int k, int m, int pdl,
           cudaStream_t stream, int* regs, int* spill_bytes, int* ctas_per_sm) {
  const size_t smem = smem_bytes(m, k, NT, (OPTS & kAct16) != 0, (OPTS & kTranspose) != 0, (OPTS & kQuantize) != 0);
  const size_t capped = capped_smem(min_ctas_16row(OPTS), 0);
  return launch_or_describe(regmma_kernel<NT, K_BLOCKS, DIAG, OPTS>, unsigned(n / 16), kThreads,
                            (OPTS & kSmemCap) && capped > smem ? capped : smem, pdl, stream, regs, spill_bytes,
                            ctas_per_sm, w, ws, act, xs, out, n, k, m,
                            (OPTS & kQuantCluster) ? kQuantClusterSize : 1);
}

// ---- the swapped orientation: 8-row CTAs (session 35, second probe) ---------------------------------
//
// The first kernel's 16-row CTAs leave the SMs unevenly loaded (5120 rows = 320 CTAs on 132 SMs: 2 or 3
// an SM, the busiest 1.24x the mean). Here the weight is mma's B operand (n8 = 8 weight rows) and the
// activations its A operand (m16 = tokens 0-15, zeros past m): CTAs of 8 rows and 4 warps, n / 8 of them
// (640 / 576 / 512 on the Qwen shapes, 5 an SM), warp w on K slice [w K / 4, (w + 1) K / 4).
// Thread (g, t) loads 16 contiguous bytes of row g at K offset 64 c + 16 t of each chunk c; mma s takes
// bytes 4 s, 4 s + 1 as B's k {2t, 2t + 1} and 4 s + 2, 4 s + 3 as {2t + 8, 2t + 9}; the activations of
// tokens g and g + 8 at the same 16 K (e4m3, read straight from global memory: L2 hits) fill A under the
// same order. The accumulator: c0 / c1 = token g, rows 2t / 2t + 1; c2 / c3 = token g + 8.
template <int K_BLOCKS, int DIAG, int OPTS>
__global__ void __launch_bounds__(128, min_ctas_8row(OPTS))
    regmma_swapped_kernel(const uint8_t* __restrict__ w, const float* __restrict__ ws, const uint8_t* __restrict__ act,
                          const float* __restrict__ xs, __nv_bfloat16* __restrict__ out, int n, int k, int m) {
  constexpr bool NO_ACT = (OPTS & kNoActivations) != 0;
  constexpr int kAhead = (OPTS & kAllAtEntry) || K_BLOCKS < 4 ? K_BLOCKS : 4;  // all (the whole share) or four
  constexpr bool CONTIG = (OPTS & kContiguous) != 0;  // 8 rows x K/4: load j = 512 bytes at offset 512 j
  constexpr bool ROWS4 = (OPTS & kRows4) != 0;        // load c of block b: rows 4c .. 4c + 3, 128 bytes each
  constexpr bool ROTATE = (OPTS & kRotateK) != 0;
  static_assert(!(CONTIG || ROWS4) || DIAG == kLoadsOnly || DIAG == kBare,
                "the other load patterns are loads-only diagnostics");
  static_assert(!ROTATE || !(CONTIG || ROWS4), "the rotation is the fragment pattern's");
  __shared__ float red[4][16][8];
  allow_next_grid_launch();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int row0 = blockIdx.x * 8;
  const int k0 = warp * K_BLOCKS * 128;
  const uint8_t* row = w + (size_t)(row0 + g) * k + (ROTATE ? 0 : k0) + 16 * t;
  constexpr int kAllBlocks = 4 * K_BLOCKS;  // k / 128
  const int rotation = ROTATE ? rotation_blocks<OPTS>(kAllBlocks) : 0;
  // kRotateK: the K block of this warp's step b (without the rotation it is k0 / 128 + b, and the code below
  // keeps its original form: `row` then points at the warp's slice)
  auto block_of = [&](int b) { return (warp * K_BLOCKS + b + rotation) % kAllBlocks; };
  auto step_offset = [&](int b) { return ROTATE ? block_of(b) * 128 : b * 128; };  // bytes past `row`
  // this thread's 16 bytes of step b, chunk c, in the variant's load pattern
  auto load_step = [&](int b, int c) {
    return CONTIG  ? load_contiguous(w, k, row0, k0, K_BLOCKS * 128, 2 * b + c)
           : ROWS4 ? load_rows4(w, k, row0, k0, b, c)
                   : load_streaming_16B(row + step_offset(b) + c * 64);
  };
  uint4 wbuf[K_BLOCKS][2];  // block b, chunk c
#pragma unroll
  for (int b = 0; b < kAhead; ++b)
#pragma unroll
    for (int c = 0; c < 2; ++c) wbuf[b][c] = load_step(b, c);
  if (wait_after_entry_loads<OPTS, kAhead>(wbuf, m, out)) return;
  if (DIAG == kBare) {  // fold every word, refilling kAhead blocks ahead as the loop below does
    uint32_t fold = 0;
#pragma unroll
    for (int b = 0; b < K_BLOCKS; ++b) {
      if (b + kAhead < K_BLOCKS)
#pragma unroll
        for (int c = 0; c < 2; ++c) wbuf[b + kAhead][c] = load_step(b + kAhead, c);
#pragma unroll
      for (int c = 0; c < 2; ++c) fold ^= wbuf[b][c].x ^ wbuf[b][c].y ^ wbuf[b][c].z ^ wbuf[b][c].w;
    }
    fold = __reduce_xor_sync(0xffffffffu, fold);
    if (lane == 0) reinterpret_cast<uint32_t*>(out)[blockIdx.x * 4 + warp] = fold;  // 16 bytes a CTA: out's 8 bf16
    return;
  }
  const int kblocks = k / 128;
  const float* ws_row = ws + (size_t)(row0 / 128) * kblocks + (ROTATE ? 0 : k0 / 128);
  const bool tok_lo = g < m && !NO_ACT, tok_hi = g + 8 < m && !NO_ACT;
  float total[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int b = 0; b < K_BLOCKS; ++b) {
    if (b + kAhead < K_BLOCKS)
#pragma unroll
      for (int c = 0; c < 2; ++c) wbuf[b + kAhead][c] = load_step(b + kAhead, c);
    const int kb = ROTATE ? block_of(b) : k0 / 128 + b;  // this step's K block
    const float x_lo = tok_lo ? xs[(size_t)g * kblocks + kb] : 0.f;
    const float x_hi = tok_hi ? xs[(size_t)(g + 8) * kblocks + kb] : 0.f;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const size_t chunk = (size_t)(ROTATE ? 2 * kb + c : k0 / 64 + 2 * b + c);
      const uint4 a_lo = tok_lo ? *reinterpret_cast<const uint4*>(act + (chunk * m + g) * 64 + 16 * t)
                                : make_uint4(0u, 0u, 0u, 0u);
      const uint4 a_hi = tok_hi ? *reinterpret_cast<const uint4*>(act + (chunk * m + g + 8) * 64 + 16 * t)
                                : make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        const uint32_t wv = word_of(wbuf[b][c], s), lo = word_of(a_lo, s), hi = word_of(a_hi, s);
        if (DIAG == kLoadsOnly) {
          acc.x += __uint_as_float((wv ^ lo ^ hi) & 0x3c003c00u);
        } else if (DIAG == kNoDecode) {
          mma_f16_16x8x16(acc, lo & 0x3c003c00u, hi & 0x3c003c00u, lo & 0x3c00u, hi & 0x3c00u, wv & 0x3c003c00u,
                      wv & 0x3c00u);
        } else {
          mma_f16_16x8x16(acc, cvt_e4m3x2_to_f16x2(lo), cvt_e4m3x2_to_f16x2(hi), cvt_e4m3x2_to_f16x2(lo >> 16),
                      cvt_e4m3x2_to_f16x2(hi >> 16), cvt_e4m3x2_to_f16x2(wv), cvt_e4m3x2_to_f16x2(wv >> 16));
        }
      }
    }
    const float wsc = ws_row[ROTATE ? kb : b];
    total[0] += acc.x * (x_lo * wsc);  // token g, row 2t
    total[1] += acc.y * (x_lo * wsc);  // token g, row 2t + 1
    total[2] += acc.z * (x_hi * wsc);  // token g + 8, row 2t
    total[3] += acc.w * (x_hi * wsc);  // token g + 8, row 2t + 1
  }
  red[warp][g][2 * t] = total[0];
  red[warp][g][2 * t + 1] = total[1];
  red[warp][g + 8][2 * t] = total[2];
  red[warp][g + 8][2 * t + 1] = total[3];
  __syncthreads();
  for (int i = threadIdx.x; i < 8 * m; i += 128) {
    const int tok = i / 8, r = i % 8;
    const float sum = red[0][tok][r] + red[1][tok][r] + red[2][tok][r] + red[3][tok][r];
    out[(size_t)tok * n + row0 + r] = __float2bfloat16_rn(sum);
  }
}

// ---- bare 8-row reads (session 36): the 8-row CTAs' share (8 whole rows, 8 k contiguous bytes) read with
// nothing else, every load before griddepcontrol.wait, by THREADS threads in one of two patterns:
//   kLinear: load d of thread i is 16-byte unit d * THREADS + i of the share (each warp instruction 512
//            contiguous bytes, the CTA's d-th loads 16 * THREADS contiguous bytes: stream_ceiling's ldg kernel);
//   kStrips: warp w owns K slice [w k / WARPS, (w + 1) k / WARPS) of the 8 rows, lane (g, t) the 16 bytes of
//            row g at 64 j + 16 t of it (the 8-row GEMM's fragment pattern).
//   kLinearStaggered: kLinear with CTA b's share rotated by 512 b bytes (mod its size): CTAs that run at the
//            same time do not start on 32 KB-aligned addresses together (does the address alignment matter?).
// The CTA's XOR of every word goes to out (word 4 b of it: out holds 8 bf16 a CTA at least).
//   kStripsStaggered: kStrips with the same 512 b byte rotation of the share;
//   kLinearRotatedBlocks: kLinear with the share rotated by 128 (b mod 32) bytes: the offsets a K-block
//            rotation (kRotateK) gives (a 4 KB range instead of kLinearStaggered's 32 KB).
//   kStripsRotatedInRows128 / 512 (session 37): kStrips with each row's column rotated by 128 b / 512 b bytes
//            (mod k), every lane staying in its row. With 128 threads, the first is exactly the addresses of the
//            8-row GEMM under kRotateK (variant 547), read as kStripsStaggered reads (all at entry, nothing else).
enum BarePattern : int {
  kLinear = 0, kStrips = 1, kLinearStaggered = 2, kStripsStaggered = 3, kLinearRotatedBlocks = 4,
  kStripsRotatedInRows128 = 5, kStripsRotatedInRows512 = 6
};

template <int THREADS, int PATTERN, int LOADS>
__global__ void __launch_bounds__(THREADS, 5)
    bare_rows_kernel(const uint8_t* __restrict__ w, const float* __restrict__, const uint8_t* __restrict__,
                     const float* __restrict__, __nv_bfloat16* __restrict__ out, int, int k, int) {
  constexpr int kWarps = THREADS / 32;
  __shared__ uint32_t warp_fold[kWarps];
  allow_next_grid_launch();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const uint8_t* share = w + (size_t)blockIdx.x * 8 * k;
  uint4 v[LOADS];
#pragma unroll
  for (int j = 0; j < LOADS; ++j) {
    const size_t share_bytes = (size_t)8 * k;
    const size_t linear = ((size_t)j * THREADS + threadIdx.x) * 16;
    const size_t strips = (size_t)(lane >> 2) * k + (size_t)warp * (k / kWarps) + 64 * j + 16 * (lane & 3);
    const size_t strip_column = (size_t)warp * (k / kWarps) + 64 * j + 16 * (lane & 3);
    const size_t row_rotation = PATTERN == kStripsRotatedInRows128 ? 128 * (size_t)blockIdx.x : 512 * (size_t)blockIdx.x;
    const size_t rotated_in_row = (size_t)(lane >> 2) * k + (strip_column + row_rotation) % k;
    const size_t offset = PATTERN == kLinear                ? linear
                          : PATTERN == kLinearStaggered     ? (linear + 512 * (size_t)blockIdx.x) % share_bytes
                          : PATTERN == kStripsStaggered     ? (strips + 512 * (size_t)blockIdx.x) % share_bytes
                          : PATTERN == kLinearRotatedBlocks ? (linear + 128 * (size_t)(blockIdx.x % 32)) % share_bytes
                          : PATTERN == kStripsRotatedInRows128 || PATTERN == kStripsRotatedInRows512 ? rotated_in_row
                                                            : strips;
    v[j] = load_streaming_16B(share + offset);
  }
  wait_for_previous_grid();
  uint32_t fold = 0;
#pragma unroll
  for (int j = 0; j < LOADS; ++j) fold ^= v[j].x ^ v[j].y ^ v[j].z ^ v[j].w;
  fold = __reduce_xor_sync(0xffffffffu, fold);
  if (lane == 0) warp_fold[warp] = fold;
  __syncthreads();
  if (threadIdx.x == 0) {
    uint32_t total = 0;
#pragma unroll
    for (int i = 0; i < kWarps; ++i) total ^= warp_fold[i];
    reinterpret_cast<uint32_t*>(out)[blockIdx.x * 4] = total;
  }
}

template <int THREADS, int PATTERN, bool CAP = true>
int launch_bare(const void* w, const void* ws, const void* act, const void* xs, void* out, int n, int k, int m, int pdl,
                cudaStream_t stream, int* regs, int* spill_bytes, int* ctas_per_sm) {
  // 43.5 KB of unused dynamic shared memory: exactly 5 CTAs an SM, as the 8-row GEMM's registers allow (fewer
  // registers would let the next launch's CTAs in beside them, which changes the stream: stream_ceiling
  // --ldg-residency)
  constexpr size_t kFiveAnSm = capped_smem(5, 0);  // 44544 B, = tools/stream_ceiling.py's cap_smem(5)
  auto go = [&](auto kernel) {
    return launch_or_describe(kernel, unsigned(n / 8), THREADS, CAP ? kFiveAnSm : 0, pdl, stream, regs, spill_bytes,
                              ctas_per_sm,
                              w, ws, act, xs, out, n, k, m);
  };
  // loads a thread: 8 rows x k bytes / (16 bytes x THREADS)
  return k == 4096 ? go(bare_rows_kernel<THREADS, PATTERN, 8 * 4096 / 16 / THREADS>)
                   : go(bare_rows_kernel<THREADS, PATTERN, 8 * 2048 / 16 / THREADS>);
}

template <int K_BLOCKS, int DIAG, int OPTS>
int launch_swapped(const void* w, const void* ws, const void* act, const void* xs, void* out, int n, int k, int m,
                   int pdl, cudaStream_t stream, int* regs, int* spill_bytes, int* ctas_per_sm) {
  const size_t smem = (OPTS & kSmemCap) ? capped_smem(min_ctas_8row(OPTS), 4 * 16 * 8 * sizeof(float)) : 0;
  return launch_or_describe(regmma_swapped_kernel<K_BLOCKS, DIAG, OPTS>, unsigned(n / 8), 128, smem, pdl, stream,
                            regs, spill_bytes, ctas_per_sm, w, ws, act, xs, out, n, k, m);
}

template <int DIAG, int OPTS>
int dispatch_swapped(const void* w, const void* ws, const void* act, const void* xs, void* out, int n, int k, int m,
                     int pdl, cudaStream_t s, int* regs, int* spill, int* ctas) {
  return k == 4096 ? launch_swapped<8, DIAG, OPTS>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas)
                   : launch_swapped<4, DIAG, OPTS>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
}

bool valid(int n, int k, int m) { return n > 0 && n % 16 == 0 && (k == 2048 || k == 4096) && m >= 1 && m <= 16; }

}  // namespace

// Every instance, by (m, k, variant). Variant codes (tools/regmma_probe.py names them): below 32, the
// 16-row kernel, diag (0-3) + 4 * options (bits of Opt); 32-63, the 8-row kernel, 32 + the same; 67, 71, 72
// and 99, 103: the 16-row and 8-row kernels with the kContiguous / kRows4 / kTranspose options; 256 and
// up: with kHeadroom (256, 259: 16-row; 288, 291, 323: 8-row); 400-403: the 8-row kernel's bare loads (kBare);
// 410-421: bare_rows_kernel; 512, 515 / 544, 547, 548, 555, 556: the 16-row / 8-row kernel with kRotateK;
// 1536, 1539 / 1568, 1571, 1572: the same rotated by 4 b blocks (kRotateBy4); 2048 and up: with kSmemCap;
// 4096 and up: with kPlainWait (the wait ptxas hoists above the loads, as every instance had before session 37).
template <int DIAG, int OPTS>
int dispatch_k(const void* w, const void* ws, const void* act, const void* xs, void* out, int n, int k, int m, int pdl,
               cudaStream_t s, int* regs, int* spill, int* ctas) {
  if (m <= 8)
    return k == 4096 ? launch<1, 4, DIAG, OPTS>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas)
                     : launch<1, 2, DIAG, OPTS>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
  return k == 4096 ? launch<2, 4, DIAG, OPTS>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas)
                   : launch<2, 2, DIAG, OPTS>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
}

int dispatch(const void* w, const void* ws, const void* act, const void* xs, void* out, int n, int k, int m,
             int variant, int pdl, cudaStream_t s, int* regs, int* spill, int* ctas) {
  switch (variant) {
    case 0: return dispatch_k<kFull, 0>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 1: return dispatch_k<kNoDecode, 0>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 2: return dispatch_k<kNoMma, 0>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 3: return dispatch_k<kLoadsOnly, 0>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 4: return dispatch_k<kFull, kAct16>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 8: return dispatch_k<kFull, kAllAtEntry>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 11: return dispatch_k<kLoadsOnly, kAllAtEntry>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 19: return dispatch_k<kLoadsOnly, kNoActivations>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 27: return dispatch_k<kLoadsOnly, kAllAtEntry | kNoActivations>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    // 32 + : the swapped orientation (8-row CTAs)
    case 32: return dispatch_swapped<kFull, 0>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 33: return dispatch_swapped<kNoDecode, 0>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 40: return dispatch_swapped<kFull, kAllAtEntry>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 43: return dispatch_swapped<kLoadsOnly, kAllAtEntry>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 59: return dispatch_swapped<kLoadsOnly, kAllAtEntry | kNoActivations>(w, ws, act, xs, out, n, k, m, pdl, s,
                                                                               regs, spill, ctas);
    // the contiguous-load diagnostics (kContiguous): 16-row and 8-row, activations kept
    case 67: return dispatch_k<kLoadsOnly, kContiguous>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 99: return dispatch_swapped<kLoadsOnly, kContiguous>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 71: return dispatch_k<kLoadsOnly, kRows4>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 72: return dispatch_k<kFull, kRows4 | kTranspose>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 103: return dispatch_swapped<kLoadsOnly, kRows4>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 35: return dispatch_swapped<kLoadsOnly, 0>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 51: return dispatch_swapped<kLoadsOnly, kNoActivations>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill,
                                                                 ctas);
    // + 4 * kHeadroom (256): the same kernels under launch bounds that leave room for the next launch's CTAs
    case 256: return dispatch_k<kFull, kHeadroom>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 259: return dispatch_k<kLoadsOnly, kHeadroom>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 288: return dispatch_swapped<kFull, kHeadroom>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 291: return dispatch_swapped<kLoadsOnly, kHeadroom>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 323: return dispatch_swapped<kLoadsOnly, kContiguous | kHeadroom>(w, ws, act, xs, out, n, k, m, pdl, s, regs,
                                                                           spill, ctas);
    // 400 and up: the 8-row kernel's loads alone as a bare read-only kernel (kBare)
    case 400: return dispatch_swapped<kBare, 0>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 401: return dispatch_swapped<kBare, kAllAtEntry>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 402: return dispatch_swapped<kBare, kAllAtEntry | kContiguous>(w, ws, act, xs, out, n, k, m, pdl, s, regs,
                                                                        spill, ctas);
    case 403: return dispatch_swapped<kBare, kAllAtEntry | kHeadroom>(w, ws, act, xs, out, n, k, m, pdl, s, regs,
                                                                      spill, ctas);
    // 410-413: bare 8-row reads by 128 or 256 threads, linear or in strips
    case 410: return launch_bare<128, kLinear>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 411: return launch_bare<128, kStrips>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 412: return launch_bare<256, kLinear>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 413: return launch_bare<256, kStrips>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 414: return launch_bare<256, kLinearStaggered>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 415: return launch_bare<256, kStripsStaggered>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 416: return launch_bare<256, kLinearRotatedBlocks>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    // 417-421 (session 37): strips staggered at 128 threads, and strips rotated within their rows
    case 417: return launch_bare<128, kStripsStaggered>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 418: return launch_bare<128, kStripsRotatedInRows128>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 419: return launch_bare<128, kStripsRotatedInRows512>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 420: return launch_bare<256, kStripsRotatedInRows128>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 421: return launch_bare<256, kStripsRotatedInRows512>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 422: return launch_bare<128, kStripsRotatedInRows128, false>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill,
                                                                      ctas);  // 418 without the 5-an-SM cap
    // + 4 * kRotateK (512): the 16-row (512, 515) and 8-row (544, 547) GEMMs and their loads alone, K blocks rotated by CTA
    case 512: return dispatch_k<kFull, kRotateK>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 515: return dispatch_k<kLoadsOnly, kRotateK>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 544: return dispatch_swapped<kFull, kRotateK>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 547: return dispatch_swapped<kLoadsOnly, kRotateK>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    // session 37: the rotated 8-row kernel's loads bare (548), bare with every block at entry (556), and loads
    // only with every block at entry (555)
    case 548: return dispatch_swapped<kBare, kRotateK>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 555: return dispatch_swapped<kLoadsOnly, kAllAtEntry | kRotateK>(w, ws, act, xs, out, n, k, m, pdl, s, regs,
                                                                          spill, ctas);
    case 556: return dispatch_swapped<kBare, kAllAtEntry | kRotateK>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill,
                                                                     ctas);
    // + 4 * kRotateBy4 (1024): rotated by 4 b blocks (512 b bytes): the 16-row GEMM and its loads (1536, 1539), the
    // 8-row GEMM, its loads and its bare loads (1568, 1571, 1572)
    case 1536: return dispatch_k<kFull, kRotateK | kRotateBy4>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 1539: return dispatch_k<kLoadsOnly, kRotateK | kRotateBy4>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill,
                                                                  ctas);
    case 1568: return dispatch_swapped<kFull, kRotateK | kRotateBy4>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill,
                                                                     ctas);
    case 1571: return dispatch_swapped<kLoadsOnly, kRotateK | kRotateBy4>(w, ws, act, xs, out, n, k, m, pdl, s, regs,
                                                                          spill, ctas);
    case 1572: return dispatch_swapped<kBare, kRotateK | kRotateBy4>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill,
                                                                     ctas);
    // + 4 * kSmemCap (2048): unused shared memory up to 3 / 5 CTAs an SM: the 16-row kernel (2048, 2051) and
    // rotated (2560, 2563); the 8-row kernel (2080, 2083) and rotated (2592, 2595, bare 2596)
    case 2048: return dispatch_k<kFull, kSmemCap>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 2051: return dispatch_k<kLoadsOnly, kSmemCap>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 2560: return dispatch_k<kFull, kSmemCap | kRotateK>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 2563: return dispatch_k<kLoadsOnly, kSmemCap | kRotateK>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 2080: return dispatch_swapped<kFull, kSmemCap>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 2083: return dispatch_swapped<kLoadsOnly, kSmemCap>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 2592: return dispatch_swapped<kFull, kSmemCap | kRotateK>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill,
                                                                   ctas);
    case 2595: return dispatch_swapped<kLoadsOnly, kSmemCap | kRotateK>(w, ws, act, xs, out, n, k, m, pdl, s, regs,
                                                                        spill, ctas);
    case 2596: return dispatch_swapped<kBare, kSmemCap | kRotateK>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill,
                                                                   ctas);
    // + 4 * kQuantize (8192): the 16-row GEMM quantizing its bf16 activations (8192), its loads with the
    // quantization (8195), without the weight decode (8193) or the MMAs (8194), with three blocks at entry (8200),
    // and K blocks rotated (8704)
    case 8192: return dispatch_k<kFull, kQuantize>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 8193: return dispatch_k<kNoDecode, kQuantize>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 8194: return dispatch_k<kNoMma, kQuantize>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 8195: return dispatch_k<kLoadsOnly, kQuantize>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 8200: return dispatch_k<kFull, kQuantize | kAllAtEntry>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 8704: return dispatch_k<kFull, kQuantize | kRotateK>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    // + 4 * kQuantFast (16384): kQuantize with 8 lanes a pair and the next pass's loads first (24576, loads only 24579)
    case 24576: return dispatch_k<kFull, kQuantize | kQuantFast>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 24579: return dispatch_k<kLoadsOnly, kQuantize | kQuantFast>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill,
                                                                    ctas);
    // + 4 * kQuantCluster (32768): kQuantize shared by clusters of 8 CTAs (40960, loads only 40963)
    case 40960: return dispatch_k<kFull, kQuantize | kQuantCluster>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill,
                                                                    ctas);
    case 40963: return dispatch_k<kLoadsOnly, kQuantize | kQuantCluster>(w, ws, act, xs, out, n, k, m, pdl, s, regs,
                                                                         spill, ctas);
    // + 4 * kPlainWait (4096): the plain wait, above the loads (every instance's before session 37): the 16-row GEMM
    // and its loads (4096, 4099), the 8-row ones (4128, 4131)
    case 4096: return dispatch_k<kFull, kPlainWait>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 4099: return dispatch_k<kLoadsOnly, kPlainWait>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 4128: return dispatch_swapped<kFull, kPlainWait>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    case 4131: return dispatch_swapped<kLoadsOnly, kPlainWait>(w, ws, act, xs, out, n, k, m, pdl, s, regs, spill, ctas);
    default: return int(cudaErrorInvalidValue);
  }
}

extern "C" {

int regmma_probe(const void* w, const void* ws, const void* act, const void* xs, void* out, int n, int k, int m,
                 int variant, int pdl, void* stream) {
  if (!valid(n, k, m)) return int(cudaErrorInvalidValue);
  return dispatch(w, ws, act, xs, out, n, k, m, variant, pdl, static_cast<cudaStream_t>(stream), nullptr, nullptr,
                  nullptr);
}

// Registers a thread, local (spill) bytes and CTAs an SM of the instance that (k, m, variant) runs.
int regmma_describe(int k, int m, int variant, int* regs, int* spill_bytes, int* ctas_per_sm) {
  if (!valid(16, k, m)) return int(cudaErrorInvalidValue);
  return dispatch(nullptr, nullptr, nullptr, nullptr, nullptr, 16, k, m, variant, 0, nullptr, regs, spill_bytes,
                  ctas_per_sm);
}

const char* regmma_error_string(int code) { return cudaGetErrorString(static_cast<cudaError_t>(code)); }

}  // extern "C"
