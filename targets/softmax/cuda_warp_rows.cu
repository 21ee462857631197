/* softmax, CUDA strategy "warp_rows": FORGE_P_LANES threads (a warp or a
 * part of one) per row, the whole row in registers: one read, one write.
 *
 * Math: per row of the last dim (length L <= FORGE_P_MAX_ROW), in fp32:
 *   M = max x;  e = exp(x - M);  S = sum e;  y = e * (1/S)
 * Op: aten::_softmax(Tensor self, int dim, bool half_to_float) -> Tensor;
 * input float32/float16/bfloat16, output any of them (half_to_float: fp16 in,
 * fp32 out). Shapes: any rank >= 1, dim = the last dim, any row count
 * (64-bit row offsets).
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * dim wraps to the last dim; input and output contiguous with equal sizes;
 * L <= FORGE_P_MAX_ROW; grid within 2^31 blocks. A launch failure returns 1.
 * Non-finite values as in the stock kernel: an all -inf row gives NaN, +inf or
 * NaN in a row makes the row NaN.
 *
 * Why it is fast: rows <= a few thousand elements are too short for a block;
 * LANES threads own a row (Quack's heuristic: 8-16 lanes for <= 128, a warp
 * for <= 3K), reductions are register shuffles within the lane group (no
 * shared memory, no __syncthreads), and every access is a 16-byte vector when
 * the base pointers are 16-byte aligned and L * sizeof(dtype) is a multiple of
 * 16 (else a scalar instance of the same kernel). FORGE_P_EXP = 1 uses the
 * SFU exp (__expf: ~2 ulp plus |x|*2^-24 relative: fine for softmax, whose
 * large |x - M| terms are tiny); 0 the accurate expf.
 * Compiled here (nvcc 13, sm_90a) but not run on this machine: no GPU.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "forge_kernel.h"

#ifndef FORGE_P_LANES
#define FORGE_P_LANES 32 /* threads per row: 4, 8, 16, 32 */
#endif
#ifndef FORGE_P_BLOCK
#define FORGE_P_BLOCK 128 /* threads per block: 64 .. 1024 */
#endif
#ifndef FORGE_P_MAX_ROW
#define FORGE_P_MAX_ROW 1024 /* longest row this instance holds in registers */
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

constexpr int LANES = FORGE_P_LANES;
constexpr int BLOCK = FORGE_P_BLOCK;
constexpr int MAX_ROW = FORGE_P_MAX_ROW;
static_assert(LANES == 4 || LANES == 8 || LANES == 16 || LANES == 32, "FORGE_P_LANES: 4, 8, 16 or 32");
static_assert(BLOCK % 32 == 0 && BLOCK >= 32 && BLOCK <= 1024, "FORGE_P_BLOCK: a multiple of 32, <= 1024");

// LANES threads per row, the row in registers: VW consecutive elements per
// chunk (16 bytes of input when VEC, else 1), CHUNKS chunks per thread, chunk
// k of lane l covering elements [(k*LANES + l)*VW, +VW).
template <class TI, class TO, int VW, bool VEC>
__global__ void __launch_bounds__(BLOCK) softmax_warp_rows(const TI* __restrict__ x, TO* __restrict__ y,
                                                           int64_t rows, int L) {
  constexpr int CHUNKS = (MAX_ROW + LANES * VW - 1) / (LANES * VW);
  const int lane = threadIdx.x % LANES;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (BLOCK / LANES) + threadIdx.x / LANES;
  const bool live = row < rows;  // no early return: the shuffles need the whole warp
  const TI* xr = x + (live ? row : 0) * static_cast<int64_t>(L);
  float v[CHUNKS][VW];
#pragma unroll
  for (int k = 0; k < CHUNKS; ++k) {
    const int j = (k * LANES + lane) * VW;
    if (live && j + VW <= L) {
      if constexpr (VEC) {
        load_n<TI, VW>(xr + j, v[k]);
      } else {
#pragma unroll
        for (int e = 0; e < VW; ++e) v[k][e] = Io<TI>::to(xr[j + e]);
      }
    } else {
#pragma unroll
      for (int e = 0; e < VW; ++e) v[k][e] = (live && j + e < L) ? Io<TI>::to(xr[j + e]) : -INFINITY;
    }
  }
  float m = -INFINITY;
#pragma unroll
  for (int k = 0; k < CHUNKS; ++k)
#pragma unroll
    for (int e = 0; e < VW; ++e) m = fmaxf(m, v[k][e]);
  m = group_max<LANES>(m);
  // A NaN input: fmaxf drops it here, but exp(NaN - m) makes the sum NaN.
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < CHUNKS; ++k)
#pragma unroll
    for (int e = 0; e < VW; ++e) {
      // padding: exp(-inf - m) = 0; an all -inf row: NaN, as stock. log_softmax keeps x - m.
      const float d = v[k][e] - m, ex = FORGE_EXP(d);
      s += ex;
      v[k][e] = SM_LOG ? d : ex;
    }
  s = group_sum<LANES>(s);
  const float inv = 1.0f / s, logs = SM_LOG ? logf(s) : 0.0f;
  if (!live) return;
  TO* yr = y + row * static_cast<int64_t>(L);
#pragma unroll
  for (int k = 0; k < CHUNKS; ++k) {
    const int j = (k * LANES + lane) * VW;
    float o[VW];
#pragma unroll
    for (int e = 0; e < VW; ++e) o[e] = SM_LOG ? v[k][e] - logs : v[k][e] * inv;
    if (j + VW <= L) {
      if constexpr (VEC) {
        store_n<TO, VW>(yr + j, o);
      } else {
#pragma unroll
        for (int e = 0; e < VW; ++e) yr[j + e] = Io<TO>::from(o[e]);
      }
    } else {
#pragma unroll
      for (int e = 0; e < VW; ++e)
        if (j + e < L) yr[j + e] = Io<TO>::from(o[e]);
    }
  }
}

template <class TI, class TO>
int launch(const void* x, void* y, int64_t rows, int64_t L, cudaStream_t stream) {
  if (L > MAX_ROW) return 1;  // the row does not fit this instance's registers
  constexpr int VW = 16 / sizeof(TI);
  const int64_t blocks = (rows + BLOCK / LANES - 1) / (BLOCK / LANES);
  if (blocks > 0x7fffffffLL) return 1;
  // 16-byte vectors need both rows aligned: base pointers and the row pitch.
  const bool vec = aligned16(x) && aligned16(y) && (L * sizeof(TI)) % 16 == 0 && (L * sizeof(TO)) % 16 == 0 &&
                   (VW * sizeof(TO)) % 4 == 0;
  if (vec)
    softmax_warp_rows<TI, TO, VW, true><<<static_cast<unsigned>(blocks), BLOCK, 0, stream>>>(
        static_cast<const TI*>(x), static_cast<TO*>(y), rows, static_cast<int>(L));
  else
    softmax_warp_rows<TI, TO, 1, false><<<static_cast<unsigned>(blocks), BLOCK, 0, stream>>>(
        static_cast<const TI*>(x), static_cast<TO*>(y), rows, static_cast<int>(L));
  return launch_status();
}

}  // namespace

#include "../_common/softmax_cuda_entry.cuh"  // the entry point (last dim, contiguous): inlined when forge loads the template
