/* group_norm, CUDA strategy "split_group": each (sample, group) slice split
 * into chunks of FORGE_P_CHUNK elements, one block per chunk: a statistics
 * kernel writes per-chunk partial moments to the workspace, an apply kernel
 * merges its group's partials (fixed order: deterministic) and normalizes its
 * chunk. Two reads and one write of x, whatever the slice size.
 *
 * Math: chunk k of slice s (n_k elements), fp32: K = its first element,
 * S1 = sum (x - K), S2 = sum (x - K)^2; mean_k = K + S1/n_k,
 * M2_k = S2 - S1^2/n_k. Merged (Chan et al.): n = n_a + n_b,
 * d = mean_b - mean_a, mean = mean_a + d*n_b/n, M2 = M2_a + M2_b + d^2*n_a*n_b/n;
 * var = M2/|s|; rstd = rsqrt(var + eps); per channel scale = rstd * w[c],
 * bias = fma(-scale, mean, b[c]); y = fma(x, scale, bias).
 * Op: aten::native_group_norm(Tensor input, Tensor? weight, Tensor? bias,
 *     SymInt N, SymInt C, SymInt HxW, int group, float eps) -> (out, mean, rstd).
 * Shapes: input [N, C, *] NCHW; out like input; mean/rstd [N, G].
 * Workspace: N*G*ceil(|s|/CHUNK) * 3 floats (forge_workspace_bytes).
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * as block_group (NCHW-contiguous float32/float16/bfloat16, C % group == 0,
 * weight/bias of the input's dtype or float32, mean/rstd N*G contiguous);
 * workspace at least forge_workspace_bytes. A launch failure returns 1.
 *
 * Why it is fast: the Apex/sglang recipe for big planes (SD/VAE group_norm:
 * 1 x 128 x 1024 x 1024 is 32 groups of 8 MB): N*G blocks would leave most of
 * 132 SMs idle, so the reduction is split across SPLIT = |s|/CHUNK blocks per
 * group, one writer per workspace slot (deterministic, no atomics), and the
 * normalize pass is fused with the merge. 16-byte vectors when HxW and the
 * pointers allow.
 *
 * The apply pass issues its first loads before it merges the partials (they
 * do not depend on them), so the merge's latency hides under them. UNROLL
 * (vectors in flight per thread, both passes) is not in strategies.yaml: on
 * the H200, 2 and 4 were slower than 1 at every VAE signature
 * (bench/results/rejected_designs.jsonl, commit 03e3058).
 * REVERSE = 1: the apply pass takes the chunks last first. The statistics
 * pass just read the last chunks, so up to the L2's size of them (50 MB on an
 * H200) is read from L2 instead of HBM; y is stored with an evict-first hint
 * so the writes do not push those lines out.
 * PDL = 1: the apply kernel is a programmatic dependent launch: its blocks
 * start (and load their first batch) while the statistics kernel drains, and
 * wait for its results with griddepcontrol.wait (no-op without the attribute).
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "forge_kernel.h"

#ifndef FORGE_P_BLOCK
#define FORGE_P_BLOCK 256 /* threads per chunk: 128, 256, 512 */
#endif
#ifndef FORGE_P_CHUNK
#define FORGE_P_CHUNK 32768 /* elements per block: 8192, 32768, 131072 (a multiple of 8) */
#endif
#ifndef FORGE_P_UNROLL
#define FORGE_P_UNROLL 1 /* 16-byte vectors in flight per thread: 1, 2, 4 */
#endif
#ifndef FORGE_P_REVERSE
#define FORGE_P_REVERSE 0 /* 1: apply pass last chunk first (re-read from L2) */
#endif
#ifndef FORGE_P_PDL
#define FORGE_P_PDL 0 /* 1: apply kernel as a programmatic dependent launch */
#endif

#include "../_common/cuda_common.cuh"  // inlined when forge loads the template (docs/STRATEGIES.md)
#include "../_common/pointwise_cuda_math.cuh"  // a chain's epilogue (chain_epilogue.h): the pointwise math
#include "../_common/pointwise_ops.h"  // and its op table

// FORGE_CHAIN (forge replaces this line with the generated chain)

