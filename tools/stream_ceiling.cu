// Streaming-ceiling kernels for tools/stream_ceiling.py.
//
// Question answered: how fast can *any* kernel on this GPU read a decode GEMM's weight bytes
// once, cold, when launched back to back the way our fused GEMM is (CUDA graph, programmatic
// dependent launch)? These kernels do nothing but read: each CTA streams one contiguous,
// balanced slice of the buffer and folds what it read into a checksum, so the time they take
// is a practical ceiling for the fused kernel's weight stream (which has the same bytes, the
// same launch pattern, and real work on top).
//
// Two ways to read:
//   ldg  : every thread keeps D independent 16-byte loads in flight
//          (ld.global.nc.L1::no_allocate.L2::256B, the same instruction the fused kernel streams
//          its weight with), coalesced across the warp.
//   bulk : one thread per CTA drives the TMA unit: cp.async.bulk global -> shared into a ring of
//          `stages` slots, one mbarrier per slot; the register file is not involved at all.
//   tensor: the fused wgmma ring kernel's own weight copies without its work: its partition of
//          the weight (clusters of k_split CTAs over K, row groups of whole 16-row tiles), its
//          3-D tensor map (128-byte K block x rows x blocks, 128-byte swizzle, evict_first) and
//          box, every box into its own slot. Separates what the copy pattern costs from what
//          the fused kernel's other work costs (session 18).
//
// Both follow the fused kernel's PDL shape: allow the next grid to launch at entry, put the
// first window of loads in flight (the weight never depends on the previous kernel), then
// griddepcontrol.wait, then stream the rest; the only global write (out[blockIdx.x]) comes
// after the wait. Without the PDL launch attribute the griddepcontrol instructions are no-ops.
//
// Plain CUDA, no torch headers: built by the .py with
//   nvcc -O3 -arch=sm_90a -shared -Xcompiler -fPIC -o stream_ceiling.so tools/stream_ceiling.cu
// and called through ctypes. Every host entry point returns a cudaError_t as int (0 = success).
//
// Assumptions (checked on the host side): bytes % 16 == 0 and buf 16-byte aligned (the .py
// passes 256-byte aligned slices of one torch allocation).

#include <cuda_runtime.h>
#include <stdint.h>

#include <type_traits>

// The fused kernel's own tensor map and tensor copy (its weight copies, exactly).
#include "../kernels/sm90/sm90_ptx.cuh"         // tensor_copy_3d_to_shared (evict_first)
#include "../kernels/sm90/sm90_weight_map.h"    // encode_ring_weight_map

namespace {

constexpr int kLdgThreads = 256;
constexpr int kBulkThreads = 32;      // only thread 0 works; one warp keeps the CTA small
constexpr int kMaxStages = 32;        // mbarriers are static shared memory
constexpr int kMaxRingBytes = 200 * 1024;

// ---- PTX wrappers -----------------------------------------------------------------------------

// 16-byte streaming load: read-only path, not kept in L1, 256-byte L2 prefetch hint.
// `volatile` keeps every load even though the compiler could not otherwise see a use it cannot
// drop; the fold below also feeds the output, so the data is genuinely consumed.
__device__ __forceinline__ uint4 load_stream_16B(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

__device__ __forceinline__ void pdl_launch_dependents() { asm volatile("griddepcontrol.launch_dependents;"); }
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

// Make the mbarrier initializations visible to the async proxy (the TMA unit that will
// complete transactions on them) before the first bulk copy is issued.
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// Arrive once (the barrier's expected count is 1) and announce `bytes` of incoming transactions:
// the phase completes when the bulk copy has delivered that many bytes.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

// One non-blocking probe of phase `parity`; the caller loops (try_wait itself may suspend the
// thread for a bounded time, so the loop does not spin hot).
__device__ __forceinline__ bool mbar_try_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}

__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  while (!mbar_try_wait(bar, parity)) {
  }
}

// TMA bulk copy global -> this CTA's shared memory, completing `bytes` transactions on `bar`.
// A non-cluster launch is a cluster of one, so a shared::cta address is a valid shared::cluster
// address. dst/src 16-byte aligned, bytes a multiple of 16.
__device__ __forceinline__ void bulk_copy_g2s(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
      "l"(src), "r"(bytes), "r"(bar)
      : "memory");
}

// Order this thread's earlier generic-proxy reads of a ring slot before the async-proxy
// (TMA) write that refills it.
__device__ __forceinline__ void fence_proxy_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// ---- work split ----------------------------------------------------------------------------

// CTA b of `grid` gets the 16-byte units [begin, end): contiguous, sizes differ by at most one.
__device__ __forceinline__ void cta_slice(long long units, long long& begin, long long& end) {
  const long long grid = gridDim.x, b = blockIdx.x;
  begin = units / grid * b + min(b, units % grid);
  end = begin + units / grid + (b < units % grid ? 1 : 0);
}

__device__ __forceinline__ uint32_t fold4(uint4 v) { return v.x ^ v.y ^ v.z ^ v.w; }

// ---- ldg variant ---------------------------------------------------------------------------

// Load one window: D loads per thread, load d of thread t at unit pos + d * 256 + t, so each
// warp instruction reads 512 consecutive bytes. GUARDED windows (a CTA's last, partial one)
// skip units at or past `end`.
template <int D, bool GUARDED>
__device__ __forceinline__ void load_window(const uint4* buf, long long pos, long long end, uint4 (&v)[D]) {
#pragma unroll
  for (int d = 0; d < D; ++d) {
    const long long u = pos + d * kLdgThreads + threadIdx.x;
    if (!GUARDED || u < end) {
      v[d] = load_stream_16B(buf + u);
    } else {
      v[d] = make_uint4(0u, 0u, 0u, 0u);
    }
  }
}

template <int D>
__device__ __forceinline__ uint32_t fold_window(const uint4 (&v)[D]) {
  uint32_t acc = 0;
#pragma unroll
  for (int d = 0; d < D; ++d) acc ^= fold4(v[d]);
  return acc;
}

// out[blockIdx.x] = XOR of every 32-bit word of the CTA's slice (host can verify it).
template <int D>
__global__ void __launch_bounds__(kLdgThreads) stream_ldg_kernel(const uint4* __restrict__ buf, long long units,
                                                                  uint32_t* __restrict__ out) {
  pdl_launch_dependents();

  long long begin, end;
  cta_slice(units, begin, end);
  constexpr long long kWindow = (long long)D * kLdgThreads;  // units per CTA-wide window

  // First window in flight before waiting on the previous grid, as the fused kernel does.
  uint4 v[D];
  long long pos = begin;
  if (pos + kWindow <= end) {
    load_window<D, false>(buf, pos, end, v);
  } else {
    load_window<D, true>(buf, pos, end, v);
  }
  pdl_wait();
  uint32_t acc = fold_window<D>(v);
  pos += kWindow;

  // Steady state: full windows without bounds checks, then at most one partial window.
  for (; pos + kWindow <= end; pos += kWindow) {
    load_window<D, false>(buf, pos, end, v);
    acc ^= fold_window<D>(v);
  }
  if (pos < end) {
    load_window<D, true>(buf, pos, end, v);
    acc ^= fold_window<D>(v);
  }

  // Block-wide XOR: one reduction per warp, eight partials through shared memory.
  __shared__ uint32_t warp_fold[kLdgThreads / 32];
  acc = __reduce_xor_sync(0xffffffffu, acc);
  if ((threadIdx.x & 31) == 0) warp_fold[threadIdx.x >> 5] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    uint32_t total = 0;
#pragma unroll
    for (int w = 0; w < kLdgThreads / 32; ++w) total ^= warp_fold[w];
    out[blockIdx.x] = total;  // after pdl_wait: never races the previous grid
  }
}

// ---- bulk (TMA) variant ----------------------------------------------------------------------

