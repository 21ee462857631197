/* group_norm, CPU strategy "two_pass": per (sample, group) statistics over the
 * group's contiguous slice of C/G channels x HxW, then a per-channel affine pass.
 *
 * Math: for sample n, group g, the slice s = x[n, g*D:(g+1)*D, :] (D = C/G,
 * D*HxW elements), in fp32, K = the slice's first element:
 *   mean = K + sum (s - K) / (D*HxW);  var (biased) as below;
 *   rstd = 1 / sqrt(max(var, 0) + eps);
 *   per channel c: scale = rstd * w[c], bias = fma(-scale, mean, b[c]);
 *   y = fma(x, scale, bias)
 * which is the stock CPU kernel's arithmetic (its outputs are reproduced bit
 * for bit given the same mean and rstd). var = sum (s - mean)^2 / (D*HxW): a second read of
 * the slice, exact even when |mean| >> std.
 * Op: aten::native_group_norm(Tensor input, Tensor? weight, Tensor? bias,
 *     SymInt N, SymInt C, SymInt HxW, int group, float eps) -> (out, mean, rstd).
 * Shapes: input [N, C, *] with prod(*) = HxW; out like input; mean and rstd
 * [N, G] in the dtype the caller allocated (outputs[1..2]: the input's dtype
 * in torch 2.14 on both backends).
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * input/out contiguous (NCHW) float32, bfloat16 or float16 of one dtype, with
 * N*C*HxW elements; C divisible by group; weight and bias absent or
 * contiguous with C elements (one float dtype); mean and rstd contiguous with
 * N*G elements. NaN propagates to the group.
 *
 * Why it is fast: one call, no allocation, no dispatcher, no thread wake-up;
 * the whole (n, g) slice (16 KB for GroupNorm(8, 32) on 32x32 fp32) stays in
 * L1/L2 between the passes; vector loads of one ISA register (FORGE_P_ISA)
 * with FORGE_P_UNROLL independent accumulators. Single-threaded.
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

#include "../_common/cpu_common.h"  // inlined when forge loads the template (docs/STRATEGIES.md)
#include "../_common/pointwise_cpu_math.h"  // a chain's epilogue (chain_epilogue.h): the pointwise math
#include "../_common/pointwise_ops.h"  // and its op table

// FORGE_CHAIN (forge replaces this line with the generated chain)

constexpr int U = FORGE_P_UNROLL;
static_assert(U >= 1 && U <= 8, "FORGE_P_UNROLL must be 1..8");

inline vi lane_index() {
  vi v;
  for (int k = 0; k < W; ++k) v[k] = k;
  return v;
}

#include "../_common/cpu_fma.h"  // fma with the stock kernel's single rounding, the affine plane pass: inlined when forge loads the template

// mean and rstd of n contiguous elements: shifted sum, then centered squares.
template <class T>
inline void slice_moments(const T* x, int64_t n, float eps, float& mean, float& rstd) {
  const float K = to_f32(x[0]);
  const vf kv = splat(K);
  vf s[U];
  for (int u = 0; u < U; ++u) s[u] = splat(0.0f);
  int64_t i = 0;
  for (; i + U * W <= n; i += U * W)
    for (int u = 0; u < U; ++u) s[u] += load(x + i + u * W) - kv;
  for (; i + W <= n; i += W) s[0] += load(x + i) - kv;
  if (i < n) {
    vf d = load_part(x + i, n - i, T{}) - kv;
    s[0] += lane_index() < static_cast<int32_t>(n - i) ? d : splat(0.0f);
  }
  for (int u = 1; u < U; ++u) s[0] += s[u];
  mean = K + hsum(s[0]) / static_cast<float>(n);

  const vf mv = splat(mean);
  vf q[U];
  for (int u = 0; u < U; ++u) q[u] = splat(0.0f);
  i = 0;
  for (; i + U * W <= n; i += U * W)
    for (int u = 0; u < U; ++u) {
      vf d = load(x + i + u * W) - mv;
      q[u] += d * d;
    }
  for (; i + W <= n; i += W) {
    vf d = load(x + i) - mv;
    q[0] += d * d;
  }
  if (i < n) {
    vf d = load_part(x + i, n - i, T{}) - mv;
    d = lane_index() < static_cast<int32_t>(n - i) ? d : splat(0.0f);
    q[0] += d * d;
  }
  for (int u = 1; u < U; ++u) q[0] += q[u];
  const float var = hsum(q[0]) / static_cast<float>(n);
  rstd = 1.0f / sqrtf((var > 0.0f ? var : 0.0f) + eps);
  if (var != var) rstd = var;  // keep NaN
}

#include "../_common/group_norm_cpu_entry.h"  // the affine pass, dispatch, argument checks and entry points: inlined when forge loads the template
