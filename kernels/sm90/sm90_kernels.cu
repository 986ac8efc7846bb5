// sm_90 implementation of the launchers declared in kernels/common/gpu_launch.h.
//
// Torch-free: CI compiles this file alone with nvcc for sm_90a and checks its SASS for FP8
// tensor-core instructions; setup.py links it into sglang_fp8ext._C on CUDA builds.
#include <cuda.h>
#include <cuda_runtime.h>

#include <mutex>
#include <unordered_map>

#include "../common/gpu_launch.h"
#include "sm90_gemm_common.cuh"
#include "sm90_gemm_plan.h"
#include "sm90_general_gemm.cuh"
#include "sm90_quant.cuh"
#include "sm90_register_fed_gemm.cuh"
#include "sm90_weight_map.h"
#include "sm90_wgmma_ring_gemm.cuh"

namespace sgl_fp8 {
namespace {

using sm90::GemmKernelArgs;
using sm90::GemmPlan;

using GemmKernel = void (*)(const GemmKernelArgs);

// Units (2 KB of weight per warp each) in flight per warp, bounded by the 128 registers a thread
// may use so that the next kernel's CTA fits beside this one.
template <int TOKEN_TILES>
constexpr int kWeightPipelineDepth = 3;


template <bool PREQUANT>
GemmKernel gemm_instance(int token_tiles) {
  switch (token_tiles) {
    case 1: return sm90::general_gemm_sm90<1, PREQUANT, kWeightPipelineDepth<1>>;
    case 2: return sm90::general_gemm_sm90<2, PREQUANT, kWeightPipelineDepth<2>>;
    case 3: return sm90::general_gemm_sm90<3, PREQUANT, kWeightPipelineDepth<3>>;
    default: return sm90::general_gemm_sm90<4, PREQUANT, kWeightPipelineDepth<4>>;
  }
}

// Up to 16 tokens (TOKEN_TILES 1 or 2): the co-resident variant, or the 4-warpgroup kernel with the
// windows the plan's max_tiles needs (sm90::wgmma_instance_windows; 0 before planning).
template <int TOKEN_TILES, bool PREQUANT>
GemmKernel wgmma_instance_up_to_16(bool co_resident, int max_tiles) {
  if (co_resident) return sm90::wgmma_ring_gemm_sm90<TOKEN_TILES, PREQUANT, sm90::kCoResidentWarpGroups>;
  return sm90::wgmma_instance_windows(TOKEN_TILES, max_tiles) > 2
             ? sm90::wgmma_ring_gemm_sm90<TOKEN_TILES, PREQUANT, sm90::kWgmmaWarpGroups, 3>
             : sm90::wgmma_ring_gemm_sm90<TOKEN_TILES, PREQUANT>;
}

// The paired-activations instances (bf16/fp16 input, 4 warpgroups, 9-32 tokens).
GemmKernel wgmma_pair_instance(int token_tiles, int max_tiles) {
  constexpr int kWgs = sm90::kWgmmaWarpGroups;
  if (token_tiles > 2) return sm90::wgmma_ring_gemm_sm90<4, false, kWgs, 3, true>;
  return sm90::wgmma_instance_windows(2, max_tiles) > 2 ? sm90::wgmma_ring_gemm_sm90<2, false, kWgs, 3, true>
                                                        : sm90::wgmma_ring_gemm_sm90<2, false, kWgs, 2, true>;
}

// token_tiles: sm90::wgmma_token_tiles (1, 2 or 4); co_resident: the 2-warpgroup variant (<= 16 tokens);
// max_tiles: the plan's tiles a CTA (0 before planning), for sm90::wgmma_instance_windows; pair:
// paired activations (PREQUANT false, not co-resident, token_tiles >= 2).
template <bool PREQUANT>
GemmKernel wgmma_ring_instance(int token_tiles, bool co_resident, int max_tiles, bool pair = false) {
  if (pair && !PREQUANT && !co_resident && token_tiles >= 2) return wgmma_pair_instance(token_tiles, max_tiles);
  switch (token_tiles) {
    case 1: return wgmma_instance_up_to_16<1, PREQUANT>(co_resident, max_tiles);
    case 2: return wgmma_instance_up_to_16<2, PREQUANT>(co_resident, max_tiles);
    default: return sm90::wgmma_ring_gemm_sm90<4, PREQUANT>;
  }
}

// The register-fed kernel: an instance per token tiles (1-2) and K blocks a warp (K / 1024: 1-8).
template <int TOKEN_TILES>
GemmKernel register_fed_instance_for(int64_t K) {
  switch (K / (sm90::kRegisterFedWarps * sm90::kBlockK)) {
    case 1: return sm90::register_fed_gemm_sm90<TOKEN_TILES, 1>;
    case 2: return sm90::register_fed_gemm_sm90<TOKEN_TILES, 2>;
    case 3: return sm90::register_fed_gemm_sm90<TOKEN_TILES, 3>;
    case 4: return sm90::register_fed_gemm_sm90<TOKEN_TILES, 4>;
    case 5: return sm90::register_fed_gemm_sm90<TOKEN_TILES, 5>;
    case 6: return sm90::register_fed_gemm_sm90<TOKEN_TILES, 6>;
    case 7: return sm90::register_fed_gemm_sm90<TOKEN_TILES, 7>;
    default: return sm90::register_fed_gemm_sm90<TOKEN_TILES, 8>;
  }
}

GemmKernel register_fed_instance(int64_t M, int64_t K) {
  return sm90::token_tiles_for(M) <= 1 ? register_fed_instance_for<1>(K) : register_fed_instance_for<2>(K);
}

struct DeviceFacts {
  int sms = 0;
  int64_t max_smem = 0;
};

// Per-device facts and per-kernel one-time setup, cached so the hot path makes no device
// queries after the first call (and none that would break graph capture).
class LaunchCache {
 public:
  static LaunchCache& get() {
    static LaunchCache cache;
    return cache;
  }

