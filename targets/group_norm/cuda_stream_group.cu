/* group_norm, CUDA strategy "stream_group": a thread-block cluster per
 * (sample, group) slice streams it twice, and the second read comes from L2
 * because only LIVE_MB of slices are worked on at once.
 *
 * Math: CTA r of a cluster takes elements [r*P, (r+1)*P) of the slice (P =
 * |s|/CLUSTER rounded up to a vector), fp32, shifted by K = the slice's first
 * element (the same K in every CTA): S1_r = sum (x - K), S2_r = sum (x - K)^2.
 * After a cluster barrier every CTA adds all S1_r, S2_r through distributed
 * shared memory in rank order (the same bits everywhere): mean = K + S1/|s|,
 * var = (S2 - S1^2/|s|)/|s|, rstd = rsqrt(var + eps); mean and rstd rounded
 * to the outputs' dtype as the stock CUDA kernel keeps them; per channel
 * scale = rstd * w[c], bias = fma(-scale, mean, b[c]); y = fma(x, scale, bias).
 * Op: aten::native_group_norm(Tensor input, Tensor? weight, Tensor? bias,
 *     SymInt N, SymInt C, SymInt HxW, int group, float eps) -> (out, mean, rstd).
 * Shapes: input [N, C, *] NCHW; out like input; mean/rstd [N, G].
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * NCHW-contiguous float32/float16/bfloat16, C % group == 0, weight/bias of
 * the input's dtype or float32, mean/rstd N*G contiguous; slices below 2^31
 * elements (the channel of a vector by a 32-bit division); the device runs
 * clusters of CLUSTER CTAs (sm_90; a failed launch returns 1). No workspace.
 *
 * Why it should be fast: split_group reads x from HBM twice, because all of
 * a VAE tensor's slices (64-128 MB) are in flight at once and L2 holds 50 MB.
 * Here the grid has LIVE_MB / slice-bytes clusters, each walking its slices
 * in turn, so the bytes between a slice's first and second read fit in L2.
 * Unlike cluster_group (PERF.md run E) nothing waits in shared memory: a
 * CTA's only pause is its cluster's barrier, and the apply pass's first
 * loads are issued before it. Several CTAs share an SM, at different phases.
 * y is stored evict-first so the writes do not push x out of L2.
 */
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "forge_kernel.h"

#ifndef FORGE_P_CLUSTER
#define FORGE_P_CLUSTER 16 /* CTAs per slice: 16, 8 */
#endif
#ifndef FORGE_P_BLOCK
#define FORGE_P_BLOCK 512 /* threads per CTA: 512, 256, 1024 */
#endif
#ifndef FORGE_P_LIVE_MB
#define FORGE_P_LIVE_MB 24 /* slices in flight * slice bytes, at most: 24, 16, 32 (0: every slice at once) */
#endif
#ifndef FORGE_P_UNROLL
#define FORGE_P_UNROLL 2 /* 16-byte loads in flight per thread: 2, 4, 8 */
#endif
#ifndef FORGE_P_STAGES
#define FORGE_P_STAGES 0 /* 0: loads to registers; else bulk copies (TMA) into a ring of STAGES chunks: 4, 8 */
#endif
#ifndef FORGE_P_CHUNK_KB
#define FORGE_P_CHUNK_KB 16 /* bytes per bulk copy: 16, 8 */
#endif

#include "../_common/cuda_common.cuh"  // inlined when forge loads the template (docs/STRATEGIES.md)

