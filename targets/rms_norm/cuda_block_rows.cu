/* rms_norm, CUDA strategy "block_rows": a block per row for rows longer than
 * a warp holds (LLM hidden sizes past 8K, whole feature maps): the first
 * BLOCK * VW * CHUNKS elements of the row in registers, the rest read again.
 *
 * Math: per row of N elements, the sum of squares in fp32 per vector step,
 * gathered in double; rstd = rsqrt(sum x^2 / N + eps) (eps None: FLT_EPSILON,
 * as torch's decomposition); y = (x * rstd) * w, fp32.
 * Op: aten::_fused_rms_norm(Tensor input, int[] normalized_shape, Tensor?
 *     weight, float? eps) -> (Tensor out, Tensor rstd).
 * Shapes: input [..., *normalized_shape]; out like input; rstd one value per
 * row in the dtype the caller allocated (float32).
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * rms_norm_parse.h's (input/out contiguous float32/float16/bfloat16 of one
 * dtype; weight absent or N contiguous elements of the input's dtype or
 * float32; rstd contiguous, one per row); rows of whole 16-byte vectors, the
 * bases aligned to 16 bytes; rows fit a grid (< 2^31). A launch failure
 * returns 1.
 *
 * Why it is fast: one read and one write for rows up to the register cache
 * (BLOCK 512, CHUNKS 8: 16K float32 or 32K 16-bit elements), 16-byte
 * vectors; longer rows read their tail twice, the second time mostly from L2
 * (a block's row tail). Few long rows leave
 * SMs idle: a grid of one block per row. Its GPU runs: docs/STRATEGIES.md.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "forge_kernel.h"

#ifndef FORGE_P_BLOCK
#define FORGE_P_BLOCK 512 /* threads per row: 256, 512, 1024 */
#endif
#ifndef FORGE_P_CHUNKS
#define FORGE_P_CHUNKS 8 /* vectors per thread held in registers: 4, 8 (16 spills at BLOCK 512) */
#endif

#include "../_common/cuda_common.cuh"  // inlined when forge loads the template (docs/STRATEGIES.md)
#include "../_common/rms_norm_args.h"  // the call's fields, shared with the CPU template

namespace {

constexpr int BLOCK = FORGE_P_BLOCK;
constexpr int CHUNKS = FORGE_P_CHUNKS;
static_assert(BLOCK % 32 == 0 && BLOCK >= 64 && BLOCK <= 1024, "FORGE_P_BLOCK: a multiple of 32, 64..1024");
static_assert(CHUNKS >= 1 && CHUNKS <= 32, "FORGE_P_CHUNKS: 1..32");

// VW elements at j of row r, zeros from N on (N and j are multiples of VW:
// whole 16-byte vectors, the launch checks).
template <class T, int VW>
__device__ __forceinline__ void load_at(const T* r, int64_t j, int64_t N, float* v) {
  if (j < N) {
    load_n<T, VW>(r + j, v);
  } else {
#pragma unroll
    for (int e = 0; e < VW; ++e) v[e] = 0.0f;
  }
}

template <class T, class TW, int VW>
__device__ __forceinline__ void store_at(T* yr, const TW* w, int64_t j, const float* v, float rstd) {
  float o[VW], wv[VW];
  if (w) load_n<TW, VW>(w + j, wv);
#pragma unroll
  for (int e = 0; e < VW; ++e) o[e] = w ? (v[e] * rstd) * wv[e] : v[e] * rstd;
  store_n<T, VW>(yr + j, o);
}

template <class T, class TW, class TS, int VW>
__global__ void __launch_bounds__(BLOCK) rms_block_rows(const T* __restrict__ x, const TW* __restrict__ w,
                                                        T* __restrict__ y, TS* __restrict__ rstd_out, int64_t N,
                                                        float eps) {
  constexpr int64_t STEP = static_cast<int64_t>(BLOCK) * VW, CAP = STEP * CHUNKS;
  __shared__ double scratch[32];
  const int64_t row = blockIdx.x;
  const T* xr = x + row * N;
  T* yr = y + row * N;
  const int64_t first = static_cast<int64_t>(threadIdx.x) * VW;
  float v[CHUNKS][VW];
  float q = 0.0f;
#pragma unroll
  for (int k = 0; k < CHUNKS; ++k) {
    load_at<T, VW>(xr, k * STEP + first, N, v[k]);
#pragma unroll
    for (int e = 0; e < VW; ++e) q += v[k][e] * v[k][e];
  }
  double qd = q;
  for (int64_t j = CAP + first; j < N; j += STEP) {  // the tail past the registers
    float t[VW], s = 0.0f;
    load_at<T, VW>(xr, j, N, t);
#pragma unroll
    for (int e = 0; e < VW; ++e) s += t[e] * t[e];
    qd += s;
  }
  qd = block_sum(qd, scratch);
  const float rstd = rsqrtf(static_cast<float>(qd / static_cast<double>(N)) + eps);
  if (threadIdx.x == 0 && rstd_out) rstd_out[row] = Io<TS>::from(rstd);
#pragma unroll
  for (int k = 0; k < CHUNKS; ++k)
    if (k * STEP + first < N) store_at<T, TW, VW>(yr, w, k * STEP + first, v[k], rstd);
  for (int64_t j = CAP + first; j < N; j += STEP) {
    float t[VW];
    load_at<T, VW>(xr, j, N, t);
    store_at<T, TW, VW>(yr, w, j, t, rstd);
  }
}

template <class T, class TW, class TS>
int launch(const RmsArgs& a, cudaStream_t stream) {
  constexpr int VW = 16 / sizeof(T);
  if (a.M > 0x7fffffffLL) return 1;
  // Whole 16-byte vectors only: rows that are no whole number of them, or
  // unaligned bases, are declined (the scalar form of this kernel gave 0
  // across a row holding -inf where stock gives NaN: docs/STRATEGIES.md).
  if (!aligned16(a.x) || !aligned16(a.y) || (a.w && !aligned16(a.w)) || (a.N * sizeof(T)) % 16 != 0) return 1;
  rms_block_rows<T, TW, TS, VW><<<static_cast<unsigned>(a.M), BLOCK, 0, stream>>>(
      static_cast<const T*>(a.x), static_cast<const TW*>(a.w), static_cast<T*>(a.y), static_cast<TS*>(a.rstd), a.N,
      a.eps);
  return launch_status();
}

}  // namespace

#include "../_common/rms_norm_parse.h"  // the call's checks, shared with the CPU template

extern "C" int forge_kernel(const forge_call* call) {
  RmsArgs a;
  if (parse_rms_norm(call, a)) return 1;
  if (a.M == 0) return 0;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  return with_dtype(a.x_dtype, [&](auto t) {
    using T = decltype(t);
    return with_param_types<T>(a.x_dtype, a.w_dtype, a.s_dtype,
                               [&](auto tp, auto ts) { return launch<T, decltype(tp), decltype(ts)>(a, stream); });
  });
}
