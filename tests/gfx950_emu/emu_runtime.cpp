// wave64 SIMT emulator: fibers, wave-level operations, barriers, LDS, buffer loads and the
// AMDGCN builtins the gfx950 kernels use, implemented from the documented hardware behaviour
// (AMD CDNA3/CDNA4 ISA guides, LLVM AMDGPUUsage / builtin definitions, the OCP 8-bit floating
// point spec). Nothing here is derived from kernels/; see README.md for the model and its limits.
//
// Execution model:
//   * every work-item is a fiber with its own stack; a workgroup runs on one OS thread, its
//     fibers switched cooperatively; workgroups are spread over `threads` OS threads.
//   * a fiber runs until it reaches a wave-level operation, a workgroup barrier, or its end.
//   * when no lane of a wave can run, the lanes of that wave waiting at the same call site for
//     the same operation are resolved together (that set is the EXEC mask of the operation); if
//     lanes of the wave wait at different sites (divergence), the lowest site in the code is
//     resolved first (min-PC reconvergence), one site at a time.
//   * s_barrier releases when every unfinished work-item of the workgroup waits at one.
//   * the dynamic LDS arena (160 KiB) is filled with 0xFF (NaN as fp32, e4m3 and e8m0) at the
//     start of every workgroup; after it, the highest byte that is not poison gives the LDS
//     high-water mark.
//
// Deliberately broken variants (-DEMU_BREAK_<NAME>) exist so that the tests can show they
// detect each kind of error: DPP_MIRROR, MFMA_ROWS, TIE_AWAY, DROP_BARRIER, DROP_WAVE_BARRIER.

#include <hip/hip_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "emu_runtime.h"

namespace emu {

// ---- options and counters ---------------------------------------------------------------------

Options g_options;
static std::mutex g_mutex;
static Counters g_counters;
static std::string g_error_detail;
static hipError_t g_last_error = hipSuccess;
static char g_arch[64] = "gfx950:sramecc+:xnack-";
static Region g_regions[kMaxRegions];
static std::vector<LaunchRecord> g_launches;

const char* const kCounterNames[kNumCounters] = {
#define EMU_COUNTER_NAME(name) #name,
    EMU_COUNTERS(EMU_COUNTER_NAME)
#undef EMU_COUNTER_NAME
};

// ---- fibers -----------------------------------------------------------------------------------
// A minimal context switch: callee-saved registers, the SSE control word and the x87 control
// word are pushed on the old stack, the stack pointer is swapped, and the new context is popped.
extern "C" void emu_switch(void** save_sp, void* new_sp);
extern "C" void emu_fiber_entry();
#if defined(__x86_64__)
asm(R"(
.text
.globl emu_switch
.type emu_switch,@function
emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
.size emu_switch,.-emu_switch
.globl emu_fiber_entry
.type emu_fiber_entry,@function
emu_fiber_entry:
  movq %r12, %rdi
  callq *%r13
  ud2
.size emu_fiber_entry,.-emu_fiber_entry
)");
#else
#error "tests/gfx950_emu: the fiber switch is written for x86-64"
#endif

enum class State : uint8_t { kReady, kWaveOp, kBarrier, kDone };
enum class Op : uint8_t { kNone, kReadfirstlane, kDpp, kBallot, kWaveBarrier, kMfma };

struct Item;
struct Block;

struct Item {
  void* sp = nullptr;
  State state = State::kReady;
  Op op = Op::kNone;
  const void* site = nullptr;
  int tid = 0, lane = 0, wave = 0;
  Block* block = nullptr;
  // operands of the pending wave-level operation
  int32_t i0 = 0, i1 = 0;
  int ctrl = 0, row_mask = 0, bank_mask = 0;
  bool bound_ctrl = false, pred = false;
  emu_i32x8 a, b;
  emu_f32x4 c;
  int a_fmt = 0, b_fmt = 0, opsel_a = 0, scale_a = 0, opsel_b = 0, scale_b = 0;
  // results
  int32_t r_i = 0;
  uint64_t r_u64 = 0;
  emu_f32x4 r_c;
};

struct Worker {
  void* sched_sp = nullptr;
  uint8_t* stacks = nullptr;
  size_t stack_bytes = 0, slot_bytes = 0, slots = 0;
  Counters counters;
  uint64_t rng = 0x9E3779B97F4A7C15ull;
  std::string error;
  uint64_t next_random() {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
  }
};

struct Block {
  dim3 id, dim;
  int n = 0, waves = 0;
  std::vector<Item> items;
  void (*body)(void*) = nullptr;
  void* ctx = nullptr;
  Worker* worker = nullptr;
};

static thread_local Item* t_item = nullptr;

static void fiber_main(Item* it) {
  it->block->body(it->block->ctx);
  it->state = State::kDone;
  emu_switch(&it->sp, it->block->worker->sched_sp);
  __builtin_trap();  // a finished fiber is never resumed
}

static void* init_stack(uint8_t* top, Item* it) {
  uintptr_t sp = reinterpret_cast<uintptr_t>(top) & ~uintptr_t{15};
  auto push = [&](uint64_t v) {
    sp -= 8;
    *reinterpret_cast<uint64_t*>(sp) = v;
  };
  // `ret` into emu_fiber_entry leaves rsp == top (16-byte aligned), so its `call` enters
  // fiber_main with the ABI's alignment.
  push(reinterpret_cast<uint64_t>(&emu_fiber_entry));
  push(0);                                         // rbp
  push(0);                                         // rbx
  push(reinterpret_cast<uint64_t>(it));            // r12: argument
  push(reinterpret_cast<uint64_t>(&fiber_main));   // r13: function
  push(0);                                         // r14
  push(0);                                         // r15
  sp -= 8;
  uint32_t mxcsr;
  uint16_t fpcw;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fpcw));
  memcpy(reinterpret_cast<void*>(sp), &mxcsr, 4);
  memcpy(reinterpret_cast<void*>(sp + 4), &fpcw, 2);
  return reinterpret_cast<void*>(sp);
}

