// Byte offsets of weight elements in the two layouts of SPEC §4. Free of torch headers.
//
// Plain: row-major [N, K] e4m3 bytes, offset n*K + k.
// AITER (16,16) preshuffle: w.view(N/16, 16, K/32, 2, 16).permute(0, 2, 3, 1, 4), i.e. with
// n = 16*n0 + n1 and k = 32*k0 + 16*k1 + k2:  o = n0*16*K + k0*512 + k1*256 + n1*16 + k2.
// Consequences the kernels rely on: the 16 bytes k2 = 0..15 of one (n, 16-wide K chunk) are
// contiguous; a 16-row tile's 128-wide K block is 2048 contiguous bytes; a 16-row tile over all
// of K is 16*K contiguous bytes.
#pragma once

#include <stdint.h>

#include "fp8_quant_math.h"  // SGL_FP8_HD

namespace sgl_fp8 {

constexpr int kShuffleRows = 16;   // rows per shuffled tile (n1)
constexpr int kShuffleChunk = 16;  // contiguous K bytes per (row, chunk) (k2)

SGL_FP8_HD int64_t plain_weight_offset(int64_t n, int64_t k, int64_t K) { return n * K + k; }

SGL_FP8_HD int64_t shuffled_weight_offset(int64_t n, int64_t k, int64_t K) {
  const int64_t n0 = n >> 4, n1 = n & 15;
  const int64_t k0 = k >> 5, k1 = (k >> 4) & 1, k2 = k & 15;
  return n0 * 16 * K + k0 * 512 + k1 * 256 + n1 * 16 + k2;
}

// Offset of the 16 contiguous bytes holding (n, k .. k+15) for k % 16 == 0, in either layout.
SGL_FP8_HD int64_t weight_chunk16_offset(int64_t n, int64_t k, int64_t K, bool shuffled) {
  return shuffled ? shuffled_weight_offset(n, k, K) : plain_weight_offset(n, k, K);
}

}  // namespace sgl_fp8
