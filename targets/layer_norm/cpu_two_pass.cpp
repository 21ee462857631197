/* layer_norm, CPU strategy "two_pass": exact mean, then the centered sum of
 * squares, then the normalize pass; each row read three times from L1/L2.
 *
 * Math: for every row r (the last len(normalized_shape) dims flattened, N
 * elements), the sums in double, the rest in fp32:
 *   mean = sum x / N;  var = sum (x - mean)^2 / N  (biased);
 *   rstd = 1 / sqrt(max(var, 0) + eps);  y = ((x - mean) * rstd) * w + b
 * Op: aten::native_layer_norm(Tensor input, SymInt[] normalized_shape,
 *     Tensor? weight, Tensor? bias, float eps) -> (out, mean, rstd).
 * Shapes: input [..., *normalized_shape]; out like input; mean and rstd hold
 * one value per row, shaped input.shape[:axis] + [1]*len(normalized_shape), in
 * the dtype the caller allocated (float32 for every input dtype on CUDA; the
 * input's dtype on the CPU in torch 2.14): the kernel writes whatever
 * outputs[1..2] say.
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * input/out contiguous float32, bfloat16 or float16 of one dtype; weight and
 * bias absent or contiguous with N elements (one float dtype for both); mean
 * and rstd contiguous with one element per row; FORGE_P_ROW, when nonzero,
 * equals N.
 * Two passes over the row cannot lose digits to cancellation when
 * |mean| >> std (E[x^2] - E[x]^2 would). NaN propagates to the row.
 *
 * Why it is fast: no allocation, no dispatcher, no thread wake-up; vector
 * loads of one ISA register (FORGE_P_ISA), FORGE_P_UNROLL independent
 * accumulators, tree horizontal reductions; FORGE_P_ROW = N makes every loop a
 * compile-time trip count (fully unrolled, the row stays in registers for
 * small N) - legal because the signature family fixes N.
 * Single-threaded (the worker refuses OpenMP runtimes).
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
#ifndef FORGE_P_UNROLL
#define FORGE_P_UNROLL 2 /* independent accumulators per pass: 1, 2, 4 */
#endif
#ifndef FORGE_P_ROW
#define FORGE_P_ROW 0 /* 0: row length read at run time; else the row length N, fixed at compile time */
#endif

#include "../_common/cpu_common.h"  // inlined when forge loads the template (docs/STRATEGIES.md)

constexpr int U = FORGE_P_UNROLL;
static_assert(U >= 1 && U <= 8, "FORGE_P_UNROLL must be 1..8");

#include "../_common/layer_norm_cpu_moments.h"  // row_moments: inlined when forge loads the template

// y = ((x - mean) * rstd) * w + b, the stock kernel's order of operations.
template <class T, class TW, bool HAS_W, bool HAS_B>
inline void ln_apply(const T* x, T* y, const TW* w, const TW* b, int64_t n_runtime, float mean, float rstd) {
  const int64_t N = FORGE_P_ROW ? FORGE_P_ROW : n_runtime;
  const vf mv = splat(mean), rv = splat(rstd);
  int64_t i = 0;
  for (; i + W <= N; i += W) {
    vf v = (load(x + i) - mv) * rv;
    if constexpr (HAS_W) v = v * load(w + i);
    if constexpr (HAS_B) v = v + load(b + i);
    store(y + i, v);
  }
  if (i < N) {
    const int64_t n = N - i;
    vf v = (load_part(x + i, n, T{}) - mv) * rv;
    if constexpr (HAS_W) v = v * load_part(w + i, n, TW{});
    if constexpr (HAS_B) v = v + load_part(b + i, n, TW{});
    store_part(y + i, v, n);
  }
}

#include "../_common/layer_norm_args.h"  // the call's fields, shared with the CUDA templates: inlined when forge loads the template

template <class T, class TW, class TS>
void ln_rows(const LnArgs& a) {
  const T* x = static_cast<const T*>(a.x);
  T* y = static_cast<T*>(a.y);
  const TW* w = static_cast<const TW*>(a.w);
  const TW* b = static_cast<const TW*>(a.b);
  TS* mean_out = static_cast<TS*>(a.mean);
  TS* rstd_out = static_cast<TS*>(a.rstd);
  for (int64_t r = 0; r < a.M; ++r) {
    float mean, rstd;
    row_moments<U>(x + r * a.N, a.N, a.eps, mean, rstd);
    if (mean_out) store1(mean_out + r, mean);
    if (rstd_out) store1(rstd_out + r, rstd);
    const T* xr = x + r * a.N;
    T* yr = y + r * a.N;
    if (w && b) ln_apply<T, TW, true, true>(xr, yr, w, b, a.N, mean, rstd);
    else if (w) ln_apply<T, TW, true, false>(xr, yr, w, b, a.N, mean, rstd);
    else if (b) ln_apply<T, TW, false, true>(xr, yr, w, b, a.N, mean, rstd);
    else ln_apply<T, TW, false, false>(xr, yr, w, b, a.N, mean, rstd);
  }
}

#include "../_common/layer_norm_cpu_entry.h"  // dispatch, argument checks and entry points: inlined when forge loads the template