// out[blockIdx.x] = XOR over the CTA's chunks of each chunk's first 32-bit word (the host can
// verify it). The CTA's slice is cut into chunks of `chunk` bytes, the last one shorter; every
// chunk is a multiple of 16 bytes because the slice is in 16-byte units. Chunk j goes to slot
// j % stages; slot and barrier phase are tracked incrementally (no 64-bit division in the loop:
// thread 0's loop is the critical path of this variant).
__global__ void __launch_bounds__(kBulkThreads) stream_bulk_kernel(const uint8_t* __restrict__ buf, long long units,
                                                                    uint32_t* __restrict__ out, int chunk,
                                                                    int stages) {
  extern __shared__ __align__(128) uint8_t ring[];
  __shared__ __align__(8) uint64_t bars[kMaxStages];

  // Every thread triggers (a CTA counts as triggered once its threads have triggered or exited).
  pdl_launch_dependents();
  if (threadIdx.x != 0) return;

  long long begin_u, end_u;
  cta_slice(units, begin_u, end_u);
  const long long begin = begin_u * 16, end = end_u * 16;

  const uint32_t ring_base = smem_addr(ring);
  const uint32_t bar_base = smem_addr(bars);
  for (int s = 0; s < stages; ++s) mbar_init(bar_base + 8u * s, 1);
  mbar_init_fence();

  // Bulk-copy the chunk at byte offset `off` into `slot` (announcing its size on the slot's barrier).
  auto issue = [&](int slot, long long off) {
    const uint32_t size = uint32_t(min((long long)chunk, end - off));
    const uint32_t bar = bar_base + 8u * uint32_t(slot);
    mbar_arrive_expect_tx(bar, size);
    bulk_copy_g2s(ring_base + uint32_t(slot) * uint32_t(chunk), buf + off, size, bar);
  };

  // First window: fill the whole ring before waiting on the previous grid.
  long long next = begin;  // byte offset of the next chunk to issue
  for (int s = 0; s < stages && next < end; ++s, next += chunk) issue(s, next);
  pdl_wait();

  uint32_t acc = 0;
  int slot = 0;
  uint32_t phase = 0;  // parity of the slot's current fill: flips each time the ring wraps
  for (long long off = begin; off < end; off += chunk) {
    mbar_wait(bar_base + 8u * uint32_t(slot), phase);
    acc ^= *reinterpret_cast<const volatile uint32_t*>(ring + size_t(slot) * size_t(chunk));
    if (next < end) {  // refill the slot just consumed with the chunk one ring ahead
      fence_proxy_async_smem();
      issue(slot, next);
      next += chunk;
    }
    if (++slot == stages) {
      slot = 0;
      phase ^= 1u;
    }
  }
  out[blockIdx.x] = acc;  // after pdl_wait: never races the previous grid
}

// ---- tensor (TMA tiled) variant -------------------------------------------------------------

// The fused kernel's copy (evict_first), or the same without the L2 policy.
__device__ __forceinline__ void tensor_copy_3d(uint32_t dst, const CUtensorMap* map, int c0, int c1, int c2,
                                               uint32_t bar, bool evict_first) {
  if (evict_first) {
    sgl_fp8::sm90::tensor_copy_3d_to_shared(dst, map, c0, c1, c2, bar);
  } else {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
        "[%5];" ::"r"(dst),
        "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
        : "memory");
  }
}

struct TensorShare {
  int tiles;       // 16-row tiles of the weight
  int kblocks;     // 128-byte K blocks of the weight
  int box_blocks;  // K blocks per box
  int max_tiles;   // tiles of the CTAs that take the full map's box (the others: one fewer)
  int early;       // boxes requested before griddepcontrol.wait (the rest after it); >= chunks: all
  int late_box_blocks;  // K blocks per box of the boxes after the early ones (session 27)
  int evict_first;
  // The fused kernel's other entry work, optional: every thread of the CTA (blockDim.x) waits for
  // the previous grid and for every box as its warps do; threads < scale_loads each load one word
  // of `scales` at entry (the fused kernel's block scales: cold, into registers) and store it to
  // shared memory at the end.
  const uint32_t* scales;
  int scale_words;
  int scale_loads;
  int consumer;  // what the 4 warpgroups do with each K block once its box lands (Consumer); 0: nothing
  int rotate;    // session 36: each CTA requests its early boxes, and then its late ones, starting at box
                 // (row group) mod (their count), so the CTAs that stream at once do not all begin at the same
                 // K offset (the boxes keep their ring slots; only the order of the requests changes)
};

// A CTA's boxes over its `nblocks` K blocks: the first `early` of `bb` blocks (requested at entry),
// then boxes of `lbb` blocks (after griddepcontrol.wait). Box c lies at its first block's place in
// a ring laid out block by block, as the fused kernel's chunks do. The kernel and the host (the
// largest CTA's shared memory) count them alike.
struct BoxLayout {
  int bb, lbb, early, early_blocks, chunks;
  __host__ __device__ BoxLayout(int nblocks, int box_blocks, int late_box_blocks, int requested_early)
      : bb(box_blocks), lbb(late_box_blocks) {
    const int whole = (nblocks + bb - 1) / bb;
    early = requested_early < whole ? requested_early : whole;
    early_blocks = early * bb < nblocks ? early * bb : nblocks;
    chunks = early + (nblocks - early_blocks + lbb - 1) / lbb;
  }
  __host__ __device__ int first(int c) const { return c < early ? c * bb : early_blocks + (c - early) * lbb; }
  __host__ __device__ int of(int lb) const { return lb < early_blocks ? lb / bb : early + (lb - early_blocks) / lbb; }
  __host__ __device__ int blocks(int c) const { return c < early ? bb : lbb; }
  __host__ __device__ int ring_blocks() const { return first(chunks - 1) + blocks(chunks - 1); }  // the last box's end
};

// ---- consumers: the fused kernel's shared-memory reads, without its prologue and epilogue --------
// (session 23, --smem-reads). Warpgroup wg takes the CTA's K blocks wg, wg + 4, ... as the fused
// kernel does (512 threads), waits for each block's box and reads the block's bytes one way:
enum Consumer : int {
  kNoConsumer = 0,
  kWindows = 1,      // the fused kernel's MMAs: m64n8k32 (SS) over its 64-row windows (2 for 5 tiles, the
                     // second overlapping the first: 8 tiles' bytes read a block), 8 tokens of B
  kOneWindow = 2,    // only the first window: 4 tiles' bytes a block
  kSwapped = 3,      // the weight as B (N = the CTA's rows, 64 or 80) and 64 token rows as A from
                     // registers (zeros): each weight byte read once, no A bytes from shared memory
  kOneWindowTail = 4,  // kOneWindow, and a fifth tile (TILES = 5) by mma.sync.m16n8k32: warp q of the
                       // warpgroup takes K step q of the tile (its A fragment by ld.shared), so the
                       // tile's bytes are read once and no 64-row instruction is spent on 16 rows
  kWaitOnly = 5,       // (session 26) each block's box waited for, as kWindows does, and no MMA
  kEarlyWindows = 6,   // (session 26) kWindows's MMAs issued at once, none waiting for its box (they
                       // read whatever the slots hold); the boxes are waited for afterwards
  kLastBoxWindows = 7,   // (session 26) every box waited for, then kWindows's MMAs on the last box's
                         // blocks only: the MMAs that must follow the last landing, alone
  kButLastWindows = 8,   // (session 26) kWindows's MMAs on every block but the last box's, each after
                         // its box; then the last box waited for
};

// D (16 x 8, fp32) += A (16 x 32 e4m3, rows g / g + 8, K bytes 4q / 16 + 4q) * B (32 x 8, token g).
__device__ __forceinline__ void mma_m16n8k32_e4m3(float4& d, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                                  uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d.x), "+f"(d.y), "+f"(d.z), "+f"(d.w)
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// m64nNk32, A from registers, B from shared memory (N = 64 or 80: the CTA's rows), into d[N / 2].
template <int N>
__device__ __forceinline__ void wgmma_rs_tokens_as_a(float (&d)[N / 2], uint32_t a, uint64_t b_desc);
template <>
__device__ __forceinline__ void wgmma_rs_tokens_as_a<64>(float (&d)[32], uint32_t a, uint64_t b_desc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, "
      "%23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a), "r"(a), "r"(a), "r"(a), "l"(b_desc), "r"(1));
}
template <>
__device__ __forceinline__ void wgmma_rs_tokens_as_a<80>(float (&d)[40], uint32_t a, uint64_t b_desc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %45, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n80k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, "
      "%23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39}, {%40, %41, %42, %43}, "
      "%44, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),
        "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39])
      : "r"(a), "r"(a), "r"(a), "r"(a), "l"(b_desc), "r"(1));
}

