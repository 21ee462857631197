/* mean over H x W (adaptive_avg_pool2d(x, 1)), CUDA strategy "plane_lanes":
 * FORGE_P_LANES threads per (n, c) plane, a segmented sum in registers.
 *
 * Math: y[p] = (sum_{j < HW} x[p*HW + j]) / HW for every plane p, fp32
 * accumulation, a division like the stock kernel. Generally the mean over the
 * trailing k dims of a contiguous tensor (dim = those dims, or None / []).
 * Op: aten::mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *,
 *     ScalarType? dtype=None) -> Tensor (adaptive_avg_pool2d(x, 1) reaches it
 * as dim = [-1, -2], keepdim = True). Shapes: [N, C, H, W] -> [N, C, 1, 1]
 * or [N, C]; any float in/out dtype (dtype=).
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * self/out contiguous float32/float16/bfloat16; the reduced dims are the
 * trailing ones; one output per plane. A launch failure returns 1.
 *
 * Why it is fast: N x 2048 x 7 x 7 is latency-bound (6.4 MB at N = 32 bf16,
 * ~2 us at full bandwidth): a warp per 49-element plane leaves 15 of 32 lanes
 * idle; 8-16 lanes per plane keep all lanes loading, the group reduction is
 * log2(LANES) shuffles, and one wave of small blocks covers the GPU. 16-byte
 * vectors when HW*sizeof(dtype) % 16 == 0 and the pointer is aligned.
 * Compiled here (nvcc 13, sm_90a) but not run on this machine: no GPU.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "forge_kernel.h"

#ifndef FORGE_P_LANES
#define FORGE_P_LANES 16 /* threads per plane: 4, 8, 16, 32 */
#endif
#ifndef FORGE_P_BLOCK
#define FORGE_P_BLOCK 256 /* threads per block: 64 .. 1024 */
#endif

#include "../_common/cuda_common.cuh"  // inlined when forge loads the template (docs/STRATEGIES.md)

namespace {

constexpr int LANES = FORGE_P_LANES;
constexpr int BLOCK = FORGE_P_BLOCK;
static_assert(LANES == 4 || LANES == 8 || LANES == 16 || LANES == 32, "FORGE_P_LANES: 4, 8, 16 or 32");
static_assert(BLOCK % 32 == 0 && BLOCK >= 32 && BLOCK <= 1024, "FORGE_P_BLOCK: a multiple of 32, <= 1024");

template <class TI, class TO, int VW, bool VEC>
__global__ void __launch_bounds__(BLOCK) mean_plane_lanes(const TI* __restrict__ x, TO* __restrict__ y,
                                                          int64_t planes, int64_t HW) {
  constexpr int PER_BLOCK = BLOCK / LANES;
  const int lane = threadIdx.x % LANES;
  const int64_t step = static_cast<int64_t>(gridDim.x) * PER_BLOCK;
  // Every lane group runs the same number of iterations (uniform shuffles).
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * PER_BLOCK; base < planes; base += step) {
    const int64_t p = base + threadIdx.x / LANES;
    const bool live = p < planes;
    float s = 0.0f;
    if (live) {
      const TI* xp = x + p * HW;
      for (int64_t j = static_cast<int64_t>(lane) * VW; j < HW; j += static_cast<int64_t>(LANES) * VW) {
        float v[VW];
        if (VEC) {
          load_n<TI, VW>(xp + j, v);
        } else {
          v[0] = Io<TI>::to(xp[j]);
        }
#pragma unroll
        for (int e = 0; e < VW; ++e) s += v[e];
      }
    }
    s = group_sum<LANES>(s);
    if (live && lane == 0) y[p] = Io<TO>::from(s / static_cast<float>(HW));
  }
}

template <class TI, class TO>
int launch(const void* x, void* y, int64_t planes, int64_t HW, cudaStream_t stream) {
  constexpr int VW = 16 / sizeof(TI);
  constexpr int PER_BLOCK = BLOCK / LANES;
  const int64_t blocks = (planes + PER_BLOCK - 1) / PER_BLOCK;
  const unsigned grid = static_cast<unsigned>(blocks < 0x7fffffffLL ? blocks : 0x7fffffffLL);
  const bool vec = aligned16(x) && (HW * sizeof(TI)) % 16 == 0;
  if (vec)
    mean_plane_lanes<TI, TO, VW, true><<<grid, BLOCK, 0, stream>>>(static_cast<const TI*>(x), static_cast<TO*>(y),
                                                                   planes, HW);
  else
    mean_plane_lanes<TI, TO, 1, false><<<grid, BLOCK, 0, stream>>>(static_cast<const TI*>(x), static_cast<TO*>(y),
                                                                   planes, HW);
  return launch_status();
}

}  // namespace

#include "../_common/mean_hw_cuda_entry.cuh"  // dispatch, argument checks and entry points: inlined when forge loads the template