// Called on a fiber: hands control back to the workgroup scheduler until resolved.
static void block_fiber(Item* it, State s) {
  it->state = s;
  emu_switch(&it->sp, it->block->worker->sched_sp);
}

static Item* cur() {
  if (t_item == nullptr) {
    fprintf(stderr, "gfx950 emulator: a device builtin was called outside a kernel\n");
    abort();
  }
  return t_item;
}

static void fail(Worker* w, const std::string& msg) {
  if (w->error.empty()) w->error = msg;
  w->counters.v[kErrors]++;
}

// ---- numerics -----------------------------------------------------------------------------------

// OCP 8-bit FP spec, E4M3 ("fn"): bias 7, no infinities, S.1111.111 is NaN, max normal 448,
// subnormals m * 2^-9. Round to nearest, ties to even (EMU_BREAK_TIE_AWAY: ties away from zero).
// Non-saturating conversion (values that round above 448, and +-Inf, give NaN); NaN keeps its sign.
static double round_to_integer(double v) {
#ifdef EMU_BREAK_TIE_AWAY
  return round(v);
#else
  return nearbyint(v);  // the default rounding mode: to nearest, ties to even
#endif
}

static uint32_t f32_to_e4m3(float x) {
  const uint32_t sign = signbit(x) ? 0x80u : 0u;
  if (isnan(x)) return sign | 0x7Fu;
  if (isinf(x)) return sign | 0x7Fu;
  const double a = fabs(static_cast<double>(x));
  if (a == 0.0) return sign;
  int e;
  frexp(a, &e);  // a = f * 2^e, f in [0.5, 1): the leading bit has weight 2^(e-1)
  const int lead = e - 1 < -6 ? -6 : e - 1;  // below 2^-6 the quantum stays 2^-9
  const int quantum = lead - 3;
  const double v = ldexp(round_to_integer(ldexp(a, -quantum)), quantum);
  if (v > 448.0) return sign | 0x7Fu;
  if (v == 0.0) return sign;
  if (v < 0.015625) return sign | static_cast<uint32_t>(ldexp(v, 9));  // subnormal: m * 2^-9
  int ve;
  const double f = frexp(v, &ve);  // v = f * 2^ve, exponent of the leading bit ve - 1
  const uint32_t mant = static_cast<uint32_t>(ldexp(f * 2.0 - 1.0, 3));
  return sign | (static_cast<uint32_t>(ve - 1 + 7) << 3) | mant;
}

// E5M2 (bf8), OCP: bias 15, has Inf; only provided for completeness of the conversion family.
static uint32_t f32_to_e5m2(float x) {
  const uint32_t sign = signbit(x) ? 0x80u : 0u;
  if (isnan(x)) return sign | 0x7Fu;
  if (isinf(x)) return sign | 0x7Cu;
  const double a = fabs(static_cast<double>(x));
  if (a == 0.0) return sign;
  int e;
  frexp(a, &e);
  const int lead = e - 1 < -14 ? -14 : e - 1;
  const int quantum = lead - 2;
  const double v = ldexp(round_to_integer(ldexp(a, -quantum)), quantum);
  if (v > 57344.0) return sign | 0x7Cu;
  if (v == 0.0) return sign;
  if (v < ldexp(1.0, -14)) return sign | static_cast<uint32_t>(ldexp(v, 16));
  int ve;
  const double f = frexp(v, &ve);
  const uint32_t mant = static_cast<uint32_t>(ldexp(f * 2.0 - 1.0, 2));
  return sign | (static_cast<uint32_t>(ve - 1 + 15) << 2) | mant;
}

// E4M3 byte -> value * 2^9 as an integer (exact: |value| <= 448 = 229376 / 512), NaN flagged.
struct E4m3Int {
  int32_t v[256];
  bool nan[256];
  E4m3Int() {
    for (int b = 0; b < 256; ++b) {
      const int exp = (b >> 3) & 15, mant = b & 7;
      const int sign = (b & 0x80) ? -1 : 1;
      nan[b] = (b & 0x7F) == 0x7F;
      int32_t m = exp == 0 ? mant : ((8 + mant) << (exp - 1));  // units of 2^-9
      v[b] = nan[b] ? 0 : sign * m;
    }
  }
};
static const E4m3Int g_e4m3;