// One warpgroup's blocks under CONSUMER, TILES = the plan's most tiles a CTA (4 or 5). block_at(lb)
// is where block lb lies in shared memory, box_bar(lb) the barrier of its box; b_block the 8-token
// B block (kWindows, kOneWindow, kOneWindowTail). Returns a fold of what it computed, which the
// caller stores, so that nothing is dead code.
template <int CONSUMER, int TILES, typename BlockAt, typename BoxBar>
__device__ __forceinline__ uint32_t consume_blocks(int nblocks, int ntiles, BlockAt block_at, BoxBar box_bar,
                                                   const uint8_t* b_block, int last_box_block) {
  using namespace sgl_fp8::sm90;
  const int wg = threadIdx.x / 128;
  auto block_lo = [&](int lb) { return smem_descriptor_sw128_lo(smem_addr(block_at(lb))); };  // descriptor low word
  const uint32_t b_lo = smem_descriptor_sw128_lo(smem_addr(b_block));
  uint32_t fold = 0;
  if constexpr (CONSUMER == kWaitOnly) {
    for (int i = 0; i < nblocks / 4; ++i) mbar_wait(box_bar(wg + 4 * i), 0);
  } else if constexpr (CONSUMER == kWindows || CONSUMER == kOneWindow || CONSUMER == kOneWindowTail ||
                       CONSUMER == kEarlyWindows || CONSUMER == kLastBoxWindows || CONSUMER == kButLastWindows) {
    constexpr int kWindowCount = CONSUMER == kOneWindow || CONSUMER == kOneWindowTail ? 1 : (TILES + 3) / 4;
    // This warpgroup's first block (wg + 4 i) in the last box: kLastBoxWindows's MMAs start there,
    // kButLastWindows's stop there. Loop bounds, not a branch around the wgmma (ptxas would serialize).
    const int i_last = (last_box_block - wg + 3) / 4 > 0 ? (last_box_block - wg + 3) / 4 : 0;
    int i_begin = 0, i_end = nblocks / 4;
    if constexpr (CONSUMER == kLastBoxWindows) {  // the earlier boxes, then the last box's blocks as kWindows
      for (int i = 0; i < i_last && i < nblocks / 4; ++i) mbar_wait(box_bar(wg + 4 * i), 0);
      i_begin = i_last;
    }
    if constexpr (CONSUMER == kButLastWindows) i_end = i_last < i_end ? i_last : i_end;
    constexpr bool kTail = CONSUMER == kOneWindowTail && TILES == 5;
    const int lane = threadIdx.x % 32, g = lane / 4, q = lane % 4, ks_of_warp = (threadIdx.x / 32) % 4;
    float4 tail = make_float4(0.f, 0.f, 0.f, 0.f);
    // byte k of row r of a block under the 128-byte swizzle (sm90_gemm_layout.h's wgmma_ring_offset)
    auto swizzled = [](int r, int k) { return r * 128 + ((((k >> 4) ^ (r & 7))) << 4) + (k & 15); };
    float4 d[kWindowCount];
#pragma unroll
    for (int w = 0; w < kWindowCount; ++w) d[w] = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int i = i_begin; i < i_end; ++i) {  // as kSwapped's loop
      const int lb = wg + 4 * i;
      if constexpr (CONSUMER != kEarlyWindows) mbar_wait(box_bar(lb), 0);
      wgmma_fence();
      const uint32_t a_lo = block_lo(lb);
#pragma unroll
      for (int w = 0; w < kWindowCount; ++w) {
        const int tile0 = 4 * w + 4 <= ntiles ? 4 * w : ntiles - 4;  // the fused kernel's wgmma_window_tile
#pragma unroll
        for (int ks = 0; ks < 4; ++ks)
          wgmma_m64n8k32_e4m3(d[w], smem_descriptor_sw128_from_lo(a_lo + uint32_t(tile0 * 16 * 128 / 16) + 2 * ks),
                              smem_descriptor_sw128_from_lo(b_lo + 2 * ks), true);
      }
      wgmma_commit();
      if constexpr (kTail) {  // rows 64.. of the block (the fifth tile), K step ks_of_warp
        const uint8_t* block = block_at(lb);
        const int k = 32 * ks_of_warp + 4 * q;
        auto word = [](const uint8_t* base, int offset) { return *reinterpret_cast<const uint32_t*>(base + offset); };
        mma_m16n8k32_e4m3(tail, word(block, swizzled(64 + g, k)), word(block, swizzled(72 + g, k)),
                          word(block, swizzled(64 + g, k + 16)), word(block, swizzled(72 + g, k + 16)),
                          word(b_block, swizzled(g, k)), word(b_block, swizzled(g, k + 16)));
      }
    }
    wgmma_wait<0>();
    fold ^= __float_as_uint(tail.x + tail.y + tail.z + tail.w);
#pragma unroll
    for (int w = 0; w < kWindowCount; ++w) fold ^= __float_as_uint(d[w].x + d[w].y + d[w].z + d[w].w);
  } else if constexpr (CONSUMER == kSwapped) {
    constexpr int kN = 16 * TILES;
    float d[kN / 2];
#pragma unroll
    for (int i = 0; i < kN / 2; ++i) d[i] = 0.f;
    // A trip count uniform over the CTA (nblocks % 4 == 0, the host checks): with lb < nblocks as
    // the loop's condition ptxas serialized these wgmma (C7518).
    for (int i = 0; i < nblocks / 4; ++i) {
      const int lb = wg + 4 * i;
      mbar_wait(box_bar(lb), 0);
      wgmma_fence();
      const uint32_t b_block_lo = block_lo(lb);
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) wgmma_rs_tokens_as_a<kN>(d, 0u, smem_descriptor_sw128_from_lo(b_block_lo + 2 * ks));
      wgmma_commit();
    }
    wgmma_wait<0>();
#pragma unroll
    for (int i = 0; i < kN / 2; ++i) fold ^= __float_as_uint(d[i]);
  }
  return fold;
}

// CTA (rank = blockIdx.x, group = blockIdx.y) of a (k_split, groups) grid reads tiles
// [group * tiles / groups, (group + 1) * tiles / groups) x blocks [rank * kblocks / k_split, ...),
// box c = blocks c * box_blocks .. of the slice (the last box may pass the slice: the fused
// kernel reads and ignores those bytes too). out[CTA] = XOR over its boxes of the first 32-bit
// word of each 16-byte piece of the box's row 0 (the swizzle permutes pieces within a row only).
// CONSUMER (512 threads only): the warpgroups' reads of each landed block (consume_blocks), TILES
// the plan's most tiles a CTA (4 or 5); the 8-token B block of kWindows / kOneWindow lies after the
// slots (1 KB, never written: its bytes do not matter to the timing).
template <int CONSUMER, int TILES>
__global__ void __launch_bounds__(512) stream_tensor_kernel(const __grid_constant__ CUtensorMap map,
                                                                      const __grid_constant__ CUtensorMap map_short,
                                                                      const __grid_constant__ CUtensorMap map_late,
                                                                      const __grid_constant__ CUtensorMap map_late_short,
                                                                      const TensorShare share,
                                                                      uint32_t* __restrict__ out) {
  extern __shared__ __align__(1024) uint8_t slots[];
  __shared__ __align__(8) uint64_t bars[kMaxStages];
  __shared__ uint32_t scale_sink[512];  // where the scale words go (keeps their loads)
  pdl_launch_dependents();
  const int cta = blockIdx.y * gridDim.x + blockIdx.x;
  const bool loads_scale = int(threadIdx.x) < share.scale_loads;
  const uint32_t scale_word = loads_scale ? __ldg(share.scales + (cta * share.scale_loads + threadIdx.x) % share.scale_words) : 0u;
  const bool everyone = blockDim.x > 32;  // the fused kernel's shape: every thread waits
  if (CONSUMER == kNoConsumer && threadIdx.x != 0 && !everyone) return;  // (a consumer's CTA: 512 threads)
  const int rank = blockIdx.x, group = blockIdx.y;
  const int tile_begin = int((long long)group * share.tiles / gridDim.y);
  const int tile_end = int((long long)(group + 1) * share.tiles / gridDim.y);
  const int kb_begin = int((long long)rank * share.kblocks / gridDim.x);
  const int kb_end = int((long long)(rank + 1) * share.kblocks / gridDim.x);
  const int ntiles = tile_end - tile_begin;
  const int nblocks = kb_end - kb_begin;
  const BoxLayout boxes(nblocks, share.box_blocks, share.late_box_blocks, share.early);
  const int early = boxes.early, chunks = boxes.chunks;
  const bool full_rows = ntiles == share.max_tiles;
  const uint32_t row_block_bytes = uint32_t(ntiles) * 16u * 128u, ring_block_bytes = uint32_t(share.max_tiles) * 16u * 128u;
  const uint32_t base = smem_addr(slots), bar_base = smem_addr(bars);
  if (threadIdx.x == 0) {
    for (int c = 0; c < chunks; ++c) mbar_init(bar_base + 8u * c, 1);
    mbar_init_fence();
  }
  if (everyone) __syncthreads();
  auto issue = [&](int c) {
    const uint32_t bar = bar_base + 8u * uint32_t(c);
    const bool late = c >= early;
    mbar_arrive_expect_tx(bar, row_block_bytes * uint32_t(boxes.blocks(c)));
    const CUtensorMap* m = late ? (full_rows ? &map_late : &map_late_short) : (full_rows ? &map : &map_short);
    tensor_copy_3d(base + uint32_t(boxes.first(c)) * ring_block_bytes, m, 0, tile_begin * 16, kb_begin + boxes.first(c),
                   bar, share.evict_first != 0);
  };
  // boxes [begin, end) in order, from begin + (group mod their count) when share.rotate, wrapping at end
  auto issue_range = [&](int begin, int end) {
    if (begin >= end) return;
    int c = begin + (share.rotate ? group % (end - begin) : 0);
    for (int i = begin; i < end; ++i) {
      issue(c);
      c = c + 1 == end ? begin : c + 1;
    }
  };
  if (threadIdx.x == 0) issue_range(0, early);
  pdl_wait();
  if (threadIdx.x == 0) issue_range(early, chunks);
  uint32_t acc = 0;
  if constexpr (CONSUMER != kNoConsumer) {
    auto block_at = [&](int lb) {
      const int first = boxes.first(boxes.of(lb));
      return slots + size_t(first) * ring_block_bytes + size_t(lb - first) * row_block_bytes;
    };
    auto box_bar = [&](int lb) { return bar_base + 8u * uint32_t(boxes.of(lb)); };
    const uint32_t fold = consume_blocks<CONSUMER, TILES>(nblocks, ntiles, block_at, box_bar,
                                                          slots + size_t(boxes.ring_blocks()) * ring_block_bytes,
                                                          boxes.first(chunks - 1));
    asm volatile("st.shared.u32 [%0], %1;" ::"r"(smem_addr(scale_sink + threadIdx.x)), "r"(fold) : "memory");
  }
  for (int c = 0; c < chunks; ++c) {
    mbar_wait(bar_base + 8u * uint32_t(c), 0);
    // Row 0's eight 16-byte pieces, whichever order the swizzle left them in.
    if (threadIdx.x == 0)
      for (int piece = 0; piece < 8; ++piece)
        acc ^= *reinterpret_cast<const volatile uint32_t*>(slots + size_t(boxes.first(c)) * ring_block_bytes + 16 * piece);
  }
  if (loads_scale)  // a store the compiler must keep: the loads stay
    asm volatile("st.shared.u32 [%0], %1;" ::"r"(smem_addr(scale_sink + threadIdx.x)), "r"(scale_word) : "memory");
  if (threadIdx.x == 0) out[cta] = acc;
}

