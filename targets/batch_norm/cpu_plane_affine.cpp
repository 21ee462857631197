/* batch_norm in inference, CPU strategy "plane_affine": per-channel affine
 * terms from the running statistics, then y = x * alpha[c] + beta[c] over
 * every contiguous (n, c) plane.
 *
 * Math (eval mode: the running statistics, nothing updated), per channel c in fp32:
 *   invstd = 1 / sqrt(running_var[c] + eps);  alpha = invstd * w[c];
 *   beta = b[c] - running_mean[c] * alpha  (one rounding);  y = fma(x, alpha, beta)
 * which is the stock CPU kernel's arithmetic bit for bit (measured: with a
 * fused multiply-add for beta and y, 100% identical; without, 67-86%; where
 * x * alpha + beta cancels the difference is large relative to y).
 * Op: aten::native_batch_norm(Tensor input, Tensor? weight, Tensor? bias,
 *     Tensor? running_mean, Tensor? running_var, bool training, float momentum,
 *     float eps) -> (out, save_mean, save_invstd), training = False.
 * Shapes: input [N, C, *]; out like input; save_mean and save_invstd are
 * empty ([0]) from the stock CPU kernel in eval mode and [C] (running_mean,
 * invstd; fp32) from the CUDA one: the kernel fills whichever it is given.
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * training false; input/out NCHW-contiguous float32/bfloat16/float16 of one
 * dtype; running_mean and running_var present, weight and bias optional, all
 * with C contiguous elements of one float dtype.
 *
 * Why it is fast: one read and one write at memory speed; the per-channel
 * terms of FORGE_P_CHUNK channels are computed once and kept on the stack
 * while every sample's planes of those channels stream through in memory
 * order; the stock kernel also allocates its output and two alpha/beta
 * tensors per call. Vector loads of one ISA register (FORGE_P_ISA), masked
 * tails. Single-threaded.
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
#define FORGE_P_CHUNK 256 /* channels whose terms are computed at once: 16, 64, 256, 1024 */
#endif
#ifndef FORGE_P_STREAM
#define FORGE_P_STREAM 0 /* 1: float32 planes written with non-temporal stores (no read for ownership; cpu_fma.h) */
#endif
#define FORGE_NHWC 0 /* this strategy: NCHW only */

#include "../_common/cpu_common.h"  // inlined when forge loads the template (docs/STRATEGIES.md)

constexpr int CH = FORGE_P_CHUNK;
static_assert(CH >= 1 && CH <= 4096, "FORGE_P_CHUNK must be 1..4096");

#include "../_common/cpu_fma.h"  // fma with the stock kernel's single rounding, the affine plane pass: inlined when forge loads the template

#include "../_common/batch_norm_cpu_nchw.h"  // arguments, the stock per-channel terms and the NCHW pass: inlined when forge loads the template

// save_mean / save_invstd: empty on the CPU in eval mode; C elements
// (running_mean, rsqrt(running_var + eps)) on CUDA in eval mode.
template <class TP, class TS>
void bn_save(const BnArgs& a) {
  if (!a.save_mean) return;
  TS* sm = static_cast<TS*>(a.save_mean);
  TS* si = static_cast<TS*>(a.save_invstd);
  for (int64_t c = 0; c < a.C; ++c) {
    float alpha, beta, invstd;
    channel_terms<TP>(a, c, alpha, beta, invstd);
    store1(sm + c, to_f32(static_cast<const TP*>(a.rm)[c]));
    store1(si + c, invstd);
  }
}

template <class T, class TP, class TS>
void bn_typed(const BnArgs& a) {
  bn_save<TP, TS>(a);
  bn_nchw<T, TP>(a);
}

#include "../_common/batch_norm_cpu_entry.h"  // dispatch, argument checks and entry points: inlined when forge loads the template