// Exact sum of terms m * 2^e (|m| < 2^62) and one fp32, rounded once to fp32 (nearest even).
// A 704-bit two's-complement fixed-point accumulator with bit 0 = 2^-330 covers every product
// of e4m3 values with e8m0 scales (2^-290 .. 2^280) and every fp32.
struct WideAcc {
  static constexpr int kLimbs = 11;
  static constexpr int kBase = -330;
  uint64_t limb[kLimbs] = {};
  void add_shifted(int64_t m, int e) {
    if (m == 0) return;
    const int shift = e - kBase;
    const bool neg = m < 0;
    unsigned __int128 mag = static_cast<unsigned __int128>(neg ? -static_cast<__int128>(m) : m);
    // place mag << shift into a temporary, then add or subtract it
    uint64_t t[kLimbs] = {};
    const int q = shift / 64, r = shift % 64;
    unsigned __int128 lo = mag << r;  // mag < 2^63, r < 64: fits 127 bits
    if (q < kLimbs) t[q] = static_cast<uint64_t>(lo);
    if (q + 1 < kLimbs) t[q + 1] = static_cast<uint64_t>(lo >> 64);
    unsigned __int128 carry = 0;
    if (!neg) {
      for (int i = 0; i < kLimbs; ++i) {
        unsigned __int128 s = static_cast<unsigned __int128>(limb[i]) + t[i] + carry;
        limb[i] = static_cast<uint64_t>(s);
        carry = s >> 64;
      }
    } else {
      uint64_t borrow = 0;
      for (int i = 0; i < kLimbs; ++i) {
        const uint64_t a = limb[i], b = t[i];
        const uint64_t d = a - b - borrow;
        borrow = (a < b) || (a - b < borrow) ? 1 : 0;
        limb[i] = d;
      }
    }
  }
  float round_to_f32() const {
    uint64_t m[kLimbs];
    memcpy(m, limb, sizeof m);
    const bool neg = (m[kLimbs - 1] >> 63) != 0;
    if (neg) {  // negate
      uint64_t carry = 1;
      for (int i = 0; i < kLimbs; ++i) {
        m[i] = ~m[i] + carry;
        carry = (carry && m[i] == 0) ? 1 : 0;
      }
    }
    int top = -1;
    for (int i = kLimbs - 1; i >= 0 && top < 0; --i)
      if (m[i]) top = i * 64 + 63 - __builtin_clzll(m[i]);
    if (top < 0) return 0.0f;
    auto bit = [&](int p) -> int { return p < 0 ? 0 : static_cast<int>((m[p / 64] >> (p % 64)) & 1u); };
    const int min_lsb = -149 - kBase;  // fp32 subnormal quantum
    int lsb = top - 23;
    if (lsb < min_lsb) lsb = min_lsb;
    uint64_t mant = 0;
    for (int p = top; p >= lsb; --p) mant = (mant << 1) | static_cast<uint64_t>(bit(p));
    const int round = bit(lsb - 1);
    bool sticky = false;
    for (int p = lsb - 2; p >= 0 && !sticky; --p) sticky = bit(p) != 0;
    if (round && (sticky || (mant & 1u))) mant += 1;
    const float v = ldexpf(static_cast<float>(mant), lsb + kBase);
    return neg ? -v : v;
  }
};

static bool e8m0_value_is_nan(uint32_t b) { return b == 0xFF; }

