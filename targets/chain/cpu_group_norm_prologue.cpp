/* chain, CPU strategy "group_norm_prologue": pointwise ops, a group norm that
 * reads their result, pointwise ops after it (conv -> add bias -> sigmoid ->
 * GroupNorm), in one kernel: the prologue's result is never stored.
 *
 * forge generates the chain's part from the target (rules/search/
 * chain_strategies.h, norm_definition) and puts it where the FORGE_CHAIN line
 * stands: the inputs and how each is indexed at output element j
 * (CHAIN_INPUT_LIST; the norm's weight and bias per channel), chain_prologue
 * (the ops before the norm), the norm's sizes and eps (CHAIN_GN_*), which
 * inputs are its weight and bias (CHAIN_GN_W/B, -1: none) and chain_finish
 * (the norm's result r rounded as stock stores it, then the ops after it).
 * Without it (this file alone) the chain is relu -> GroupNorm(2, 8) on [2, 8, 15].
 *
 * Math: per sample n and group g, over the slice of C/G channels x HxW of the
 * prologue's values v (fp32, each op rounded where a 16-bit stock op stores):
 * mean = sum v / n, var = sum (v - mean)^2 / n (biased; both sums in fp32
 * vectors of 64 steps, added in double), rstd = 1/sqrt(var + eps); per
 * channel scale = rstd * w[c], bias = b[c] - scale * mean; r = v * scale +
 * bias, the stock group norm's arithmetic up to its roundings. The prologue is
 * computed three times (mean, variance, output) from its inputs, which a
 * slice of up to a few hundred KB keeps in cache between the passes.
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * the inputs and output as generated (chain_checks.h), every tensor's sizes
 * exactly the captured ones. Single-threaded.
 */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "forge_kernel.h"

#include "../_common/chain_checks.h"  // CHAIN_FULL/BCAST/VALUE and the call's checks (host code, before the ISA region)

#pragma GCC diagnostic ignored "-Wpsabi" /* vectors wider than the target ISA are fine: all inline */
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized" /* GCC 12 false positives inside the fp16 */
#pragma GCC diagnostic ignored "-Wuninitialized"      /* conversion intrinsics (_mm512_cvt*ph*) */

#ifndef FORGE_P_ISA
#define FORGE_P_ISA 0 /* 0: as compiled (-march); 2: AVX2 paths; 3: AVX-512 paths (run-time checked) */
#endif

#include "../_common/cpu_common.h"  // inlined when forge loads the template (docs/STRATEGIES.md)
#include "../_common/pointwise_cpu_math.h"  // pw_k, pw_sel, pw_exp, ... on vf
// gelu as 1 + erf, as stock's vector path (pointwise_ops.h): chains' derived
// families set compare_float64 (rules/evaluate/family.cpp).
#define PW_GELU_ERF 1
#include "../_common/pointwise_ops.h"  // the op table: pw_op_unary, pw_op_binary

#define CHAIN_F32 float
#define CHAIN_BF16 bf16
#define CHAIN_F16 f16

// FORGE_CHAIN (forge replaces this line with the generated chain)
#ifndef CHAIN_INPUTS  // the template alone: relu(x) -> group norm (2 groups) with weight and bias
#define CHAIN_INPUTS 3
#define CHAIN_Y CHAIN_F32
#define CHAIN_Y_DTYPE FORGE_FLOAT32
constexpr int64_t kChainNumel = 240;
#define CHAIN_INPUT_LIST(X)                                 \
  X(0, CHAIN_F32, FORGE_FLOAT32, CHAIN_FULL, 1, 240, 1, 1) \
  X(1, CHAIN_F32, FORGE_FLOAT32, CHAIN_BCAST, 15, 8, 1, 1) \
  X(2, CHAIN_F32, FORGE_FLOAT32, CHAIN_BCAST, 15, 8, 1, 1)
