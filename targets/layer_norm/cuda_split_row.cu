/* layer_norm, CUDA strategy "split_row": each row split into chunks of
 * BLOCK*PER 16-byte vectors, one block per chunk, for rows too long for one
 * block (a 4M-element row on one SM is a sixteenth of the GPU's bandwidth at
 * 16 rows): a statistics kernel writes per-chunk moments to the workspace, a
 * merge kernel (a warp per row, fixed order: deterministic) turns each row's
 * into its mean and rstd, an apply kernel normalizes each chunk. Two reads
 * and one write of x, whatever the row length.
 *
 * Math: chunk k of a row (n_k elements) held in registers, fp32:
 * mean_k = sum x / n_k, M2_k = sum (x - mean_k)^2 (two exact passes over the
 * registers: no shift whose distance from the mean would scale the sums'
 * rounding); merged (Chan et al., group_norm_moments.cuh): n = n_a + n_b,
 * d = mean_b - mean_a, mean = mean_a + d*n_b/n, M2 = M2_a + M2_b + d^2*n_a*n_b/n;
 * var = M2/N; rstd = rsqrt(var + eps); y = ((x - mean) * rstd) * w + b.
 * Op: aten::native_layer_norm(Tensor input, SymInt[] normalized_shape,
 *     Tensor? weight, Tensor? bias, float eps) -> (out, mean, rstd).
 * Shapes: input [..., *normalized_shape] (M rows of N); out like input;
 * mean/rstd one value per row. Workspace: M*ceil(N/chunk)*3 + M*2 floats.
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * as block_row (contiguous float32/float16/bfloat16 input and out of one dtype;
 * weight/bias absent or N contiguous elements of the input's dtype or float32;
 * mean/rstd contiguous, float32 or the input's dtype); workspace at least
 * forge_workspace_bytes. A launch failure returns 1.
 *
 * Why it is fast: the split_group recipe (Apex/sglang's for big planes) on
 * rows: M blocks would leave most SMs idle when rows are few and long, so the
 * reduction is split across blocks, one writer per workspace slot (no
 * atomics). REVERSE = 1: the apply pass takes the chunks last first, so the
 * chunks the statistics pass read last come from L2; y is stored evict-first.
 * PDL = 1: the merge and apply kernels are programmatic dependent launches;
 * the apply blocks load their chunk while the kernels before them drain.
 * Compiled here (nvcc 13, sm_90a) but not run on this machine: no GPU.
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
#ifndef FORGE_P_PER
#define FORGE_P_PER 8 /* 16-byte vectors per thread, held in registers: 1..16 */
#endif
#ifndef FORGE_P_REVERSE
#define FORGE_P_REVERSE 0 /* 1: apply pass last chunk first (re-read from L2) */
#endif
#ifndef FORGE_P_PDL
#define FORGE_P_PDL 0 /* 1: merge and apply kernels as programmatic dependent launches */
#endif

#include "../_common/cuda_common.cuh"  // inlined when forge loads the template (docs/STRATEGIES.md)