namespace {

constexpr int BLOCK = FORGE_P_BLOCK;
constexpr int64_t CHUNK = FORGE_P_CHUNK;
constexpr int UNROLL = FORGE_P_UNROLL;
constexpr bool REVERSE = FORGE_P_REVERSE != 0;
constexpr bool PDL = FORGE_P_PDL != 0;
static_assert(BLOCK % 32 == 0 && BLOCK >= 64 && BLOCK <= 1024,
              "FORGE_P_BLOCK: a multiple of 32 in 64..1024");
static_assert(CHUNK % 8 == 0 && CHUNK >= 256, "FORGE_P_CHUNK: a multiple of 8, >= 256");
static_assert(UNROLL >= 1 && UNROLL <= 8, "FORGE_P_UNROLL: 1..8");

#include "../_common/group_norm_args.h"  // the call's fields: inlined when forge loads the template

#include "../_common/group_norm_apply_range.cuh"  // the affine pass of a slice range: inlined when forge loads the template

#include "../_common/group_norm_moments.cuh"  // Moments, merge, warp_merge: inlined when forge loads the template

// Partial moments of chunk id (= (n*G + g) * split + k) into its workspace slot.
template <class T, int VW, bool VEC>
__device__ __forceinline__ void stats_chunk(const T* __restrict__ x, float* __restrict__ ws,
                                            int64_t id, int64_t split, int64_t C, int64_t HW,
                                            int64_t G, float* scratch) {
  const int64_t D = C / G, n_el = D * HW;
  constexpr int64_t STEP = static_cast<int64_t>(BLOCK) * VW;
  const int64_t ng = id / split, k = id % split;
  const int64_t n = ng / G, g = ng % G;
  const int64_t j0 = k * CHUNK, j1 = j0 + CHUNK < n_el ? j0 + CHUNK : n_el;
  const T* xs = x + (n * C + g * D) * HW;
  const float K = Io<T>::to(xs[j0]);
  float s1 = 0.0f, s2 = 0.0f;
  for (int64_t j = j0 + threadIdx.x * VW; j < j1; j += STEP * UNROLL) {
    float v[UNROLL][VW];
    load_batch<T, VW, VEC, UNROLL>(xs, j, j1, STEP, v);
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      if (j + u * STEP >= j1) break;
#pragma unroll
      for (int e = 0; e < VW; ++e) {
        const float d = v[u][e] - K;
        s1 += d;
        s2 += d * d;
      }
    }
  }
  // This block's reads are done: the apply grid may launch once every block got here.
  if (PDL) asm volatile("griddepcontrol.launch_dependents;");
  s1 = block_sum(s1, scratch);
  s2 = block_sum(s2, scratch);
  if (threadIdx.x == 0) {
    const float cnt = static_cast<float>(j1 - j0);
    float* slot = ws + (ng * split + k) * 3;
    slot[0] = cnt;
    slot[1] = K + s1 / cnt;
    slot[2] = s2 - s1 * s1 / cnt;
  }
}

// Merges chunk id's group partials and normalizes the chunk. WAIT: a PDL
// launch; the workspace is read only after griddepcontrol.wait.
template <class T, class TW, class TS, int VW, bool VEC, bool WAIT>
__device__ __forceinline__ void apply_chunk(const T* __restrict__ x, const TW* __restrict__ w,
                                            const TW* __restrict__ b, T* __restrict__ y,
                                            TS* __restrict__ mean_out, TS* __restrict__ rstd_out,
                                            const float* __restrict__ ws, int64_t id, int64_t split,
                                            int64_t C, int64_t HW, int64_t G, float eps, DivU32 hw,
                                            float* stats) {
  const int64_t D = C / G, n_el = D * HW;
  constexpr int64_t STEP = static_cast<int64_t>(BLOCK) * VW;
  const int64_t ng = id / split, k = id % split;
  const int64_t n = ng / G, g = ng % G;
  const int64_t off = (n * C + g * D) * HW;
  const int64_t j0 = k * CHUNK, j1 = j0 + CHUNK < n_el ? j0 + CHUNK : n_el;
  float v[UNROLL][VW];
  load_batch<T, VW, VEC, UNROLL>(x + off, j0 + threadIdx.x * VW, j1, STEP, v);
  if (WAIT)
    asm volatile("griddepcontrol.wait;" ::
                     : "memory");  // the statistics kernel's writes are visible
  // Merge the group's partials (warp_merge: the same bits in every block of the group).
  if (threadIdx.x < 32) {
    const Moments m = warp_merge(ws + ng * split * 3, split);
    if (threadIdx.x == 0) {
      const float var = m.m2 / static_cast<float>(n_el);
      // mean/rstd as stored in the outputs' dtype, as the stock CUDA kernel
      // normalizes with (it keeps them in the input's dtype): with 16-bit
      // stats, exact ones differ from stock by several output ulps.
      stats[0] = Io<TS>::to(Io<TS>::from(m.mean));
      stats[1] = Io<TS>::to(Io<TS>::from(rsqrtf(var + eps)));
      if (k == 0 && mean_out) {  // a chain's kernel has no statistics outputs
        mean_out[ng] = Io<TS>::from(stats[0]);
        rstd_out[ng] = Io<TS>::from(stats[1]);
      }
    }
  }
  __syncthreads();
  const float mean = stats[0], rstd = stats[1];
  apply_range<T, TW, VW, VEC, UNROLL, REVERSE>(x + off, y + off, w, b, g * D, hw, j0, j1, mean,
                                               rstd, BLOCK, v);
  __syncthreads();  // stats is rewritten for the next id
}