#define CHAIN_GN_N 2LL
#define CHAIN_GN_C 8LL
#define CHAIN_GN_HW 15LL
#define CHAIN_GN_G 2LL
#define CHAIN_GN_EPS 1e-5f
#define CHAIN_GN_W 1
#define CHAIN_GN_B 2
template <class V>
PW_FN V chain_prologue(const V* in) {
  const PwScalars none{0.0f, 0.0f, 0.0f, 0, 0, 0};
  return pw_op_unary<PW_relu>(in[0], none);
}
template <class V>
PW_FN V chain_finish(const V*, V r) {
  return r;
}
inline bool chain_shapes_ok(const forge_call* call) {
  static const int64_t x[] = {2, 8, 3, 5}, c[] = {8};
  return chain_sizes_are(call->outputs[0], x, 4) && chain_sizes_are(call->inputs[0], x, 4) &&
         chain_sizes_are(call->inputs[1], c, 1) && chain_sizes_are(call->inputs[2], c, 1);
}
#endif
#include "../_common/chain_cpu_inputs.h"  // ChainPtrs, chain_lanes, CHAIN_CHECK

static_assert(CHAIN_GN_N * CHAIN_GN_C * CHAIN_GN_HW == kChainNumel, "the norm's sizes are the output's");
static_assert(CHAIN_GN_G > 0 && CHAIN_GN_C % CHAIN_GN_G == 0, "C divisible by the group count");

#define CHAIN_LOAD(k, T, DT, MODE, INNER, NN, INNER2, NN2) in[k] = chain_lanes<k, T, MODE>(p, j, m, INNER, NN, INNER2, NN2);

// The chain's inputs at output elements j .. j+m-1 (m <= W).
struct Lanes {
  vf in[CHAIN_INPUTS];
  Lanes(const ChainPtrs& p, int64_t j, int64_t m) { CHAIN_INPUT_LIST(CHAIN_LOAD) }
};

// The sum over [from, from + n) of f(v), v the prologue's values: fp32 vector
// sums of up to 64 vectors each, added in double, so the error does not grow
// with the slice (a 3D conv's group has tens of thousands of elements).
template <class F>
inline double slice_sum(const ChainPtrs& p, int64_t from, int64_t n, F f) {
  double total = 0.0;
  int64_t i = 0;
  while (i < n) {
    vf acc = splat(0.0f);
    const int64_t stop = n - i > 64 * W ? i + 64 * W : n;
    for (; i + W <= stop; i += W) acc += f(chain_prologue<vf>(Lanes(p, from + i, W).in));
    if (i < stop) {
      const vf d = f(chain_prologue<vf>(Lanes(p, from + i, stop - i).in));
      acc += iota() < static_cast<int32_t>(stop - i) ? d : splat(0.0f);
      i = stop;
    }
    total += static_cast<double>(hsum(acc));
  }
  return total;
}

__attribute__((noinline)) int chain_run(const ChainPtrs& p) {
  CHAIN_Y* y = static_cast<CHAIN_Y*>(p.y);
  constexpr int64_t n = CHAIN_GN_C / CHAIN_GN_G * CHAIN_GN_HW;  // a (sample, group) slice, contiguous
  for (int64_t s = 0; s < CHAIN_GN_N * CHAIN_GN_G; ++s) {
    const int64_t off = s * n;
    const float mean = static_cast<float>(slice_sum(p, off, n, [](vf v) { return v; }) / static_cast<double>(n));
    const vf mv = splat(mean);
    const double var = slice_sum(p, off, n, [mv](vf v) { return (v - mv) * (v - mv); }) / static_cast<double>(n);
    const float rstd = static_cast<float>(1.0 / sqrt(var + static_cast<double>(CHAIN_GN_EPS)));  // NaN stays NaN
    // The slice's lanes in order; a lane's weight and bias are its channel's
    // (chain_lanes splats them within one channel, gathers across a boundary).
    for (int64_t i = 0; i < n; i += W) {
      const int64_t m = n - i < W ? n - i : W;
      Lanes l(p, off + i, m);
      const vf v = chain_prologue<vf>(l.in);
#if CHAIN_GN_W >= 0
      const vf scale = splat(rstd) * l.in[CHAIN_GN_W];
#else
      const vf scale = splat(rstd);
#endif
#if CHAIN_GN_B >= 0
      const vf bias = l.in[CHAIN_GN_B] - scale * splat(mean);
#else
      const vf bias = splat(0.0f) - scale * splat(mean);
#endif
      const vf r = chain_finish<vf>(l.in, v * scale + bias);
      if (m == W) store(y + off + i, r);
      else store_part(y + off + i, r, m);
    }
  }
  return 0;
}

#include "../_common/cpu_checks.h"  // the ISA region ends; cpu_ok and the host-side tensor checks

#include "../_common/chain_cpu_entry.h"  // forge_kernel: the call's checks, then chain_run