namespace {

#define LN_WORKSPACE 1
#include "../_common/layer_norm_args.h"  // the call's fields, shared with the CPU templates: inlined when forge loads the template

#include "../_common/group_norm_moments.cuh"  // Moments, merge, warp_merge: inlined when forge loads the template

constexpr int BLOCK = FORGE_P_BLOCK;
constexpr int PER = FORGE_P_PER;
constexpr bool REVERSE = FORGE_P_REVERSE != 0;
constexpr bool PDL = FORGE_P_PDL != 0;
static_assert(BLOCK % 32 == 0 && BLOCK >= 64 && BLOCK <= 1024, "FORGE_P_BLOCK: a multiple of 32 in 64..1024");
static_assert(PER >= 1 && PER <= 16, "FORGE_P_PER: 1..16");

// Elements of a chunk: BLOCK*PER vectors of VW.
template <int VW>
__host__ __device__ constexpr int64_t chunk_of() {
  return static_cast<int64_t>(BLOCK) * PER * VW;
}

// The chunk [j0, j1) of row xr into registers: thread t holds vectors
// t, t + BLOCK, ...; elements past j1 read as 0 and are not counted.
template <class T, int VW, bool VEC>
__device__ __forceinline__ void load_chunk(const T* __restrict__ xr, int64_t j0, int64_t j1, float (&v)[PER][VW]) {
#pragma unroll
  for (int p = 0; p < PER; ++p) {
    const int64_t j = j0 + (static_cast<int64_t>(p) * BLOCK + threadIdx.x) * VW;
    if (VEC && j + VW <= j1) {
      load_n<T, VW>(xr + j, v[p]);
    } else {
#pragma unroll
      for (int e = 0; e < VW; ++e) v[p][e] = j + e < j1 ? Io<T>::to(xr[j + e]) : 0.0f;
    }
  }
}

template <class T, int VW, bool VEC>
__global__ void __launch_bounds__(BLOCK) ln_split_stats(const T* __restrict__ x, float* __restrict__ ws,
                                                        int64_t total, int64_t split, int64_t N) {
  __shared__ float scratch[32];
  constexpr int64_t CH = chunk_of<VW>();
  for (int64_t id = blockIdx.x; id < total; id += gridDim.x) {
    const int64_t row = id / split, k = id % split;
    const int64_t j0 = k * CH, j1 = j0 + CH < N ? j0 + CH : N;
    float v[PER][VW];
    load_chunk<T, VW, VEC>(x + row * N, j0, j1, v);
    if (PDL && id + gridDim.x >= total) asm volatile("griddepcontrol.launch_dependents;");
    const float cnt = static_cast<float>(j1 - j0);
    float s = 0.0f;
#pragma unroll
    for (int p = 0; p < PER; ++p)
#pragma unroll
      for (int e = 0; e < VW; ++e) s += v[p][e];
    const float mean = block_sum(s, scratch) / cnt;
    float q = 0.0f;
#pragma unroll
    for (int p = 0; p < PER; ++p) {
      const int64_t j = j0 + (static_cast<int64_t>(p) * BLOCK + threadIdx.x) * VW;
#pragma unroll
      for (int e = 0; e < VW; ++e) {
        const float d = j + e < j1 ? v[p][e] - mean : 0.0f;
        q = fmaf(d, d, q);
      }
    }
    const float m2 = block_sum(q, scratch);
    if (threadIdx.x == 0) {
      float* slot = ws + id * 3;
      slot[0] = cnt;
      slot[1] = mean;
      slot[2] = m2;
    }
  }
}

// One warp per row merges its chunks' moments (a fixed order: the same bits
// on every run) into {mean, rstd} after the moments in the workspace, and
// writes the op's mean and rstd outputs. Done once per row here, not once
// per chunk in the apply kernel: 512 chunks' moments read through L2 by every
// apply block would hold each block's stores behind a serial merge.
template <class TS>
__global__ void __launch_bounds__(128) ln_split_merge(float* __restrict__ ws, TS* __restrict__ mean_out,
                                                      TS* __restrict__ rstd_out, int64_t M, int64_t split,
                                                      int64_t N, float eps) {
  if (PDL) {
    asm volatile("griddepcontrol.launch_dependents;");
    asm volatile("griddepcontrol.wait;" ::: "memory");
  }
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * 4 + (threadIdx.x >> 5); row < M;
       row += static_cast<int64_t>(gridDim.x) * 4) {
    const Moments m = warp_merge(ws + row * split * 3, split);
    if ((threadIdx.x & 31) == 0) {
      const float rstd = rsqrtf(m.m2 / static_cast<float>(N) + eps);
      float* out = ws + M * split * 3 + row * 2;
      out[0] = m.mean;
      out[1] = rstd;
      mean_out[row] = Io<TS>::from(m.mean);
      rstd_out[row] = Io<TS>::from(rstd);
    }
  }
}

