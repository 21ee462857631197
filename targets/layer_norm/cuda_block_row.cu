/* layer_norm, CUDA strategy "block_row": one block per row for wide rows
 * (hidden 4K..64K), the row in registers when it fits, else re-read from L2.
 *
 * Math: per row (N elements), in fp32:
 *   cached (N <= BLOCK*CHUNKS*VW): mean = sum x / N, var = sum (x - mean)^2 / N
 *     over registers (two exact passes, one read);
 *   otherwise: K = x[0]; mean = K + sum (x - K) / N (shifted: small partial
 *     sums), var = sum (x - mean)^2 / N by a second read;
 *   rstd = rsqrt(var + eps); y = ((x - mean) * rstd) * w + b.
 * Op: aten::native_layer_norm(Tensor input, SymInt[] normalized_shape,
 *     Tensor? weight, Tensor? bias, float eps) -> (out, mean, rstd).
 * Shapes: input [..., *normalized_shape]; out like input; mean/rstd one value
 * per row (float32 on CUDA, or the input's dtype). Rows loop past 2^31 blocks.
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * input/out contiguous float32/float16/bfloat16 of one dtype; weight/bias
 * absent or contiguous N elements of the input's dtype or float32; mean/rstd
 * contiguous, one per row, float32 or the input's dtype. A launch failure
 * returns 1.
 *
 * Why it is fast: FlashInfer/Quack shape: a block per row, 16-byte vectors,
 * warp shuffles plus one shared-memory step per reduction, the row read once
 * when BLOCK*CHUNKS*16 bytes hold it (else three reads, the later two from L2).
 * Small row counts underfill the GPU: prefer warp_rows there.
 * Compiled here (nvcc 13, sm_90a) but not run on this machine: no GPU.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "forge_kernel.h"

#ifndef FORGE_P_BLOCK
#define FORGE_P_BLOCK 256 /* threads per row: 64, 128, 256, 512, 1024 */
#endif
#ifndef FORGE_P_CHUNKS
#define FORGE_P_CHUNKS 4 /* 16-byte vectors per thread kept in registers (0: always re-read) */
#endif

#include "../_common/cuda_common.cuh"  // inlined when forge loads the template (docs/STRATEGIES.md)

