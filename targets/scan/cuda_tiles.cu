/* scan, CUDA strategy "tiles": an inclusive scan of the table in
 * targets/_common/scan_ops.h (FORGE_P_OP: cumsum, cumprod) along one dim.
 *
 * Math: the input as [outer, L, inner] (scan_parse.h); for each (o, i),
 * y[o, l, i] = x[o, 0, i] (+ or *) ... x[o, l, i], carried in double and
 * rounded once per output.
 * Ops: aten::cumsum, aten::cumprod; input and output float32/bfloat16/float16.
 * Shapes: any rank <= 8, any dim.
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * scan_parse.h's (contiguous non-empty input and output of one shape). A
 * launch failure returns 1.
 *
 * Why it is fast: rows (inner = 1): a block per row walks it in tiles of
 * UNROLL sub-tiles of BLOCK x V elements (V: one 16-byte access per thread
 * when the rows are 16-byte aligned), all of a tile's loads issued before its
 * first scan; each sub-tile is scanned in double within the thread's V
 * elements, across the warp by shuffles, across warps through shared memory,
 * and the carry passes to the next. Columns (inner > 1): a thread per column,
 * neighbouring threads on neighbouring columns (coalesced rows), UNROLL rows
 * in flight.
 * Known limit: a row per block, so fewer rows than the GPU has block slots
 * (a few very long rows) leave SMs idle; and a column per thread, so few
 * columns (outer * inner well under the GPU's ~270K threads) do the same.
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
#define FORGE_P_UNROLL 4 /* sub-tiles (rows) or rows (columns) in flight per thread: 1..8 */
#endif

#include "../_common/cuda_common.cuh"  // inlined when forge loads the template (docs/STRATEGIES.md)
#include "../_common/scan_ops.h"       // the op table: SC_OP

namespace {

constexpr int BLOCK = FORGE_P_BLOCK;
constexpr int UNROLL = FORGE_P_UNROLL;
constexpr int WARPS = BLOCK / 32;
static_assert(BLOCK % 32 == 0 && BLOCK >= 64 && BLOCK <= 1024, "FORGE_P_BLOCK: a multiple of 32, 64..1024");
static_assert(UNROLL >= 1 && UNROLL <= 8, "FORGE_P_UNROLL: 1..8");

__device__ __forceinline__ double combine(double a, double b) { return SC_COMBINE(a, b); }

template <class T, class TY, int V>
__global__ void __launch_bounds__(BLOCK) scan_rows(ScanArgs a) {
  __shared__ double warp_total[WARPS];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t L = a.L;
  for (int64_t row = blockIdx.x; row < a.outer; row += gridDim.x) {
    const T* x = static_cast<const T*>(a.x) + row * L;
    TY* y = static_cast<TY*>(a.y) + row * L;
    double carry = SC_IDENTITY;
    for (int64_t t0 = 0; t0 < L; t0 += static_cast<int64_t>(UNROLL) * BLOCK * V) {
      float v[UNROLL][V];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const int64_t at = t0 + (static_cast<int64_t>(u) * BLOCK + threadIdx.x) * V;
        if (at + V <= L) {
          load_n<T, V>(x + at, v[u]);
        } else {
#pragma unroll
          for (int k = 0; k < V; ++k) v[u][k] = at + k < L ? Io<T>::to(x[at + k]) : static_cast<float>(SC_IDENTITY);
        }
      }
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const int64_t base = t0 + static_cast<int64_t>(u) * BLOCK * V;
        if (base >= L) break;  // the same for the whole block
        double s[V];
        double run = SC_IDENTITY;
#pragma unroll
        for (int k = 0; k < V; ++k) s[k] = run = combine(run, static_cast<double>(v[u][k]));
        double inc = run;  // the warp's inclusive scan of the threads' totals
#pragma unroll
        for (int off = 1; off < 32; off <<= 1) {
          const double n = __shfl_up_sync(0xffffffffu, inc, off);
          if (lane >= off) inc = combine(n, inc);
        }
        double excl = __shfl_up_sync(0xffffffffu, inc, 1);
        if (lane == 0) excl = SC_IDENTITY;
        if (lane == 31) warp_total[warp] = inc;
        __syncthreads();
        double pre = carry, tile = SC_IDENTITY;
#pragma unroll
        for (int w = 0; w < WARPS; ++w) {
          if (w == warp) pre = combine(pre, tile);
          tile = combine(tile, warp_total[w]);
        }
        __syncthreads();  // warp_total is rewritten by the next sub-tile
        pre = combine(pre, excl);
        carry = combine(carry, tile);
        float out[V];
#pragma unroll
        for (int k = 0; k < V; ++k) out[k] = static_cast<float>(combine(pre, s[k]));
        const int64_t at = base + static_cast<int64_t>(threadIdx.x) * V;
        if (at + V <= L) {
          store_n<TY, V>(y + at, out);
        } else {
#pragma unroll
          for (int k = 0; k < V; ++k)
            if (at + k < L) y[at + k] = Io<TY>::from(out[k]);
        }
      }
    }
  }
}