// ---- chain variant (session 29) ------------------------------------------------------------------
// What a one-launch decode GEMM cannot avoid besides reading its weight, with no arithmetic at all:
// after griddepcontrol.wait every CTA reads its activations (M rows of one K slice of `act_split`,
// bf16, from L2 as in bench) and, once those and its whole weight share are in, writes its part of
// the output (M x N bf16 over the grid). The weight share is the bulk variant's contiguous slice,
// copied into a ring that holds all of it (no refills): `early` chunks at entry, the rest at the
// point `late_order` names. So its period is a practical floor for any design that streams the
// weight through the SM and consumes the previous kernel's output, and the orders show what the
// activation round trip costs where it queues behind the copies (session 7's model).
enum LateOrder : int {
  kLateBeforeActivations = 0,  // the held-back chunks requested right after the wait, then the loads
  kLateAfterIssue = 1,         // after the CTA's first activation loads are issued, before they return
  kLateAfterArrival = 2,       // after every activation load of the CTA has returned
  kPaced = 3,  // (session 30) thread 32 requests `early` at entry and one more as each lands, whatever
               // the previous grid does: at most `early` copies of the CTA in flight at any time
  kTimed = 4,  // (session 33) a producer warp of its own requests `early` at entry and copy c >= early at
               // entry + (c - early + 1) x pace_cycles SM cycles, whatever lands or the previous grid does
};

struct ChainShare {
  const uint4* act;    // M x K bf16, row-major, 16-byte aligned (nullptr: no activations read)
  int m;               // rows (tokens)
  int row_units;       // 16-byte units a row (K * 2 / 16)
  int act_split;       // CTA b reads the K slice b % act_split of every row
  int slice_shift;     // log2 of a slice's 16-byte units (row_units / act_split)
  uint4* outputs;      // grid x out_units 16-byte units
  int out_units;       // a CTA's output, 16-byte units
  uint32_t* act_fold;  // per CTA: the XOR of every word of its activation slice
  int chunk;           // bytes a weight copy
  int early;           // copies requested at entry (the rest at late_order)
  int late_order;
  int hold_cycles;     // SM cycles thread 0 spins once the share and the activations are in, before
                       // the output: a stand-in for the arithmetic that must follow the last landing
  int stream_mod;      // (session 30) CTA b streams its share only where b % stream_mod == 0 (1: all)
  unsigned long long* stamps;  // (session 30) null, or kChainStamps words a CTA (ChainStamp)
  int pace_cycles;     // (session 33) kTimed: SM cycles between the requests after the first `early`
};

// (Session 30, --chain-mma) what thread 0 of each CTA records: the SM clock and the global timer at
// entry and exit, and the global timer once griddepcontrol.wait returns, once its first activation
// loads have returned, once the whole share has landed, and once its copy requests have been
// issued (does a request wait for the TMA while earlier copies stream?).
enum ChainStamp : int {
  kStampClockEntry = 0,
  kStampEntry = 1,
  kStampRelease = 2,
  kStampActivations = 3,
  kStampLanded = 4,
  kStampExit = 5,
  kStampClockExit = 6,
  kStampSm = 7,
  kStampEarlyIssued = 8,  // thread 0 has requested the copies at entry (the TMA took them)
  kStampLateIssued = 9,   // ... and the others (where there are any; else 0)
  kStampChunkLanded = 10,  // + c (c < kStampedChunks): chunk c had landed (thread 0 waits in order)
  kStampedChunks = 8,
  kChainStamps = kStampChunkLanded + kStampedChunks,
};

__device__ __forceinline__ unsigned long long chain_timer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
// The global timer once `after` is computed (the input operand orders the read after it).
__device__ __forceinline__ unsigned long long chain_timer_ns_after(uint32_t after) {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t) : "r"(after));
  return t;
}

// (Session 30) ROUNDS rounds of 8 wgmma m64n8k32 (SS) per warpgroup on whatever shared memory
// `base` (1024-byte aligned) holds, then their wait: the tensor work of a fused kernel without its
// data dependences. Compile-time counts (a branch around a wgmma makes ptxas serialize them all).
// Returns a fold of the accumulators (garbage, never zero-tested by the caller's logic).
template <int ROUNDS>
__device__ __forceinline__ uint32_t chain_wgmma_burst(uint32_t base) {
  using namespace sgl_fp8::sm90;
  float4 d = make_float4(0.f, 0.f, 0.f, 0.f);
  const uint32_t a_lo = smem_descriptor_sw128_lo(base), b_lo = smem_descriptor_sw128_lo(base + 64 * 1024);
#pragma unroll
  for (int r = 0; r < ROUNDS; ++r) {
    wgmma_fence();
#pragma unroll
    for (int j = 0; j < 8; ++j)
      // (descriptor words count 16-byte units: A steps 512 bytes a wgmma through the first 24 KB)
      wgmma_m64n8k32_e4m3(d, smem_descriptor_sw128_from_lo(a_lo + uint32_t(((r * 8 + j) % 32) * 512 / 16) + 2 * (j & 3)),
                          smem_descriptor_sw128_from_lo(b_lo + 2 * (j & 3)), true);
    wgmma_commit();
  }
  wgmma_wait<0>();
  return __float_as_uint(d.x) ^ __float_as_uint(d.y) ^ __float_as_uint(d.z) ^ __float_as_uint(d.w);
}

