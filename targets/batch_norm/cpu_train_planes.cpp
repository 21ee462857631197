/* batch_norm in training mode, CPU strategy "train_planes": per channel the
 * batch statistics over every sample's (n, c) plane, then the affine pass,
 * then the running statistics the call updates.
 *
 * Math, per channel c over the M = N * HW values x of the channel, as the
 * stock CPU kernel (batch_norm_cpu_collect_stats_contiguous and the shared
 * affine pass), so that it matches bit for bit where the stock result
 * cancels (|x * alpha| >> |y|):
 *   mean = fp32(sum(x) / M)   (the sum in double, the mean rounded to fp32)
 *   squares = fp32(sum(fp32((x - mean)^2)))   (each term in fp32, the sum in double)
 *   save_mean = mean;  save_invstd = fp32(1 / sqrt(double(squares / M) + eps))
 *     (squares / M in fp32; 0 when that and eps are both 0)
 *   alpha = save_invstd * w[c];  beta = b[c] - mean * alpha (one rounding);  y = fma(x, alpha, beta)
 *   running_mean' = momentum * mean + (1 - momentum) * running_mean
 *   running_var'  = momentum * (squares / (M - 1)) + (1 - momentum) * running_var
 *     (squares / (M - 1) in fp32, the rest in double)
 * A [N, C] input (HW = 1: BatchNorm1d) takes the stock kernel's channels-last
 * statistics instead: sum and squares accumulated in fp32, row after row,
 * per channel (as stock on one thread; on several, stock's own result
 * depends on how its rows are split).
 * Op: aten::native_batch_norm(input, weight?, bias?, running_mean?,
 *     running_var?, training=True, momentum, eps) -> (out, save_mean,
 *     save_invstd); the new running statistics are outputs 3 and 4
 *     (_common/batch_norm_train_parse.h). Instance norm reaches the same op
 *     on [1, N*C, *] without running statistics.
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * training true; input/out NCHW-contiguous float32; weight, bias and the
 * running statistics optional (the statistics together), C contiguous float32
 * elements; save_* C float32 elements. (The stock kernel's 16-bit path sums
 * in fp32 vectors and, with 16-bit parameters, forms alpha and beta in 16-bit
 * arithmetic: not reproduced here.)
 *
 * Why it is fast: the stock kernel sums the squared deviations one scalar at a
 * time; here both statistics passes run in double vectors (FORGE_P_UNROLL
 * independent accumulators), the second and the affine pass over a channel
 * find its planes in cache when they fit, and nothing is allocated.
 * Single-threaded.
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
#define FORGE_P_UNROLL 2 /* independent double accumulators per statistics pass: 1, 2, 4 */
#endif

#include "../_common/cpu_common.h"  // inlined when forge loads the template (docs/STRATEGIES.md)
#include "../_common/cpu_double_lanes.h"  // vd, widen, narrow, dsum: inlined when forge loads the template

constexpr int U = FORGE_P_UNROLL;
static_assert(U == 1 || U == 2 || U == 4, "FORGE_P_UNROLL must be 1, 2 or 4");

#include "../_common/cpu_fma.h"  // fma with the stock kernel's single rounding, the affine plane pass: inlined when forge loads the template

#include "../_common/batch_norm_train_args.h"  // the call's fields, shared with the CUDA templates

// sum(x) over one plane, in double lanes.
inline double plane_sum(const float* x, int64_t hw) {
  vd acc[U];
  for (int u = 0; u < U; ++u) acc[u] = vd{};
  int64_t i = 0;
  for (; i + U * W <= hw; i += U * W)
    for (int u = 0; u < U; ++u) acc[u] += widen(load(x + i + u * W));
  for (; i + W <= hw; i += W) acc[0] += widen(load(x + i));
  if (i < hw) acc[0] += widen(load_part(x + i, hw - i, 0.0f));
  for (int u = 1; u < U; ++u) acc[0] += acc[u];
  return dsum(acc[0]);
}

// sum((x - mean)^2) over one plane, each term in fp32 and the sum in double
// lanes; the tail's padding lanes are left out (a zero there adds mean^2).
inline double plane_squares(const float* x, int64_t hw, float mean) {
  const vf m = splat(mean);
  vd acc[U];
  for (int u = 0; u < U; ++u) acc[u] = vd{};
  int64_t i = 0;
  for (; i + U * W <= hw; i += U * W)
    for (int u = 0; u < U; ++u) {
      const vf d = load(x + i + u * W) - m;
      acc[u] += widen(d * d);
    }
  for (; i + W <= hw; i += W) {
    const vf d = load(x + i) - m;
    acc[0] += widen(d * d);
  }
  double s = 0;
  for (; i < hw; ++i) {
    const float d = x[i] - mean;
    s += static_cast<double>(d * d);
  }
  for (int u = 1; u < U; ++u) acc[0] += acc[u];
  return dsum(acc[0]) + s;
}

