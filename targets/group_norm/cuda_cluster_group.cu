/* group_norm, CUDA strategy "cluster_group": one thread-block cluster per
 * (sample, group) slice; each CTA keeps its part of the slice in shared
 * memory, so x is read from global memory once when the slice fits on chip
 * (CLUSTER * SMEM_KB: 3.5 MB at 16 x 224 KB), and only the part past that is
 * read again (from L2, the cluster having just read it).
 *
 * Math: CTA r holds elements [r*P, (r+1)*P) of the slice (P = |s|/CLUSTER
 * rounded up to a vector), fp32, shifted by K = the slice's first element
 * (the same K in every CTA): S1_r = sum (x - K), S2_r = sum (x - K)^2. After
 * a cluster barrier every CTA adds all S1_r, S2_r through distributed shared
 * memory in rank order (the same bits everywhere): mean = K + S1/|s|,
 * var = (S2 - S1^2/|s|)/|s|, rstd = rsqrt(var + eps); mean and rstd rounded
 * to the outputs' dtype as the stock CUDA kernel keeps them; per channel
 * scale = rstd * w[c], bias = fma(-scale, mean, b[c]); y = fma(x, scale, bias).
 * Op: aten::native_group_norm(Tensor input, Tensor? weight, Tensor? bias,
 *     SymInt N, SymInt C, SymInt HxW, int group, float eps) -> (out, mean, rstd).
 * Shapes: input [N, C, *] NCHW; out like input; mean/rstd [N, G].
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * NCHW-contiguous float32/float16/bfloat16, C % group == 0, weight/bias of
 * the input's dtype or float32, mean/rstd N*G contiguous; the device runs
 * clusters of CLUSTER CTAs with SMEM_KB of shared memory each (sm_90; a
 * failed launch returns 1). No workspace.
 *
 * Why it is fast (KERNELS.md: "for small planes one cluster per (n, g)
 * reduces through distributed shared memory and reads once"): the VAE's
 * slices are 1-4 MB, so split_group's second read of x goes to HBM; here it
 * goes to shared memory. Loads are issued UNROLL 16-byte vectors at a time
 * so each SM keeps enough bytes in flight with one CTA resident.
 */
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "forge_kernel.h"

#ifndef FORGE_P_CLUSTER
#define FORGE_P_CLUSTER 16 /* CTAs per (n, g) slice: 16, 8 */
#endif
#ifndef FORGE_P_BLOCK
#define FORGE_P_BLOCK 512 /* threads per CTA: 512, 1024 */
#endif
#ifndef FORGE_P_SMEM_KB
#define FORGE_P_SMEM_KB 224 /* shared memory per CTA for the slice: 224 (one CTA per SM), 112 (two) */
#endif
#ifndef FORGE_P_UNROLL
#define FORGE_P_UNROLL 4 /* 16-byte loads in flight per thread: 4, 2, 8 */
#endif

#include "../_common/cuda_common.cuh"  // inlined when forge loads the template (docs/STRATEGIES.md)

