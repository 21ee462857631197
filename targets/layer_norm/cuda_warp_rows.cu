/* layer_norm, CUDA strategy "warp_rows": FORGE_P_LANES threads per row, the
 * row in registers, two passes over registers (exact mean, then the centered
 * sum of squares), then the normalize; one read, one write.
 *
 * Math: per row (the last len(normalized_shape) dims, N <= FORGE_P_MAX_ROW
 * elements), in fp32: mean = sum x / N; var = sum (x - mean)^2 / N (biased);
 * rstd = rsqrt(var + eps); y = ((x - mean) * rstd) * w + b.
 * Op: aten::native_layer_norm(Tensor input, SymInt[] normalized_shape,
 *     Tensor? weight, Tensor? bias, float eps) -> (out, mean, rstd).
 * Shapes: input [..., *normalized_shape], out like input, mean/rstd one value
 * per row in the dtype the caller allocated (float32 on CUDA).
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * input/out contiguous float32/float16/bfloat16 of one dtype; weight/bias
 * absent or contiguous with N elements of the input's dtype or float32 (one
 * dtype for both); mean/rstd contiguous, one element per row, float32 or the
 * input's dtype; N <= FORGE_P_MAX_ROW. A launch failure returns 1.
 *
 * Why it is fast: hidden sizes up to a few thousand fit one warp's registers
 * (bf16 4096: 32 lanes x 8 x 16 B); both reductions are register shuffles, no
 * shared memory, no re-read; 16-byte loads/stores when every pointer is
 * 16-byte aligned and N * sizeof(dtype) is a multiple of 16 (else a scalar
 * instance). Two passes over registers cannot cancel like E[x^2] - E[x]^2.
 * Compiled here (nvcc 13, sm_90a) but not run on this machine: no GPU.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "forge_kernel.h"

#ifndef FORGE_P_LANES
#define FORGE_P_LANES 32 /* threads per row: 8, 16, 32 */
#endif
#ifndef FORGE_P_BLOCK
#define FORGE_P_BLOCK 128 /* threads per block: 64 .. 1024 */
#endif
#ifndef FORGE_P_MAX_ROW
#define FORGE_P_MAX_ROW 1024 /* longest row this instance holds in registers */
#endif

#include "../_common/cuda_common.cuh"  // inlined when forge loads the template (docs/STRATEGIES.md)

namespace {

#include "../_common/layer_norm_args.h"  // the call's fields, shared with the CPU templates: inlined when forge loads the template


constexpr int LANES = FORGE_P_LANES;
constexpr int BLOCK = FORGE_P_BLOCK;
constexpr int MAX_ROW = FORGE_P_MAX_ROW;
static_assert(LANES == 8 || LANES == 16 || LANES == 32, "FORGE_P_LANES: 8, 16 or 32");
static_assert(BLOCK % 32 == 0 && BLOCK >= 32 && BLOCK <= 1024, "FORGE_P_BLOCK: a multiple of 32, <= 1024");

template <class T, class TW, class TS, int VW, bool VEC>
__global__ void __launch_bounds__(BLOCK) ln_warp_rows(const T* __restrict__ x, const TW* __restrict__ w,
                                                      const TW* __restrict__ b, T* __restrict__ y,
                                                      TS* __restrict__ mean_out, TS* __restrict__ rstd_out,
                                                      int64_t rows, int N, float eps) {
  constexpr int CHUNKS = (MAX_ROW + LANES * VW - 1) / (LANES * VW);
  const int lane = threadIdx.x % LANES;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (BLOCK / LANES) + threadIdx.x / LANES;
  const bool live = row < rows;  // no early return before the shuffles
  const T* xr = x + (live ? row : 0) * static_cast<int64_t>(N);
  float v[CHUNKS][VW];
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < CHUNKS; ++k) {
    const int j = (k * LANES + lane) * VW;
    if (VEC && live && j + VW <= N) {
      load_n<T, VW>(xr + j, v[k]);
    } else {
#pragma unroll
      for (int e = 0; e < VW; ++e) v[k][e] = (live && j + e < N) ? Io<T>::to(xr[j + e]) : 0.0f;
    }
#pragma unroll
    for (int e = 0; e < VW; ++e) s += v[k][e];
  }
  const float mean = group_sum<LANES>(s) / static_cast<float>(N);
  float q = 0.0f;
#pragma unroll
  for (int k = 0; k < CHUNKS; ++k) {
    const int j = (k * LANES + lane) * VW;
#pragma unroll
    for (int e = 0; e < VW; ++e) {
      const float d = j + e < N ? v[k][e] - mean : 0.0f;
      q += d * d;
    }
  }
  const float var = group_sum<LANES>(q) / static_cast<float>(N);
  const float rstd = rsqrtf(var + eps);
  if (!live) return;
  if (lane == 0) {
    mean_out[row] = Io<TS>::from(mean);
    rstd_out[row] = Io<TS>::from(rstd);
  }
  T* yr = y + row * static_cast<int64_t>(N);
#pragma unroll
  for (int k = 0; k < CHUNKS; ++k) {
    const int j = (k * LANES + lane) * VW;
    if (j >= N) break;
    float o[VW], wv[VW], bv[VW];
    if (VEC && j + VW <= N) {
      if (w) load_n<TW, VW>(w + j, wv);
      if (b) load_n<TW, VW>(b + j, bv);
    } else {
#pragma unroll
      for (int e = 0; e < VW; ++e) {
        wv[e] = (w && j + e < N) ? Io<TW>::to(w[j + e]) : 1.0f;
        bv[e] = (b && j + e < N) ? Io<TW>::to(b[j + e]) : 0.0f;
      }
    }
#pragma unroll
    for (int e = 0; e < VW; ++e) {
      float t = (v[k][e] - mean) * rstd;
      if (w) t = t * wv[e];
      if (b) t = t + bv[e];
      o[e] = t;
    }
    if (VEC && j + VW <= N) {
      store_n<T, VW>(yr + j, o);
    } else {
#pragma unroll
      for (int e = 0; e < VW; ++e)
        if (j + e < N) yr[j + e] = Io<T>::from(o[e]);
    }
  }
}

inline bool row_fits(int64_t N) { return N <= MAX_ROW; }

template <class T, class TW, class TS>
int launch(const LnArgs& a, cudaStream_t stream) {
  constexpr int VW = 16 / sizeof(T);
  const int64_t blocks = (a.M + BLOCK / LANES - 1) / (BLOCK / LANES);
  if (blocks > 0x7fffffffLL || a.N > 0x7fffffffLL) return 1;
  // 16-byte vectors: every row start and every weight/bias chunk aligned.
  const bool vec = aligned16(a.x) && aligned16(a.y) && (!a.w || aligned16(a.w)) && (!a.b || aligned16(a.b)) &&
                   (a.N * sizeof(T)) % 16 == 0;
  auto args = [&](auto kernel) {
    kernel<<<static_cast<unsigned>(blocks), BLOCK, 0, stream>>>(
        static_cast<const T*>(a.x), static_cast<const TW*>(a.w), static_cast<const TW*>(a.b), static_cast<T*>(a.y),
        static_cast<TS*>(a.mean), static_cast<TS*>(a.rstd), a.M, static_cast<int>(a.N), a.eps);
  };
  if (vec) args(ln_warp_rows<T, TW, TS, VW, true>);
  else args(ln_warp_rows<T, TW, TS, 1, false>);
  return launch_status();
}

#include "../_common/layer_norm_cuda_entry.cuh"  // dispatch, argument checks and entry points: inlined when forge loads the template