  const char* device_facts(int device, DeviceFacts& out) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = facts_.find(device);
    if (it == facts_.end()) {
      DeviceFacts f;
      int smem_optin = 0, sms = 0;
      if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
          cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess)
        return "cudaDeviceGetAttribute failed";
      f.sms = sms;
      f.max_smem = smem_optin;
      it = facts_.emplace(device, f).first;
    }
    out = it->second;
    return nullptr;
  }

  // Raise the kernel's dynamic shared memory limit to the device maximum, once per kernel.
  const char* prepare_kernel(GemmKernel kernel, int device, int64_t max_smem) {
    std::lock_guard<std::mutex> lock(mutex_);
    const Key key{reinterpret_cast<uintptr_t>(kernel), device, 0, 0};
    if (prepared_.count(key)) return nullptr;
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(max_smem));
    if (e != cudaSuccess) return cudaGetErrorString(e);
    prepared_.emplace(key, 1);
    return nullptr;
  }

  // How many clusters of `cluster` CTAs of `threads` threads with `smem` bytes can be resident at once.
  int max_active_clusters(GemmKernel kernel, int device, int cluster, int threads, int64_t smem) {
    std::lock_guard<std::mutex> lock(mutex_);
    const Key key{reinterpret_cast<uintptr_t>(kernel), device, cluster, smem};
    auto it = clusters_.find(key);
    if (it != clusters_.end()) return it->second;
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(cluster, 1024, 1);
    config.blockDim = dim3(threads, 1, 1);
    config.dynamicSmemBytes = size_t(smem);
    cudaLaunchAttribute attribute;
    attribute.id = cudaLaunchAttributeClusterDimension;
    attribute.val.clusterDim.x = cluster;
    attribute.val.clusterDim.y = 1;
    attribute.val.clusterDim.z = 1;
    config.attrs = &attribute;
    config.numAttrs = 1;
    int count = 0;
    if (cudaOccupancyMaxActiveClusters(&count, kernel, &config) != cudaSuccess) {
      (void)cudaGetLastError();  // a failed query is not sticky; clear it so the launch check does not see it
      count = 0;
    }
    clusters_.emplace(key, count);
    return count;
  }

 private:
  struct Key {
    uintptr_t kernel;
    int device, cluster;
    int64_t smem;
    bool operator==(const Key& o) const {
      return kernel == o.kernel && device == o.device && cluster == o.cluster && smem == o.smem;
    }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return std::hash<uintptr_t>()(k.kernel) ^ (size_t(k.device) << 1) ^ (size_t(k.cluster) << 8) ^
             (size_t(k.smem) << 16);
    }
  };
  std::mutex mutex_;
  std::unordered_map<int, DeviceFacts> facts_;
  std::unordered_map<Key, int, KeyHash> prepared_;
  std::unordered_map<Key, int, KeyHash> clusters_;
};


}  // namespace

