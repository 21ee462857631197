/* softmax, CUDA strategy "block_row": one block per row, for rows too long
 * for a warp (Quack: 64 threads from ~3K, 128 from ~6K, 256 beyond).
 *
 * Math: per row of the last dim (length L), in fp32:
 *   M = max x;  S = sum exp(x - M);  y = exp(x - M) * (1/S).
 * When L <= FORGE_P_BLOCK * FORGE_P_CHUNKS * VW (VW = 16 bytes of elements)
 * the row is held in registers: one read, one write. Otherwise each thread
 * keeps an online (m, s) over its strided vectors,
 *   m' = max(m, x);  s = s * exp(m - m') + exp(x - m'),
 * guarded so that (-inf) - (-inf) never enters (a lane that has only seen -inf
 * keeps s = 0), the (m, s) pairs are merged across the block, and a second
 * read writes y: two reads, one write (the stock kernel reads three times
 * once a row passes its 48 KB shared-memory cache).
 * Op: aten::_softmax(Tensor self, int dim, bool half_to_float) -> Tensor;
 * float32/float16/bfloat16 in, any of them out. Shapes: any rank >= 1, dim =
 * the last dim, any row count (one block per row, grid-stride past 2^31),
 * 64-bit offsets.
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * dim wraps to the last dim; input and output contiguous with equal sizes. A
 * launch failure returns 1. Non-finite values as the stock kernel: all -inf
 * row -> NaN, +inf or NaN in a row -> the row NaN.
 *
 * Why it is fast: 16-byte vector loads and stores (scalar instance when the
 * pointers or L * sizeof(dtype) are not 16-byte aligned), register-resident
 * rows up to BLOCK*CHUNKS*VW, warp shuffles then one shared-memory step per
 * reduction, max and sum reduced separately only on the cached path.
 * Compiled here (nvcc 13, sm_90a) but not run on this machine: no GPU.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "forge_kernel.h"

#ifndef FORGE_P_BLOCK
#define FORGE_P_BLOCK 256 /* threads per row: 128, 256, 512, 1024 */
#endif
#ifndef FORGE_P_CHUNKS
#define FORGE_P_CHUNKS 4 /* 16-byte vectors per thread kept in registers (0: never cache, always online) */
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

constexpr int BLOCK = FORGE_P_BLOCK;
constexpr int CHUNKS = FORGE_P_CHUNKS;
static_assert(BLOCK % 32 == 0 && BLOCK >= 64 && BLOCK <= 1024, "FORGE_P_BLOCK: a multiple of 32 in 64..1024");
static_assert(CHUNKS >= 0 && CHUNKS <= 32, "FORGE_P_CHUNKS: 0..32");

// Online (m, s) update with one value, and the merge of two pairs; both keep
// s = 0 while m = -inf (no -inf - -inf = NaN from masked lanes).
__device__ __forceinline__ void online_add(float& m, float& s, float v) {
  const float mn = fmaxf(m, v);
  if (mn == -INFINITY) return;
  s = s * FORGE_EXP(m - mn) + FORGE_EXP(v - mn);
  m = mn;
}
__device__ __forceinline__ void online_merge(float& m, float& s, float m2, float s2) {
  const float mn = fmaxf(m, m2);
  if (mn == -INFINITY) {
    s += s2;  // 0 (or NaN that must stay NaN)
    return;
  }
  s = s * FORGE_EXP(m - mn) + s2 * FORGE_EXP(m2 - mn);
  m = mn;
}
// A NaN input: fmaxf drops it from m, but exp(NaN - m) makes s NaN.
__device__ __forceinline__ void online_add_nan(float& m, float& s, float v) {
  if (v != v) {
    s = v;
    return;
  }
  online_add(m, s, v);
}

