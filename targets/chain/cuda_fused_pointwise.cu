/* chain, CUDA strategy "fused_pointwise": a chain of elementwise ops of the
 * pointwise table (targets/_common/pointwise_ops.h) in one pass: every input
 * read once, the output written once, intermediates in registers.
 *
 * forge generates the chain's part from the target (rules/search/
 * chain_strategies.h) and puts it where the FORGE_CHAIN line stands: the
 * inputs' types and how each is indexed (CHAIN_INPUT_LIST), the output's type
 * and size, and chain_body, one pw_op_* call per op with the op's captured
 * constants. Without it (this file alone) the chain is y = silu(x) * x.
 *
 * Math: y[j] = body(in_0[idx_0(j)], ...) in fp32 whatever the storage dtypes,
 * rounded once to y's dtype (the stock chain rounds every intermediate to its
 * dtype: a 16-bit chain is closer to float64 here than stock is).
 * Shapes: the output contiguous; each input the output's size (contiguous),
 * broadcast along one span of dims ((j / inner) % n), or a float64 Python
 * number in host memory.
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * the inputs and output as generated (chain_checks.h). A launch failure
 * returns 1.
 *
 * Why it is fast: the stock chain reads and writes every intermediate; here
 * VEC elements per thread, 16-byte accesses for the full-size tensors when
 * every pointer is aligned, grid-stride loop.
 * Compiled here (nvcc 13, sm_90a) but not run on this machine: no GPU.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "forge_kernel.h"

#ifndef FORGE_P_BLOCK
#define FORGE_P_BLOCK 256 /* threads per block: 128, 256, 512 */
#endif
#ifndef FORGE_P_VEC
#define FORGE_P_VEC 4 /* elements per thread per step: 1, 2, 4, 8 */
#endif

#include "../_common/cuda_common.cuh"  // inlined when forge loads the template (docs/STRATEGIES.md)
#include "../_common/pointwise_cuda_math.cuh"  // pw_k, pw_sel, pw_exp, ... on float
#include "../_common/pointwise_ops.h"  // the op table: pw_op_unary, pw_op_binary
#include "../_common/chain_checks.h"  // CHAIN_FULL/BCAST/VALUE and the call's checks

#define CHAIN_F32 float
#define CHAIN_BF16 __nv_bfloat16
#define CHAIN_F16 __half

// FORGE_CHAIN (forge replaces this line with the generated chain)
#include "../_common/chain_default.h"  // the template alone: y = silu(x) * x
#include "../_common/chain_cuda_inputs.cuh"  // ChainPtrs, chain_in, chain_in_n, CHAIN_CHECK

namespace {

constexpr int BLOCK = FORGE_P_BLOCK;
constexpr int VEC = FORGE_P_VEC;
static_assert(BLOCK % 32 == 0 && BLOCK >= 32 && BLOCK <= 1024, "FORGE_P_BLOCK: a multiple of 32 up to 1024");
static_assert(VEC == 1 || VEC == 2 || VEC == 4 || VEC == 8, "FORGE_P_VEC: 1, 2, 4 or 8");

#define CHAIN_LOAD_N(k, T, DT, MODE, INNER, NN, INNER2, NN2) chain_in_n<k, T, MODE, N>(p, i, INNER, NN, INNER2, NN2, in[k]);
#define CHAIN_LOAD_1(k, T, DT, MODE, INNER, NN, INNER2, NN2) v[k] = chain_in<k, T, MODE>(p, j, INNER, NN, INNER2, NN2);

template <int N>
__global__ void __launch_bounds__(BLOCK) chain_fused(ChainPtrs p, int64_t numel) {
  CHAIN_Y* y = static_cast<CHAIN_Y*>(p.y);
  const int64_t step = static_cast<int64_t>(gridDim.x) * BLOCK * N;
  for (int64_t i = (static_cast<int64_t>(blockIdx.x) * BLOCK + threadIdx.x) * N; i < numel; i += step) {
    if (i + N <= numel) {
      float in[CHAIN_INPUTS][N], r[N];
      CHAIN_INPUT_LIST(CHAIN_LOAD_N)
#pragma unroll
      for (int e = 0; e < N; ++e) {
        float v[CHAIN_INPUTS];
#pragma unroll
        for (int k = 0; k < CHAIN_INPUTS; ++k) v[k] = in[k][e];
        r[e] = chain_body<float>(v);
      }
      store_n<CHAIN_Y, N>(y + i, r);
    } else {
      for (int64_t j = i; j < numel; ++j) {
        float v[CHAIN_INPUTS];
        CHAIN_INPUT_LIST(CHAIN_LOAD_1)
        y[j] = Io<CHAIN_Y>::from(chain_body<float>(v));
      }
    }
  }
}

// Every full-size tensor (and y) aligned to N of its elements.
#define CHAIN_ALIGNED(k, T, DT, MODE, INNER, NN, INNER2, NN2) \
  ok = ok && (MODE != CHAIN_FULL || reinterpret_cast<uintptr_t>(p.in[k]) % (VEC * sizeof(T)) == 0);

int launch(const ChainPtrs& p, cudaStream_t stream) {
  bool ok = reinterpret_cast<uintptr_t>(p.y) % (VEC * sizeof(CHAIN_Y)) == 0;
  CHAIN_INPUT_LIST(CHAIN_ALIGNED)
  const int64_t per = static_cast<int64_t>(BLOCK) * (ok ? VEC : 1);
  const int64_t want = (kChainNumel + per - 1) / per;
  const unsigned grid = static_cast<unsigned>(want < 65535 * 32 ? want : 65535 * 32);
  if (ok) chain_fused<VEC><<<grid, BLOCK, 0, stream>>>(p, kChainNumel);
  else chain_fused<1><<<grid, BLOCK, 0, stream>>>(p, kChainNumel);
  return launch_status();
}

}  // namespace

#include "../_common/chain_bind.h"  // chain_bind: inlined when forge loads the template

extern "C" int forge_kernel(const forge_call* call) {
  ChainPtrs p{};
  if (chain_bind(call, p)) return 1;
  if (kChainNumel == 0) return 0;
  return launch(p, static_cast<cudaStream_t>(call->stream));
}
