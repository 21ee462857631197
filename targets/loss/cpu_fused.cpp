/* loss, CPU strategy "fused": one pairwise loss of the table in
 * targets/_common/loss_ops.h (FORGE_P_OP: mse_loss, smooth_l1_loss,
 * huber_loss) with its reduction, in one pass.
 *
 * Math: each element's loss of (input, target) in fp32 (loss_ops.h), then
 * reduction 0 (the losses), 1 (their mean) or 2 (their sum), sums gathered in
 * double every 64 vector steps.
 * Ops: aten::mse_loss, smooth_l1_loss, huber_loss; float32/bfloat16/float16.
 * Shapes: any, input and target of one shape.
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * loss_parse.h's (contiguous, same-shape, non-empty input and target; beta
 * >= 0, delta > 0).
 *
 * Why it is fast: stock writes every element's loss to a temporary and reads
 * it back to reduce it; here the losses stay in registers (UNROLL independent
 * vector accumulators), so the inputs are read once and nothing is written.
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
#define FORGE_P_UNROLL 2 /* independent vector accumulators: 1..8 */
#endif

#include "../_common/cpu_common.h"  // inlined when forge loads the template (docs/STRATEGIES.md)
#include "../_common/loss_ops.h"    // the op table and loss_of

constexpr int U = FORGE_P_UNROLL;
static_assert(U >= 1 && U <= 8, "FORGE_P_UNROLL must be 1..8");
constexpr int64_t FLUSH = 64;  // vector steps between fp32 partial sums and the double total

template <class T, class TY>
__attribute__((noinline)) int loss_run(const LossArgs& a) {
  const T* x = static_cast<const T*>(a.x);
  const T* t = static_cast<const T*>(a.t);
  const int64_t n = a.n;
  if (a.reduction == 0) {
    TY* y = static_cast<TY*>(a.y);
    int64_t i = 0;
    for (; i + W <= n; i += W) store(y + i, loss_of(load(x + i), load(t + i), a.k));
    if (i < n) store_part(y + i, loss_of(load_part(x + i, n - i, T{}), load_part(t + i, n - i, T{}), a.k), n - i);
    return 0;
  }
  // Padding lanes hold input = target = 0: a loss of 0.
  double total = 0.0;
  int64_t i = 0;
  while (i < n) {
    vf acc[U];
    for (int u = 0; u < U; ++u) acc[u] = splat(0.0f);
    const int64_t end = n - i > FLUSH * U * W ? i + FLUSH * U * W : n;
    for (; i + U * W <= end; i += U * W)
      for (int u = 0; u < U; ++u) acc[u] += loss_of(load(x + i + u * W), load(t + i + u * W), a.k);
    for (; i + W <= end; i += W) acc[0] += loss_of(load(x + i), load(t + i), a.k);
    if (i < end) {
      acc[0] += loss_of(load_part(x + i, end - i, T{}), load_part(t + i, end - i, T{}), a.k);
      i = end;
    }
    for (int u = 1; u < U; ++u) acc[0] += acc[u];
    total += hsum(acc[0]);
  }
  if (a.reduction == 1) total /= static_cast<double>(n);
  store1(static_cast<TY*>(a.y), static_cast<float>(total));
  return 0;
}

__attribute__((noinline)) int loss_dispatch(const LossArgs& a) {
  return with_dtype(a.x_dtype, [&](auto t) {
    return with_dtype(a.y_dtype, [&](auto ty) { return loss_run<decltype(t), decltype(ty)>(a); });
  });
}

#include "../_common/cpu_checks.h"  // the ISA region ends; cpu_ok and the host-side tensor checks

#include "../_common/loss_parse.h"  // the call's checks, shared with the CUDA template

extern "C" int forge_kernel(const forge_call* call) {
  LossArgs a;
  if (parse_loss(call, a) || !cpu_ok()) return 1;
  return loss_dispatch(a);
}