template <class TI, class TO, int VW, bool VEC, bool CACHED>
__global__ void __launch_bounds__(BLOCK) softmax_block_row(const TI* __restrict__ x, TO* __restrict__ y,
                                                           int64_t rows, int64_t L) {
  __shared__ float scratch[2][32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const TI* xr = x + row * L;
    TO* yr = y + row * L;
    if constexpr (CACHED) {
      constexpr int C = CHUNKS > 0 ? CHUNKS : 1;
      float v[C][VW];
#pragma unroll
      for (int k = 0; k < C; ++k) {
        const int64_t j = (static_cast<int64_t>(k) * BLOCK + threadIdx.x) * VW;
        if (j + VW <= L) {
          if constexpr (VEC) load_n<TI, VW>(xr + j, v[k]);
          else
#pragma unroll
            for (int e = 0; e < VW; ++e) v[k][e] = Io<TI>::to(xr[j + e]);
        } else {
#pragma unroll
          for (int e = 0; e < VW; ++e) v[k][e] = j + e < L ? Io<TI>::to(xr[j + e]) : -INFINITY;
        }
      }
      float m = -INFINITY;
#pragma unroll
      for (int k = 0; k < C; ++k)
#pragma unroll
        for (int e = 0; e < VW; ++e) m = fmaxf(m, v[k][e]);
      m = block_max(m, scratch[0]);
      float s = 0.0f;
#pragma unroll
      for (int k = 0; k < C; ++k)
#pragma unroll
        for (int e = 0; e < VW; ++e) {
          const float d = v[k][e] - m, ex = FORGE_EXP(d);  // log_softmax keeps x - m
          s += ex;
          v[k][e] = SM_LOG ? d : ex;
        }
      s = block_sum(s, scratch[1]);
      const float inv = 1.0f / s, logs = SM_LOG ? logf(s) : 0.0f;
#pragma unroll
      for (int k = 0; k < C; ++k) {
        const int64_t j = (static_cast<int64_t>(k) * BLOCK + threadIdx.x) * VW;
        float o[VW];
#pragma unroll
        for (int e = 0; e < VW; ++e) o[e] = SM_LOG ? v[k][e] - logs : v[k][e] * inv;
        if (j + VW <= L) {
          if constexpr (VEC) store_n<TO, VW>(yr + j, o);
          else
#pragma unroll
            for (int e = 0; e < VW; ++e) yr[j + e] = Io<TO>::from(o[e]);
        } else {
#pragma unroll
          for (int e = 0; e < VW; ++e)
            if (j + e < L) yr[j + e] = Io<TO>::from(o[e]);
        }
      }
    } else {
      // Pass 1: online (m, s) per thread over its vectors, merged across the block.
      float m = -INFINITY, s = 0.0f;
      for (int64_t j = static_cast<int64_t>(threadIdx.x) * VW; j < L; j += static_cast<int64_t>(BLOCK) * VW) {
        float v[VW];
        if (VEC && j + VW <= L) {
          load_n<TI, VW>(xr + j, v);
        } else {
#pragma unroll
          for (int e = 0; e < VW; ++e) v[e] = j + e < L ? Io<TI>::to(xr[j + e]) : -INFINITY;
        }
#pragma unroll
        for (int e = 0; e < VW; ++e) online_add_nan(m, s, v[e]);
      }
#pragma unroll
      for (int o = 16; o > 0; o /= 2) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
        online_merge(m, s, m2, s2);
      }
      const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
      __syncthreads();
      if (lane == 0) {
        scratch[0][warp] = m;
        scratch[1][warp] = s;
      }
      __syncthreads();
      m = lane < BLOCK / 32 ? scratch[0][lane] : -INFINITY;
      s = lane < BLOCK / 32 ? scratch[1][lane] : 0.0f;
#pragma unroll
      for (int o = 16; o > 0; o /= 2) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
        online_merge(m, s, m2, s2);
      }
      // An all -inf row: m = -inf, s = 0 -> exp(-inf - -inf) * (1/0) = NaN, as stock.
      const float inv = 1.0f / s, logs = SM_LOG ? logf(s) : 0.0f;
      // Pass 2: re-read (from L2 for rows up to a few MB) and write.
      for (int64_t j = static_cast<int64_t>(threadIdx.x) * VW; j < L; j += static_cast<int64_t>(BLOCK) * VW) {
        float v[VW];
        if (VEC && j + VW <= L) {
          load_n<TI, VW>(xr + j, v);
#pragma unroll
          for (int e = 0; e < VW; ++e) v[e] = SM_LOG ? (v[e] - m) - logs : FORGE_EXP(v[e] - m) * inv;
          store_n<TO, VW>(yr + j, v);
        } else {
#pragma unroll
          for (int e = 0; e < VW; ++e)
            if (j + e < L) {
              const float d = Io<TI>::to(xr[j + e]) - m;
              yr[j + e] = Io<TO>::from(SM_LOG ? d - logs : FORGE_EXP(d) * inv);
            }
        }
      }
      __syncthreads();  // scratch is reused by the next row
    }
  }
}

template <class TI, class TO>
int launch(const void* x, void* y, int64_t rows, int64_t L, cudaStream_t stream) {
  constexpr int VW = 16 / sizeof(TI);
  const bool vec = aligned16(x) && aligned16(y) && (L * sizeof(TI)) % 16 == 0 && (L * sizeof(TO)) % 16 == 0;
  const unsigned grid = static_cast<unsigned>(rows < 0x7fffffffLL ? rows : 0x7fffffffLL);
  const bool fits_vec = CHUNKS > 0 && L <= static_cast<int64_t>(BLOCK) * CHUNKS * VW;
  const bool fits_scalar = CHUNKS > 0 && L <= static_cast<int64_t>(BLOCK) * CHUNKS;
  const TI* xi = static_cast<const TI*>(x);
  TO* yo = static_cast<TO*>(y);
  if (vec && fits_vec)
    softmax_block_row<TI, TO, VW, true, true><<<grid, BLOCK, 0, stream>>>(xi, yo, rows, L);
  else if (!vec && fits_scalar)
    softmax_block_row<TI, TO, 1, false, true><<<grid, BLOCK, 0, stream>>>(xi, yo, rows, L);
  else if (vec)
    softmax_block_row<TI, TO, VW, true, false><<<grid, BLOCK, 0, stream>>>(xi, yo, rows, L);
  else
    softmax_block_row<TI, TO, 1, false, false><<<grid, BLOCK, 0, stream>>>(xi, yo, rows, L);
  return launch_status();
}

}  // namespace

#include "../_common/softmax_cuda_entry.cuh"  // the entry point (last dim, contiguous): inlined when forge loads the template
