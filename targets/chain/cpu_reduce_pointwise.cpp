/* chain, CPU strategy "reduce_pointwise": pointwise ops around one reduction
 * over one dim with keepdim (x / mean(|x|, 1), x / norm(x, 2, 1),
 * x / sqrt(mean(x^2, 1) + eps)) or one softmax or log_softmax
 * (softmax(x * scale + mask) in float32, then a cast) in one pass over each
 * row or column: the reduced values never go to memory.
 *
 * forge generates the chain's part (rules/search/chain_strategies.h,
 * reduce_definition): the inputs (CHAIN_INPUT_LIST), the output viewed as
 * [kRedOuter, kRedN, kRedInner] with the reduction over kRedN, chain_pre,
 * chain_finish, CHAIN_RED_KIND and chain_out, as the CUDA template reads
 * them (cuda_reduce_pointwise.cu). Without it the chain is x / sum(x, 1) on
 * [8, 512].
 *
 * Math: fp32 whatever the storage dtypes; rows (kRedInner == 1) are summed
 * in W lanes then across them; columns in W neighbouring positions at once,
 * each in order over kRedN. The max propagates NaN as torch's amax does.
 * A softmax computes its row's values once into a buffer on the stack (rows
 * up to 16384 elements), then exp(x - max) there and their sum, then the
 * output: exp(x - max) / sum, or x - max - log(sum). Longer rows and
 * columns compute them in each of the three passes.
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * the inputs and output as generated (chain_checks.h), the ISA compiled for.
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
#include "../_common/chain_reduce_default.h"  // the template alone: y = x / sum(x, 1) on [8, 512]
#include "../_common/chain_cpu_inputs.h"  // ChainPtrs, chain_lanes, CHAIN_CHECK

static_assert(CHAIN_RED_KIND >= 0 && CHAIN_RED_KIND <= 3, "CHAIN_RED_KIND: 0 sum, 1 max, 2 softmax, 3 log_softmax");
constexpr bool kSoftmax = CHAIN_RED_KIND >= 2;
constexpr bool kMaxKind = CHAIN_RED_KIND != 0;  // the (first) reduction is a max
const float kRedInit = kMaxKind ? -INFINITY : 0.0f;

// Per lane: the max with NaN winning (b != b is a NaN lane), or the sum.
inline vf red_max(vf a, vf b) { return pw_sel((b > a) | (b != b), b, a); }
inline vf red_add(vf a, vf b) {
  if constexpr (kMaxKind) return red_max(a, b);
  else return a + b;
}
inline float lanes_max(vf v) {
  float lanes[W], r = -INFINITY;
  memcpy(lanes, &v, sizeof lanes);
  for (int e = 0; e < W; ++e) r = (lanes[e] > r || lanes[e] != lanes[e]) ? lanes[e] : r;
  return r;
}
// The softmax's result at x, given the max and the sum of exp(x - max) (lanes
// of positions, or one row's splat).
inline vf soft(vf x, vf max, vf sum) {
  if constexpr (CHAIN_RED_KIND == 2) {
    return pw_exp(x - max) / sum;
  } else {
    float s[W];
    memcpy(s, &sum, sizeof s);
    for (int e = 0; e < W; ++e) s[e] = logf(s[e]);
    vf log_sum;
    memcpy(&log_sum, s, sizeof s);
    return x - max - log_sum;
  }
}

#define CHAIN_LOAD(k, T, DT, MODE, INNER, NN, INNER2, NN2) in[k] = chain_lanes<k, T, MODE>(p, j, m, INNER, NN, INNER2, NN2);

inline vf pre_at(const ChainPtrs& p, int64_t j, int64_t m) {
  vf in[CHAIN_INPUTS];
  CHAIN_INPUT_LIST(CHAIN_LOAD)
  return chain_pre<vf>(in);
}
inline void out_at(const ChainPtrs& p, int64_t j, int64_t m, vf r) {
  vf in[CHAIN_INPUTS];
  CHAIN_INPUT_LIST(CHAIN_LOAD)
  CHAIN_Y* y = static_cast<CHAIN_Y*>(p.y) + j;
  if (m == W) store(y, chain_out<vf>(in, r));
  else store_part(y, chain_out<vf>(in, r), m);
}

// Softmax: the max, the sum of exp(x - max), then each element.
constexpr int64_t kHeldN = kRedN <= 16384 ? kRedN : 0;  // a row held on the stack
void softmax_held_row(const ChainPtrs& p, int64_t base, vf lane) {
  alignas(64) float buf[kHeldN + W];
  vf mx = splat(-INFINITY), sum = splat(0.0f);
  for (int64_t k = 0; k < kRedN; k += W) {
    const int64_t m = kRedN - k < W ? kRedN - k : W;
    const vf v = pw_sel(lane < splat(static_cast<float>(m)), pre_at(p, base + k, m), splat(-INFINITY));
    memcpy(buf + k, &v, sizeof v);
    mx = red_max(mx, v);
  }
  const vf row_max = splat(lanes_max(mx));
  for (int64_t k = 0; k < kRedN; k += W) {
    vf v;
    memcpy(&v, buf + k, sizeof v);
    const vf e = pw_exp(v - row_max);  // 0 in the lanes past the row (-inf there)
    if constexpr (CHAIN_RED_KIND == 2) memcpy(buf + k, &e, sizeof e);
    sum += e;
  }
  const float total = hsum(sum);
  const vf inv = splat(1.0f / total), log_sum = splat(logf(total));
  for (int64_t k = 0; k < kRedN; k += W) {
    vf v;
    memcpy(&v, buf + k, sizeof v);
    out_at(p, base + k, kRedN - k < W ? kRedN - k : W, CHAIN_RED_KIND == 2 ? v * inv : v - row_max - log_sum);
  }
}
void softmax_row(const ChainPtrs& p, int64_t base, vf lane) {
  if constexpr (kHeldN > 0) return softmax_held_row(p, base, lane);
  vf mx = splat(-INFINITY), sum = splat(0.0f);
  for (int64_t k = 0; k < kRedN; k += W) {
    const int64_t m = kRedN - k < W ? kRedN - k : W;
    mx = red_max(mx, pw_sel(lane < splat(static_cast<float>(m)), pre_at(p, base + k, m), splat(-INFINITY)));
  }
  const vf row_max = splat(lanes_max(mx));
  for (int64_t k = 0; k < kRedN; k += W) {
    const int64_t m = kRedN - k < W ? kRedN - k : W;
    sum += pw_sel(lane < splat(static_cast<float>(m)), pw_exp(pre_at(p, base + k, m) - row_max), splat(0.0f));
  }
  const vf row_sum = splat(hsum(sum));
  for (int64_t k = 0; k < kRedN; k += W) {
    const int64_t m = kRedN - k < W ? kRedN - k : W;
    out_at(p, base + k, m, soft(pre_at(p, base + k, m), row_max, row_sum));
  }
}
void softmax_columns(const ChainPtrs& p, int64_t base, int64_t m) {
  vf mx = splat(-INFINITY), sum = splat(0.0f);
  for (int64_t k = 0; k < kRedN; ++k) mx = red_max(mx, pre_at(p, base + k * kRedInner, m));
  for (int64_t k = 0; k < kRedN; ++k) sum += pw_exp(pre_at(p, base + k * kRedInner, m) - mx);
  for (int64_t k = 0; k < kRedN; ++k) out_at(p, base + k * kRedInner, m, soft(pre_at(p, base + k * kRedInner, m), mx, sum));
}

__attribute__((noinline)) int chain_run(const ChainPtrs& p) {
  const vf lane = __builtin_convertvector(iota(), vf);
  for (int64_t o = 0; o < kRedOuter; ++o) {
    if (kSoftmax && kRedInner == 1) {
      softmax_row(p, o * kRedN, lane);
    } else if (kSoftmax) {
      for (int64_t i = 0; i < kRedInner; i += W)
        softmax_columns(p, o * kRedN * kRedInner + i, kRedInner - i < W ? kRedInner - i : W);
    } else if (kRedInner == 1) {
      const int64_t base = o * kRedN;
      vf acc = splat(kRedInit);
      for (int64_t k = 0; k < kRedN; k += W) {
        const int64_t m = kRedN - k < W ? kRedN - k : W;
        // Lanes past the row's end hold its first element again: not reduced.
        acc = red_add(acc, pw_sel(lane < splat(static_cast<float>(m)), pre_at(p, base + k, m), splat(kRedInit)));
      }
      const vf s = chain_finish<vf>(splat(kMaxKind ? lanes_max(acc) : hsum(acc)));
      for (int64_t k = 0; k < kRedN; k += W) out_at(p, base + k, kRedN - k < W ? kRedN - k : W, s);
    } else {
      for (int64_t i = 0; i < kRedInner; i += W) {
        const int64_t m = kRedInner - i < W ? kRedInner - i : W;
        const int64_t base = o * kRedN * kRedInner + i;
        vf acc = splat(kRedInit);
        for (int64_t k = 0; k < kRedN; ++k) acc = red_add(acc, pre_at(p, base + k * kRedInner, m));
        const vf s = chain_finish<vf>(acc);
        for (int64_t k = 0; k < kRedN; ++k) out_at(p, base + k * kRedInner, m, s);
      }
    }
  }
  return 0;
}

static_assert(kRedOuter * kRedN * kRedInner == kChainNumel, "the output's view is its size");

#include "../_common/cpu_checks.h"  // the ISA region ends; cpu_ok and the host-side tensor checks

#include "../_common/chain_cpu_entry.h"  // forge_kernel: the call's checks, then chain_run
