/* reduce, CUDA strategy "lanes": one reduction of the table in
 * targets/_common/reduce_ops.h (FORGE_P_OP: sum, mean, prod, amax, amin,
 * argmax, argmin, max, min, linalg_vector_norm) over one run of neighbouring
 * dims.
 *
 * Math: the input as [outer, R, inner] (reduce_parse.h); for each (o, i) the
 * sum (in double) / mean / product (fp32) / extreme and its first index / the
 * sum of |x| or the root of the sum of squares (in double) of x[o, 0..R-1, i].
 * NaN wins an extreme, ties and NaNs give the first index.
 * Ops: aten::sum.dim_IntList, sum, mean.dim, prod.dim_int, amax, amin,
 * argmax, argmin, max.dim, min.dim, linalg_vector_norm (ord 1 or 2); input
 * float32/bfloat16/float16, values out in any of them, indices int64.
 * Shapes: any rank <= 8, the reduced dims one run whose groups of dims merge
 * (reduce_parse.h); keepdim either way.
 * Workspace (rows split in chunks): outer * chunks_of() * 16 bytes.
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * reduce_parse.h's; the workspace at least forge_workspace_bytes. A launch
 * failure returns 1.
 *
 * Why it is fast: rows (inner = 1): FORGE_P_BLOCK threads per chunk of
 * at most FORGE_P_CHUNK elements of a row, fewer when that fills the GPU
 * (chunk_len), so a few long rows or one whole tensor still fill it;
 * 16-byte loads when the row pitch and base allow; warp shuffles, then shared
 * memory; one writer per workspace slot and a fixed-order finish (no atomics:
 * deterministic). Columns (inner > 1): a thread per output, the R rows read
 * as coalesced rows across the block's threads, UNROLL rows in flight.
 * Compiled here (nvcc 13, sm_90a) but not run on this machine: no GPU.
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
#ifndef FORGE_P_CHUNK
#define FORGE_P_CHUNK 65536 /* row elements per block: 0 = a whole row per block */
#endif
#ifndef FORGE_P_UNROLL
#define FORGE_P_UNROLL 4 /* column rows in flight per thread: 1, 2, 4, 8 */
#endif

#include "../_common/cuda_common.cuh"  // inlined when forge loads the template (docs/STRATEGIES.md)
#include "../_common/reduce_ops.h"  // the op table: RD_OP and its kind

namespace {

constexpr int BLOCK = FORGE_P_BLOCK;
constexpr int64_t CHUNK = FORGE_P_CHUNK;
constexpr int UNROLL = FORGE_P_UNROLL;
static_assert(BLOCK % 32 == 0 && BLOCK >= 32 && BLOCK <= 1024, "FORGE_P_BLOCK: a multiple of 32 up to 1024");
static_assert(CHUNK == 0 || CHUNK >= BLOCK, "FORGE_P_CHUNK: 0 or at least a block of elements");
static_assert(UNROLL >= 1 && UNROLL <= 8, "FORGE_P_UNROLL: 1..8");

// A partial result: the sum (double) or product / extreme, and its index.
struct Part {
  double v;
  int64_t i;
};

__device__ __forceinline__ double identity() {
#if RD_SUM
  return 0.0;
#elif RD_PROD
  return 1.0;
#elif RD_IS_MAX
  return -INFINITY;
#else
  return INFINITY;
#endif
}
// Does (v, iv) replace (b, ib)? The extreme, NaN first, the smaller index among equals.
__device__ __forceinline__ bool replaces(double v, int64_t iv, double b, int64_t ib) {
  const bool vnan = v != v, bnan = b != b;
#if RD_IS_MAX
  const bool better = v > b;
#else
  const bool better = v < b;
#endif
  return (vnan && !bnan) || better || ((v == b || (vnan && bnan)) && iv < ib);
}
__device__ __forceinline__ Part combine(Part a, Part b) {
#if RD_SUM
  return Part{a.v + b.v, 0};
#elif RD_PROD
  return Part{static_cast<double>(static_cast<float>(a.v) * static_cast<float>(b.v)), 0};
#else
  return replaces(b.v, b.i, a.v, a.i) ? b : a;
#endif
}
// One element folded into a thread's partial (elements arrive in index order).
// A norm sums |x| (ord 1) or x * x (ord 2), the square taken in double.
__device__ __forceinline__ void fold(Part& p, float x, int64_t i, int ord) {
#if RD_NORM
  p.v += ord == 2 ? static_cast<double>(x) * x : fabs(static_cast<double>(x));
#elif RD_SUM
  p.v += x;
#elif RD_PROD
  p.v = static_cast<float>(p.v) * x;
#else
  if (replaces(x, i, p.v, p.i)) p = Part{x, i};
#endif
}
__device__ __forceinline__ Part warp_combine(Part p) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) {
    Part q{__shfl_down_sync(0xffffffffu, p.v, o), __shfl_down_sync(0xffffffffu, p.i, o)};
    p = combine(p, q);
  }
  return p;
}
// The block's partials combined; thread 0 gets the result.
__device__ __forceinline__ Part block_combine(Part p) {
  __shared__ Part warps[BLOCK / 32];
  p = warp_combine(p);
  __syncthreads();  // warp 0 may still read `warps` from the block's previous row
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warps[warp] = p;
  __syncthreads();
  if (warp == 0) {
    p = lane < BLOCK / 32 ? warps[lane] : Part{identity(), INT64_MAX};
    p = warp_combine(p);
  }
  return p;
}