namespace {

namespace cg = cooperative_groups;
constexpr int CLUSTER = FORGE_P_CLUSTER;
constexpr int BLOCK = FORGE_P_BLOCK;
constexpr int64_t LIVE_BYTES = static_cast<int64_t>(FORGE_P_LIVE_MB) << 20;
constexpr int UNROLL = FORGE_P_UNROLL;
// Registers capped for 1024 threads per SM (64 each): two CTAs of 512 at different phases.
constexpr int MIN_BLOCKS = BLOCK <= 1024 / 2 ? 1024 / BLOCK : 1;
static_assert(CLUSTER >= 1 && CLUSTER <= 16, "FORGE_P_CLUSTER: 1..16");
static_assert(BLOCK % 32 == 0 && BLOCK >= 64 && BLOCK <= 1024, "FORGE_P_BLOCK: a multiple of 32 in 64..1024");
static_assert(FORGE_P_LIVE_MB >= 0, "FORGE_P_LIVE_MB: >= 0");
static_assert(UNROLL >= 1 && UNROLL <= 16, "FORGE_P_UNROLL: 1..16");
constexpr int STAGES = FORGE_P_STAGES;
constexpr int CHUNK_BYTES = FORGE_P_CHUNK_KB << 10;
static_assert(STAGES >= 0 && STAGES <= 16 && CHUNK_BYTES >= 1024 && STAGES * CHUNK_BYTES <= 200 * 1024,
              "FORGE_P_STAGES x FORGE_P_CHUNK_KB: at most 200 KB of shared memory");

#include "../_common/group_norm_args.h"  // the call's fields: inlined when forge loads the template

// UNROLL vectors one block stride apart, from thread offset j, as stored
// (those at or past j1 are left unset): all loads issued before any is used.
template <class T, int VW, bool VEC>
__device__ __forceinline__ void load_raw(const T* xs, int64_t j, int64_t j1, Pack<T, VW> (&pk)[UNROLL]) {
  constexpr int64_t STEP = static_cast<int64_t>(BLOCK) * VW;
#pragma unroll
  for (int u = 0; u < UNROLL; ++u) {
    const int64_t ju = j + u * STEP;
    if (ju >= j1) break;
    if (VEC) pk[u] = *reinterpret_cast<const Pack<T, VW>*>(xs + ju);
    else pk[u].v[0] = xs[ju];
  }
}

// Cluster c takes slices c, c + clusters, ... P: elements per CTA (a multiple of VW).
template <class T, class TW, class TS, int VW, bool VEC>
__global__ void __launch_bounds__(BLOCK, MIN_BLOCKS) gn_stream(const T* __restrict__ x, const TW* __restrict__ w,
                                                   const TW* __restrict__ b, T* __restrict__ y,
                                                   TS* __restrict__ mean_out, TS* __restrict__ rstd_out,
                                                   int64_t groups, int64_t C, int64_t HW, int64_t G, float eps,
                                                   int64_t P, DivU32 hw) {
  cg::cluster_group cluster = cg::this_cluster();
  __shared__ float scratch[32];
  // This CTA's S1, S2, read by the others. Two sets by slice parity: a CTA
  // can be one slice ahead of another (one cluster barrier per slice), never
  // two, so the set it writes is never the one being read.
  __shared__ float published[2][2];
  const int rank = static_cast<int>(cluster.block_rank());
  const int64_t D = C / G, n_el = D * HW;
  const int64_t clusters = gridDim.x / CLUSTER;
  constexpr int64_t STEP = static_cast<int64_t>(BLOCK) * VW;
  int parity = 0;
  for (int64_t ng = blockIdx.x / CLUSTER; ng < groups; ng += clusters, parity ^= 1) {
    const int64_t n = ng / G, g = ng % G;
    const int64_t off = (n * C + g * D) * HW;
    const T* xs = x + off;
    T* ys = y + off;
    const int64_t j0 = rank * P, j1 = j0 + P < n_el ? j0 + P : n_el;  // may be empty
    const int64_t first = j0 + static_cast<int64_t>(threadIdx.x) * VW;
    const float K = Io<T>::to(xs[0]);
    float s1 = 0.0f, s2 = 0.0f;
    for (int64_t j = first; j < j1; j += STEP * UNROLL) {
      Pack<T, VW> pk[UNROLL];
      load_raw<T, VW, VEC>(xs, j, j1, pk);
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        if (j + u * STEP >= j1) break;
#pragma unroll
        for (int e = 0; e < VW; ++e) {
          const float d = Io<T>::to(pk[u].v[e]) - K;
          s1 += d;
          s2 += d * d;
        }
      }
    }
    // The apply pass's first batch does not depend on the sums: its loads
    // (L2 hits, just read) are in flight across the reduction and the barrier.
    // Kept as loaded (half the registers of fp32 for 16-bit types).
    Pack<T, VW> pk[UNROLL];
    load_raw<T, VW, VEC>(xs, first, j1, pk);
    s1 = block_sum(s1, scratch);
    s2 = block_sum(s2, scratch);
    if (threadIdx.x == 0) {
      published[parity][0] = s1;
      published[parity][1] = s2;
    }
    cluster.sync();
    s1 = 0.0f;
    s2 = 0.0f;
    for (int r = 0; r < CLUSTER; ++r) {  // rank order: the same sums in every CTA
      const float* p = cluster.map_shared_rank(&published[parity][0], r);
      s1 += p[0];
      s2 += p[1];
    }
    const float cnt = static_cast<float>(n_el);
    const float var = fmaxf((s2 - s1 * s1 / cnt) / cnt, 0.0f);
    const float mean = Io<TS>::to(Io<TS>::from(K + s1 / cnt));
    const float rstd = Io<TS>::to(Io<TS>::from(rsqrtf(var + eps)));
    if (rank == 0 && threadIdx.x == 0) {
      mean_out[ng] = Io<TS>::from(mean);
      rstd_out[ng] = Io<TS>::from(rstd);
    }
    // y = fma(x, scale[c], bias[c]); a vector lies in one channel when VEC.
    for (int64_t j = first; j < j1; j += STEP * UNROLL) {
      if (j != first) load_raw<T, VW, VEC>(xs, j, j1, pk);
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const int64_t ju = j + u * STEP;
        if (ju >= j1) break;
        const int64_t c = g * D + hw.div(static_cast<uint32_t>(ju));
        const float scale = w ? rstd * Io<TW>::to(w[c]) : rstd;
        const float bias = fmaf(-scale, mean, b ? Io<TW>::to(b[c]) : 0.0f);
        float o[VW];
#pragma unroll
        for (int e = 0; e < VW; ++e) o[e] = fmaf(Io<T>::to(pk[u].v[e]), scale, bias);
        if (VEC) store_n<T, VW, true>(ys + ju, o);
        else ys[ju] = Io<T>::from(o[0]);
      }
    }
  }
  cluster.sync();  // no CTA exits (freeing `published`) while another may still read it
}