// (Session 32) one group of COUNT wgmma m64n8k32 (SS) by warpgroup wg into `d`, committed but not
// waited for: its share of --chain-consume's work on one chunk, the next chunk's group issued while
// this one runs. A 32 KB chunk is four 8 KB tiles of 64 rows x 128 bytes (a 128-byte swizzle atom
// of 8 rows every 1 KB, as the fused kernel's tensor copies lay a window out), each read in 4 K
// steps of 32 bytes: instruction g = wg * COUNT + j of the chunk's 16 x reads takes tile g / 4 % 4,
// K step g % 4. The tiles cycle through 16 x 8 KB from `base` (1024-byte aligned), as the chunks
// would through a ring; B is 1 KB at base + 64 KB.
template <int COUNT>
__device__ __forceinline__ void chain_wgmma_group(float4& d, uint32_t base, int chunk, int wg) {
  using namespace sgl_fp8::sm90;
  const uint32_t a_lo = smem_descriptor_sw128_lo(base), b_lo = smem_descriptor_sw128_lo(base + 64 * 1024);
  wgmma_fence();
#pragma unroll
  for (int j = 0; j < COUNT; ++j) {
    const int g = wg * COUNT + j;
    const uint32_t tile = uint32_t((chunk * 4 + g / 4 % 4) % 16), k_step = uint32_t(g % 4);
    wgmma_m64n8k32_e4m3(d, smem_descriptor_sw128_from_lo(a_lo + tile * 8192 / 16 + 2 * k_step),
                        smem_descriptor_sw128_from_lo(b_lo + 2 * k_step), true);
  }
  wgmma_commit();
}

constexpr int kChainBatch = 8;  // activation loads a thread keeps in flight

// THREADS: 256, or 32 (the bulk variant's CTA size: does a larger CTA cost the weight stream?), or 512
// (session 32, with MMA_CONSUME only: 4 warpgroups, as the fused kernel has)
// MMA_ENTRY / MMA_TAIL (session 30, 256 threads only): rounds of 8 wgmma per warpgroup issued at
// entry (before griddepcontrol.wait) / once everything has landed (before the output), on garbage.
// MMA_CONSUME (session 32, 256 or 512 threads): once every thread's activation loads are in (a
// barrier, as a kernel's quantized activations need), every warpgroup waits for each chunk in turn
// and the warpgroups share MMA_CONSUME x 16 wgmma on it (1: 16 m64n8k32 a 32 KB chunk, every weight
// byte read once as wgmma's A; 2: the same bytes twice), one commit group a warpgroup a chunk, waited
// for only after the last chunk's: a GEMM that consumes its share as it lands, without its data
// dependences (the operands are garbage, as the bursts'). (Session 32's calls 2-4 kept one group in
// flight, wait_group 1, and calls 3-6 chained a warpgroup's groups through one accumulator: the
// same ~35 cycles an instruction as now.)
// CONSUME_CHUNKS: the chunks a CTA's share takes (2 or 5 on the Qwen shapes), a compile-time count so
// that the loop over them unrolls: a runtime loop with a group in flight across its back edge makes
// ptxas serialize every wgmma (C7514; the tail CTA, with fewer chunks, issues the others' groups on garbage).
// TIMED (session 33, late_order kTimed only): the CTA has one more warp, THREADS + 32 threads, whose first
// thread requests the copies on a clock (kTimed) and which then exits; the THREADS others do the rest
// and meet on named barrier 1, so that no copy request waits for a load, a barrier or a wgmma. (Its
// minimum of one CTA an SM lets ptxas keep a thread's activation loads in flight: without it, at 288
// threads it chose 32 registers and kept ~3 of 8 in flight, which took 4.6 us at 8 tokens in call 2.)
template <int THREADS, int MMA_ENTRY = 0, int MMA_TAIL = 0, int MMA_CONSUME = 0, int CONSUME_CHUNKS = 0,
          bool TIMED = false>
__global__ void __launch_bounds__(THREADS + (TIMED ? 32 : 0), TIMED ? 1 : 0)
    stream_chain_kernel(const uint8_t* __restrict__ buf, long long units, uint32_t* __restrict__ out,
                        const ChainShare cs) {
  constexpr int kChainThreads = THREADS;
  static_assert((MMA_ENTRY == 0 && MMA_TAIL == 0) || THREADS % 128 == 0, "wgmma needs whole warpgroups");
  extern __shared__ __align__(128) uint8_t ring[];
  __shared__ __align__(8) uint64_t bars[kMaxStages];
  __shared__ uint32_t warp_fold[kChainThreads / 32];
  __shared__ uint32_t weight_fold;
  const long long clock_entry = clock64();
  const unsigned long long entry_ns = chain_timer_ns();
  pdl_launch_dependents();
  unsigned long long* stamps = cs.stamps != nullptr ? cs.stamps + (size_t)blockIdx.x * kChainStamps : nullptr;
  const bool stamp = stamps != nullptr && threadIdx.x == 0;
  // (the bursts' operands: from a 1024-byte aligned start inside the ring, which the host makes >= 68 KB:
  // B 64 KB on, A within the first 24 KB; --chain-consume's A tiles: 128 KB, in a ring of >= 130 KB)
  const uint32_t burst_base = (smem_addr(ring) + 1023u) & ~1023u;
  uint32_t burst_fold = 0;

  long long begin_u, end_u;
  cta_slice(units, begin_u, end_u);
  if (int(blockIdx.x) % cs.stream_mod != 0) end_u = begin_u;  // (session 30) this CTA reads no weight
  const long long begin = begin_u * 16, end = end_u * 16;
  const int chunks = int((end - begin + cs.chunk - 1) / cs.chunk);  // the host checks it fits the ring
  const int early = min(cs.early, chunks);
  const uint32_t ring_base = smem_addr(ring), bar_base = smem_addr(bars);
  if (threadIdx.x == 0) {
    for (int c = 0; c < chunks; ++c) mbar_init(bar_base + 8u * c, 1);
    mbar_init_fence();
  }
  __syncthreads();
  auto issue_chunk = [&](int c) {  // chunk c into its own slot
    const long long off = begin + (long long)c * cs.chunk;
    const uint32_t bar = bar_base + 8u * uint32_t(c);
    const uint32_t size = uint32_t(min((long long)cs.chunk, end - off));
    mbar_arrive_expect_tx(bar, size);
    bulk_copy_g2s(ring_base + uint32_t(c) * uint32_t(cs.chunk), buf + off, size, bar);
  };
  const bool paced = cs.late_order == kPaced;
  auto issue_chunks = [&](int from, int to) {  // thread 0 requests chunks [from, to)
    if (threadIdx.x != 0 || paced || TIMED) return;
    for (int c = from; c < to; ++c) issue_chunk(c);
  };
  // the worker threads' barrier (with TIMED the producer warp has left: it must not be counted)
  auto sync_workers = [] {
    if constexpr (TIMED)
      asm volatile("bar.sync 1, %0;" ::"n"(THREADS) : "memory");
    else
      __syncthreads();
  };
  if constexpr (TIMED) {
    if (threadIdx.x >= THREADS) {
      if (threadIdx.x == THREADS) {
        for (int c = 0; c < early; ++c) issue_chunk(c);
        for (int c = early; c < chunks; ++c) {
          const long long due = clock_entry + (long long)(c - early + 1) * cs.pace_cycles;
          while (clock64() < due) {
          }
          issue_chunk(c);
        }
        if (stamps != nullptr && chunks > early) stamps[kStampLateIssued] = chain_timer_ns();
      }
      return;
    }
  }
  if (paced && threadIdx.x == 32) {  // (not thread 0: its stamps time the activation loads)
    for (int c = 0; c < early; ++c) issue_chunk(c);
    for (int c = early; c < chunks; ++c) {
      mbar_wait(bar_base + 8u * uint32_t(c - early), 0);
      issue_chunk(c);
    }
    if (stamps != nullptr && chunks > early) stamps[kStampLateIssued] = chain_timer_ns();
  }

  issue_chunks(0, early);
  if (stamp) stamps[kStampEarlyIssued] = chain_timer_ns();
  if constexpr (MMA_ENTRY > 0) burst_fold ^= chain_wgmma_burst<MMA_ENTRY>(burst_base);
  pdl_wait();
  if (stamp) stamps[kStampRelease] = chain_timer_ns();
  auto issue_late = [&] {
    issue_chunks(early, chunks);
    if (stamp && !paced && !TIMED) stamps[kStampLateIssued] = early < chunks ? chain_timer_ns() : 0ull;
  };
  if (cs.late_order == kLateBeforeActivations) issue_late();

  // The activation slice, kChainBatch loads in flight a thread: unit u of the slice is row
  // u / slice_units, unit u % slice_units of the row's K slice.
  // (slice_units is a power of two, 1 << slice_shift: the host checks.)
  const int slice_units = 1 << cs.slice_shift;
  const int slice_first = (int(blockIdx.x) % cs.act_split) * slice_units;
  const int total = cs.act != nullptr ? cs.m * slice_units : 0;
  auto load_batch = [&](int first, uint4 (&v)[kChainBatch]) {
#pragma unroll
    for (int j = 0; j < kChainBatch; ++j) {
      const int u = first + j * kChainThreads;
      v[j] = u < total ? cs.act[(long long)(u >> cs.slice_shift) * cs.row_units + slice_first + (u & (slice_units - 1))]
                       : make_uint4(0u, 0u, 0u, 0u);
    }
  };
  auto fold_batch = [](const uint4 (&v)[kChainBatch]) {
    uint32_t acc = 0;
#pragma unroll
    for (int j = 0; j < kChainBatch; ++j) acc ^= fold4(v[j]);
    return acc;
  };
  uint4 v[kChainBatch];
  load_batch(threadIdx.x, v);
  if (cs.late_order == kLateAfterIssue) issue_late();
  uint32_t fold = fold_batch(v);
  if (stamp) stamps[kStampActivations] = chain_timer_ns_after(fold);  // its first loads have returned
  for (int first = threadIdx.x + kChainBatch * kChainThreads; first < total; first += kChainBatch * kChainThreads) {
    load_batch(first, v);
    fold ^= fold_batch(v);
  }
  fold = __reduce_xor_sync(0xffffffffu, fold);
  if ((threadIdx.x & 31) == 0) warp_fold[threadIdx.x >> 5] = fold;
  if (cs.late_order == kLateAfterArrival) {
    sync_workers();  // every thread's loads have returned (their values are folded)
    issue_late();
  }

  // The output needs the whole share: thread 0 waits for every chunk (folding each one's first word).
  if constexpr (MMA_CONSUME > 0) {
    static_assert(THREADS % 128 == 0, "wgmma needs whole warpgroups");
    sync_workers();  // every thread's activation loads have returned
    uint32_t acc = 0;
    static_assert(CONSUME_CHUNKS > 0 && CONSUME_CHUNKS <= kMaxStages, "a compile-time chunk count");
    // one accumulator a chunk, as a GEMM that applies its block scales per 128-K block starts each
    // block's products afresh: a warpgroup's groups on successive chunks are independent
    float4 d[CONSUME_CHUNKS];
#pragma unroll
    for (int c = 0; c < CONSUME_CHUNKS; ++c) d[c] = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int c = 0; c < CONSUME_CHUNKS; ++c) {
      if (c < chunks) mbar_wait(bar_base + 8u * uint32_t(c), 0);
      if (threadIdx.x == 0 && c < chunks) {  // (its stamp: when thread 0 got past chunk c)
        acc ^= *reinterpret_cast<const volatile uint32_t*>(ring + size_t(c) * size_t(cs.chunk));
        if (stamp && c < kStampedChunks) stamps[kStampChunkLanded + c] = chain_timer_ns_after(acc);
      }
      chain_wgmma_group<16 * MMA_CONSUME / (THREADS / 128)>(d[c], burst_base, c, int(threadIdx.x) / 128);
    }
    sgl_fp8::sm90::wgmma_wait<0>();
#pragma unroll
    for (int c = 0; c < CONSUME_CHUNKS; ++c)
      burst_fold ^= __float_as_uint(d[c].x) ^ __float_as_uint(d[c].y) ^ __float_as_uint(d[c].z) ^ __float_as_uint(d[c].w);
    if (threadIdx.x == 0) {
      weight_fold = acc;
      if (stamp) stamps[kStampLanded] = chain_timer_ns_after(acc ^ burst_fold);  // the last burst is done
    }
  } else if (threadIdx.x == 0) {
    uint32_t acc = 0;
    for (int c = 0; c < chunks; ++c) {
      mbar_wait(bar_base + 8u * uint32_t(c), 0);
      acc ^= *reinterpret_cast<const volatile uint32_t*>(ring + size_t(c) * size_t(cs.chunk));
      if (stamp && c < kStampedChunks) stamps[kStampChunkLanded + c] = chain_timer_ns_after(acc);
    }
    weight_fold = acc;
    if (stamp) stamps[kStampLanded] = chain_timer_ns_after(acc);
    if (cs.hold_cycles > 0) {
      const long long start = clock64();
      while (clock64() - start < cs.hold_cycles) {
      }
    }
  }
  sync_workers();
  if constexpr (MMA_TAIL > 0) burst_fold ^= chain_wgmma_burst<MMA_TAIL>(burst_base);
  uint32_t act_fold = 0;
