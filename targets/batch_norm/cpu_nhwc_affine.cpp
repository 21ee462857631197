/* batch_norm in inference, CPU strategy "nhwc_affine": channels-last inputs
 * (and [N, C]) with the channel as the vector dimension; NCHW inputs take the
 * per-plane path of plane_affine.
 *
 * Math (eval mode), per channel c in fp32:
 *   invstd = 1 / sqrt(running_var[c] + eps);  alpha = invstd * w[c];
 *   beta = b[c] - running_mean[c] * alpha  (one rounding);  y = fma(x, alpha, beta)
 * the stock CPU kernel's arithmetic bit for bit.
 * Op: aten::native_batch_norm(input, weight?, bias?, running_mean?,
 *     running_var?, training, momentum, eps) -> (out, save_mean, save_invstd),
 * training = False.
 * Shapes: input [N, C, *] channels-last (strides C*HW, 1, ..., C) or [N, C],
 * or NCHW-contiguous; out with the input's strides; save_mean/save_invstd
 * empty (CPU eval) or [C] (CUDA eval: running_mean, invstd).
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * training false; input/out of one float dtype with equal strides, NCHW- or
 * channels-last-contiguous; running stats present; weight/bias optional; all
 * parameters C contiguous elements of one float dtype.
 *
 * Why it is fast: in channels-last memory every pixel is a row of C channels,
 * so alpha[c] and beta[c] load as vectors beside x (FORGE_P_CHUNK channels of
 * terms on the stack, the rows streamed in memory order) instead of one
 * broadcast per tiny plane; BatchNorm1d's [N, C] is the same loop. One read
 * and one write, no allocation. Single-threaded.
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
#ifndef FORGE_P_STREAM
#define FORGE_P_STREAM 0 /* 1: NCHW float32 planes written with non-temporal stores (cpu_fma.h); channels-last rows as before */
#endif
#ifndef FORGE_P_CHUNK
#define FORGE_P_CHUNK 1024 /* channels whose terms are kept at once: 256, 1024, 4096 */
#endif
#define FORGE_NHWC 1 /* this strategy: channels-last (and [N, C]) fast path, NCHW too */

#include "../_common/cpu_common.h"  // inlined when forge loads the template (docs/STRATEGIES.md)

constexpr int CH = FORGE_P_CHUNK;
static_assert(CH >= 1 && CH <= 4096, "FORGE_P_CHUNK must be 1..4096");

#include "../_common/cpu_fma.h"  // fma with the stock kernel's single rounding, the affine plane pass: inlined when forge loads the template

#include "../_common/batch_norm_cpu_nchw.h"  // arguments, the stock per-channel terms and the NCHW pass: inlined when forge loads the template

// Channels-last: rows of C channels, terms for CH channels at a time.
template <class T, class TP>
void bn_nhwc(const BnArgs& a) {
  const T* x = static_cast<const T*>(a.x);
  T* y = static_cast<T*>(a.y);
  const int64_t pixels = a.N * a.HW;
  alignas(64) float alpha[CH + W], beta[CH + W];
  for (int64_t c0 = 0; c0 < a.C; c0 += CH) {
    const int64_t nc = a.C - c0 < CH ? a.C - c0 : CH;
    for (int64_t k = 0; k < nc; ++k) {
      float invstd;
      channel_terms<TP>(a, c0 + k, alpha[k], beta[k], invstd);
    }
    for (int64_t p = 0; p < pixels; ++p) {
      const T* xr = x + p * a.C + c0;
      T* yr = y + p * a.C + c0;
      int64_t k = 0;
      for (; k + W <= nc; k += W) store(yr + k, vfma(load(xr + k), load(alpha + k), load(beta + k)));
      if (k < nc)
        store_part(yr + k, vfma(load_part(xr + k, nc - k, T{}), load(alpha + k), load(beta + k)), nc - k);
    }
  }
}

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
  if (a.channels_last) bn_nhwc<T, TP>(a);
  else bn_nchw<T, TP>(a);
}

#include "../_common/batch_norm_cpu_entry.h"  // dispatch, argument checks and entry points: inlined when forge loads the template
