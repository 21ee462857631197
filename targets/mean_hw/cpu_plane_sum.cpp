/* mean over H x W (adaptive_avg_pool2d(x, 1)), CPU strategy "plane_sum": one
 * contiguous plane at a time, FORGE_P_UNROLL vector accumulators.
 *
 * Math: y[p] = (sum_{j < HW} x[p*HW + j]) / HW for every plane p (every
 * (n, c) of NCHW), accumulated in fp32 lanes, divided (not multiplied by a
 * reciprocal) like the stock kernel. More generally: the mean over the
 * trailing k dims of a contiguous tensor (dim = those dims in any order, or
 * None / [] = all dims).
 * Op: aten::mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *,
 *     ScalarType? dtype=None) -> Tensor; adaptive_avg_pool2d(x, 1) reaches it
 * as dim = [-1, -2], keepdim = True.
 * Shapes: self [N, C, H, W] (any rank); out [N, C, 1, 1] or [N, C].
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * self and out contiguous, float32/bfloat16/float16 (out may differ: dtype=),
 * the reduced dims are exactly the trailing ones, out has one element per
 * plane; FORGE_P_ROW, when nonzero, equals HW. NaN and inf propagate as in a
 * plain sum (+inf and -inf in one plane give NaN).
 *
 * Why it is fast: the stock kernel goes through TensorIterator's generic
 * reduction (set-up, a cascade sum, an output allocation); this is one loop
 * of vector adds at memory speed. FORGE_P_ROW = HW (fixed by the signature)
 * gives compile-time trip counts. Single-threaded.
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
#define FORGE_P_UNROLL 2 /* independent accumulators: 1, 2, 4 */
#endif
#ifndef FORGE_P_ROW
#define FORGE_P_ROW 0 /* 0: plane size read at run time; else HW, fixed at compile time */
#endif

#include "../_common/cpu_common.h"  // inlined when forge loads the template (docs/STRATEGIES.md)

constexpr int U = FORGE_P_UNROLL;
static_assert(U >= 1 && U <= 8, "FORGE_P_UNROLL must be 1..8");

template <class T, class TO>
void mean_planes(const T* x, TO* y, int64_t planes, int64_t hw_runtime) {
  const int64_t HW = FORGE_P_ROW ? FORGE_P_ROW : hw_runtime;
  const float denom = static_cast<float>(HW);
  for (int64_t p = 0; p < planes; ++p) {
    const T* xp = x + p * HW;
    vf s[U];
    for (int u = 0; u < U; ++u) s[u] = splat(0.0f);
    int64_t i = 0;
    for (; i + U * W <= HW; i += U * W)
      for (int u = 0; u < U; ++u) s[u] += load(xp + i + u * W);
    for (; i + W <= HW; i += W) s[0] += load(xp + i);
    if (i < HW) s[0] += load_part(xp + i, HW - i, T{});
    for (int u = 1; u < U; ++u) s[0] += s[u];
    store1(y + p, hsum(s[0]) / denom);
  }
}

#include "../_common/mean_hw_cpu_entry.h"  // dispatch, argument checks and entry points: inlined when forge loads the template