#pragma unroll
  for (int w = 0; w < kChainThreads / 32; ++w) act_fold ^= warp_fold[w];
  const uint32_t value = act_fold ^ weight_fold;
  for (int u = threadIdx.x; u < cs.out_units; u += kChainThreads)  // after pdl_wait: never races the previous grid
    cs.outputs[(long long)blockIdx.x * cs.out_units + u] = make_uint4(value, uint32_t(u), blockIdx.x, value);
  if (threadIdx.x == 0) {
    out[blockIdx.x] = weight_fold;
    cs.act_fold[blockIdx.x] = act_fold;
  }
  if (stamp) {
    stamps[kStampExit] = chain_timer_ns();
    stamps[kStampClockExit] = (unsigned long long)clock64();
    stamps[kStampClockEntry] = (unsigned long long)clock_entry;
    stamps[kStampEntry] = entry_ns;
    uint32_t sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    // the bursts' fold in the high word (the wgmma are asm volatile: kept whatever becomes of it)
    stamps[kStampSm] = sm | ((unsigned long long)burst_fold << 32);
  }
}

// ---- launch helpers --------------------------------------------------------------------------

// Opting in to more than 48 KiB of dynamic shared memory is a per-function attribute; it is a
// host-side setting (no stream work), so it is also fine while a graph is being captured. Raised
// before each launch to the largest ring this tool allows (the tensor variant's 160 KB shares too;
// 227 KB less the static barriers was refused on the H200).
template <typename Kernel>
cudaError_t allow_ring_smem(Kernel kernel) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxRingBytes);
}

cudaLaunchConfig_t make_config(int grid, int block, size_t smem, int pdl, void* stream,
                               cudaLaunchAttribute* attr) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(unsigned(grid), 1, 1);
  config.blockDim = dim3(unsigned(block), 1, 1);
  config.dynamicSmemBytes = smem;
  config.stream = static_cast<cudaStream_t>(stream);
  config.attrs = attr;
  config.numAttrs = 0;
  if (pdl) {
    attr->id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr->val.programmaticStreamSerializationAllowed = 1;
    config.numAttrs = 1;
  }
  return config;
}

bool valid_common(const void* buf, long long bytes, const void* out, int sms, int ctas_per_sm) {
  return buf != nullptr && out != nullptr && bytes > 0 && bytes % 16 == 0 &&
         (reinterpret_cast<uintptr_t>(buf) & 15) == 0 && sms > 0 && ctas_per_sm > 0 &&
         (long long)sms * ctas_per_sm <= (1LL << 20);
}

// `smem`: dynamic shared memory the kernel does not use, only to cap how many CTAs fit an SM (session 36:
// with the cap at ctas_per_sm, the next launch's CTAs cannot start on an SM before this launch's leave it).
template <int D>
int launch_ldg(const void* buf, long long bytes, void* out, int grid, int smem, int pdl, void* stream) {
  if (const cudaError_t e = cudaFuncSetAttribute(stream_ldg_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
      e != cudaSuccess)
    return int(e);
  cudaLaunchAttribute attr;
  cudaLaunchConfig_t config = make_config(grid, kLdgThreads, size_t(smem), pdl, stream, &attr);
  return int(cudaLaunchKernelEx(&config, stream_ldg_kernel<D>, static_cast<const uint4*>(buf), bytes / 16,
                                static_cast<uint32_t*>(out)));
}

}  // namespace

