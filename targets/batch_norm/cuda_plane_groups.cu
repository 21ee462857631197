/* batch_norm in inference, CUDA strategy "plane_groups": NCHW planes taken P
 * at a time, P the fewest whose bytes are whole 16-byte vectors (P = 16 /
 * gcd(16, HW * sizeof(T)): 8 planes of 7x7 bf16 are 49 vectors, 784 bytes).
 * A warp takes a group: lanes 0..P-1 compute the P channels' constants, and
 * each lane gets its vector's one or two channels by shuffle. Every group
 * has the same layout, so which elements of a vector fall in its second plane
 * is one comparison, with no branch: all lanes run the same instructions.
 *
 * Why (PERF.md run N4): flat_affine at 7x7 spent 76% of its issue slots with
 * 18 of 32 lanes active. Each lane found its channel by two divisions, loaded
 * four constants and took a rsqrt per vector, and the one vector in seven
 * that straddles two planes took a second, divergent path. Here a vector
 * costs a division by HW (multiply-shift), eight shuffles and eight selects.
 *
 * Math (eval mode), per channel c, fp32: invstd = rsqrt(running_var[c] + eps);
 * y = fma((x - running_mean[c]) * invstd, w[c], b[c]) (the stock CUDA
 * arithmetic, batch_norm_cuda_params.cuh); save_mean = running_mean,
 * save_invstd = invstd when given C elements, nothing when empty.
 * Op: aten::native_batch_norm(input, weight?, bias?, running_mean?,
 *     running_var?, training, momentum, eps) -> (out, save_mean, save_invstd),
 * training = False. Shapes: input [N, C, *] NCHW-contiguous (or [N, C]).
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * as plane_lanes, and 16-byte aligned x and y, and N*C a multiple of P (every
 * group whole). A launch failure returns 1.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "forge_kernel.h"

#ifndef FORGE_P_BLOCK
#define FORGE_P_BLOCK 256 /* threads per block: 128, 256, 512 */
#endif
#ifndef FORGE_P_UNROLL
#define FORGE_P_UNROLL 2 /* groups per warp per step, all loaded before any is stored: 1, 2, 4 */
#endif
#define ACCEPT_CHANNELS_LAST 0

#include "../_common/cuda_common.cuh"  // inlined when forge loads the template (docs/STRATEGIES.md)

