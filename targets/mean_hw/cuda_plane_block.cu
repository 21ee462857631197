/* mean over H x W, CUDA strategy "plane_block": one block per (n, c) plane
 * for large planes (56x56 and up), the block reduced through shared memory.
 *
 * Math: y[p] = (sum_{j < HW} x[p*HW + j]) / HW, fp32 accumulation, divided
 * like the stock kernel; generally the mean over the trailing dims.
 * Op: aten::mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *,
 *     ScalarType? dtype=None) -> Tensor. Shapes: [N, C, H, W] -> [N, C, 1, 1]
 * or [N, C]; any float in/out dtype.
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * self/out contiguous float32/float16/bfloat16; the reduced dims are the
 * trailing ones; one output per plane. A launch failure returns 1.
 *
 * Why it is fast: a plane of thousands of elements is enough work for a block:
 * FORGE_P_UNROLL independent 16-byte loads per thread in flight, one
 * warp-shuffle + shared-memory reduction per plane, planes looped past the
 * grid limit. Compiled here (nvcc 13, sm_90a) but not run here: no GPU.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "forge_kernel.h"

#ifndef FORGE_P_BLOCK
#define FORGE_P_BLOCK 256 /* threads per plane: 64, 128, 256, 512 */
#endif
#ifndef FORGE_P_UNROLL
#define FORGE_P_UNROLL 2 /* vectors per thread per step: 1, 2, 4 */
#endif

#include "../_common/cuda_common.cuh"  // inlined when forge loads the template (docs/STRATEGIES.md)

namespace {

constexpr int BLOCK = FORGE_P_BLOCK;
constexpr int UNROLL = FORGE_P_UNROLL;
static_assert(BLOCK % 32 == 0 && BLOCK >= 64 && BLOCK <= 1024, "FORGE_P_BLOCK: a multiple of 32 in 64..1024");
static_assert(UNROLL >= 1 && UNROLL <= 8, "FORGE_P_UNROLL: 1..8");

template <class TI, class TO, int VW, bool VEC>
__global__ void __launch_bounds__(BLOCK) mean_plane_block(const TI* __restrict__ x, TO* __restrict__ y,
                                                          int64_t planes, int64_t HW) {
  __shared__ float scratch[32];
  constexpr int64_t STEP = static_cast<int64_t>(BLOCK) * VW;
  for (int64_t p = blockIdx.x; p < planes; p += gridDim.x) {
    const TI* xp = x + p * HW;
    float acc[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) acc[u] = 0.0f;
    int64_t j = static_cast<int64_t>(threadIdx.x) * VW;
    for (; j + (UNROLL - 1) * STEP < HW; j += UNROLL * STEP) {
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        float v[VW];
        if (VEC) load_n<TI, VW>(xp + j + u * STEP, v);
        else v[0] = Io<TI>::to(xp[j + u * STEP]);
#pragma unroll
        for (int e = 0; e < VW; ++e) acc[u] += v[e];
      }
    }
    for (; j < HW; j += STEP) {
      float v[VW];
      if (VEC) load_n<TI, VW>(xp + j, v);
      else v[0] = Io<TI>::to(xp[j]);
#pragma unroll
      for (int e = 0; e < VW; ++e) acc[0] += v[e];
    }
    float s = 0.0f;
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) s += acc[u];
    s = block_sum(s, scratch);
    if (threadIdx.x == 0) y[p] = Io<TO>::from(s / static_cast<float>(HW));
  }
}

template <class TI, class TO>
int launch(const void* x, void* y, int64_t planes, int64_t HW, cudaStream_t stream) {
  constexpr int VW = 16 / sizeof(TI);
  const unsigned grid = static_cast<unsigned>(planes < 0x7fffffffLL ? planes : 0x7fffffffLL);
  const bool vec = aligned16(x) && (HW * sizeof(TI)) % 16 == 0;
  if (vec)
    mean_plane_block<TI, TO, VW, true><<<grid, BLOCK, 0, stream>>>(static_cast<const TI*>(x), static_cast<TO*>(y),
                                                                   planes, HW);
  else
    mean_plane_block<TI, TO, 1, false><<<grid, BLOCK, 0, stream>>>(static_cast<const TI*>(x), static_cast<TO*>(y),
                                                                   planes, HW);
  return launch_status();
}

}  // namespace

#include "../_common/mean_hw_cuda_entry.cuh"  // dispatch, argument checks and entry points: inlined when forge loads the template