// Channel c's terms from its statistics; its running statistics updated.
inline void finish_channel(const BnTrainArgs& a, int64_t c, float mean, float squares, float& alpha, float& beta) {
  const int64_t count = a.N * a.HW;
  const float var = squares / static_cast<float>(count);
  const float invstd = var != 0 || a.eps != 0 ? static_cast<float>(1.0 / sqrt(static_cast<double>(var) + a.eps)) : 0.0f;
  static_cast<float*>(a.save_mean)[c] = mean;
  static_cast<float*>(a.save_invstd)[c] = invstd;
  const float* w = static_cast<const float*>(a.w);
  const float* b = static_cast<const float*>(a.b);
  alpha = w ? invstd * w[c] : invstd;
  beta = sfma(-mean, alpha, b ? b[c] : 0.0f);
  if (a.rm) {
    const float* rm = static_cast<const float*>(a.rm);
    const float* rv = static_cast<const float*>(a.rv);
    static_cast<float*>(a.new_rm)[c] = static_cast<float>(a.momentum * mean + (1 - a.momentum) * rm[c]);
    static_cast<float*>(a.new_rv)[c] =
        static_cast<float>(a.momentum * (squares / static_cast<float>(count - 1)) + (1 - a.momentum) * rv[c]);
  }
}

// [N, C]: rows of C channels, the statistics of W channels at a time in fp32
// vectors, row after row (stock's order), then the rows' affine pass.
__attribute__((noinline)) void bn_train_rows(const BnTrainArgs& a) {
  const float* x = static_cast<const float*>(a.x);
  float* y = static_cast<float*>(a.y);
  const int64_t C = a.C;
  for (int64_t c0 = 0; c0 < C; c0 += W) {
    const int64_t nc = C - c0 < W ? C - c0 : W;
    vf sum = vf{};
    for (int64_t n = 0; n < a.N; ++n) sum += load_part(x + n * C + c0, nc, 0.0f);
    vf mean;
    for (int k = 0; k < W; ++k) mean[k] = static_cast<float>(static_cast<double>(sum[k]) / static_cast<double>(a.N));
    vf sq = vf{};
    for (int64_t n = 0; n < a.N; ++n) {
      const vf d = load_part(x + n * C + c0, nc, 0.0f) - mean;
      sq += d * d;
    }
    alignas(64) float alpha[W], beta[W];
    for (int64_t k = 0; k < nc; ++k) finish_channel(a, c0 + k, mean[k], sq[k], alpha[k], beta[k]);
    for (int64_t k = nc; k < W; ++k) alpha[k] = beta[k] = 0.0f;
    const vf av = load(alpha), bv = load(beta);
    for (int64_t n = 0; n < a.N; ++n)
      store_part(y + n * C + c0, vfma(load_part(x + n * C + c0, nc, 0.0f), av, bv), nc);
  }
}

__attribute__((noinline)) void bn_train(const BnTrainArgs& a) {
  const float* x = static_cast<const float*>(a.x);
  float* y = static_cast<float*>(a.y);
  const double M = static_cast<double>(a.N) * static_cast<double>(a.HW);
  const int64_t plane = a.HW, step = a.C * a.HW;
  for (int64_t c = 0; c < a.C; ++c) {
    const float* xc = x + c * plane;
    double sum = 0;
    for (int64_t n = 0; n < a.N; ++n) sum += plane_sum(xc + n * step, plane);
    const float mean = static_cast<float>(sum / M);
    double squares = 0;
    for (int64_t n = 0; n < a.N; ++n) squares += plane_squares(xc + n * step, plane, mean);
    float alpha, beta;
    finish_channel(a, c, mean, static_cast<float>(squares), alpha, beta);
    for (int64_t n = 0; n < a.N; ++n) apply_plane(xc + n * step, y + c * plane + n * step, plane, alpha, beta);
  }
}

#include "../_common/cpu_checks.h"  // the ISA region ends; cpu_ok and the host-side tensor checks

#include "../_common/batch_norm_train_parse.h"  // the call's checks, shared with the CUDA templates

extern "C" int forge_kernel(const forge_call* call) {
  BnTrainArgs a;
  if (parse_batch_norm_train(call, a) || !cpu_ok()) return 1;
  if (a.x_dtype != FORGE_FLOAT32 || a.p_dtype != FORGE_FLOAT32 || a.s_dtype != FORGE_FLOAT32) return 1;
  if (a.HW == 1) bn_train_rows(a);
  else bn_train(a);
  return 0;
}