template <class T, class TW, int VW, bool VEC>
__global__ void __launch_bounds__(BLOCK)
    ln_split_apply(const T* __restrict__ x, const TW* __restrict__ w, const TW* __restrict__ b, T* __restrict__ y,
                   const float* __restrict__ row_stats, int64_t total, int64_t split, int64_t N) {
  constexpr int64_t CH = chunk_of<VW>();
  for (int64_t it = blockIdx.x; it < total; it += gridDim.x) {
    const int64_t id = REVERSE ? total - 1 - it : it;
    const int64_t row = id / split, k = id % split;
    const int64_t j0 = k * CH, j1 = j0 + CH < N ? j0 + CH : N;
    float v[PER][VW];
    load_chunk<T, VW, VEC>(x + row * N, j0, j1, v);
    if (PDL && it == blockIdx.x) asm volatile("griddepcontrol.wait;" ::: "memory");
    // Written by ln_split_merge on other SMs: read through L2.
    const float mean = __ldcg(row_stats + row * 2), rstd = __ldcg(row_stats + row * 2 + 1);
    T* yr = y + row * N;
#pragma unroll
    for (int p = 0; p < PER; ++p) {
      const int64_t j = j0 + (static_cast<int64_t>(p) * BLOCK + threadIdx.x) * VW;
      if (j >= j1) break;
      float wv[VW], bv[VW], o[VW];
      const bool full = VEC && j + VW <= j1;
#pragma unroll
      for (int e = 0; e < VW; ++e) wv[e] = 1.0f, bv[e] = 0.0f;
      if (w) {
        if (full) load_n<TW, VW>(w + j, wv);
        else
#pragma unroll
          for (int e = 0; e < VW; ++e) wv[e] = j + e < j1 ? Io<TW>::to(w[j + e]) : 1.0f;
      }
      if (b) {
        if (full) load_n<TW, VW>(b + j, bv);
        else
#pragma unroll
          for (int e = 0; e < VW; ++e) bv[e] = j + e < j1 ? Io<TW>::to(b[j + e]) : 0.0f;
      }
#pragma unroll
      for (int e = 0; e < VW; ++e) {
        float t = (v[p][e] - mean) * rstd;
        if (w) t = t * wv[e];
        if (b) t = t + bv[e];
        o[e] = t;
      }
      if (full) {
        store_n<T, VW, true>(yr + j, o);
      } else {
#pragma unroll
        for (int e = 0; e < VW; ++e)
          if (j + e < j1) yr[j + e] = Io<T>::from(o[e]);
      }
    }
  }
}

template <class T>
bool vectorized(const LnArgs& a) {
  return aligned16(a.x) && aligned16(a.y) && (!a.w || aligned16(a.w)) && (!a.b || aligned16(a.b)) &&
         (a.N * static_cast<int64_t>(sizeof(T))) % 16 == 0;
}
inline int64_t split_of(const LnArgs& a, int64_t chunk) { return (a.N + chunk - 1) / chunk; }

// The workspace for either instance (vectorized or scalar chunks): the scalar
// one's, the larger.
inline int64_t workspace_needed(const LnArgs& a) {
  return (a.M * split_of(a, chunk_of<1>()) * 3 + a.M * 2) * static_cast<int64_t>(sizeof(float));
}

// A launch after the previous kernel on the stream; with PDL a programmatic
// dependent one (it waits in the kernel, at griddepcontrol.wait).
template <class... P, class... A>
bool launch_after(void (*kernel)(P...), unsigned grid, unsigned block, cudaStream_t stream, A... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(block);
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = PDL ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, static_cast<P>(args)...) == cudaSuccess && !launch_status();
}

template <class T, class TW, class TS, int VW, bool VEC>
int run(const LnArgs& a, cudaStream_t stream) {
  const int64_t split = split_of(a, chunk_of<VW>()), total = a.M * split;
  const unsigned grid = static_cast<unsigned>(total < 0x7fffffffLL ? total : 0x7fffffffLL);
  float* ws = static_cast<float*>(a.workspace);
  const T* x = static_cast<const T*>(a.x);
  ln_split_stats<T, VW, VEC><<<grid, BLOCK, 0, stream>>>(x, ws, total, split, a.N);
  if (launch_status()) return 1;
  const int64_t merge_blocks = (a.M + 3) / 4;
  if (!launch_after(ln_split_merge<TS>, static_cast<unsigned>(merge_blocks < 0x7fffffffLL ? merge_blocks : 0x7fffffffLL),
                    128, stream, ws, static_cast<TS*>(a.mean), static_cast<TS*>(a.rstd), a.M, split, a.N, a.eps))
    return 1;
  return launch_after(ln_split_apply<T, TW, VW, VEC>, grid, BLOCK, stream, x, static_cast<const TW*>(a.w),
                      static_cast<const TW*>(a.b), static_cast<T*>(a.y), static_cast<const float*>(ws + total * 3),
                      total, split, a.N)
             ? 0
             : 1;
}

inline bool row_fits(int64_t) { return true; }

template <class T, class TW, class TS>
int launch(const LnArgs& a, cudaStream_t stream) {
  constexpr int VW = 16 / sizeof(T);
  return vectorized<T>(a) ? run<T, TW, TS, VW, true>(a, stream) : run<T, TW, TS, 1, false>(a, stream);
}

#include "../_common/layer_norm_cuda_entry.cuh"  // dispatch, argument checks and entry points: inlined when forge loads the template