template <class TY>
__device__ __forceinline__ void put(const ReduceArgs& a, int64_t at, Part p) {
#if RD_OP == RD_mean
  p.v /= static_cast<double>(a.R) * static_cast<double>(a.R1);
#elif RD_NORM
  if (a.ord == 2) p.v = sqrt(p.v);
#endif
  if constexpr (RD_WITH_VALUE) static_cast<TY*>(a.y)[at] = Io<TY>::from(static_cast<float>(p.v));
  if constexpr (RD_WITH_INDEX) a.idx[at] = p.i;
}

// Block blockIdx.x's chunk of row o (one block-wide reduction: every thread calls it).
template <class T, class TY, int N>
__device__ __forceinline__ void reduce_row_chunk(const ReduceArgs& a, int64_t o, int64_t chunk, int64_t chunks,
                                                 Part* parts) {
  const int64_t c = blockIdx.x;
  // [R1, outer, R]: chunk c is row c of the R1 rows, sR1 apart.
  const bool rows1 = a.R1 > 1;
  const T* x = static_cast<const T*>(a.x) + o * a.sO + (rows1 ? c * a.sR1 : 0);
  const int64_t begin = rows1 ? 0 : c * chunk, end = rows1 ? a.R : begin + chunk < a.R ? begin + chunk : a.R;
  Part p{identity(), INT64_MAX};
  // N elements per access from begin (aligned: the host checks), then the tail.
  int64_t j = begin + static_cast<int64_t>(threadIdx.x) * N;
  for (; j + N <= end; j += static_cast<int64_t>(BLOCK) * N) {
    float v[N];
    load_n<T, N>(x + j, v);
#pragma unroll
    for (int k = 0; k < N; ++k) fold(p, v[k], j + k, a.ord);
  }
  for (; j < end; ++j) fold(p, Io<T>::to(x[j]), j, a.ord);  // the last thread's partial vector
  p = block_combine(p);
  if (threadIdx.x != 0) return;
  if (chunks == 1) put<TY>(a, o, p);
  else parts[o * chunks + c] = p;
}

// Rows: block (c, o) reduces elements [c * chunk, (c + 1) * chunk) of row o,
// for o = blockIdx.y, blockIdx.y + gridDim.y, ... (grid.y is at most 65535);
// with one chunk per row it writes the output, else its partial to `parts`.
template <class T, class TY, int N>
__global__ void __launch_bounds__(BLOCK) reduce_rows(ReduceArgs a, int64_t chunk, int64_t chunks, Part* parts) {
  for (int64_t o = blockIdx.y; o < a.outer; o += gridDim.y) reduce_row_chunk<T, TY, N>(a, o, chunk, chunks, parts);
}
// The chunks' partials of each row in order (one writer each: deterministic).
template <class TY>
__global__ void __launch_bounds__(BLOCK) finish_rows(ReduceArgs a, int64_t chunks, const Part* parts) {
  const int64_t o = static_cast<int64_t>(blockIdx.x) * BLOCK + threadIdx.x;
  if (o >= a.outer) return;
  Part p = parts[o * chunks];
  for (int64_t c = 1; c < chunks; ++c) p = combine(p, parts[o * chunks + c]);
  put<TY>(a, o, p);
}

// The same for rows of many chunks (a full reduction's hundreds): a block per
// row, thread t folding partials t, t + BLOCK, ... in order, then the block's
// fixed tree, so the result's bits do not depend on timing either.
template <class TY>
__global__ void __launch_bounds__(BLOCK) finish_rows_wide(ReduceArgs a, int64_t chunks, const Part* parts) {
  for (int64_t o = blockIdx.x; o < a.outer; o += gridDim.x) {
    Part p{identity(), INT64_MAX};
    for (int64_t c = threadIdx.x; c < chunks; c += BLOCK) p = combine(p, parts[o * chunks + c]);
    p = block_combine(p);
    if (threadIdx.x == 0) put<TY>(a, o, p);
  }
}

// Columns: a thread per output (o, i), the R rows sR apart; UNROLL rows loaded
// before they are folded (in order).
template <class T, class TY>
__global__ void __launch_bounds__(BLOCK) reduce_columns(ReduceArgs a) {
  const int64_t m = a.outer * a.inner;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * BLOCK + threadIdx.x; t < m;
       t += static_cast<int64_t>(gridDim.x) * BLOCK) {
    const int64_t o = t / a.inner, i = t - o * a.inner;
    const T* x = static_cast<const T*>(a.x) + o * a.sO + i;
    Part p{identity(), INT64_MAX};
    int64_t r = 0;
    for (; r + UNROLL <= a.R; r += UNROLL) {
      float v[UNROLL];
#pragma unroll
      for (int k = 0; k < UNROLL; ++k) v[k] = Io<T>::to(x[(r + k) * a.sR]);
#pragma unroll
      for (int k = 0; k < UNROLL; ++k) fold(p, v[k], r + k, a.ord);
    }
    for (; r < a.R; ++r) fold(p, Io<T>::to(x[r * a.sR]), r, a.ord);
    put<TY>(a, t, p);
  }
}