// Maps the plan choose_gemm (sm90_gemm_plan.h) makes to its kernel instance, encodes the wgmma
// plan's tensor maps and launches; the choice itself is made there and nowhere else.
const char* launch_block_scaled_gemm(const GemmParams& p, void* stream) {
  if (p.M == 0) return nullptr;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return "cudaGetDevice failed";
  DeviceFacts facts;
  if (const char* err = LaunchCache::get().device_facts(device, facts)) return err;

  const bool prequant = p.x_type == ElemType::kE4M3;
  if (p.M > 1 && p.x_row_stride * (prequant ? 1 : 2) >= kMaxActivationRowBytes)
    return "activation rows 128 MB or more apart (K too large for one launch)";
  // Clusters are placed within GPCs, so not every SM count divides into clusters: the plans ask
  // how many fit at once (of a representative instance: the instances of one engine, token tiles
  // and thread count share their launch bounds, so the same clusters fit) and keep the grid to one
  // resident wave.
  const char* prepare_error = nullptr;
  auto residency = [&](GemmEngine engine, int token_tiles, int cluster, int threads, int64_t smem) -> int64_t {
    GemmKernel k = nullptr;
    if (engine == GemmEngine::kWgmma)
      k = prequant ? wgmma_ring_instance<true>(token_tiles, threads != sm90::kWgmmaWarpGroups * 128, 0)
                   : wgmma_ring_instance<false>(token_tiles, threads != sm90::kWgmmaWarpGroups * 128, 0);
    else
      k = prequant ? gemm_instance<true>(token_tiles) : gemm_instance<false>(token_tiles);
    if (const char* err = LaunchCache::get().prepare_kernel(k, device, facts.max_smem)) {
      prepare_error = err;
      return 0;
    }
    return LaunchCache::get().max_active_clusters(k, device, cluster, threads, smem);
  };
  CUtensorMap weight_map = {}, weight_map_short = {};
  auto maps_ok = [&](int rows, int chunk_blocks) {
    return sm90::encode_ring_weight_map(&weight_map, p.w, p.N, p.K, rows, chunk_blocks) &&
           sm90::encode_ring_weight_map(&weight_map_short, p.w, p.N, p.K, rows - sm90::kTileRows, chunk_blocks);
  };
  const GemmPlan plan = sm90::choose_gemm(p.N, p.K, p.M, p.w_shuffled, prequant, facts.sms, facts.max_smem, p.config,
                                          residency, maps_ok);
  if (prepare_error) return prepare_error;
  if (plan.cost < 0) return plan.error ? plan.error : sm90::kGeneralPlanError;

  GemmKernel kernel = nullptr;
  int threads = sm90::kGemmThreads;
  switch (plan.engine) {
    case GemmEngine::kRegisterFed:
      kernel = register_fed_instance(p.M, p.K);
      threads = sm90::kRegisterFedThreads;
      break;
    case GemmEngine::kWgmma:
      // the instance of the plan's windows and pairing (the same threads and shared memory as the one
      // the residency was asked of)
      kernel = prequant ? wgmma_ring_instance<true>(plan.token_tiles, plan.co_resident, plan.max_tiles_per_cta)
                        : wgmma_ring_instance<false>(plan.token_tiles, plan.co_resident, plan.max_tiles_per_cta,
                                                     plan.pair);
      threads = (plan.co_resident ? sm90::kCoResidentWarpGroups : sm90::kWgmmaWarpGroups) * 128;
      break;
    default:
      kernel = prequant ? gemm_instance<true>(plan.token_tiles) : gemm_instance<false>(plan.token_tiles);
      threads = sm90::kGemmThreads;
      break;
  }
  if (const char* err = LaunchCache::get().prepare_kernel(kernel, device, facts.max_smem)) return err;
  static_assert(sm90::kGeneralThreads == sm90::kGemmThreads, "the plan's general CTA is the kernel's");

  GemmKernelArgs a = {};
  a.x = p.x;
  a.x_row_stride = p.x_row_stride;
  a.x_is_fp16 = p.x_type == ElemType::kFP16;
  a.x_scale = p.x_scale;
  a.x_scale_stride_m = p.x_scale_stride_m;
  a.x_scale_stride_kb = p.x_scale_stride_kb;
  a.w = p.w;
  a.w_shuffled = p.w_shuffled;
  a.w_scale = p.w_scale;
  a.e8m0 = p.e8m0;
  a.bias = p.bias;
  a.out = p.out;
  a.out_is_fp16 = p.out_type == ElemType::kFP16;
  a.M = int(p.M);
  a.N = int(p.N);
  a.K = int(p.K);
  a.tiles = int(p.N / 16);
  a.kblocks = int(p.K / 128);
  a.k_split = plan.k_split;
  a.warps_k = plan.warps_k;
  a.warps_t = plan.warps_t;
  a.max_tiles_per_cta = plan.max_tiles_per_cta;
  a.max_blocks_per_cta = plan.max_blocks_per_cta;
  a.smem_stages = plan.smem_stages;
  a.engine = int(plan.engine);
  a.weight_map = weight_map;
  a.chunk_blocks = plan.chunk_blocks;
  a.early_chunks = plan.early_chunks;
  a.ring_slots = plan.ring_slots;
  a.weight_map_short = weight_map_short;
  auto inverse = [](int v) { return v > 0 ? 1.0f / float(v) : 0.0f; };  // small_quotient's (IEEE division)
  a.inverse_k_split = inverse(plan.k_split);
  a.inverse_chunk_blocks = inverse(plan.chunk_blocks);
  a.inverse_max_tiles = inverse(plan.max_tiles_per_cta);
  a.inverse_short_tiles = inverse(plan.max_tiles_per_cta - 1);
  a.inverse_max_blocks = inverse(plan.max_blocks_per_cta);
  a.inverse_short_blocks = inverse(plan.max_blocks_per_cta - 1);
  a.wgmma_layout = plan.wgmma_layout;

  cudaLaunchConfig_t config = {};
  // (The register-fed kernel's CTAs along x: one row group each.)
  config.gridDim = plan.engine == GemmEngine::kRegisterFed ? dim3(plan.row_groups, 1, 1)
                                                           : dim3(plan.k_split, plan.row_groups, plan.chunks);
  config.blockDim = dim3(threads, 1, 1);
  config.dynamicSmemBytes = size_t(plan.smem_bytes);
  config.stream = static_cast<cudaStream_t>(stream);
  cudaLaunchAttribute attributes[2];
  int n = 0;
  if (plan.k_split > 1 || plan.pair) {
    attributes[n].id = cudaLaunchAttributeClusterDimension;
    attributes[n].val.clusterDim.x = plan.k_split;
    attributes[n].val.clusterDim.y = plan.pair ? 2 : 1;  // paired activations: two row groups
    attributes[n].val.clusterDim.z = 1;
    ++n;
  }
  if (p.allow_early_weight_prefetch) {
    attributes[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  config.attrs = attributes;
  config.numAttrs = n;
  const cudaError_t e = cudaLaunchKernelEx(&config, kernel, a);
  return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

const char* launch_per1x128_quant(const QuantParams& p, void* stream) {
  const int64_t groups = p.rows * (p.K / 128);
  if (groups == 0) return nullptr;
  const int64_t blocks = sm90::ceil_div(groups, sm90::kQuantThreads / 16);
  sm90::per1x128_quant_sm90<<<dim3(unsigned(blocks < 65535 * 16 ? blocks : 65535 * 16)), sm90::kQuantThreads, 0,
                              static_cast<cudaStream_t>(stream)>>>(p);
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

const char* launch_rmsnorm_quant(const NormQuantParams& p, void* stream) {
  if (p.rows == 0) return nullptr;
  if (p.rows > 0x7FFFFFFF) return "rmsnorm_quant: too many rows for one launch";
  sm90::rmsnorm_quant_sm90<<<dim3(unsigned(p.rows)), sm90::kQuantThreads, 0, static_cast<cudaStream_t>(stream)>>>(p);
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

bool device_supported(int device_index, const char** why) {
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device_index) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device_index) != cudaSuccess) {
    if (why) *why = "could not read the device's compute capability";
    return false;
  }
  if (major == 9 && minor == 0) return true;
  if (why) *why = "this library has sm_90a kernels only (H100/H200); the device is not compute capability 9.0";
  return false;
}

}  // namespace sgl_fp8