namespace {

namespace cg = cooperative_groups;
constexpr int CLUSTER = FORGE_P_CLUSTER;
constexpr int BLOCK = FORGE_P_BLOCK;
constexpr int64_t SMEM_BYTES = static_cast<int64_t>(FORGE_P_SMEM_KB) << 10;
constexpr int UNROLL = FORGE_P_UNROLL;
static_assert(CLUSTER >= 1 && CLUSTER <= 16, "FORGE_P_CLUSTER: 1..16");
static_assert(BLOCK % 32 == 0 && BLOCK >= 64 && BLOCK <= 1024, "FORGE_P_BLOCK: a multiple of 32 in 64..1024");
static_assert(SMEM_BYTES >= 1024 && SMEM_BYTES <= 227 * 1024, "FORGE_P_SMEM_KB: 1..227");
static_assert(UNROLL >= 1 && UNROLL <= 16, "FORGE_P_UNROLL: 1..16");

#include "../_common/group_norm_args.h"  // the call's fields: inlined when forge loads the template

// One cluster per slice (looped when there are more slices than clusters in
// the grid). P: elements per CTA (a multiple of VW); cap: how many of them
// the CTA keeps in shared memory (a multiple of VW, <= P).
template <class T, class TW, class TS, int VW, bool VEC>
__global__ void __launch_bounds__(BLOCK) gn_cluster(const T* __restrict__ x, const TW* __restrict__ w,
                                                    const TW* __restrict__ b, T* __restrict__ y,
                                                    TS* __restrict__ mean_out, TS* __restrict__ rstd_out,
                                                    int64_t groups, int64_t C, int64_t HW, int64_t G, float eps,
                                                    int64_t P, int64_t cap) {
  cg::cluster_group cluster = cg::this_cluster();
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* cache = reinterpret_cast<T*>(smem_raw);
  __shared__ float scratch[32];
  __shared__ float published[2];  // this CTA's S1 and S2, read by the others
  const int rank = static_cast<int>(cluster.block_rank());
  const int64_t D = C / G, n_el = D * HW;
  const int64_t clusters = gridDim.x / CLUSTER;
  constexpr int64_t STEP = static_cast<int64_t>(BLOCK) * VW;
  for (int64_t ng = blockIdx.x / CLUSTER; ng < groups; ng += clusters) {
    const int64_t n = ng / G, g = ng % G;
    const int64_t off = (n * C + g * D) * HW;
    const T* xs = x + off;
    T* ys = y + off;
    const int64_t j0 = rank * P, j1 = j0 + P < n_el ? j0 + P : n_el;  // may be empty
    const float K = Io<T>::to(xs[0]);
    float s1 = 0.0f, s2 = 0.0f;
    // Pass 1: UNROLL vectors loaded before any is used (bytes in flight),
    // then kept in shared memory (as loaded: exact) and summed.
    for (int64_t base = j0 + static_cast<int64_t>(threadIdx.x) * VW; base < j1; base += STEP * UNROLL) {
      Pack<T, VW> pk[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const int64_t j = base + u * STEP;
        if (j < j1) {
          if (VEC) pk[u] = *reinterpret_cast<const Pack<T, VW>*>(xs + j);
          else pk[u].v[0] = xs[j];
        }
      }
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const int64_t j = base + u * STEP;
        if (j >= j1) break;
        if (j - j0 < cap) *reinterpret_cast<Pack<T, VW>*>(cache + (j - j0)) = pk[u];
#pragma unroll
        for (int e = 0; e < VW; ++e) {
          const float d = Io<T>::to(pk[u].v[e]) - K;
          s1 += d;
          s2 += d * d;
        }
      }
    }
    s1 = block_sum(s1, scratch);
    s2 = block_sum(s2, scratch);
    if (threadIdx.x == 0) {
      published[0] = s1;
      published[1] = s2;
    }
    cluster.sync();
    s1 = 0.0f;
    s2 = 0.0f;
    for (int r = 0; r < CLUSTER; ++r) {  // rank order: the same sums in every CTA
      const float* p = cluster.map_shared_rank(published, r);
      s1 += p[0];
      s2 += p[1];
    }
    cluster.sync();  // nobody overwrites `published` (next slice) or exits while others read it
    const float cnt = static_cast<float>(n_el);
    const float var = fmaxf((s2 - s1 * s1 / cnt) / cnt, 0.0f);
    const float mean = Io<TS>::to(Io<TS>::from(K + s1 / cnt));
    const float rstd = Io<TS>::to(Io<TS>::from(rsqrtf(var + eps)));
    if (rank == 0 && threadIdx.x == 0) {
      mean_out[ng] = Io<TS>::from(mean);
      rstd_out[ng] = Io<TS>::from(rstd);
    }
    // Pass 2: each thread reads back the very vectors it cached (no barrier
    // needed); the part past `cap` is read from global memory again.
    for (int64_t j = j0 + static_cast<int64_t>(threadIdx.x) * VW; j < j1; j += STEP) {
      Pack<T, VW> pk;
      if (j - j0 < cap) pk = *reinterpret_cast<const Pack<T, VW>*>(cache + (j - j0));
      else if (VEC) pk = *reinterpret_cast<const Pack<T, VW>*>(xs + j);
      else pk.v[0] = xs[j];
      const int64_t c = g * D + j / HW;  // one channel per vector (HW % VW == 0)
      const float scale = w ? rstd * Io<TW>::to(w[c]) : rstd;
      const float bias = fmaf(-scale, mean, b ? Io<TW>::to(b[c]) : 0.0f);
      float v[VW];
#pragma unroll
      for (int e = 0; e < VW; ++e) v[e] = fmaf(Io<T>::to(pk.v[e]), scale, bias);
      if (VEC) store_n<T, VW>(ys + j, v);
      else ys[j] = Io<T>::from(v[0]);
    }
  }
}

template <class T, class TW, class TS, int VW, bool VEC>
int launch_one(const GnArgs& a, cudaStream_t stream) {
  auto kernel = gn_cluster<T, TW, TS, VW, VEC>;
  // One-time opt-ins per instantiation (thread-safe static initialization):
  // past 48 KB of dynamic shared memory, and clusters of more than 8.
  static const bool ready =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(SMEM_BYTES)) ==
          cudaSuccess &&
      (CLUSTER <= 8 || cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) == cudaSuccess);
  if (!ready) return 1;
  const int64_t groups = a.N * a.G, n_el = a.C / a.G * a.HW;
  const int64_t P = ((n_el + CLUSTER - 1) / CLUSTER + VW - 1) / VW * VW;
  int64_t cap = SMEM_BYTES / static_cast<int64_t>(sizeof(T)) / VW * VW;
  cap = cap < P ? cap : P;
  const int64_t max_clusters = 0x7fffffffLL / CLUSTER;
  const int64_t clusters = groups < max_clusters ? groups : max_clusters;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(clusters * CLUSTER));
  cfg.blockDim = dim3(BLOCK);
  cfg.dynamicSmemBytes = static_cast<size_t>(cap) * sizeof(T);
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = CLUSTER;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  if (cudaLaunchKernelEx(&cfg, kernel, static_cast<const T*>(a.x), static_cast<const TW*>(a.w),
                         static_cast<const TW*>(a.b), static_cast<T*>(a.y), static_cast<TS*>(a.mean),
                         static_cast<TS*>(a.rstd), groups, a.C, a.HW, a.G, a.eps, P, cap) != cudaSuccess)
    return 1;
  return launch_status();
}

inline int64_t workspace_needed(const GnArgs&) { return 0; }

template <class T, class TW, class TS>
int launch(const GnArgs& a, cudaStream_t stream) {
  constexpr int VW = 16 / sizeof(T);
  if (aligned16(a.x) && aligned16(a.y) && a.HW % VW == 0) return launch_one<T, TW, TS, VW, true>(a, stream);
  return launch_one<T, TW, TS, 1, false>(a, stream);
}

#include "../_common/group_norm_cuda_entry.cuh"  // argument checks and the entry points: inlined when forge loads the template