namespace {

constexpr int BLOCK = FORGE_P_BLOCK;
constexpr int UNROLL = FORGE_P_UNROLL;
constexpr int SLOTS = 2;  // vectors per lane per group: groups of up to 64 vectors (7x7: 49)
static_assert(BLOCK % 32 == 0 && BLOCK >= 64 && BLOCK <= 1024, "FORGE_P_BLOCK: a multiple of 32 in 64..1024");
static_assert(UNROLL >= 1 && UNROLL <= 4, "FORGE_P_UNROLL: 1..4");

#include "../_common/batch_norm_cuda_params.cuh"  // arguments, per-channel constants and saved statistics: inlined when forge loads the template

// One group's geometry, the same for every group: G vectors of VW elements
// over P planes of HW. Vector v starts in plane v*VW / HW, with `split` of
// its elements there (VW or more: it lies in one plane).
struct Groups {
  int P, G;
  DivU32 hw;
  int HW;
};

template <class T, class TP, class TS, int VW>
__global__ void __launch_bounds__(BLOCK) bn_groups(const T* __restrict__ x, const TP* __restrict__ w,
                                                   const TP* __restrict__ b, const TP* __restrict__ rm,
                                                   const TP* __restrict__ rv, T* __restrict__ y, TS* __restrict__ sm,
                                                   TS* __restrict__ si, int64_t groups, int64_t C, Groups g,
                                                   float eps) {
  write_saved(rm, rv, sm, si, C, eps);
  const int lane = threadIdx.x & 31;
  // This lane's vectors in any group, and where their planes change.
  int plane[SLOTS], split[SLOTS];
#pragma unroll
  for (int k = 0; k < SLOTS; ++k) {
    const uint32_t e0 = static_cast<uint32_t>((lane + 32 * k) * VW);
    plane[k] = static_cast<int>(g.hw.div(e0));
    split[k] = (plane[k] + 1) * g.HW - static_cast<int>(e0);
    if (plane[k] + 1 >= g.P) split[k] = VW;  // the group's last plane: no second one (and none to shuffle from)
  }
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (BLOCK / 32);
  for (int64_t g0 = (static_cast<int64_t>(blockIdx.x) * (BLOCK / 32) + threadIdx.x / 32) * UNROLL; g0 < groups;
       g0 += warps * UNROLL) {
    float v[UNROLL][SLOTS][VW];
    float mean[UNROLL], invstd[UNROLL], wc[UNROLL], bc[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int64_t gi = g0 + u;
      if (gi >= groups) break;
      const int64_t base = gi * g.G;  // in vectors
#pragma unroll
      for (int k = 0; k < SLOTS; ++k)
        if (lane + 32 * k < g.G) load_n<T, VW>(x + (base + lane + 32 * k) * VW, v[u][k]);
      if (lane < g.P) channel_params(rm, rv, w, b, (gi * g.P + lane) % C, eps, mean[u], invstd[u], wc[u], bc[u]);
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int64_t gi = g0 + u;
      if (gi >= groups) break;
      const int64_t base = gi * g.G;
#pragma unroll
      for (int k = 0; k < SLOTS; ++k) {
        // Shuffles are warp-wide: every lane takes part, idle slots included.
        const int p0 = plane[k] < g.P ? plane[k] : 0, p1 = p0 + 1 < g.P ? p0 + 1 : p0;
        const float m0 = __shfl_sync(0xffffffffu, mean[u], p0), m1 = __shfl_sync(0xffffffffu, mean[u], p1);
        const float i0 = __shfl_sync(0xffffffffu, invstd[u], p0), i1 = __shfl_sync(0xffffffffu, invstd[u], p1);
        const float w0 = __shfl_sync(0xffffffffu, wc[u], p0), w1 = __shfl_sync(0xffffffffu, wc[u], p1);
        const float b0 = __shfl_sync(0xffffffffu, bc[u], p0), b1 = __shfl_sync(0xffffffffu, bc[u], p1);
        if (lane + 32 * k >= g.G) continue;
#pragma unroll
        for (int e = 0; e < VW; ++e) {
          const bool first = e < split[k];
          v[u][k][e] = bn_apply(v[u][k][e], first ? m0 : m1, first ? i0 : i1, first ? w0 : w1, first ? b0 : b1);
        }
        store_n<T, VW>(y + (base + lane + 32 * k) * VW, v[u][k]);
      }
    }
  }
}

inline int gcd16(int64_t bytes) {
  int g = 16;
  while (bytes % g) g /= 2;
  return g;
}

template <class T, class TP, class TS>
int launch(const BnArgs& a, cudaStream_t stream) {
  constexpr int VW = 16 / sizeof(T);
  if (!aligned16(a.x) || !aligned16(a.y) || a.HW <= 0 || a.HW > 0x10000) return 1;
  const int P = 16 / gcd16(a.HW * static_cast<int64_t>(sizeof(T)));
  const int64_t G = P * a.HW / VW, planes = a.N * a.C;
  if (G > 32 * SLOTS || planes % P) return 1;  // larger planes: flat_affine's and plane_lanes' shapes
  const int64_t groups = planes / P;
  const int64_t per_block = (BLOCK / 32) * UNROLL;
  int64_t blocks = (groups + per_block - 1) / per_block;
  const int64_t min_blocks = (a.C + BLOCK - 1) / BLOCK;  // write_saved covers C with the grid
  if (blocks < min_blocks) blocks = min_blocks;
  if (blocks > 0x7fffffffLL) blocks = 0x7fffffffLL;
  const Groups g{P, static_cast<int>(G), DivU32::of(static_cast<uint32_t>(a.HW)), static_cast<int>(a.HW)};
  bn_groups<T, TP, TS, VW><<<static_cast<unsigned>(blocks), BLOCK, 0, stream>>>(
      static_cast<const T*>(a.x), static_cast<const TP*>(a.w), static_cast<const TP*>(a.b),
      static_cast<const TP*>(a.rm), static_cast<const TP*>(a.rv), static_cast<T*>(a.y),
      static_cast<TS*>(a.save_mean), static_cast<TS*>(a.save_invstd), groups, a.C, g, a.eps);
  return launch_status();
}

#include "../_common/batch_norm_cuda_entry.cuh"  // dispatch, argument checks and entry points: inlined when forge loads the template
