/* softmax, CPU strategy "rows_3pass": three vector passes per row, the row
 * staying in L1/L2 between them.
 *
 * Math: for every row r of the last dim (length L),
 *   M = max_j x[r,j];  e_j = exp(x[r,j] - M);  S = sum_j e_j;  y[r,j] = e_j * (1/S)
 * computed in fp32 whatever the storage dtype (float32, bfloat16, float16; the
 * output dtype may differ from the input's: _softmax's half_to_float).
 * Op: aten::_softmax(Tensor self, int dim, bool half_to_float) -> Tensor.
 * Shapes: any rank >= 1, dim == the last dim (after wrapping), any row count.
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 *   - 1 input, 1 output, scalars (dim, half_to_float); dim wraps to ndim-1;
 *   - input and output dtypes in {float32, bfloat16, float16}, same sizes;
 *   - both contiguous (row-major; size-1 dims may have any stride).
 * Non-finite values follow the stock CPU kernel: a row that is all -inf gives
 * NaN (max = -inf, then -inf - -inf), a +inf or NaN anywhere in a row makes the
 * whole row NaN (the sum becomes NaN).
 *
 * Why it is fast: one call, no allocation, no dispatcher, no thread wake-up;
 * the exp is an inlined polynomial over GCC vector extensions (one ISA register
 * per vector: 16 fp32 lanes with AVX-512, 8 with AVX2, 4 with SSE; FORGE_P_ISA), FORGE_P_UNROLL independent accumulators
 * hide the add/max latency. Pass 2 writes e_j into the fp32 output and pass 3
 * rescales it in place, so exp runs once per element; 16-bit outputs keep e in
 * a 16 KB fp32 stack buffer (rows up to 4096; longer rows recompute exp).
 * Single-threaded (the worker refuses OpenMP runtimes: docs/CANDIDATE_ABI.md).
 *
 * exp: x = n*ln2 + r with n = round(x*log2e) (Cody-Waite split of ln2), exp(r)
 * by a degree-7 Taylor polynomial on |r| <= ln2/2 (truncation 5e-9 relative),
 * 2^n built in two halves so n = 128 does not overflow the exponent field;
 * x > 88.72 gives +inf, x < -87 gives 0 (the true value is below 1.7e-38),
 * NaN stays NaN. About 2 ulp.
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
#define FORGE_P_UNROLL 2 /* independent vectors in flight per pass: 1, 2, 4 */
#endif

#include "../_common/cpu_common.h"  // inlined when forge loads the template (docs/STRATEGIES.md)
#include "../_common/softmax_op.h"  // SM_LOG: softmax or log_softmax (FORGE_P_OP)

constexpr int U = FORGE_P_UNROLL;
static_assert(U >= 1 && U <= 8, "FORGE_P_UNROLL must be 1..8");

constexpr int64_t ROWBUF = 4096;

template <class TI, class TO>
void softmax_row(const TI* x, TO* y, int64_t L, float* rowbuf) {
  const TI ninf = neg_inf<TI>();
  // Pass 1: the row max.
  vf m[U];
  for (int u = 0; u < U; ++u) m[u] = splat(-INFINITY);
  int64_t i = 0;
  for (; i + U * W <= L; i += U * W)
    for (int u = 0; u < U; ++u) m[u] = vmax(m[u], load(x + i + u * W));
  for (; i + W <= L; i += W) m[0] = vmax(m[0], load(x + i));
  if (i < L) m[0] = vmax(m[0], load_part(x + i, L - i, ninf));
  for (int u = 1; u < U; ++u) m[0] = vmax(m[0], m[u]);
  const vf M = splat(hmax(m[0]));

  // Pass 2: e = exp(x - M), summed and kept: in y when y is fp32, in an fp32
  // stack buffer for 16-bit outputs of rows up to ROWBUF, else recomputed.
  constexpr bool keep = sizeof(TO) == 4 && !SM_LOG;
  float* buf = keep ? nullptr : rowbuf;
  const bool buffered = !keep && !SM_LOG && L <= ROWBUF;
  vf s[U];
  for (int u = 0; u < U; ++u) s[u] = splat(0.0f);
  i = 0;
  for (; i + U * W <= L; i += U * W)
    for (int u = 0; u < U; ++u) {
      vf e = vexp(load(x + i + u * W) - M);
      if constexpr (keep) store(y + i + u * W, e);
      else if (buffered) store(buf + i + u * W, e);
      s[u] += e;
    }
  for (; i + W <= L; i += W) {
    vf e = vexp(load(x + i) - M);
    if constexpr (keep) store(y + i, e);
    else if (buffered) store(buf + i, e);
    s[0] += e;
  }
  if (i < L) {
    vf e = vexp(load_part(x + i, L - i, ninf) - M);  // padding: exp(-inf - M) = 0
    if constexpr (keep) store_part(y + i, e, L - i);
    else if (buffered) store_part(buf + i, e, L - i);
    s[0] += e;
  }
  for (int u = 1; u < U; ++u) s[0] += s[u];
  const float S = hsum(s[0]);
  const vf inv = splat(1.0f / S);

  // Pass 3: scale (log_softmax: (x - M) - log S from x; nothing kept).
  i = 0;
  if constexpr (SM_LOG) {
    const vf logS = splat(logf(S));
    for (; i + W <= L; i += W) store(y + i, (load(x + i) - M) - logS);
    if (i < L) store_part(y + i, (load_part(x + i, L - i, ninf) - M) - logS, L - i);
  } else if constexpr (keep) {
    for (; i + W <= L; i += W) store(y + i, load(y + i) * inv);
    if (i < L) store_part(y + i, load_part(y + i, L - i, TO{}) * inv, L - i);
  } else if (buffered) {
    for (; i + W <= L; i += W) store(y + i, load(buf + i) * inv);
    if (i < L) store_part(y + i, load_part(buf + i, L - i, 0.0f) * inv, L - i);
  } else {
    for (; i + W <= L; i += W) store(y + i, vexp(load(x + i) - M) * inv);
    if (i < L) store_part(y + i, vexp(load_part(x + i, L - i, ninf) - M) * inv, L - i);
  }
}

template <class TI, class TO>
__attribute__((noinline)) void softmax_rows(const void* x, void* y, int64_t rows, int64_t L) {
  const TI* xi = static_cast<const TI*>(x);
  TO* yo = static_cast<TO*>(y);
  alignas(64) float rowbuf[sizeof(TO) == 4 ? 1 : ROWBUF];  // 16 KB for 16-bit outputs
  for (int64_t r = 0; r < rows; ++r) softmax_row(xi + r * L, yo + r * L, L, rowbuf);
}

#include "../_common/softmax_cpu_entry.h"  // dispatch, argument checks and entry points: inlined when forge loads the template