// v_mfma_scale_f32_16x16x128_f8f6f4, e4m3 operands (format 0), from SPEC §7's lane layout:
//   operand X (A rows / B columns): lane l holds row/column l % 16; register byte j (0..31) is
//   K = 16*(l/16) + j for j < 16 and K = 64 + 16*(l/16) + (j-16) for j >= 16.
//   scales: e8m0 byte (op_sel selects the byte of the lane's scale VGPR), one per row/column per
//   32-wide K block (OCP MX block size): the scale of row i, K block g is held by lane 16*g + i.
//   result: c[i] of lane l = D[4*(l/16) + i][l % 16].
// Model: D = C + sum_k A*B*sa*sb computed exactly and rounded once to fp32 (round to nearest even);
// any NaN element, NaN scale (0xFF) or NaN C in a dot product gives NaN. The hardware's internal
// accumulation order and rounding are not documented; this is a model of them.
static void mfma_scale_16x16x128(Worker* w, std::vector<Item*>& group) {
  const Item* lanes[64] = {};
  for (Item* it : group) lanes[it->lane] = it;
  const bool partial = group.size() != 64;
  if (partial) w->counters.v[kPartialWaveMfma]++;
  w->counters.v[kMfmaOps]++;
  const Item& l0 = *group.front();
  if (l0.a_fmt != 0 || l0.b_fmt != 0) {
    fail(w, "v_mfma_scale: only the fp8 e4m3 operand format (0) is emulated");
    return;
  }
  int32_t A[16][128], B[16][128];  // A[row][k], B[col][k] in units of 2^-9
  bool a_nan[16][4] = {}, b_nan[16][4] = {};
  uint32_t sa[16][4], sb[16][4];
  for (int l = 0; l < 64; ++l) {
    const Item* it = lanes[l];
    const int idx = l % 16, g = l / 16;
    for (int j = 0; j < 32; ++j) {
      const int k = (j < 16 ? 0 : 64) + 16 * g + (j & 15);
      // a lane outside EXEC still feeds the matrix unit in hardware; its register content is
      // unknown here, so it is NaN (the partial-wave counter flags it)
      const uint32_t ab = it ? (static_cast<uint32_t>(it->a[j / 4]) >> (8 * (j % 4))) & 0xFFu : 0x7Fu;
      const uint32_t bb = it ? (static_cast<uint32_t>(it->b[j / 4]) >> (8 * (j % 4))) & 0xFFu : 0x7Fu;
      A[idx][k] = g_e4m3.v[ab];
      B[idx][k] = g_e4m3.v[bb];
      if (g_e4m3.nan[ab]) a_nan[idx][k / 32] = true;
      if (g_e4m3.nan[bb]) b_nan[idx][k / 32] = true;
    }
    sa[idx][g] = it ? (static_cast<uint32_t>(it->scale_a) >> (8 * (it->opsel_a & 3))) & 0xFFu : 0xFFu;
    sb[idx][g] = it ? (static_cast<uint32_t>(it->scale_b) >> (8 * (it->opsel_b & 3))) & 0xFFu : 0xFFu;
  }
  for (int l = 0; l < 64; ++l) {
    Item* it = const_cast<Item*>(lanes[l]);
    if (it == nullptr) continue;
    const int col = l % 16;
    for (int r = 0; r < 4; ++r) {
#ifdef EMU_BREAK_MFMA_ROWS
      const int row = 4 * (l / 16) + (3 - r);
#else
      const int row = 4 * (l / 16) + r;
#endif
      bool nan = isnan(it->c[r]);
      int64_t part[4];
      for (int g = 0; g < 4; ++g) {
        nan = nan || a_nan[row][g] || b_nan[col][g] || e8m0_value_is_nan(sa[row][g]) || e8m0_value_is_nan(sb[col][g]);
        int64_t s = 0;
        for (int k = 32 * g; k < 32 * g + 32; ++k) s += static_cast<int64_t>(A[row][k]) * B[col][k];
        part[g] = s;  // |s| < 32 * 229376^2 < 2^41
      }
      float d;
      if (nan) {
        d = __builtin_nanf("");
      } else {
        // exponent of one unit: 2^-18 * 2^(sa-127) * 2^(sb-127)
        const bool same = sa[row][0] == sa[row][1] && sa[row][0] == sa[row][2] && sa[row][0] == sa[row][3] &&
                          sb[col][0] == sb[col][1] && sb[col][0] == sb[col][2] && sb[col][0] == sb[col][3];
        const float cin = it->c[r];
        if (same && !isinf(cin)) {
          const int64_t total = part[0] + part[1] + part[2] + part[3];  // < 2^43: exact in a double
          const int e = -18 + static_cast<int>(sa[row][0]) - 127 + static_cast<int>(sb[col][0]) - 127;
          const double s = ldexp(static_cast<double>(total), e);  // exact
          // C + s rounded once: two-sum gives the exact error; round-to-odd in double (53 >= 24+2
          // bits) followed by the fp32 conversion is then a single correct rounding.
          const double cd = cin;
          double sum = cd + s;
          const double bv = sum - cd;
          const double err = (cd - (sum - bv)) + (s - bv);
          if (err != 0.0) {
            uint64_t bits;
            memcpy(&bits, &sum, 8);
            if ((bits & 1u) == 0) sum = nextafter(sum, err > 0 ? INFINITY : -INFINITY);
          }
          d = static_cast<float>(sum);
        } else if (isinf(cin)) {
          d = cin;  // every product is finite
        } else {
          WideAcc acc;
          for (int g = 0; g < 4; ++g)
            acc.add_shifted(part[g], -18 + static_cast<int>(sa[row][g]) - 127 + static_cast<int>(sb[col][g]) - 127);
          int ce;
          const float cf = frexpf(cin, &ce);
          acc.add_shifted(static_cast<int64_t>(ldexpf(cf, 24)), ce - 24);
          d = acc.round_to_f32();
        }
      }
      it->r_c[r] = d;
    }
  }
}

// ---- wave-level operation resolution -----------------------------------------------------------

