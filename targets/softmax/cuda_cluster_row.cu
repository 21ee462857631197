/* softmax, CUDA strategy "cluster_row": a thread-block cluster per row for
 * rows too long for one block's registers (Hopper, sm_90): the row is read
 * once and written once however long, up to CLUSTER*BLOCK*CHUNKS*VW.
 *
 * Math: per row of the last dim (length L), in fp32: CTA r of the cluster
 * holds elements [r*SL, (r+1)*SL) (SL = BLOCK*CHUNKS*VW, VW = 16 bytes of
 * elements) in registers; m_r = max of its slice (block reduction), published
 * in shared memory; after a cluster barrier every CTA reads all m_r through
 * distributed shared memory: M = max m_r; then s_r = sum exp(x - M) likewise,
 * S = sum s_r; y = exp(x - M) * (1/S).
 * Op: aten::_softmax(Tensor self, int dim, bool half_to_float) -> Tensor;
 * float32/float16/bfloat16 in, any of them out. Shapes: any rank >= 1, dim =
 * the last dim, any row count (rows looped past the grid limit), 64-bit offsets.
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * dim wraps to the last dim; input and output contiguous with equal sizes;
 * L <= CLUSTER*BLOCK*CHUNKS*VW (VW = 1 for the scalar instance used when the
 * pointers or L*sizeof(dtype) are not 16-byte aligned); the device supports
 * clusters (sm_90+; a failed launch returns 1). Cluster size 16 needs the
 * non-portable attribute, set once per process (allowed: thread-safe, no
 * allocation). Non-finite values as the stock kernel.
 *
 * Why it is fast: Quack's recipe: past ~16K elements one block per row either
 * spills or re-reads; a cluster of 2..16 CTAs (one per SM) keeps the row on
 * chip and exchanges two floats per CTA through DSMEM, so global memory sees
 * exactly one read and one write (the stock kernel reads 3x past 48 KB rows).
 * Compiled here (nvcc 13, sm_90a) but not run on this machine: no GPU.
 */
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "forge_kernel.h"

#ifndef FORGE_P_CLUSTER
#define FORGE_P_CLUSTER 4 /* CTAs per row: 2, 4, 8, 16 */
#endif
#ifndef FORGE_P_BLOCK
#define FORGE_P_BLOCK 256 /* threads per CTA: 128, 256, 512 */
#endif
#ifndef FORGE_P_CHUNKS
#define FORGE_P_CHUNKS 8 /* 16-byte vectors per thread held in registers: 2 .. 32 */
#endif
#ifndef FORGE_P_EXP
#define FORGE_P_EXP 0 /* 0: expf; 1: __expf (SFU) */
#endif
#if FORGE_P_EXP
#define FORGE_EXP(v) __expf(v)
#else
#define FORGE_EXP(v) expf(v)
#endif

#include "../_common/cuda_common.cuh"  // inlined when forge loads the template (docs/STRATEGIES.md)
#include "../_common/softmax_op.h"  // SM_LOG: softmax or log_softmax (FORGE_P_OP)