template <class T, class TY>
__global__ void __launch_bounds__(BLOCK) scan_columns(ScanArgs a) {
  const int64_t m = a.outer * a.inner, L = a.L, inner = a.inner;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * BLOCK + threadIdx.x; c < m;
       c += static_cast<int64_t>(gridDim.x) * BLOCK) {
    const int64_t o = c / inner, first = o * L * inner + (c - o * inner);
    const T* x = static_cast<const T*>(a.x) + first;
    TY* y = static_cast<TY*>(a.y) + first;
    double acc = SC_IDENTITY;
    int64_t l = 0;
    for (; l + UNROLL <= L; l += UNROLL) {
      float v[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) v[u] = Io<T>::to(x[(l + u) * inner]);
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        acc = combine(acc, static_cast<double>(v[u]));
        y[(l + u) * inner] = Io<TY>::from(static_cast<float>(acc));
      }
    }
    for (; l < L; ++l) {
      acc = combine(acc, static_cast<double>(Io<T>::to(x[l * inner])));
      y[l * inner] = Io<TY>::from(static_cast<float>(acc));
    }
  }
}

inline unsigned grid_of(int64_t blocks) { return static_cast<unsigned>(blocks < 0x7fffffff ? blocks : 0x7fffffff); }

template <class T, class TY>
int launch(const ScanArgs& a, cudaStream_t stream) {
  if (a.inner > 1) {
    scan_columns<T, TY><<<grid_of((a.outer * a.inner + BLOCK - 1) / BLOCK), BLOCK, 0, stream>>>(a);
    return launch_status();
  }
  // 16-byte accesses when every row of x and y starts 16-byte aligned.
  constexpr int V = 16 / sizeof(T);
  const bool vec = aligned16(a.x) && aligned16(a.y) && (a.L * static_cast<int64_t>(sizeof(T))) % 16 == 0 &&
                   (a.L * static_cast<int64_t>(sizeof(TY))) % 16 == 0;
  if (vec) scan_rows<T, TY, V><<<grid_of(a.outer), BLOCK, 0, stream>>>(a);
  else scan_rows<T, TY, 1><<<grid_of(a.outer), BLOCK, 0, stream>>>(a);
  return launch_status();
}

}  // namespace

#include "../_common/scan_parse.h"  // the call's checks and [outer, L, inner], shared with the CPU template

extern "C" int forge_kernel(const forge_call* call) {
  ScanArgs a;
  if (parse_scan(call, a)) return 1;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  return with_dtype(a.x_dtype, [&](auto t) {
    return with_dtype(a.y_dtype, [&](auto ty) { return launch<decltype(t), decltype(ty)>(a, stream); });
  });
}
