/* softmax, CPU strategy "online_2pass": one read computes max and sum together
 * (online softmax), a second read writes the result.
 *
 * Math: for every row r of the last dim (length L), with running per-lane
 * (m, s): for each chunk of FORGE_P_CHUNK vectors c,
 *   m' = max(m, max(c));  s = s * exp(m - m') + sum exp(c - m');  m = m'
 * then the lanes are merged (M = max m_l, S = sum s_l * exp(m_l - M)) and
 *   y[r,j] = exp(x[r,j] - M) * (1/S),
 * all in fp32 whatever the storage dtype (float32, bfloat16, float16).
 * Op: aten::_softmax(Tensor self, int dim, bool half_to_float) -> Tensor.
 * Shapes: any rank >= 1, dim == the last dim, any row count and row length.
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * one input and one output of dtype float32/bfloat16/float16 with equal sizes,
 * both contiguous, dim wrapping to the last dim.
 * Non-finite values follow the stock CPU kernel: an all -inf row gives NaN, a
 * +inf or NaN makes the row NaN. The online update is guarded so that a lane
 * that has only seen -inf (a masked row: every other element -inf) keeps
 * s = 0 instead of NaN from (-inf) - (-inf).
 *
 * Why it is fast: the input is read twice and the output written once (the
 * three-pass strategy also re-reads and re-writes the output): it pays off
 * when a row does not fit in L2; exp runs (1 + 1/CHUNK) times per element in
 * the first pass, once in the second. Vector exp and loads as in rows_3pass (one ISA register per vector, FORGE_P_ISA).
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
#ifndef FORGE_P_CHUNK
#define FORGE_P_CHUNK 4 /* vectors per rescale of the running sum: 1, 2, 4, 8 */
#endif

#include "../_common/cpu_common.h"  // inlined when forge loads the template (docs/STRATEGIES.md)
#include "../_common/softmax_op.h"  // SM_LOG: softmax or log_softmax (FORGE_P_OP)

constexpr int K = FORGE_P_CHUNK;
static_assert(K >= 1 && K <= 16, "FORGE_P_CHUNK must be 1..16");

// One chunk of k vectors folded into the running (m, s).
inline void online_update(vf& m, vf& s, const vf* c, int k) {
  vf cm = c[0];
  for (int j = 1; j < k; ++j) cm = vmax(cm, c[j]);
  vf mn = vmax(m, cm);
  vi dead = mn == splat(-INFINITY);  // this lane has seen only -inf so far
  vf scale = vexp(m - mn);
  vf add = splat(0.0f);
  for (int j = 0; j < k; ++j) add += vexp(c[j] - mn);
  s = dead ? s : s * scale + add;
  m = mn;
}

template <class TI, class TO>
void softmax_row(const TI* x, TO* y, int64_t L) {
  const TI ninf = neg_inf<TI>();
  vf m = splat(-INFINITY), s = splat(0.0f);
  vf c[K];
  int64_t i = 0;
  for (; i + K * W <= L; i += K * W) {
    for (int j = 0; j < K; ++j) c[j] = load(x + i + j * W);
    online_update(m, s, c, K);
  }
  int k = 0;
  for (; i + W <= L; i += W) c[k++] = load(x + i);
  if (i < L) c[k++] = load_part(x + i, L - i, ninf);
  if (k) online_update(m, s, c, k);
  // Merge the lanes.
  float M = hmax(m);
  float S = 0.0f;
  for (int l = 0; l < W; ++l)
    if (m[l] != -INFINITY) S += s[l] * expf(m[l] - M);
    else S += s[l];  // 0, or NaN when a NaN was seen
  // An all -inf row: the stock kernel gives NaN.
  const float inv = M == -INFINITY ? NAN : 1.0f / S;
  const vf Mv = splat(M), iv = splat(inv);
  i = 0;
  if constexpr (SM_LOG) {  // (x - M) - log S; an all -inf row: -inf - -inf = NaN, as stock
    const vf logS = splat(logf(S));
    for (; i + W <= L; i += W) store(y + i, (load(x + i) - Mv) - logS);
    if (i < L) store_part(y + i, (load_part(x + i, L - i, ninf) - Mv) - logS, L - i);
    return;
  }
  for (; i + W <= L; i += W) store(y + i, vexp(load(x + i) - Mv) * iv);
  if (i < L) store_part(y + i, vexp(load_part(x + i, L - i, ninf) - Mv) * iv, L - i);
}

template <class TI, class TO>
__attribute__((noinline)) void softmax_rows(const void* x, void* y, int64_t rows, int64_t L) {
  const TI* xi = static_cast<const TI*>(x);
  TO* yo = static_cast<TO*>(y);
  for (int64_t r = 0; r < rows; ++r) softmax_row(xi + r * L, yo + r * L, L);
}

#include "../_common/softmax_cpu_entry.h"  // dispatch, argument checks and entry points: inlined when forge loads the template