namespace {

namespace cg = cooperative_groups;
constexpr int CLUSTER = FORGE_P_CLUSTER;
constexpr int BLOCK = FORGE_P_BLOCK;
constexpr int CHUNKS = FORGE_P_CHUNKS;
static_assert(CLUSTER == 2 || CLUSTER == 4 || CLUSTER == 8 || CLUSTER == 16, "FORGE_P_CLUSTER: 2, 4, 8 or 16");
static_assert(BLOCK % 32 == 0 && BLOCK >= 64 && BLOCK <= 1024, "FORGE_P_BLOCK: a multiple of 32 in 64..1024");
static_assert(CHUNKS >= 1 && CHUNKS <= 64, "FORGE_P_CHUNKS: 1..64");

template <class TI, class TO, int VW, bool VEC>
__global__ void __launch_bounds__(BLOCK) softmax_cluster_row(const TI* __restrict__ x, TO* __restrict__ y,
                                                             int64_t rows, int64_t L) {
  cg::cluster_group cluster = cg::this_cluster();
  __shared__ float scratch[2][32];
  __shared__ float published[2];  // this CTA's max and sum, read by the others
  const int rank = static_cast<int>(cluster.block_rank());
  constexpr int64_t SL = static_cast<int64_t>(BLOCK) * CHUNKS * VW;
  const int64_t clusters = gridDim.x / CLUSTER;
  for (int64_t row = blockIdx.x / CLUSTER; row < rows; row += clusters) {
    const TI* xr = x + row * L + rank * SL;
    TO* yr = y + row * L + rank * SL;
    const int64_t n = L - rank * SL;  // elements of this slice that exist (may be <= 0)
    float v[CHUNKS][VW];
#pragma unroll
    for (int k = 0; k < CHUNKS; ++k) {
      const int64_t j = (static_cast<int64_t>(k) * BLOCK + threadIdx.x) * VW;
      if (VEC && j + VW <= n) {
        load_n<TI, VW>(xr + j, v[k]);
      } else {
#pragma unroll
        for (int e = 0; e < VW; ++e) v[k][e] = j + e < n ? Io<TI>::to(xr[j + e]) : -INFINITY;
      }
    }
    float m = -INFINITY;
#pragma unroll
    for (int k = 0; k < CHUNKS; ++k)
#pragma unroll
      for (int e = 0; e < VW; ++e) m = fmaxf(m, v[k][e]);
    m = block_max(m, scratch[0]);
    if (threadIdx.x == 0) published[0] = m;
    cluster.sync();
#pragma unroll
    for (int r = 0; r < CLUSTER; ++r) m = fmaxf(m, cluster.map_shared_rank(published, r)[0]);
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < CHUNKS; ++k)
#pragma unroll
      for (int e = 0; e < VW; ++e) {
        // padding -inf -> 0; an all -inf row -> NaN, as stock. log_softmax keeps x - m.
        const float d = v[k][e] - m, ex = FORGE_EXP(d);
        s += ex;
        v[k][e] = SM_LOG ? d : ex;
      }
    s = block_sum(s, scratch[1]);
    if (threadIdx.x == 0) published[1] = s;
    cluster.sync();
    s = 0.0f;
#pragma unroll
    for (int r = 0; r < CLUSTER; ++r) s += cluster.map_shared_rank(published, r)[1];  // same order everywhere
    cluster.sync();  // nobody overwrites `published` (next row) or exits while others read it
    const float inv = 1.0f / s, logs = SM_LOG ? logf(s) : 0.0f;
#pragma unroll
    for (int k = 0; k < CHUNKS; ++k) {
      const int64_t j = (static_cast<int64_t>(k) * BLOCK + threadIdx.x) * VW;
      float o[VW];
#pragma unroll
      for (int e = 0; e < VW; ++e) o[e] = SM_LOG ? v[k][e] - logs : v[k][e] * inv;
      if (VEC && j + VW <= n) {
        store_n<TO, VW>(yr + j, o);
      } else {
#pragma unroll
        for (int e = 0; e < VW; ++e)
          if (j + e < n) yr[j + e] = Io<TO>::from(o[e]);
      }
    }
  }
}

template <class TI, class TO, int VW, bool VEC>
int launch_one(const TI* x, TO* y, int64_t rows, int64_t L, cudaStream_t stream) {
  auto kernel = softmax_cluster_row<TI, TO, VW, VEC>;
  if (CLUSTER > 8) {
    // One-time opt-in per instantiation (thread-safe static initialization).
    static const cudaError_t once = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    if (once != cudaSuccess) return 1;
  }
  const int64_t max_clusters = 0x7fffffffLL / CLUSTER;
  const int64_t clusters = rows < max_clusters ? rows : max_clusters;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(clusters * CLUSTER));
  cfg.blockDim = dim3(BLOCK);
  cfg.dynamicSmemBytes = 0;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = CLUSTER;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  if (cudaLaunchKernelEx(&cfg, kernel, x, y, rows, L) != cudaSuccess) return 1;
  return launch_status();
}

template <class TI, class TO>
int launch(const void* x, void* y, int64_t rows, int64_t L, cudaStream_t stream) {
  constexpr int VW = 16 / sizeof(TI);
  const bool vec = aligned16(x) && aligned16(y) && (L * sizeof(TI)) % 16 == 0 && (L * sizeof(TO)) % 16 == 0;
  const TI* xi = static_cast<const TI*>(x);
  TO* yo = static_cast<TO*>(y);
  if (vec) {
    if (L > static_cast<int64_t>(CLUSTER) * BLOCK * CHUNKS * VW) return 1;
    return launch_one<TI, TO, VW, true>(xi, yo, rows, L, stream);
  }
  if (L > static_cast<int64_t>(CLUSTER) * BLOCK * CHUNKS) return 1;
  return launch_one<TI, TO, 1, false>(xi, yo, rows, L, stream);
}

}  // namespace

#include "../_common/softmax_cuda_entry.cuh"  // the entry point (last dim, contiguous): inlined when forge loads the template
