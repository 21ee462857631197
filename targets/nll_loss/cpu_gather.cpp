/* nll_loss, CPU strategy "gather": nll_loss_forward with reduction mean or sum
 * and no class weights (cross entropy's second op).
 *
 * Math: over rows i whose target t_i is not ignore_index, loss = sum of
 * -x[i, t_i] and total = their count; output = loss / total (mean) or loss
 * (sum), total_weight = total. Sums in double.
 * Ops: aten::nll_loss_forward; log-probabilities float32/bfloat16/float16,
 * int64 targets.
 * Shapes: [N, C] with [N] targets, or [C] with a 0-dim target.
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * nll_loss_parse.h's (contiguous, no weight, reduction mean or sum), and every
 * target in [0, C) or ignore_index (stock raises otherwise; so does the
 * fallback), checked before anything is written.
 *
 * Why it is fast: one pass over the targets with UNROLL independent sums; no
 * TensorIterator, no thread wake-up.
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
#ifndef FORGE_P_UNROLL
#define FORGE_P_UNROLL 4 /* independent sums: 1..8 */
#endif

#include "../_common/cpu_common.h"  // inlined when forge loads the template (docs/STRATEGIES.md)

#include "../_common/nll_loss_args.h"  // NllArgs

constexpr int U = FORGE_P_UNROLL;
static_assert(U >= 1 && U <= 8, "FORGE_P_UNROLL must be 1..8");

template <class T>
__attribute__((noinline)) int nll_run(const NllArgs& a) {
  const T* x = static_cast<const T*>(a.x);
  double loss[U] = {}, count[U] = {};
  for (int64_t i0 = 0; i0 < a.N; i0 += U)
    for (int u = 0; u < U && i0 + u < a.N; ++u) {
      const int64_t i = i0 + u, t = a.t[i];
      if (t == a.ignore) continue;
      if (t < 0 || t >= a.C) return 1;
      loss[u] -= to_f32(x[i * a.C + t]);
      count[u] += 1.0;
    }
  for (int u = 1; u < U; ++u) loss[0] += loss[u], count[0] += count[u];
  const float out = static_cast<float>(a.mean ? loss[0] / count[0] : loss[0]);
  store1(static_cast<T*>(a.y), out);
  store1(static_cast<T*>(a.total), static_cast<float>(count[0]));
  return 0;
}

__attribute__((noinline)) int nll_dispatch(const NllArgs& a) {
  return with_dtype(a.dtype, [&](auto t) { return nll_run<decltype(t)>(a); });
}

#include "../_common/cpu_checks.h"  // the ISA region ends; cpu_ok and the host-side tensor checks

#include "../_common/nll_loss_parse.h"  // the call's checks, shared with the CUDA template

extern "C" int forge_kernel(const forge_call* call) {
  NllArgs a;
  if (parse_nll(call, a) || !cpu_ok()) return 1;
  return nll_dispatch(a);
}