namespace {

#include "../_common/layer_norm_args.h"  // the call's fields, shared with the CPU templates: inlined when forge loads the template

constexpr int BLOCK = FORGE_P_BLOCK;
constexpr int CHUNKS = FORGE_P_CHUNKS;
static_assert(BLOCK % 32 == 0 && BLOCK >= 64 && BLOCK <= 1024, "FORGE_P_BLOCK: a multiple of 32 in 64..1024");
static_assert(CHUNKS >= 0 && CHUNKS <= 32, "FORGE_P_CHUNKS: 0..32");

template <class T, int VW, bool VEC>
__device__ __forceinline__ void load_chunk(const T* p, int64_t j, int64_t n, float* v, float pad) {
  if (VEC && j + VW <= n) {
    load_n<T, VW>(p + j, v);
  } else {
#pragma unroll
    for (int e = 0; e < VW; ++e) v[e] = j + e < n ? Io<T>::to(p[j + e]) : pad;
  }
}

template <class T, class TW, int VW, bool VEC>
__device__ __forceinline__ void write_chunk(T* yr, const TW* w, const TW* b, int64_t j, int64_t n, const float* v,
                                            float mean, float rstd) {
  if (j >= n) return;
  float wv[VW], bv[VW], o[VW];
  if (w) load_chunk<TW, VW, VEC>(w, j, n, wv, 1.0f);
  if (b) load_chunk<TW, VW, VEC>(b, j, n, bv, 0.0f);
#pragma unroll
  for (int e = 0; e < VW; ++e) {
    float t = (v[e] - mean) * rstd;
    if (w) t = t * wv[e];
    if (b) t = t + bv[e];
    o[e] = t;
  }
  if (VEC && j + VW <= n) {
    store_n<T, VW>(yr + j, o);
  } else {
#pragma unroll
    for (int e = 0; e < VW; ++e)
      if (j + e < n) yr[j + e] = Io<T>::from(o[e]);
  }
}

template <class T, class TW, class TS, int VW, bool VEC, bool CACHED>
__global__ void __launch_bounds__(BLOCK) ln_block_row(const T* __restrict__ x, const TW* __restrict__ w,
                                                      const TW* __restrict__ b, T* __restrict__ y,
                                                      TS* __restrict__ mean_out, TS* __restrict__ rstd_out,
                                                      int64_t rows, int64_t N, float eps) {
  __shared__ float scratch[32];
  constexpr int64_t STEP = static_cast<int64_t>(BLOCK) * VW;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * N;
    T* yr = y + row * N;
    float mean, var;
    constexpr int C = CHUNKS > 0 ? CHUNKS : 1;
    float v[C][VW];
    if constexpr (CACHED) {
      float s = 0.0f;
#pragma unroll
      for (int k = 0; k < C; ++k) {
        load_chunk<T, VW, VEC>(xr, k * STEP + threadIdx.x * VW, N, v[k], 0.0f);
#pragma unroll
        for (int e = 0; e < VW; ++e) s += v[k][e];
      }
      mean = block_sum(s, scratch) / static_cast<float>(N);
      float q = 0.0f;
#pragma unroll
      for (int k = 0; k < C; ++k) {
        const int64_t j = k * STEP + threadIdx.x * VW;
#pragma unroll
        for (int e = 0; e < VW; ++e) {
          const float d = j + e < N ? v[k][e] - mean : 0.0f;
          q += d * d;
        }
      }
      var = block_sum(q, scratch) / static_cast<float>(N);
    } else {
      const float K = Io<T>::to(xr[0]);
      float s = 0.0f;
      for (int64_t j = threadIdx.x * VW; j < N; j += STEP) {
        float t[VW];
        load_chunk<T, VW, VEC>(xr, j, N, t, K);
#pragma unroll
        for (int e = 0; e < VW; ++e) s += t[e] - K;
      }
      mean = K + block_sum(s, scratch) / static_cast<float>(N);
      float q = 0.0f;
      for (int64_t j = threadIdx.x * VW; j < N; j += STEP) {
        float t[VW];
        load_chunk<T, VW, VEC>(xr, j, N, t, mean);
#pragma unroll
        for (int e = 0; e < VW; ++e) q += (t[e] - mean) * (t[e] - mean);
      }
      var = block_sum(q, scratch) / static_cast<float>(N);
    }
    const float rstd = rsqrtf(var + eps);
    if (threadIdx.x == 0) {
      mean_out[row] = Io<TS>::from(mean);
      rstd_out[row] = Io<TS>::from(rstd);
    }
    if constexpr (CACHED) {
#pragma unroll
      for (int k = 0; k < C; ++k)
        write_chunk<T, TW, VW, VEC>(yr, w, b, k * STEP + threadIdx.x * VW, N, v[k], mean, rstd);
    } else {
      for (int64_t j = threadIdx.x * VW; j < N; j += STEP) {
        float t[VW];
        load_chunk<T, VW, VEC>(xr, j, N, t, 0.0f);
        write_chunk<T, TW, VW, VEC>(yr, w, b, j, N, t, mean, rstd);
      }
    }
  }
}

inline bool row_fits(int64_t) { return true; }

template <class T, class TW, class TS>
int launch(const LnArgs& a, cudaStream_t stream) {
  constexpr int VW = 16 / sizeof(T);
  const unsigned grid = static_cast<unsigned>(a.M < 0x7fffffffLL ? a.M : 0x7fffffffLL);
  const bool vec = aligned16(a.x) && aligned16(a.y) && (!a.w || aligned16(a.w)) && (!a.b || aligned16(a.b)) &&
                   (a.N * sizeof(T)) % 16 == 0;
  const bool cached = CHUNKS > 0 && a.N <= static_cast<int64_t>(BLOCK) * CHUNKS * (vec ? VW : 1);
  auto run = [&](auto kernel) {
    kernel<<<grid, BLOCK, 0, stream>>>(static_cast<const T*>(a.x), static_cast<const TW*>(a.w),
                                       static_cast<const TW*>(a.b), static_cast<T*>(a.y), static_cast<TS*>(a.mean),
                                       static_cast<TS*>(a.rstd), a.M, a.N, a.eps);
  };
  if (vec && cached) run(ln_block_row<T, TW, TS, VW, true, true>);
  else if (vec) run(ln_block_row<T, TW, TS, VW, true, false>);
  else if (cached) run(ln_block_row<T, TW, TS, 1, false, true>);
  else run(ln_block_row<T, TW, TS, 1, false, false>);
  return launch_status();
}

#include "../_common/layer_norm_cuda_entry.cuh"  // dispatch, argument checks and entry points: inlined when forge loads the template