static int dpp_source_lane(int lane, int ctrl, bool* valid) {
  *valid = true;
  const int row = lane & ~15, in_row = lane & 15;
  if (ctrl >= 0x00 && ctrl <= 0xFF) return (lane & ~3) | ((ctrl >> (2 * (lane & 3))) & 3);  // quad_perm
  if (ctrl >= 0x101 && ctrl <= 0x10F) {  // row_shl:n  (lane reads lane + n of its row)
    const int n = ctrl & 15;
    *valid = in_row + n <= 15;
    return lane + n;
  }
  if (ctrl >= 0x111 && ctrl <= 0x11F) {  // row_shr:n
    const int n = ctrl & 15;
    *valid = in_row - n >= 0;
    return lane - n;
  }
  if (ctrl >= 0x121 && ctrl <= 0x12F) return row | ((in_row - (ctrl & 15)) & 15);  // row_ror:n
  if (ctrl == 0x140) {  // row_mirror
#ifdef EMU_BREAK_DPP_MIRROR
    return (lane & ~7) | (7 - (lane & 7));  // behaves like row_half_mirror
#else
    return row | (15 - in_row);
#endif
  }
  if (ctrl == 0x141) return (lane & ~7) | (7 - (lane & 7));  // row_half_mirror
  if (ctrl == 0x142) {  // row_bcast:15
    *valid = row > 0;
    return row - 1;
  }
  if (ctrl == 0x143) {  // row_bcast:31
    *valid = lane >= 32;
    return 31;
  }
  *valid = false;
  return INT32_MIN;  // a control this emulator does not implement
}

static void resolve(Worker* w, Block* b, std::vector<Item*>& group, int live_lanes) {
  Item& l0 = *group.front();
  Counters& c = w->counters;
  c.v[kWaveOps]++;
  if (static_cast<int>(group.size()) < live_lanes) c.v[kDivergentCollectives]++;
  Item* lanes[64] = {};
  for (Item* it : group) lanes[it->lane] = it;
  switch (l0.op) {
    case Op::kReadfirstlane: {
      const Item* first = nullptr;
      for (int l = 0; l < 64 && !first; ++l) first = lanes[l];
      bool uniform = true;
      for (Item* it : group) uniform = uniform && it->i0 == first->i0;
      if (!uniform) c.v[kReadfirstlaneNonuniform]++;
      for (Item* it : group) it->r_i = first->i0;
      break;
    }
    case Op::kBallot: {
      uint64_t mask = 0;
      for (Item* it : group)
        if (it->pred) mask |= uint64_t{1} << it->lane;
      for (Item* it : group) it->r_u64 = mask;
      break;
    }
    case Op::kWaveBarrier:
      break;
    case Op::kDpp: {
      for (Item* it : group) {
        if (it->ctrl != l0.ctrl || it->row_mask != l0.row_mask || it->bank_mask != l0.bank_mask) {
          fail(w, "DPP: lanes at one call site disagree on the (immediate) controls");
        }
        const int l = it->lane;
        const bool write = ((it->row_mask >> (l >> 4)) & 1) && ((it->bank_mask >> ((l & 15) >> 2)) & 1);
        bool valid;
        const int src = dpp_source_lane(l, it->ctrl, &valid);
        if (src == INT32_MIN) fail(w, "DPP: control not emulated");
        const Item* s = valid ? lanes[src] : nullptr;
        if (valid && s == nullptr) c.v[kDppInactiveSource]++;
        if (!write) {
          it->r_i = it->i0;
        } else if (s != nullptr) {
          it->r_i = s->i1;
        } else {
          it->r_i = it->bound_ctrl ? 0 : it->i0;  // invalid source: bound_ctrl writes 0, else old
        }
      }
      break;
    }
    case Op::kMfma:
      mfma_scale_16x16x128(w, group);
      break;
    case Op::kNone:
      fail(w, "internal: resolving no operation");
      break;
  }
  (void)b;
  for (Item* it : group) it->state = State::kReady;
}

static void wave_op(Item* it, Op op) {
  it->op = op;
  block_fiber(it, State::kWaveOp);
}

// ---- workgroup scheduler -----------------------------------------------------------------------