// ---- bulk-copy form (STAGES > 0, 16-byte vectors only) ----
// A CTA's range is read as a sequence of chunks: the statistics pass's, then
// the apply pass's (the same bytes again). Thread 0 keeps STAGES chunk copies
// in flight (cp.async.bulk into a shared-memory ring, one mbarrier per
// stage), so an SM has tens of KB of loads outstanding whatever its threads
// do, also across the block reduction and the cluster barrier: the register
// form keeps 2-4 vectors per thread in flight and ran DRAM at 44% of peak
// (PERF.md run M).
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  // The stage's last reads were generic-proxy loads (ordered by the caller's
  // __syncthreads); this orders them before the async proxy's write.
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   smem_addr(dst)),
               "l"(src), "r"(bytes), "r"(smem_addr(bar))
               : "memory");
}
__device__ __forceinline__ void bulk_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  while (!done)
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
}

constexpr int RING = STAGES > 0 ? STAGES : 1;  // STAGES, never 0 where it divides

template <class T, class TW, class TS>
__global__ void __launch_bounds__(BLOCK, 1) gn_stream_bulk(const T* __restrict__ x, const TW* __restrict__ w,
                                                          const TW* __restrict__ b, T* __restrict__ y,
                                                          TS* __restrict__ mean_out, TS* __restrict__ rstd_out,
                                                          int64_t groups, int64_t C, int64_t HW, int64_t G,
                                                          float eps, int64_t P, DivU32 hw) {
  constexpr int VW = 16 / sizeof(T);
  constexpr int64_t CHUNK_EL = CHUNK_BYTES / sizeof(T);
  cg::cluster_group cluster = cg::this_cluster();
  extern __shared__ __align__(128) unsigned char ring_raw[];
  const T* ring = reinterpret_cast<const T*>(ring_raw);
  __shared__ __align__(8) uint64_t full[RING];
  __shared__ float scratch[32];
  __shared__ float published[2][2];  // as gn_stream
  if (threadIdx.x == 0) {
    for (int s = 0; s < RING; ++s)
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(&full[s])) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  const int rank = static_cast<int>(cluster.block_rank());
  const int64_t D = C / G, n_el = D * HW;
  const int64_t clusters = gridDim.x / CLUSTER;
  uint32_t used = 0;  // chunks consumed so far by this CTA: stage = used % RING, parity = used / RING & 1
  int parity = 0;
  for (int64_t ng = blockIdx.x / CLUSTER; ng < groups; ng += clusters, parity ^= 1) {
    const int64_t n = ng / G, g = ng % G;
    const int64_t off = (n * C + g * D) * HW;
    const T* xs = x + off;
    T* ys = y + off;
    const int64_t j0 = rank * P, j1 = j0 + P < n_el ? j0 + P : n_el;
    const int64_t len = j1 > j0 ? j1 - j0 : 0;
    const int64_t chunks = (len + CHUNK_EL - 1) / CHUNK_EL, total = 2 * chunks;  // statistics, then apply
    auto issue = [&](int64_t k) {  // chunk k of the sequence into its stage (thread 0)
      const int64_t c0 = j0 + (k < chunks ? k : k - chunks) * CHUNK_EL;
      const int64_t c1 = c0 + CHUNK_EL < j1 ? c0 + CHUNK_EL : j1;
      const uint32_t st = (used + static_cast<uint32_t>(k)) % RING;
      bulk_load(ring_raw + static_cast<size_t>(st) * CHUNK_BYTES, xs + c0,
                static_cast<uint32_t>((c1 - c0) * sizeof(T)), &full[st]);
    };
    if (threadIdx.x == 0)
      for (int64_t k = 0; k < total && k < RING; ++k) issue(k);
    const float K = Io<T>::to(xs[0]);
    float s1 = 0.0f, s2 = 0.0f, mean = 0.0f, rstd = 0.0f;
    for (int64_t k = 0; k <= total; ++k) {
      // Statistics done (at once for an empty range: every CTA joins the
      // cluster's barrier): the cluster's sums, while the next chunks load.
      if (k == chunks) {
        s1 = block_sum(s1, scratch);
        s2 = block_sum(s2, scratch);
        if (threadIdx.x == 0) {
          published[parity][0] = s1;
          published[parity][1] = s2;
        }
        cluster.sync();
        s1 = 0.0f;
        s2 = 0.0f;
        for (int r = 0; r < CLUSTER; ++r) {  // rank order: the same sums in every CTA
          const float* p = cluster.map_shared_rank(&published[parity][0], r);
          s1 += p[0];
          s2 += p[1];
        }
        const float cnt = static_cast<float>(n_el);
        const float var = fmaxf((s2 - s1 * s1 / cnt) / cnt, 0.0f);
        mean = Io<TS>::to(Io<TS>::from(K + s1 / cnt));
        rstd = Io<TS>::to(Io<TS>::from(rsqrtf(var + eps)));
        if (rank == 0 && threadIdx.x == 0) {
          mean_out[ng] = Io<TS>::from(mean);
          rstd_out[ng] = Io<TS>::from(rstd);
        }
      }
      if (k == total) break;
      const uint32_t u = used + static_cast<uint32_t>(k), st = u % RING;
      bulk_wait(&full[st], (u / RING) & 1u);
      const T* chunk = ring + static_cast<size_t>(st) * (CHUNK_BYTES / sizeof(T));
      const int64_t c0 = j0 + (k < chunks ? k : k - chunks) * CHUNK_EL;
      const int64_t c1 = c0 + CHUNK_EL < j1 ? c0 + CHUNK_EL : j1;
      for (int64_t e0 = static_cast<int64_t>(threadIdx.x) * VW; e0 < c1 - c0; e0 += static_cast<int64_t>(BLOCK) * VW) {
        const Pack<T, VW> pk = *reinterpret_cast<const Pack<T, VW>*>(chunk + e0);
        if (k < chunks) {
#pragma unroll
          for (int e = 0; e < VW; ++e) {
            const float d = Io<T>::to(pk.v[e]) - K;
            s1 += d;
            s2 += d * d;
          }
        } else {
          const int64_t j = c0 + e0;
          const int64_t c = g * D + hw.div(static_cast<uint32_t>(j));
          const float scale = w ? rstd * Io<TW>::to(w[c]) : rstd;
          const float bias = fmaf(-scale, mean, b ? Io<TW>::to(b[c]) : 0.0f);
          float o[VW];
#pragma unroll
          for (int e = 0; e < VW; ++e) o[e] = fmaf(Io<T>::to(pk.v[e]), scale, bias);
          store_n<T, VW, true>(ys + j, o);
        }
      }
      __syncthreads();  // the stage is read: it may be refilled
      if (threadIdx.x == 0 && k + RING < total) issue(k + RING);
    }
    used += static_cast<uint32_t>(total);
  }
  cluster.sync();  // no CTA exits (freeing `published`) while another may still read it
}

