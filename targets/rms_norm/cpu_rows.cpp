/* rms_norm, CPU strategy "rows": the sum of squares of FORGE_P_ROWS rows in
 * one interleaved read, then the scale pass.
 *
 * Math: for every row r (the last len(normalized_shape) dims, N elements), in
 * fp32: rstd = 1 / sqrt(sum x^2 / N + eps) (eps None: FLT_EPSILON, the fp32
 * machine epsilon, also for 16-bit inputs, as torch's decomposition does);
 * y = (x * rstd) * w.
 * Op: aten::_fused_rms_norm(Tensor input, int[] normalized_shape, Tensor?
 *     weight, float? eps) -> (Tensor out, Tensor rstd): F.rms_norm /
 * nn.RMSNorm reach it (on the CPU it is CompositeImplicitAutograd in torch
 * 2.14 - pow, mean, add, rsqrt, mul, mul, casts - which is what the stock
 * reference computes).
 * Shapes: input [..., *normalized_shape]; out like input; rstd [..., 1...]
 * (one per row) in the dtype the caller allocated (float32 for every input).
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * input/out contiguous float32/bfloat16/float16 of one dtype; weight absent or
 * N contiguous elements of a float dtype; rstd contiguous, one per row;
 * FORGE_P_ROW, when nonzero, equals N. inf gives rstd 0 and y = 0 or NaN, NaN
 * propagates: as the decomposition.
 *
 * Why it is fast: the decomposition runs ~8 ATen ops with 3-4 temporaries the
 * size of the input; this reads the input twice (the second from L1) and
 * writes once. FORGE_P_ROWS rows reduced side by side keep short rows'
 * reductions overlapped. Single-threaded (no OpenMP in candidates).
 */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "forge_kernel.h"

#pragma GCC diagnostic ignored "-Wpsabi" /* vectors wider than the target ISA are fine: all inline */
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized" /* GCC 12 false positives inside the fp16 */
#pragma GCC diagnostic ignored "-Wuninitialized"      /* conversion intrinsics (_mm512_cvt*ph*) */

#ifndef FORGE_P_ISA
#define FORGE_P_ISA 0 /* 0: as compiled (-march); 2: AVX2 paths; 3: AVX-512 paths (run-time checked) */
#endif
#ifndef FORGE_P_ROWS
#define FORGE_P_ROWS 2 /* rows reduced side by side: 1, 2, 4 */
#endif
#ifndef FORGE_P_ROW
#define FORGE_P_ROW 0 /* 0: row length read at run time; else the row length N, fixed at compile time */
#endif

#include "../_common/cpu_common.h"  // inlined when forge loads the template (docs/STRATEGIES.md)

// FORGE_CHAIN (forge replaces this line with the generated chain)

constexpr int R = FORGE_P_ROWS;
static_assert(R >= 1 && R <= 8, "FORGE_P_ROWS must be 1..8");

#include "../_common/rms_norm_args.h"  // the call's fields, shared with the CUDA template: inlined when forge loads the template

template <class T, class TW, class TS>
void rms_rows(const RmsArgs& a) {
  const T* x = static_cast<const T*>(a.x);
  T* y = static_cast<T*>(a.y);
  const TW* w = static_cast<const TW*>(a.w);
  TS* rstd_out = static_cast<TS*>(a.rstd);
  const int64_t N = FORGE_P_ROW ? FORGE_P_ROW : a.N;
  for (int64_t r0 = 0; r0 < a.M; r0 += R) {
    const int nr = a.M - r0 < R ? static_cast<int>(a.M - r0) : R;
    vf q[R];
    for (int k = 0; k < R; ++k) q[k] = splat(0.0f);
    int64_t i = 0;
    for (; i + W <= N; i += W)
      for (int k = 0; k < nr; ++k) {
        vf v = load(x + (r0 + k) * N + i);
        q[k] += v * v;
      }
    if (i < N)
      for (int k = 0; k < nr; ++k) {
        vf v = load_part(x + (r0 + k) * N + i, N - i, T{});
        q[k] += v * v;
      }
    for (int k = 0; k < nr; ++k) {
      const int64_t r = r0 + k;
      const float rstd = 1.0f / sqrtf(hsum(q[k]) / static_cast<float>(N) + a.eps);
      if (rstd_out) store1(rstd_out + r, rstd);  // a chain's kernel has no rstd output
      const vf rv = splat(rstd);
      const T* xr = x + r * N;
      T* yr = y + r * N;
      int64_t j = 0;
      for (; j + W <= N; j += W) {
        vf v = load(xr + j) * rv;
        if (w) v = v * load(w + j);
        store(yr + j, v);
      }
      if (j < N) {
        vf v = load_part(xr + j, N - j, T{}) * rv;
        if (w) v = v * load_part(w + j, N - j, TW{});
        store_part(yr + j, v, N - j);
      }
    }
  }
}

// The storage types of x, weight and rstd, picked at run time.
__attribute__((noinline)) int rms_norm_run(const RmsArgs& a) {
  return with_dtype(a.x_dtype, [&](auto t) {
    return with_dtype(a.w_dtype, [&](auto tw) {
      return with_dtype(a.s_dtype, [&](auto ts) {
        rms_rows<decltype(t), decltype(tw), decltype(ts)>(a);
        return 0;
      });
    });
  });
}

#include "../_common/cpu_checks.h"  // the ISA region ends; cpu_ok and the host-side tensor checks


#include "../_common/rms_norm_parse.h"  // the call's checks, shared with the CUDA template: inlined when forge loads the template

extern "C" int forge_kernel(const forge_call* call) {
  RmsArgs a;
  if (parse_rms_norm(call, a)) return 1;
  if (FORGE_P_ROW && a.N != FORGE_P_ROW) return 1;
  if (!cpu_ok()) return 1;
  if (a.M == 0) return 0;
  return rms_norm_run(a);
}
