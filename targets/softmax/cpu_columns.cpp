/* softmax, CPU strategy "columns": softmax or log_softmax over a dim that is
 * not the last (the middle dim of [N, C, H, W], dim 0 ...), read where the
 * data lies.
 *
 * Math: the input as [outer, L, inner] (softmax_columns_parse.h); for each
 * (o, i): M = max_r x[o, r, i]; S = sum_r exp(x[o, r, i] - M);
 * y = exp(x - M) / S, or log_softmax's (x - M) - log S; fp32 whatever the
 * storage dtypes (float32, bfloat16, float16, the output's may differ).
 * Op: aten::_softmax / _log_softmax(Tensor self, int dim, bool half_to_float).
 * Shapes: any rank, any dim (inner = 1 too), any extents.
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * 1 input, 1 output with equal sizes, both contiguous; dtypes float32,
 * bfloat16, float16. Non-finite values as stock: an all -inf column is NaN,
 * a NaN or +inf in a column makes the column NaN.
 *
 * Why it is fast: stock walks such a softmax element by element along the
 * strided dim; here FORGE_P_COLS vectors of neighbouring (o, i) columns are
 * carried together while the L rows stream past, three passes over a block of
 * L x COLS*W elements that stays in L1/L2 between them; vector exp inlined.
 * Single-threaded (the worker refuses OpenMP runtimes: docs/CANDIDATE_ABI.md).
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
#ifndef FORGE_P_COLS
#define FORGE_P_COLS 4 /* vectors of columns carried at once: 1, 2, 4, 8 */
#endif

#include "../_common/cpu_common.h"  // inlined when forge loads the template (docs/STRATEGIES.md)
#include "../_common/softmax_op.h"  // SM_LOG: softmax or log_softmax (FORGE_P_OP)
#include "../_common/softmax_columns_args.h"  // SoftmaxColumns: the call as [outer, L, inner]

constexpr int C = FORGE_P_COLS;
static_assert(C >= 1 && C <= 8, "FORGE_P_COLS must be 1..8");

// Columns [c0, c0 + cols) of one outer block (x, y at its first element).
template <class TI, class TO>
void columns(const TI* x, TO* y, int64_t L, int64_t inner, int64_t c0, int64_t cols) {
  const int nv = static_cast<int>((cols + W - 1) / W);
  const int64_t last_n = cols - static_cast<int64_t>(nv - 1) * W;
  const TI ninf = neg_inf<TI>();
  auto at = [&](int64_t r, int v) {
    const TI* p = x + r * inner + c0 + static_cast<int64_t>(v) * W;
    return v == nv - 1 && last_n < W ? load_part(p, last_n, ninf) : load(p);
  };
  vf m[C], s[C];
  for (int v = 0; v < nv; ++v) m[v] = splat(-INFINITY), s[v] = splat(0.0f);
  for (int64_t r = 0; r < L; ++r)
    for (int v = 0; v < nv; ++v) m[v] = vmax(m[v], at(r, v));  // a NaN is dropped here; the sum catches it
  for (int64_t r = 0; r < L; ++r)
    for (int v = 0; v < nv; ++v) s[v] += vexp(at(r, v) - m[v]);
  vf k[C];  // 1 / S, or log S
  for (int v = 0; v < nv; ++v) {
    if constexpr (SM_LOG) {  // (an op SM_LOG does not know does not compile)
      for (int l = 0; l < W; ++l) k[v][l] = logf(s[v][l]);
    } else {
      k[v] = splat(1.0f) / s[v];
    }
  }
  for (int64_t r = 0; r < L; ++r)
    for (int v = 0; v < nv; ++v) {
      const vf d = at(r, v) - m[v];  // an all -inf column: -inf - -inf = NaN, as stock
      const vf out = SM_LOG ? d - k[v] : vexp(d) * k[v];
      TO* p = y + r * inner + c0 + static_cast<int64_t>(v) * W;
      if (v == nv - 1 && last_n < W) store_part(p, out, last_n);
      else store(p, out);
    }
}

template <class TI, class TO>
__attribute__((noinline)) int softmax_columns(const SoftmaxColumns& a) {
  const TI* x = static_cast<const TI*>(a.x);
  TO* y = static_cast<TO*>(a.y);
  const int64_t block = a.L * a.inner;
  for (int64_t o = 0; o < a.outer; ++o)
    for (int64_t c0 = 0; c0 < a.inner; c0 += C * W)
      columns(x + o * block, y + o * block, a.L, a.inner, c0, a.inner - c0 < C * W ? a.inner - c0 : C * W);
  return 0;
}

__attribute__((noinline)) int softmax_columns_dispatch(const SoftmaxColumns& a) {
  return with_dtype(a.x_dtype, [&](auto ti) {
    return with_dtype(a.y_dtype, [&](auto to) { return softmax_columns<decltype(ti), decltype(to)>(a); });
  });
}

#include "../_common/cpu_checks.h"  // the ISA region ends; cpu_ok and the host-side tensor checks

#include "../_common/softmax_columns_parse.h"  // the call's checks, shared with the CUDA columns template

extern "C" int forge_kernel(const forge_call* call) {
  SoftmaxColumns a;
  if (parse_softmax_columns(call, a) || !cpu_ok()) return 1;
  if (a.outer == 0) return 0;
  return softmax_columns_dispatch(a);
}
