/* rms_norm, CUDA strategy "warp_rows": FORGE_P_LANES threads per row, the row
 * in registers; one read, one write.
 *
 * Math: per row (N <= FORGE_P_MAX_ROW elements), fp32: rstd = rsqrt(sum x^2 /
 * N + eps) (eps None: FLT_EPSILON, as torch's decomposition); y = (x * rstd) * w.
 * Op: aten::_fused_rms_norm(Tensor input, int[] normalized_shape, Tensor?
 *     weight, float? eps) -> (Tensor out, Tensor rstd).
 * Shapes: input [..., *normalized_shape]; out like input; rstd one value per
 * row in the dtype the caller allocated (float32).
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * input/out contiguous float32/float16/bfloat16 of one dtype; weight absent or
 * N contiguous elements of the input's dtype or float32; rstd contiguous, one
 * per row, float32 or the input's dtype; N <= FORGE_P_MAX_ROW. A launch
 * failure returns 1.
 *
 * Why it is fast: hidden sizes up to 8K (bf16) fit one warp's registers; one
 * shuffle reduction, 16-byte vectors when aligned; Oink/FlashInfer run this
 * at ~90-99% of the copy bandwidth. Small row counts: LANES < 32 packs several
 * rows per warp. Compiled here (nvcc 13, sm_90a) but not run here: no GPU.
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
#define FORGE_P_MAX_ROW 4096 /* longest row this instance holds in registers */
#endif

#include "../_common/cuda_common.cuh"  // inlined when forge loads the template (docs/STRATEGIES.md)

// FORGE_CHAIN (forge replaces this line with the generated chain)
#include "../_common/rms_norm_args.h"  // the call's fields, shared with the CPU template: inlined when forge loads the template

namespace {

constexpr int LANES = FORGE_P_LANES;
constexpr int BLOCK = FORGE_P_BLOCK;
constexpr int MAX_ROW = FORGE_P_MAX_ROW;
static_assert(LANES == 8 || LANES == 16 || LANES == 32, "FORGE_P_LANES: 8, 16 or 32");
static_assert(BLOCK % 32 == 0 && BLOCK >= 32 && BLOCK <= 1024, "FORGE_P_BLOCK: a multiple of 32, <= 1024");

template <class T, class TW, class TS, int VW, bool VEC>
__global__ void __launch_bounds__(BLOCK) rms_warp_rows(const T* __restrict__ x, const TW* __restrict__ w,
                                                       T* __restrict__ y, TS* __restrict__ rstd_out, int64_t rows,
                                                       int N, float eps) {
  constexpr int CHUNKS = (MAX_ROW + LANES * VW - 1) / (LANES * VW);
  const int lane = threadIdx.x % LANES;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (BLOCK / LANES) + threadIdx.x / LANES;
  const bool live = row < rows;
  const T* xr = x + (live ? row : 0) * static_cast<int64_t>(N);
  float v[CHUNKS][VW];
  float q = 0.0f;
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
    for (int e = 0; e < VW; ++e) q += v[k][e] * v[k][e];
  }
  const float rstd = rsqrtf(group_sum<LANES>(q) / static_cast<float>(N) + eps);
  if (!live) return;
  if (lane == 0 && rstd_out) rstd_out[row] = Io<TS>::from(rstd);  // a chain's kernel has no rstd output
  T* yr = y + row * static_cast<int64_t>(N);
#pragma unroll
  for (int k = 0; k < CHUNKS; ++k) {
    const int j = (k * LANES + lane) * VW;
    if (j >= N) break;
    float o[VW], wv[VW];
    if (VEC && j + VW <= N) {
      if (w) load_n<TW, VW>(w + j, wv);
    } else {
#pragma unroll
      for (int e = 0; e < VW; ++e) wv[e] = (w && j + e < N) ? Io<TW>::to(w[j + e]) : 1.0f;
    }
#pragma unroll
    for (int e = 0; e < VW; ++e) o[e] = w ? (v[k][e] * rstd) * wv[e] : v[k][e] * rstd;
    if (VEC && j + VW <= N) {
      store_n<T, VW>(yr + j, o);
    } else {
#pragma unroll
      for (int e = 0; e < VW; ++e)
        if (j + e < N) yr[j + e] = Io<T>::from(o[e]);
    }
  }
}

template <class T, class TW, class TS>
int launch(const void* x, const void* w, void* y, void* rstd, int64_t M, int64_t N, float eps, cudaStream_t stream) {
  constexpr int VW = 16 / sizeof(T);
  const int64_t blocks = (M + BLOCK / LANES - 1) / (BLOCK / LANES);
  if (blocks > 0x7fffffffLL) return 1;
  const bool vec = aligned16(x) && aligned16(y) && (!w || aligned16(w)) && (N * sizeof(T)) % 16 == 0;
  auto run = [&](auto kernel) {
    kernel<<<static_cast<unsigned>(blocks), BLOCK, 0, stream>>>(static_cast<const T*>(x), static_cast<const TW*>(w),
                                                                static_cast<T*>(y), static_cast<TS*>(rstd), M,
                                                                static_cast<int>(N), eps);
  };
  if (vec) run(rms_warp_rows<T, TW, TS, VW, true>);
  else run(rms_warp_rows<T, TW, TS, 1, false>);
  return launch_status();
}

}  // namespace

#include "../_common/rms_norm_parse.h"  // the call's checks, shared with the CPU template: inlined when forge loads the template

extern "C" int forge_kernel(const forge_call* call) {
  RmsArgs a;
  if (parse_rms_norm(call, a)) return 1;
  if (a.N > MAX_ROW) return 1;
  if (a.M == 0) return 0;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  return with_dtype(a.x_dtype, [&](auto t) {
    using T = decltype(t);
    return with_param_types<T>(a.x_dtype, a.w_dtype, a.s_dtype,
                               [&](auto tp, auto ts) { return launch<T, decltype(tp), decltype(ts)>(a.x, a.w, a.y, a.rstd, a.M, a.N, a.eps, stream); });
  });
}
