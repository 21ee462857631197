/* group_norm, CUDA strategy "warp_group": LANES threads per (sample, group)
 * slice held in their registers, for small slices: a GEMM's [N, C] output
 * normalized in groups of C/G channels (HxW 1, slices of tens to hundreds of
 * elements, millions of them), where a block per slice leaves most threads
 * idle and reads the slice three times.
 *
 * Math: slice s = x[n, g*D:(g+1)*D, :] (D = C/G channels, D*HxW contiguous
 * elements) read once into registers, fp32: K = s[0];
 * mean = K + sum (s - K) / |s|; var = sum (s - mean)^2 / |s| over the
 * registers; rstd = rsqrt(var + eps); per channel scale = rstd * w[c],
 * bias = fma(-scale, mean, b[c]); y = fma(x, scale, bias): block_group's
 * arithmetic (the stock kernel's), sums by shuffles within the LANES threads.
 * Op and shapes: as block_group (cuda_block_group.cu).
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * block_group's, and a slice of at most LANES*PER elements (the strategy's
 * capacity: the proposer never picks an instance that cannot hold the
 * captured slice). A launch failure returns 1.
 *
 * Why it is fast: one read and one write per element, all lanes busy; LANES
 * lanes of a warp read consecutive elements (16-byte vectors when HxW and the
 * pointers allow), so even a slice of 64 floats is two coalesced loads.
 * Compiled here (nvcc 13, sm_90a) but not run on this machine: no GPU.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "forge_kernel.h"

#ifndef FORGE_P_LANES
#define FORGE_P_LANES 32 /* threads per (n, g): 8, 16, 32 */
#endif
#ifndef FORGE_P_PER
#define FORGE_P_PER 8 /* slice elements each thread holds: 4 .. 64 */
#endif
#ifndef FORGE_P_BLOCK
#define FORGE_P_BLOCK 256 /* threads per block: BLOCK / LANES slices at a time */
#endif

#include "../_common/cuda_common.cuh"  // inlined when forge loads the template (docs/STRATEGIES.md)
#include "../_common/pointwise_cuda_math.cuh"  // a chain's epilogue (chain_epilogue.h): the pointwise math
#include "../_common/pointwise_ops.h"  // and its op table

// FORGE_CHAIN (forge replaces this line with the generated chain)

namespace {

constexpr int LANES = FORGE_P_LANES, PER = FORGE_P_PER, BLOCK = FORGE_P_BLOCK;
static_assert(LANES == 8 || LANES == 16 || LANES == 32, "FORGE_P_LANES: 8, 16 or 32");
static_assert(PER >= 1 && PER <= 64, "FORGE_P_PER: 1 to 64");
static_assert(BLOCK % 32 == 0 && BLOCK >= 64 && BLOCK <= 1024, "FORGE_P_BLOCK: a multiple of 32 in 64..1024");

#include "../_common/group_norm_args.h"  // the call's fields: inlined when forge loads the template

#include "../_common/group_norm_apply_range.cuh"  // load_batch / store_batch: inlined when forge loads the template

// U vectors of VW elements per thread (U * VW == PER, or PER scalars).
template <class T, class TW, class TS, int VW, bool VEC>
__global__ void __launch_bounds__(BLOCK) gn_warp_group(const T* __restrict__ x, const TW* __restrict__ w,
                                                       const TW* __restrict__ b, T* __restrict__ y,
                                                       TS* __restrict__ mean_out, TS* __restrict__ rstd_out,
                                                       int64_t groups, int64_t C, int64_t HW, int64_t G, float eps,
                                                       DivU32 hw) {
  constexpr int U = PER / VW;
  constexpr int64_t STEP = static_cast<int64_t>(LANES) * VW;
  constexpr int64_t PER_BLOCK = BLOCK / LANES;
  const int lane = threadIdx.x % LANES;
  const int64_t D = C / G, n_el = D * HW;
  // Every thread of a warp runs every iteration (the shuffles need the whole
  // warp); a group past the last slice only sums zeros.
  for (int64_t base = blockIdx.x * PER_BLOCK; base < groups; base += static_cast<int64_t>(gridDim.x) * PER_BLOCK) {
    const int64_t ng = base + threadIdx.x / LANES;
    const bool active = ng < groups;
    const int64_t n = active ? ng / G : 0, g = active ? ng % G : 0;
    const int64_t off = (n * C + g * D) * HW;
    const T* xs = x + off;
    float v[U][VW];
    if (active) load_batch<T, VW, VEC, U>(xs, lane * VW, n_el, STEP, v);
    const float K = active ? Io<T>::to(xs[0]) : 0.0f;
    float s = 0.0f;
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (active && lane * VW + u * STEP < n_el)
#pragma unroll
        for (int e = 0; e < VW; ++e) s += v[u][e] - K;
    const float mean_exact = K + group_sum<LANES>(s) / static_cast<float>(n_el);
    float q = 0.0f;
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (active && lane * VW + u * STEP < n_el)
#pragma unroll
        for (int e = 0; e < VW; ++e) q += (v[u][e] - mean_exact) * (v[u][e] - mean_exact);
    const float var = group_sum<LANES>(q) / static_cast<float>(n_el);
    // The statistics as stored in the outputs' dtype, as block_group uses them.
    const float mean = Io<TS>::to(Io<TS>::from(mean_exact));
    const float rstd = Io<TS>::to(Io<TS>::from(rsqrtf(var + eps)));
    if (!active) continue;
    if (lane == 0 && mean_out) {  // a chain's kernel has no statistics outputs
      mean_out[ng] = Io<TS>::from(mean);
      rstd_out[ng] = Io<TS>::from(rstd);
    }
    store_batch<T, TW, VW, VEC, U, false>(y + off, w, b, g * D, hw, lane * VW, n_el, STEP, mean, rstd, v);
  }
}

inline int64_t workspace_needed(const GnArgs&) { return 0; }

template <class T, class TW, class TS>
int launch(const GnArgs& a, cudaStream_t stream) {
  constexpr int VW = 16 / sizeof(T);
  const int64_t groups = a.N * a.G;
  if ((a.C / a.G) * a.HW > static_cast<int64_t>(LANES) * PER) return 1;  // beyond this instance's capacity
  const int64_t blocks = (groups + BLOCK / LANES - 1) / (BLOCK / LANES);
  const unsigned grid = static_cast<unsigned>(blocks < 0x7fffffffLL ? blocks : 0x7fffffffLL);
  const bool vec = PER % VW == 0 && aligned16(a.x) && aligned16(a.y) && a.HW % VW == 0;
  auto run = [&](auto kernel) {
    kernel<<<grid, BLOCK, 0, stream>>>(static_cast<const T*>(a.x), static_cast<const TW*>(a.w),
                                       static_cast<const TW*>(a.b), static_cast<T*>(a.y), static_cast<TS*>(a.mean),
                                       static_cast<TS*>(a.rstd), groups, a.C, a.HW, a.G, a.eps,
                                       DivU32::of(static_cast<uint32_t>(a.HW)));
  };
  if constexpr (PER % VW == 0) {
    if (vec) {
      run(gn_warp_group<T, TW, TS, VW, true>);
      return launch_status();
    }
  }
  run(gn_warp_group<T, TW, TS, 1, false>);
  return launch_status();
}

#include "../_common/group_norm_cuda_entry.cuh"  // argument checks and the entry points: inlined when forge loads the template