extern "C" {

// ldg variant: grid = sms * ctas_per_sm CTAs of 256 threads, `depth` (2, 4, 8 or 16) 16-byte
// loads in flight per thread, `smem` bytes of (unused) dynamic shared memory a CTA. `out` holds one
// uint32 per CTA.
int stream_ceiling_ldg(const void* buf, long long bytes, void* out, int sms, int ctas_per_sm, int depth, int smem,
                       int pdl, void* stream) {
  if (!valid_common(buf, bytes, out, sms, ctas_per_sm) || smem < 0 || smem > kMaxRingBytes)
    return int(cudaErrorInvalidValue);
  const int grid = sms * ctas_per_sm;
  switch (depth) {
    case 2: return launch_ldg<2>(buf, bytes, out, grid, smem, pdl, stream);
    case 4: return launch_ldg<4>(buf, bytes, out, grid, smem, pdl, stream);
    case 8: return launch_ldg<8>(buf, bytes, out, grid, smem, pdl, stream);
    case 16: return launch_ldg<16>(buf, bytes, out, grid, smem, pdl, stream);
    default: return int(cudaErrorInvalidValue);
  }
}

// bulk variant: grid = sms * ctas_per_sm CTAs of 32 threads, a ring of `stages` slots of `chunk`
// bytes (chunk a multiple of 16, stages <= 32, ring <= 200 KiB) of dynamic shared memory.
int stream_ceiling_bulk(const void* buf, long long bytes, void* out, int sms, int ctas_per_sm, int chunk, int stages,
                        int pdl, void* stream) {
  if (!valid_common(buf, bytes, out, sms, ctas_per_sm)) return int(cudaErrorInvalidValue);
  if (chunk <= 0 || chunk % 16 != 0 || stages <= 0 || stages > kMaxStages ||
      (long long)chunk * stages > kMaxRingBytes)
    return int(cudaErrorInvalidValue);
  const int ring = chunk * stages;
  if (const cudaError_t e = allow_ring_smem(stream_bulk_kernel); e != cudaSuccess) return int(e);
  cudaLaunchAttribute attr;
  cudaLaunchConfig_t config = make_config(sms * ctas_per_sm, kBulkThreads, size_t(ring), pdl, stream, &attr);
  return int(cudaLaunchKernelEx(&config, stream_bulk_kernel, static_cast<const uint8_t*>(buf), bytes / 16,
                                static_cast<uint32_t*>(out), chunk, stages));
}

// tensor variant: a (k_split, groups) grid of `threads`-thread CTAs (32: thread 0 alone; 512: every
// thread waits, as the fused kernel's; clusters of k_split where `cluster`; `scale_loads` threads
// load a block-scale word at entry),
// the fused kernel's partition and map (stream_tensor_kernel). n % 16 == 0, k % 128 == 0,
// groups <= tiles. Returns cudaErrorInvalidValue where the shares do not fit shared memory.
int stream_ceiling_tensor(const void* w, long long n, long long k, void* out, int k_split, int groups,
                          int box_blocks, int early, int late_box_blocks, int evict_first, int cluster, int threads, int scale_loads,
                          int consumer, int rotate, int pdl, void* stream) {
  if (w == nullptr || out == nullptr || n % 16 != 0 || k % 128 != 0 || k_split < 1 || k_split > 8 || groups < 1 ||
      box_blocks < 1 || (reinterpret_cast<uintptr_t>(w) & 15) != 0)
    return int(cudaErrorInvalidValue);
  TensorShare share;
  share.tiles = int(n / 16);
  share.kblocks = int(k / 128);
  if (groups > share.tiles || k_split > share.kblocks) return int(cudaErrorInvalidValue);
  share.max_tiles = (share.tiles + groups - 1) / groups;
  share.box_blocks = box_blocks;
  share.early = early;
  share.late_box_blocks = late_box_blocks > 0 ? late_box_blocks : box_blocks;
  share.evict_first = evict_first;
  if ((threads != 32 && threads != 512) || scale_loads < 0 || scale_loads > threads) return int(cudaErrorInvalidValue);
  // the block scales (fp32, one per 128 x 128 block) follow the weight in the caller's buffer
  share.scales = reinterpret_cast<const uint32_t*>(static_cast<const uint8_t*>(w) + n * k);
  share.scale_words = int((n + 127) / 128 * (k / 128));
  share.scale_loads = scale_loads;
  share.consumer = consumer;
  share.rotate = rotate != 0;
  // consumers: 512 threads, CTAs of at most 4 or 5 tiles (the K split of 2 on the Qwen shapes)
  if (consumer < kNoConsumer || consumer > kButLastWindows ||
      (consumer != kNoConsumer && (threads != 512 || share.max_tiles < 4 || share.max_tiles > 5 ||
                                   share.kblocks % (4 * k_split) != 0)))
    return int(cudaErrorInvalidValue);
  const int max_blocks = (share.kblocks + k_split - 1) / k_split;
  const int lbb = share.late_box_blocks;
  const BoxLayout boxes(max_blocks, box_blocks, lbb, early);  // the largest CTA's
  const long long smem = (long long)boxes.ring_blocks() * share.max_tiles * 16 * 128 + (consumer ? 1024 : 0);
  if (boxes.chunks > kMaxStages || smem > kMaxRingBytes || lbb > 256) return int(cudaErrorInvalidValue);
  CUtensorMap map, map_short;
  using sgl_fp8::sm90::encode_ring_weight_map;
  if (!encode_ring_weight_map(&map, w, n, k, share.max_tiles * 16, box_blocks)) return int(cudaErrorInvalidValue);
  if (!encode_ring_weight_map(&map_short, w, n, k, share.max_tiles > 1 ? (share.max_tiles - 1) * 16 : 16, box_blocks))
    return int(cudaErrorInvalidValue);
  CUtensorMap map_late, map_late_short;
  if (!encode_ring_weight_map(&map_late, w, n, k, share.max_tiles * 16, lbb)) return int(cudaErrorInvalidValue);
  if (!encode_ring_weight_map(&map_late_short, w, n, k, share.max_tiles > 1 ? (share.max_tiles - 1) * 16 : 16, lbb))
    return int(cudaErrorInvalidValue);
  cudaLaunchAttribute attrs[2];
  cudaLaunchConfig_t config = make_config(1, threads, size_t(smem), pdl, stream, &attrs[0]);
  config.gridDim = dim3(unsigned(k_split), unsigned(groups), 1);
  if (cluster) {
    attrs[config.numAttrs].id = cudaLaunchAttributeClusterDimension;
    attrs[config.numAttrs].val.clusterDim.x = unsigned(k_split);
    attrs[config.numAttrs].val.clusterDim.y = 1;
    attrs[config.numAttrs].val.clusterDim.z = 1;
    ++config.numAttrs;
  }
  auto launch = [&](auto kernel) -> int {
    if (const cudaError_t e = allow_ring_smem(kernel); e != cudaSuccess) return int(e);
    return int(cudaLaunchKernelEx(&config, kernel, map, map_short, map_late, map_late_short, share,
                                  static_cast<uint32_t*>(out)));
  };
  const bool five = share.max_tiles == 5;
  switch (consumer) {
    case kWindows: return five ? launch(stream_tensor_kernel<kWindows, 5>) : launch(stream_tensor_kernel<kWindows, 4>);
    case kOneWindow: return five ? launch(stream_tensor_kernel<kOneWindow, 5>) : launch(stream_tensor_kernel<kOneWindow, 4>);
    case kSwapped: return five ? launch(stream_tensor_kernel<kSwapped, 5>) : launch(stream_tensor_kernel<kSwapped, 4>);
    case kOneWindowTail:
      return five ? launch(stream_tensor_kernel<kOneWindowTail, 5>) : launch(stream_tensor_kernel<kOneWindowTail, 4>);
    case kWaitOnly: return launch(stream_tensor_kernel<kWaitOnly, 4>);  // (TILES unused)
    case kEarlyWindows:
      return five ? launch(stream_tensor_kernel<kEarlyWindows, 5>) : launch(stream_tensor_kernel<kEarlyWindows, 4>);
    case kLastBoxWindows:
      return five ? launch(stream_tensor_kernel<kLastBoxWindows, 5>) : launch(stream_tensor_kernel<kLastBoxWindows, 4>);
    case kButLastWindows:
      return five ? launch(stream_tensor_kernel<kButLastWindows, 5>) : launch(stream_tensor_kernel<kButLastWindows, 4>);
    default: return launch(stream_tensor_kernel<kNoConsumer, 4>);
  }
}

// chain variant (session 29): `sms` CTAs of `threads` (256 or 32) threads (stream_chain_kernel). The weight share
// (bytes may be 0: no weight) in copies of `chunk` bytes, `early` at entry, the rest at `late_order`;
// `m` rows of bf16 activations of K (act may be null: none read), a K slice of `act_split` a CTA;
// `out_units` 16-byte units of output a CTA; thread 0 spins `hold_cycles` SM cycles once the share
// and the activations are in, before the output. Dynamic shared memory: the whole share's ring, at
// least `min_smem` bytes (a kernel that holds an SM as the fused one does). `out` and `act_fold`
// hold one uint32 a CTA. Session 30: only CTAs b with b % stream_mod == 0 read weight; `stamps`
// (null or kChainStamps words a CTA) gets thread 0's clocks and times (ChainStamp); mma_entry (0, 1,
// 2 or 4; with a tail, 0 or 2) and mma_tail (0 or 1) rounds of 8 wgmma a warpgroup at entry / after
// the last landing (256 threads). Session 32: mma_consume (0, 1 or 2; not with the others) x 16 wgmma
// among the warpgroups on each chunk as it lands, once the activations are in (256 or 512 threads; a share
// of 2 or 5 chunks).
int stream_ceiling_chain(const void* buf, long long bytes, void* out, const void* act, int m, int k, int act_split,
                         void* outputs, int out_units, void* act_fold, int sms, int threads, int chunk, int early,
                         int late_order, int min_smem, int hold_cycles, int stream_mod, void* stamps, int mma_entry,
                         int mma_tail, int mma_consume, int pace_cycles, int pdl, void* stream) {
  const bool timed = late_order == kTimed;
  if (out == nullptr || act_fold == nullptr || sms <= 0 || bytes < 0 || bytes % 16 != 0 || chunk <= 0 ||
      chunk % 16 != 0 || early < 0 || late_order < kLateBeforeActivations || late_order > kTimed ||
      (late_order == kPaced && (early < 1 || threads != 256)) ||
      // the clocked requests: a producer warp beside 256 threads, or beside 512 that consume the share once
      (timed && (pace_cycles <= 0 || mma_entry + mma_tail > 0 || !(threads == 256 || (threads == 512 && mma_consume == 1)))) ||
      (!timed && pace_cycles != 0) ||
      min_smem < 0 || min_smem > kMaxRingBytes || out_units < 0 || hold_cycles < 0 || (out_units > 0 && outputs == nullptr) ||
      (bytes > 0 && (buf == nullptr || (reinterpret_cast<uintptr_t>(buf) & 15) != 0)) || stream_mod < 1 ||
      (reinterpret_cast<uintptr_t>(stamps) & 7) != 0 ||
      !((mma_entry == 0 || mma_entry == 1 || mma_entry == 2 || mma_entry == 4) && (mma_tail == 0 || mma_tail == 1)) ||
      (mma_entry != 0 && mma_entry != 2 && mma_tail != 0) ||
      !(mma_consume >= 0 && mma_consume <= 2) || (mma_consume > 0 && mma_entry + mma_tail > 0) ||
      (mma_entry + mma_tail > 0 && threads != 256) || (mma_consume > 0 && threads == 32) ||
      (threads == 512 && mma_consume == 0))
    return int(cudaErrorInvalidValue);
  int slice_shift = 0;
  if (act != nullptr) {
    if (m < 0 || k <= 0 || (2LL * k) % 16 != 0 || act_split <= 0 || (2 * k / 16) % act_split != 0 ||
        (reinterpret_cast<uintptr_t>(act) & 15) != 0)
      return int(cudaErrorInvalidValue);
    const int slice_units = 2 * k / 16 / act_split;
    while ((1 << slice_shift) < slice_units) ++slice_shift;
    if ((1 << slice_shift) != slice_units) return int(cudaErrorInvalidValue);  // a power of two
  }
  const long long largest_share = (bytes / 16 + sms - 1) / sms * 16;
  const long long chunks = (largest_share + chunk - 1) / chunk;
  if (chunks > kMaxStages || chunks * chunk > kMaxRingBytes) return int(cudaErrorInvalidValue);
  // the wgmma bursts read 64 KB + 1 KB past a 1024-byte aligned start inside the ring
  // (--chain-consume's tiles: 128 KB from there)
  const long long burst_smem = mma_consume > 0 ? 130 * 1024 : mma_entry + mma_tail > 0 ? 68 * 1024 : 0;
  const size_t smem = size_t(max(max(chunks * chunk, (long long)min_smem), burst_smem));
  if (threads != 32 && threads != 256 && threads != 512) return int(cudaErrorInvalidValue);
  ChainShare cs;
  cs.act = static_cast<const uint4*>(act);
  cs.m = act != nullptr ? m : 0;
  cs.row_units = act != nullptr ? 2 * k / 16 : 0;
  cs.act_split = act != nullptr ? act_split : 1;
  cs.slice_shift = slice_shift;
  cs.outputs = static_cast<uint4*>(outputs);
  cs.out_units = out_units;
  cs.act_fold = static_cast<uint32_t*>(act_fold);
  cs.chunk = chunk;
  cs.early = early;
  cs.late_order = late_order;
  cs.hold_cycles = hold_cycles;
  cs.stream_mod = stream_mod;
  cs.stamps = static_cast<unsigned long long*>(stamps);
  cs.pace_cycles = pace_cycles;
  cudaLaunchAttribute attr;
  cudaLaunchConfig_t config = make_config(sms, threads + (timed ? 32 : 0), smem, pdl, stream, &attr);
  auto launch = [&](auto kernel) -> int {
    if (const cudaError_t e = allow_ring_smem(kernel); e != cudaSuccess) return int(e);
    return int(cudaLaunchKernelEx(&config, kernel, static_cast<const uint8_t*>(buf), bytes / 16,
                                  static_cast<uint32_t*>(out), cs));
  };
  if (threads == 32) return launch(stream_chain_kernel<32>);
  if (timed) {  // (session 33) the producer warp's instances
    if (threads == 256) return launch(stream_chain_kernel<256, 0, 0, 0, 0, true>);
    if (chunks == 2) return launch(stream_chain_kernel<512, 0, 0, 1, 2, true>);
    if (chunks == 5) return launch(stream_chain_kernel<512, 0, 0, 1, 5, true>);
    return int(cudaErrorInvalidValue);
  }
  if (mma_entry && mma_tail) return launch(stream_chain_kernel<256, 2, 1>);
  if (mma_entry == 1) return launch(stream_chain_kernel<256, 1, 0>);
  if (mma_entry == 2) return launch(stream_chain_kernel<256, 2, 0>);
  if (mma_entry == 4) return launch(stream_chain_kernel<256, 4, 0>);
  if (mma_tail) return launch(stream_chain_kernel<256, 0, 1>);
  // the consuming instances: 256 or 512 threads, 1 or 2 reads, a share of 2 or 5 chunks
  auto consuming = [&](auto threads_constant) -> int {
    constexpr int T = decltype(threads_constant)::value;
    if (chunks == 2) return mma_consume == 1 ? launch(stream_chain_kernel<T, 0, 0, 1, 2>) : launch(stream_chain_kernel<T, 0, 0, 2, 2>);
    if (chunks == 5) return mma_consume == 1 ? launch(stream_chain_kernel<T, 0, 0, 1, 5>) : launch(stream_chain_kernel<T, 0, 0, 2, 5>);
    return int(cudaErrorInvalidValue);
  };
  if (mma_consume > 0)
    return threads == 512 ? consuming(std::integral_constant<int, 512>{}) : consuming(std::integral_constant<int, 256>{});
  return launch(stream_chain_kernel<256>);
}

// How many CTAs of a variant fit on one SM (occupancy calculator), so the .py can record
// whether the requested ctas_per_sm actually co-reside. variant 0 = ldg (param = depth, `smem` its
// dynamic shared memory), 1 = bulk (param = ring bytes).
int stream_ceiling_occupancy(int variant, int param, int smem, int* blocks_per_sm) {
  if (blocks_per_sm == nullptr) return int(cudaErrorInvalidValue);
  if (variant == 0) {
    if (smem < 0 || smem > kMaxRingBytes) return int(cudaErrorInvalidValue);
    auto fits = [&](auto kernel) -> int {
      if (const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
          e != cudaSuccess)
        return int(e);
      return int(cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks_per_sm, kernel, kLdgThreads, size_t(smem)));
    };
    switch (param) {
      case 2: return fits(stream_ldg_kernel<2>);
      case 4: return fits(stream_ldg_kernel<4>);
      case 8: return fits(stream_ldg_kernel<8>);
      case 16: return fits(stream_ldg_kernel<16>);
      default: return int(cudaErrorInvalidValue);
    }
  }
  if (variant == 1) {
    if (param <= 0 || param > kMaxRingBytes) return int(cudaErrorInvalidValue);
    if (const cudaError_t e = allow_ring_smem(stream_bulk_kernel); e != cudaSuccess) return int(e);
    return int(cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks_per_sm, stream_bulk_kernel, kBulkThreads,
                                                             size_t(param)));
  }
  return int(cudaErrorInvalidValue);
}

const char* stream_ceiling_error_string(int code) { return cudaGetErrorString(cudaError_t(code)); }

}  // extern "C"