static void run_block(Worker* w, Block& b, uint8_t* lds, size_t dynamic_lds) {
  memset(lds, kLdsPoison, kLdsArenaBytes);
  const int n = b.n;
  for (int i = 0; i < n; ++i) {
    Item& it = b.items[i];
    it = Item();
    it.tid = i;
    it.lane = i % 64;
    it.wave = i / 64;
    it.block = &b;
    it.sp = init_stack(w->stacks + i * w->slot_bytes + w->slot_bytes, &it);
  }
  std::vector<int> order(n);
  for (int i = 0; i < n; ++i) order[i] = i;
  const int sched = g_options.schedule;
  if (sched == 1) std::reverse(order.begin(), order.end());
  std::vector<Item*> group;
  group.reserve(64);
  for (;;) {
    if (sched == 2) {  // a fresh random order every round
      for (int i = n - 1; i > 0; --i) std::swap(order[i], order[w->next_random() % (i + 1)]);
    }
    for (int idx : order) {
      Item& it = b.items[idx];
      if (it.state != State::kReady) continue;
      t_item = &it;
      emu_switch(&w->sched_sp, it.sp);
      t_item = nullptr;
    }
    bool progressed = false;
    int done = 0, at_barrier = 0;
    for (int wv = 0; wv < b.waves; ++wv) {
      const int first = wv * 64, last = std::min(n, first + 64);
      int live = 0;
      Item* leader = nullptr;
      for (int i = first; i < last; ++i) {
        Item& it = b.items[i];
        if (it.state == State::kDone) continue;
        ++live;
        if (it.state != State::kWaveOp) continue;
        // Reconvergence model ("min-PC"): of the call sites lanes of this wave wait at, the one
        // lowest in the code goes first, so lanes that are behind (in a loop, in the other arm
        // of a branch) catch up before lanes waiting further on; lanes at the same site are
        // then resolved together, as the hardware does after reconverging.
        if (leader == nullptr || reinterpret_cast<uintptr_t>(it.site) < reinterpret_cast<uintptr_t>(leader->site))
          leader = &it;
      }
      if (leader == nullptr) continue;
      group.clear();
      for (int i = first; i < last; ++i) {
        Item& it = b.items[i];
        if (it.state == State::kWaveOp && it.site == leader->site && it.op == leader->op) group.push_back(&it);
      }
      resolve(w, &b, group, live);
      progressed = true;
    }
    if (progressed) continue;
    const void* barrier_site = nullptr;
    bool mixed_sites = false;
    for (int i = 0; i < n; ++i) {
      const Item& it = b.items[i];
      if (it.state == State::kDone) ++done;
      if (it.state == State::kBarrier) {
        ++at_barrier;
        if (barrier_site != nullptr && barrier_site != it.site) mixed_sites = true;
        barrier_site = it.site;
      }
    }
    if (done == n) break;
    if (at_barrier + done == n) {
      w->counters.v[kBarriers]++;
      if (mixed_sites) w->counters.v[kBarrierSiteMismatch]++;
      if (done > 0) w->counters.v[kBarrierWithExitedItems]++;
      for (int i = 0; i < n; ++i)
        if (b.items[i].state == State::kBarrier) b.items[i].state = State::kReady;
      continue;
    }
    fail(w, "deadlock: work-items wait on each other and nothing can proceed");
    w->counters.v[kDeadlocks]++;
    break;
  }
  // LDS high-water mark and writes past the dynamic allocation.
  size_t hw = kLdsArenaBytes;
  while (hw > 0 && lds[hw - 1] == kLdsPoison) --hw;
  if (hw > w->counters.v[kLdsHighWater]) w->counters.v[kLdsHighWater] = hw;
  if (hw > dynamic_lds) w->counters.v[kLdsOverrun]++;
}

void run_grid(const LaunchShape& shape, void (*body)(void*), void* ctx) {
  const int threads_per_block = static_cast<int>(shape.block.x * shape.block.y * shape.block.z);
  const int64_t blocks = int64_t{shape.grid.x} * shape.grid.y * shape.grid.z;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_launches.push_back(LaunchRecord{shape.grid.x, shape.grid.y, shape.grid.z, shape.block.x, shape.block.y,
                                      shape.block.z, static_cast<uint64_t>(shape.dynamic_lds)});
    g_counters.v[kLaunches]++;
  }
  if (threads_per_block < 1 || threads_per_block > 1024 || shape.block.y != 1 || shape.block.z != 1 || blocks < 1 ||
      shape.dynamic_lds > kLdsArenaBytes) {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_last_error = shape.dynamic_lds > kLdsArenaBytes ? hipErrorInvalidValue : hipErrorInvalidConfiguration;
    g_error_detail = "launch shape outside what gfx950 accepts (1..1024 threads in x, LDS <= 160 KiB)";
    return;
  }
  const int nthreads = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(g_options.threads, blocks)));
  std::atomic<int64_t> next{0};
  std::vector<Worker> workers(nthreads);
  auto work = [&](int wi) {
    Worker& w = workers[wi];
    w.rng ^= g_options.seed * 0x2545F4914F6CDD1Dull + static_cast<uint64_t>(wi);
    w.stack_bytes = kStackBytes;
    w.slot_bytes = kStackBytes + 4096;
    w.slots = static_cast<size_t>(threads_per_block);
    const size_t total = w.slot_bytes * w.slots;
    w.stacks = static_cast<uint8_t*>(mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    for (size_t s = 0; s < w.slots; ++s) mprotect(w.stacks + s * w.slot_bytes, 4096, PROT_NONE);  // guard page
    uint8_t* lds = lds_arena();
    Block b;
    b.n = threads_per_block;
    b.waves = (threads_per_block + 63) / 64;
    b.items.resize(threads_per_block);
    b.body = body;
    b.ctx = ctx;
    b.worker = &w;
    for (int64_t blk = next++; blk < blocks; blk = next++) {
      b.id = dim3(static_cast<unsigned>(blk % shape.grid.x), static_cast<unsigned>((blk / shape.grid.x) % shape.grid.y),
                  static_cast<unsigned>(blk / (int64_t{shape.grid.x} * shape.grid.y)));
      b.dim = shape.block;
      run_block(&w, b, lds, shape.dynamic_lds);
      w.counters.v[kWorkgroups]++;
      w.counters.v[kWorkItems] += threads_per_block;
      if (!w.error.empty()) break;
    }
    munmap(w.stacks, total);
  };
  if (nthreads == 1) {
    work(0);
  } else {
    std::vector<std::thread> pool;
    for (int i = 0; i < nthreads; ++i) pool.emplace_back(work, i);
    for (auto& t : pool) t.join();
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  for (Worker& w : workers) {
    for (int i = 0; i < kNumCounters; ++i) {
      if (i == kLdsHighWater) {
        g_counters.v[i] = std::max(g_counters.v[i], w.counters.v[i]);
      } else {
        g_counters.v[i] += w.counters.v[i];
      }
    }
    if (!w.error.empty() && g_error_detail.empty()) g_error_detail = w.error;
    if (!w.error.empty()) g_last_error = hipErrorLaunchFailure;
  }
}

// ---- API for the harness -----------------------------------------------------------------------

void reset() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_counters = Counters();
  g_error_detail.clear();
  g_last_error = hipSuccess;
  g_launches.clear();
  for (Region& r : g_regions) r = Region();
}
Counters counters() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_counters;
}
const char* error_detail() { return g_error_detail.c_str(); }
void set_region(int slot, const void* p, uint64_t bytes) {
  if (slot >= 0 && slot < kMaxRegions) g_regions[slot] = Region{static_cast<const uint8_t*>(p), bytes};
}
void set_arch(const char* arch) { snprintf(g_arch, sizeof g_arch, "%s", arch); }
const std::vector<LaunchRecord>& launches() { return g_launches; }

}  // namespace emu

