// The wgmma ring kernel's default launch plans on an H200, computed on the CPU from
// kernels/sm90/sm90_gemm_plan.h with the H200's measured cluster residency
// (tests/h200_residency.h): one line per shape and token count. Diff two trees' tables to see
// which plans a change of the cost model moves before measuring them on the GPU:
//
//   g++ -std=c++17 -O1 -I kernels tools/sm90_plan_table.cpp -o /tmp/plans && /tmp/plans > new.txt
//   git archive REV kernels | tar x -C /tmp/rev
//   g++ -std=c++17 -O1 -I /tmp/rev/kernels tools/sm90_plan_table.cpp -o /tmp/plans_rev && /tmp/plans_rev > old.txt
//   diff old.txt new.txt
//
// Arguments (optional): a comma-separated NxK list and a comma-separated token list. The device
// remains the authority: tools/config_ab.py --kernels records the grid each launch took (session
// 22 found that a residency guessed here had misplaced clusters of 5-8).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "sm90/sm90_gemm_plan.h"
#include "../tests/h200_residency.h"

using namespace sgl_fp8;
using namespace sgl_fp8::sm90;

// A comma-separated list of positive integers, or of NxK pairs (pairs = true: N into out, K into
// second). False on anything else.
static bool parse_list(const char* text, bool pairs, std::vector<long long>& out, std::vector<long long>& second) {
  auto number = [](const char*& p, long long& v) {
    char* end = nullptr;
    v = std::strtoll(p, &end, 10);
    const bool ok = end != p && v > 0;
    p = end;
    return ok;
  };
  for (const char* p = text;;) {
    long long v = 0, w = 0;
    if (!number(p, v)) return false;
    if (pairs && (*p++ != 'x' || !number(p, w))) return false;
    out.push_back(v);
    if (pairs) second.push_back(w);
    if (*p == '\0') return true;
    if (*p++ != ',') return false;
  }
}

int main(int argc, char** argv) {
  // SPEC §6 and the other shapes session 21-22 checked (Qwen3-style decode step, DeepSeek, large shares)
  const char* shapes_text = argc > 1 ? argv[1]
                                     : "5120x4096,4608x4096,4096x2048,8192x1024,4096x1024,1536x4096,2112x7168,"
                                       "4096x4096,6144x4096,7168x2048,2560x4096,1024x4096,3072x1536,2048x2048,"
                                       "12288x4096,24576x4096,4096x12288,10240x4096,4608x7168,8192x8192,16384x1024";
  const char* ms_text = argc > 2 ? argv[2] : "1,2,4,8,9,10,11,12,13,14,15,16,17,24,32";
  std::vector<long long> ns, ks, ms, unused;
  if (!parse_list(shapes_text, true, ns, ks) || !parse_list(ms_text, false, ms, unused)) {
    std::fprintf(stderr, "usage: %s [NxK,NxK,...] [M,M,...]\n", argv[0]);
    return 2;
  }
  for (size_t i = 0; i < ns.size(); ++i)
    for (long long m : ms) {
      const GemmPlan p = plan_wgmma_ring_gemm(ns[i], ks[i], m, false, 132, 227 * 1024, GemmConfig{},
                                                    h200::resident_clusters);
      if (!p.wgmma) {
        std::printf("%lldx%lld M=%lld: no 4-warpgroup wgmma plan fits\n", ns[i], ks[i], m);
        continue;
      }
      std::printf("%lldx%lld M=%lld: k_split %d, %d row groups, %d tiles and %d K blocks a CTA, %lld B smem%s\n", ns[i],
                  ks[i], m, p.k_split, p.row_groups, p.max_tiles_per_cta, p.max_blocks_per_cta,
                  (long long)p.smem_bytes, p.pair ? ", paired activations" : "");
    }
  return 0;
}
