// Internal interface of the gfx950 emulator (emu_runtime.cpp) for the harness (emu_api.cpp).
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <vector>

namespace emu {

constexpr size_t kLdsArenaBytes = 160 * 1024;  // gfx950 LDS per workgroup
constexpr uint8_t kLdsPoison = 0xFF;           // NaN as fp32, e4m3 and e8m0
constexpr size_t kStackBytes = 64 * 1024;      // per work-item fiber (plus a guard page)
constexpr int kMaxRegions = 4;

// Counters, summed over every launch since the last reset (lds_high_water: the maximum).
#define EMU_COUNTERS(X)                                                                          \
  X(launches) X(workgroups) X(work_items) X(wave_ops) X(divergent_collectives) X(mfma_ops)      \
  X(partial_wave_mfma) X(readfirstlane_nonuniform) X(dpp_inactive_source) X(barriers)           \
  X(barrier_site_mismatch) X(barrier_with_exited_items) X(buffer_loads)                         \
  X(buffer_loads_out_of_range) X(buffer_loads_partial) X(region0_bytes) X(region1_bytes)        \
  X(region2_bytes) X(region3_bytes) X(lds_high_water) X(lds_overrun) X(deadlocks) X(errors)

enum CounterId {
#define EMU_COUNTER_ENUM(name) k_##name,
  EMU_COUNTERS(EMU_COUNTER_ENUM)
#undef EMU_COUNTER_ENUM
  kNumCounters
};
constexpr int kLaunches = k_launches, kWorkgroups = k_workgroups, kWorkItems = k_work_items,
              kWaveOps = k_wave_ops, kDivergentCollectives = k_divergent_collectives, kMfmaOps = k_mfma_ops,
              kPartialWaveMfma = k_partial_wave_mfma, kReadfirstlaneNonuniform = k_readfirstlane_nonuniform,
              kDppInactiveSource = k_dpp_inactive_source, kBarriers = k_barriers,
              kBarrierSiteMismatch = k_barrier_site_mismatch, kBarrierWithExitedItems = k_barrier_with_exited_items,
              kBufferLoads = k_buffer_loads, kBufferLoadsOutOfRange = k_buffer_loads_out_of_range,
              kBufferLoadsPartial = k_buffer_loads_partial, kRegion0Bytes = k_region0_bytes,
              kLdsHighWater = k_lds_high_water, kLdsOverrun = k_lds_overrun, kDeadlocks = k_deadlocks,
              kErrors = k_errors;
extern const char* const kCounterNames[kNumCounters];

struct Counters {
  uint64_t v[kNumCounters] = {};
};

struct Options {
  int threads = 2;     // OS threads running workgroups
  int schedule = 0;    // 0: lanes in order, 1: lanes in reverse order, 2: a random order every round
  uint64_t seed = 1;   // schedule 2
};
extern Options g_options;

// Memory ranges whose in-range buffer-load bytes are counted (region<i>_bytes).
struct Region {
  const uint8_t* base = nullptr;
  uint64_t bytes = 0;
};

struct LaunchRecord {
  unsigned gx, gy, gz, bx, by, bz;
  uint64_t dynamic_lds;
};

// The per-thread dynamic LDS arena (defined by the harness next to the kernels' `extern
// __shared__` array, so that the kernels' dynamic LDS is this storage).
uint8_t* lds_arena();

void reset();
Counters counters();
const char* error_detail();
void set_region(int slot, const void* p, uint64_t bytes);
void set_arch(const char* arch);
const std::vector<LaunchRecord>& launches();

}  // namespace emu