// ---- HIP runtime functions -----------------------------------------------------------------------

hipError_t hipGetLastError() {
  std::lock_guard<std::mutex> lock(emu::g_mutex);
  const hipError_t e = emu::g_last_error;
  emu::g_last_error = hipSuccess;
  return e;
}
const char* hipGetErrorString(hipError_t e) {
  switch (e) {
    case hipSuccess: return "hipSuccess";
    case hipErrorInvalidValue: return "hipErrorInvalidValue (emulator)";
    case hipErrorInvalidConfiguration: return "hipErrorInvalidConfiguration (emulator)";
    case hipErrorLaunchFailure: return "hipErrorLaunchFailure (emulator: see emu_error_detail)";
  }
  return "unknown hip error (emulator)";
}
hipError_t hipGetDeviceProperties(hipDeviceProp_t* prop, int device) {
  if (device != 0) return hipErrorInvalidValue;
  memset(prop, 0, sizeof *prop);
  snprintf(prop->name, sizeof prop->name, "gfx950 wave64 emulator");
  snprintf(prop->gcnArchName, sizeof prop->gcnArchName, "%s", emu::g_arch);
  prop->warpSize = 64;
  prop->sharedMemPerBlock = emu::kLdsArenaBytes;
  prop->maxThreadsPerBlock = 1024;
  return hipSuccess;
}

// ---- builtins -------------------------------------------------------------------------------------
using emu::cur;
using emu::Item;
using emu::Op;

#define EMU_SITE __builtin_return_address(0)

unsigned __builtin_amdgcn_workitem_id_x() { return static_cast<unsigned>(cur()->tid); }
unsigned __builtin_amdgcn_workitem_id_y() { return 0; }
unsigned __builtin_amdgcn_workitem_id_z() { return 0; }
unsigned __builtin_amdgcn_workgroup_id_x() { return cur()->block->id.x; }
unsigned __builtin_amdgcn_workgroup_id_y() { return cur()->block->id.y; }
unsigned __builtin_amdgcn_workgroup_id_z() { return cur()->block->id.z; }

__attribute__((noinline)) int __builtin_amdgcn_readfirstlane(int v) {
  Item* it = cur();
  it->site = EMU_SITE;
  it->i0 = v;
  emu::wave_op(it, Op::kReadfirstlane);
  return it->r_i;
}

__attribute__((noinline)) int __builtin_amdgcn_update_dpp(int old, int src, int ctrl, int row_mask, int bank_mask,
                                                         bool bound_ctrl) {
  Item* it = cur();
  it->site = EMU_SITE;
  it->i0 = old;
  it->i1 = src;
  it->ctrl = ctrl;
  it->row_mask = row_mask;
  it->bank_mask = bank_mask;
  it->bound_ctrl = bound_ctrl;
  emu::wave_op(it, Op::kDpp);
  return it->r_i;
}

__attribute__((noinline)) uint64_t __builtin_amdgcn_ballot_w64(bool pred) {
  Item* it = cur();
  it->site = EMU_SITE;
  it->pred = pred;
  emu::wave_op(it, Op::kBallot);
  return it->r_u64;
}

__attribute__((noinline)) void __builtin_amdgcn_wave_barrier() {
#ifdef EMU_BREAK_DROP_WAVE_BARRIER
  return;
#endif
  Item* it = cur();
  it->site = EMU_SITE;
  emu::wave_op(it, Op::kWaveBarrier);
}