template <class T, int VW, bool VEC>
__global__ void __launch_bounds__(BLOCK)
    gn_partial_stats(const T* __restrict__ x, float* __restrict__ ws, int64_t total, int64_t split,
                     int64_t C, int64_t HW, int64_t G) {
  __shared__ float scratch[32];
  for (int64_t id = blockIdx.x; id < total; id += gridDim.x)
    stats_chunk<T, VW, VEC>(x, ws, id, split, C, HW, G, scratch);
}

template <class T, class TW, class TS, int VW, bool VEC>
__global__ void __launch_bounds__(BLOCK)
    gn_apply(const T* __restrict__ x, const TW* __restrict__ w, const TW* __restrict__ b,
             T* __restrict__ y, TS* __restrict__ mean_out, TS* __restrict__ rstd_out,
             const float* __restrict__ ws, int64_t total, int64_t split, int64_t C, int64_t HW,
             int64_t G, float eps, DivU32 hw) {
  __shared__ float stats[2];
  for (int64_t it = blockIdx.x; it < total; it += gridDim.x)
    apply_chunk<T, TW, TS, VW, VEC, PDL>(x, w, b, y, mean_out, rstd_out, ws,
                                         REVERSE ? total - 1 - it : it, split, C, HW, G, eps, hw,
                                         stats);
}

inline int64_t split_of(const GnArgs& a) {
  const int64_t n_el = a.C / a.G * a.HW;
  return (n_el + CHUNK - 1) / CHUNK;
}
inline int64_t workspace_needed(const GnArgs& a) {
  return a.N * a.G * split_of(a) * 3 * static_cast<int64_t>(sizeof(float));
}

template <class T, class TW, class TS>
int launch(const GnArgs& a, cudaStream_t stream) {
  constexpr int VW = 16 / sizeof(T);
  const int64_t split = split_of(a), total = a.N * a.G * split;
  const bool vec = aligned16(a.x) && aligned16(a.y) && a.HW % VW == 0;
  float* ws = static_cast<float*>(a.workspace);
  const T* x = static_cast<const T*>(a.x);
  const DivU32 hw = DivU32::of(static_cast<uint32_t>(a.HW));
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(total < 0x7fffffffLL ? total : 0x7fffffffLL));
  cfg.blockDim = dim3(BLOCK);
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  cfg.attrs = attr;
  if (vec)
    gn_partial_stats<T, VW, true>
        <<<cfg.gridDim, BLOCK, 0, stream>>>(x, ws, total, split, a.C, a.HW, a.G);
  else
    gn_partial_stats<T, 1, false>
        <<<cfg.gridDim, BLOCK, 0, stream>>>(x, ws, total, split, a.C, a.HW, a.G);
  if (launch_status()) return 1;
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.numAttrs = PDL ? 1 : 0;
  auto run = [&](auto kernel) {
    return cudaLaunchKernelEx(&cfg, kernel, x, static_cast<const TW*>(a.w),
                              static_cast<const TW*>(a.b), static_cast<T*>(a.y),
                              static_cast<TS*>(a.mean), static_cast<TS*>(a.rstd), ws, total, split,
                              a.C, a.HW, a.G, a.eps, hw);
  };
  const cudaError_t e =
      vec ? run(gn_apply<T, TW, TS, VW, true>) : run(gn_apply<T, TW, TS, 1, false>);
  return e == cudaSuccess && !launch_status() ? 0 : 1;
}

#include "../_common/group_norm_cuda_entry.cuh"  // argument checks and the entry points: inlined when forge loads the template