// Elements per chunk of a row (inner = 1): at most CHUNK, fewer when the rows
// alone would give fewer than FILL blocks (a few rows of millions of elements,
// a full reduction), but never below MIN_CHUNK; a multiple of 8 so that every
// chunk starts 16-byte aligned. A whole row when CHUNK is 0 or for [R1, outer, R].
constexpr int64_t FILL = 512;               // ~4 blocks per SM of a 132-SM H100/H200
constexpr int64_t MIN_CHUNK = 16 * BLOCK;   // enough loads per thread to hide latency
inline int64_t chunk_len(const ReduceArgs& a) {
  if (a.R1 > 1 || a.inner != 1 || CHUNK == 0) return a.R;
  int64_t len = CHUNK;
  const int64_t want = (FILL + a.outer - 1) / a.outer;  // chunks per row that fill the GPU
  if (want > 1) {
    const int64_t fill = ((a.R + want - 1) / want + 7) / 8 * 8;
    const int64_t shorter = fill > MIN_CHUNK ? fill : MIN_CHUNK;
    if (shorter < len) len = shorter;
  }
  return a.R > len ? len : a.R;
}
// Chunks per row; [R1, outer, R]: the R1 rows, a chunk each.
inline int64_t chunks_of(const ReduceArgs& a) {
  if (a.R1 > 1) return a.R1;
  const int64_t len = chunk_len(a);
  return len > 0 ? (a.R + len - 1) / len : 1;
}

template <class T, class TY>
int launch(const ReduceArgs& a, void* workspace, int64_t workspace_bytes, cudaStream_t stream) {
  if (a.inner > 1) {
    const int64_t m = a.outer * a.inner;
    const int64_t blocks = (m + BLOCK - 1) / BLOCK;
    reduce_columns<T, TY><<<static_cast<unsigned>(blocks < 0x7fffffff ? blocks : 0x7fffffff), BLOCK, 0, stream>>>(a);
    return launch_status();
  }
  const int64_t chunks = chunks_of(a);
  const int64_t chunk = chunk_len(a);
  if (chunks > 0x7fffffff) return 1;
  Part* parts = static_cast<Part*>(workspace);
  if (chunks > 1 && (!parts || workspace_bytes < a.outer * chunks * static_cast<int64_t>(sizeof(Part)))) return 1;
  // 16-byte accesses when the base, the row pitch and the chunk start allow.
  constexpr int V = 16 / sizeof(T);
  // [R1, outer, R]: every row starts at 0, sR1 apart, so its length may be any.
  const bool vec = aligned16(a.x) && (a.sO * static_cast<int64_t>(sizeof(T))) % 16 == 0 &&
                   (a.R1 > 1 || chunk % V == 0) && (a.sR1 * static_cast<int64_t>(sizeof(T))) % 16 == 0;
  const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(a.outer < 65535 ? a.outer : 65535));
  if (vec) reduce_rows<T, TY, V><<<grid, BLOCK, 0, stream>>>(a, chunk, chunks, parts);
  else reduce_rows<T, TY, 1><<<grid, BLOCK, 0, stream>>>(a, chunk, chunks, parts);
  if (launch_status()) return 1;
  if (chunks > 32) {  // one thread would walk them one dependent combine at a time
    finish_rows_wide<TY><<<static_cast<unsigned>(a.outer < 65535 ? a.outer : 65535), BLOCK, 0, stream>>>(a, chunks, parts);
    return launch_status();
  }
  if (chunks > 1) {
    finish_rows<TY><<<static_cast<unsigned>((a.outer + BLOCK - 1) / BLOCK), BLOCK, 0, stream>>>(a, chunks, parts);
    return launch_status();
  }
  return 0;
}

}  // namespace

#include "../_common/reduce_parse.h"  // the call's checks and [outer, R, inner], shared with the CPU template

extern "C" int64_t forge_workspace_bytes(const forge_call* call) {
  ReduceArgs a;
  if (parse_reduce(call, a)) return 0;
  const int64_t chunks = chunks_of(a);
  return chunks > 1 ? a.outer * chunks * static_cast<int64_t>(sizeof(Part)) : 0;
}

extern "C" int forge_kernel(const forge_call* call) {
  ReduceArgs a;
  if (parse_reduce(call, a)) return 1;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  return with_dtype(a.x_dtype, [&](auto t) {
    if constexpr (!RD_WITH_VALUE) return launch<decltype(t), float>(a, call->workspace, call->workspace_bytes, stream);
    else
      return with_dtype(a.y_dtype, [&](auto ty) {
        return launch<decltype(t), decltype(ty)>(a, call->workspace, call->workspace_bytes, stream);
      });
  });
}
