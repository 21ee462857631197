/* softmax, CUDA strategy "columns": softmax or log_softmax over a dim that is
 * not the last, a thread per column.
 *
 * Math: the input as [outer, L, inner] (softmax_columns_parse.h); for each
 * (o, i), over r: an online max M and sum S of exp(x - M) (rescaled when M
 * grows), then y = exp(x - M) / S or (x - M) - log S; fp32 whatever the
 * storage dtypes (float32, bfloat16, float16).
 * Op: aten::_softmax / _log_softmax(Tensor self, int dim, bool half_to_float).
 * Shapes: any rank, any dim, any extents (64-bit offsets).
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * 1 input, 1 output with equal sizes, both contiguous. A launch failure
 * returns 1. Non-finite values as stock: an all -inf column is NaN; a NaN or
 * +inf in a column makes the column NaN.
 *
 * Why it is fast: neighbouring threads own neighbouring columns, so every
 * step along the softmax dim reads one coalesced row of the block; two reads
 * (online max and sum, then the write pass, from L2 when the block's rows
 * fit) and one write. FORGE_P_EXP = 1 uses the SFU exp (__expf).
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
#include "../_common/softmax_columns_args.h"  // SoftmaxColumns: the call as [outer, L, inner]

namespace {

constexpr int BLOCK = FORGE_P_BLOCK;
static_assert(BLOCK % 32 == 0 && BLOCK >= 32 && BLOCK <= 1024, "FORGE_P_BLOCK: a multiple of 32 up to 1024");

template <class TI, class TO>
__global__ void __launch_bounds__(BLOCK) softmax_columns(SoftmaxColumns a) {
  const int64_t n = a.outer * a.inner;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * BLOCK + threadIdx.x; t < n;
       t += static_cast<int64_t>(gridDim.x) * BLOCK) {
    const int64_t o = t / a.inner, i = t - o * a.inner;
    const int64_t base = o * a.L * a.inner + i;
    const TI* x = static_cast<const TI*>(a.x) + base;
    TO* y = static_cast<TO*>(a.y) + base;
    float m = -INFINITY, s = 0.0f;
    bool nan = false;
    for (int64_t r = 0; r < a.L; ++r) {
      const float v = Io<TI>::to(x[r * a.inner]);
      nan |= v != v;
      if (v > m) {
        s = s * FORGE_EXP(m - v) + 1.0f;  // m = -inf at first: 0 * ... + 1
        m = v;
      } else if (v != -INFINITY) {
        s += FORGE_EXP(v - m);  // a -inf adds nothing (an all -inf column: s = 0, NaN below)
      }
    }
    // Stock's two-pass sum is NaN with a NaN or a +inf in the column
    // (exp(inf - inf)); the online rescale would drop that.
    if (nan || m == INFINITY) s = NAN;
    const float inv = 1.0f / s, logs = SM_LOG ? logf(s) : 0.0f;
    for (int64_t r = 0; r < a.L; ++r) {
      const float d = Io<TI>::to(x[r * a.inner]) - m;
      y[r * a.inner] = Io<TO>::from(SM_LOG ? d - logs : FORGE_EXP(d) * inv);
    }
  }
}

}  // namespace

#include "../_common/softmax_columns_parse.h"  // the call's checks, shared with the CPU columns template

extern "C" int forge_kernel(const forge_call* call) {
  SoftmaxColumns a;
  if (parse_softmax_columns(call, a)) return 1;
  if (a.outer == 0) return 0;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  const int64_t n = a.outer * a.inner;
  const int64_t blocks = (n + BLOCK - 1) / BLOCK;
  return with_dtype(a.x_dtype, [&](auto ti) {
    return with_dtype(a.y_dtype, [&](auto to) {
      softmax_columns<decltype(ti), decltype(to)>
          <<<static_cast<unsigned>(blocks < 0x7fffffff ? blocks : 0x7fffffff), BLOCK, 0, stream>>>(a);
      return launch_status();
    });
  });
}