template <class T, class TW, class TS, int VW, bool VEC>
int launch_one(const GnArgs& a, cudaStream_t stream) {
  constexpr bool BULK = VEC && STAGES > 0;
  auto kernel = [] {
    if constexpr (BULK) return gn_stream_bulk<T, TW, TS>;
    else return gn_stream<T, TW, TS, VW, VEC>;
  }();
  const int smem = BULK ? STAGES * CHUNK_BYTES : 0;
  // One-time opt-ins per instantiation: clusters of more than 8, the ring past 48 KB.
  static const bool ready =
      (CLUSTER <= 8 || cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) == cudaSuccess) &&
      (smem <= 48 * 1024 || cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) == cudaSuccess);
  if (!ready) return 1;
  const int64_t groups = a.N * a.G, n_el = a.C / a.G * a.HW;
  const int64_t P = ((n_el + CLUSTER - 1) / CLUSTER + VW - 1) / VW * VW;
  const int64_t slice_bytes = n_el * static_cast<int64_t>(sizeof(T));
  int64_t clusters = LIVE_BYTES > 0 ? LIVE_BYTES / slice_bytes : groups;
  clusters = clusters < 1 ? 1 : clusters > groups ? groups : clusters;
  const int64_t max_clusters = 0x7fffffffLL / CLUSTER;
  clusters = clusters < max_clusters ? clusters : max_clusters;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(clusters * CLUSTER));
  cfg.blockDim = dim3(BLOCK);
  cfg.dynamicSmemBytes = smem;
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
                         static_cast<TS*>(a.rstd), groups, a.C, a.HW, a.G, a.eps, P,
                         DivU32::of(static_cast<uint32_t>(a.HW))) != cudaSuccess)
    return 1;
  return launch_status();
}

inline int64_t workspace_needed(const GnArgs&) { return 0; }

template <class T, class TW, class TS>
int launch(const GnArgs& a, cudaStream_t stream) {
  constexpr int VW = 16 / sizeof(T);
  if (a.C / a.G * a.HW >= (int64_t{1} << 31)) return 1;  // the 32-bit channel division
  if (aligned16(a.x) && aligned16(a.y) && a.HW % VW == 0) return launch_one<T, TW, TS, VW, true>(a, stream);
  return launch_one<T, TW, TS, 1, false>(a, stream);
}

#include "../_common/group_norm_cuda_entry.cuh"  // argument checks and the entry points: inlined when forge loads the template
