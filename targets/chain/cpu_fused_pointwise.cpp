/* chain, CPU strategy "fused_pointwise": a chain of elementwise ops of the
 * pointwise table (targets/_common/pointwise_ops.h) in one pass over fp32
 * vector lanes: every input read once, the output written once,
 * intermediates in registers.
 *
 * forge generates the chain's part from the target (rules/search/
 * chain_strategies.h) and puts it where the FORGE_CHAIN line stands: the
 * inputs' types and how each is indexed (CHAIN_INPUT_LIST), the output's type
 * and size, and chain_body, one pw_op_* call per op with the op's captured
 * constants. Without it (this file alone) the chain is y = silu(x) * x.
 *
 * Math: y[j] = body(in_0[idx_0(j)], ...) in fp32 whatever the storage dtypes,
 * rounded once to y's dtype; the table's inlined exp/expm1/log1p/erfc
 * (pointwise_cpu_math.h). Shapes and checks: as the CUDA template
 * (chain_checks.h).
 *
 * Why it is fast: the stock chain runs one TensorIterator loop per op and
 * reads and writes every intermediate; here FORGE_P_UNROLL independent
 * vectors per step, full-size inputs loaded as vectors, broadcast ones
 * gathered lane by lane (a constant one splat once).
 * Single-threaded (the worker refuses OpenMP runtimes: docs/CANDIDATE_ABI.md).
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
#ifndef FORGE_P_UNROLL
#define FORGE_P_UNROLL 2 /* independent vectors in flight: 1, 2, 4 */
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
#include "../_common/chain_default.h"  // the template alone: y = silu(x) * x
#include "../_common/chain_cpu_inputs.h"  // ChainPtrs, chain_lanes, CHAIN_CHECK

constexpr int U = FORGE_P_UNROLL;
static_assert(U >= 1 && U <= 8, "FORGE_P_UNROLL must be 1..8");

#define CHAIN_LOAD(k, T, DT, MODE, INNER, NN, INNER2, NN2) in[k] = chain_lanes<k, T, MODE>(p, j, m, INNER, NN, INNER2, NN2);

inline vf chain_at(const ChainPtrs& p, int64_t j, int64_t m) {
  vf in[CHAIN_INPUTS];
  CHAIN_INPUT_LIST(CHAIN_LOAD)
  return chain_body<vf>(in);
}

__attribute__((noinline)) int chain_run(const ChainPtrs& p) {
  CHAIN_Y* y = static_cast<CHAIN_Y*>(p.y);
  const int64_t n = kChainNumel;
  int64_t j = 0;
  for (; j + U * W <= n; j += U * W) {
    vf r[U];
    for (int u = 0; u < U; ++u) r[u] = chain_at(p, j + u * W, W);
    for (int u = 0; u < U; ++u) store(y + j + u * W, r[u]);
  }
  for (; j + W <= n; j += W) store(y + j, chain_at(p, j, W));
  if (j < n) store_part(y + j, chain_at(p, j, n - j), n - j);
  return 0;
}

#include "../_common/cpu_checks.h"  // the ISA region ends; cpu_ok and the host-side tensor checks

#include "../_common/chain_cpu_entry.h"  // forge_kernel: the call's checks, then chain_run