__attribute__((noinline)) void __builtin_amdgcn_s_barrier() {
#ifdef EMU_BREAK_DROP_BARRIER
  return;
#else
  Item* it = cur();
  it->site = EMU_SITE;
  emu::block_fiber(it, emu::State::kBarrier);
#endif
}

// Memory fences order this work-item's memory operations; fibers of a workgroup share one OS
// thread and switch only inside the emulator's calls, so program order is already kept.
void __builtin_amdgcn_fence(int, const char*) {}
void __builtin_amdgcn_sched_barrier(int) {}

// v_med3_f32 in IEEE mode: the median, with NaN operands handled like IEEE minNum/maxNum
// (a quiet NaN is ignored), i.e. min(max(a, b), max(min(a, b), c)) with NaN-dropping min/max.
float __builtin_amdgcn_fmed3f(float a, float b, float c) { return fminf(fmaxf(a, b), fmaxf(fminf(a, b), c)); }

// v_cvt_pk_{fp8,bf8}_f32: two converted bytes into the low (word_sel 0) or high 16 bits of old.
static int with_packed_pair(int old, uint32_t lo, uint32_t hi, bool word_sel) {
  const uint32_t shift = word_sel ? 16u : 0u;
  return static_cast<int>((static_cast<uint32_t>(old) & ~(0xFFFFu << shift)) | ((lo | (hi << 8)) << shift));
}
int __builtin_amdgcn_cvt_pk_fp8_f32(float a, float b, int old, bool word_sel) {
  return with_packed_pair(old, emu::f32_to_e4m3(a), emu::f32_to_e4m3(b), word_sel);
}
int __builtin_amdgcn_cvt_pk_bf8_f32(float a, float b, int old, bool word_sel) {
  return with_packed_pair(old, emu::f32_to_e5m2(a), emu::f32_to_e5m2(b), word_sel);
}
float __builtin_amdgcn_cvt_f32_fp8(int src, int byte_sel) {
  const uint32_t b = (static_cast<uint32_t>(src) >> (8 * (byte_sel & 3))) & 0xFFu;
  if ((b & 0x7F) == 0x7F) return __builtin_nanf("");
  const float v = ldexpf(static_cast<float>(emu::g_e4m3.v[b]), -9);
  return v;
}

__attribute__((noinline)) emu_f32x4 __builtin_amdgcn_mfma_scale_f32_16x16x128_f8f6f4(
    emu_i32x8 a, emu_i32x8 b, emu_f32x4 c, int a_fmt, int b_fmt, int opsel_a, int scale_a, int opsel_b, int scale_b) {
  Item* it = cur();
  it->site = EMU_SITE;
  it->a = a;
  it->b = b;
  it->c = c;
  it->a_fmt = a_fmt;
  it->b_fmt = b_fmt;
  it->opsel_a = opsel_a;
  it->scale_a = scale_a;
  it->opsel_b = opsel_b;
  it->scale_b = scale_b;
  emu::wave_op(it, Op::kMfma);
  return it->r_c;
}

EmuBufferRsrc __builtin_amdgcn_make_buffer_rsrc(void* base, short stride, int num_records, int flags) {
  return EmuBufferRsrc{base, static_cast<uint32_t>(num_records), stride, flags};
}

// Raw buffer load (stride 0): byte offset = voffset + soffset; each dword is range checked
// against num_records (offset + 4 <= num_records); an out-of-range dword reads 0 and touches no
// memory.
emu_u32x4 __builtin_amdgcn_raw_buffer_load_b128(EmuBufferRsrc r, int voffset, int soffset, int aux) {
  Item* it = cur();
  emu::Worker* w = it->block->worker;
  (void)aux;
  if (r.stride != 0) emu::fail(w, "buffer load: only raw (stride 0) buffers are emulated");
  const uint64_t off = uint64_t{static_cast<uint32_t>(voffset)} + static_cast<uint32_t>(soffset);
  emu_u32x4 v = {0u, 0u, 0u, 0u};
  int in = 0;
  for (int d = 0; d < 4; ++d) {
    const uint64_t o = off + 4u * d;
    if (o + 4 <= r.num_records) {
      uint32_t word;
      memcpy(&word, static_cast<const uint8_t*>(r.base) + o, 4);
      v[d] = word;
      ++in;
    }
  }
  emu::Counters& c = w->counters;
  c.v[emu::kBufferLoads]++;
  if (in == 0) c.v[emu::kBufferLoadsOutOfRange]++;
  if (in != 0 && in != 4) c.v[emu::kBufferLoadsPartial]++;
  if (in > 0) {
    const uint8_t* p = static_cast<const uint8_t*>(r.base) + off;
    for (int s = 0; s < emu::kMaxRegions; ++s) {
      const emu::Region& reg = emu::g_regions[s];
      if (reg.base != nullptr && p >= reg.base && p < reg.base + reg.bytes) c.v[emu::kRegion0Bytes + s] += 4u * in;
    }
  }
  return v;
}
