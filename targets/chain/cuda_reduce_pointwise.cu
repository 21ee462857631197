/* chain, CUDA strategy "reduce_pointwise": pointwise ops around one reduction
 * over one dim with keepdim (x / mean(|x|, 1), x / norm(x, 2, 1),
 * x / sqrt(mean(x^2, 1) + eps)) or one softmax or log_softmax
 * (softmax(x * scale + mask) in float32, then a cast), in one kernel: the
 * reduced values never leave the chip.
 *
 * forge generates the chain's part from the target (rules/search/
 * chain_strategies.h, reduce_definition): the inputs (CHAIN_INPUT_LIST, as
 * fused_pointwise reads them), the output viewed as [kRedOuter, kRedN,
 * kRedInner] with the reduction over kRedN, chain_pre (the value reduced at
 * element j), chain_finish (sum -> mean or 2-norm), CHAIN_RED_KIND (0 a
 * sum, 1 a max, 2 softmax, 3 log_softmax), and chain_out (every op at
 * element j, the reduction's result, or the softmax's there, given). Without it (this file alone) the chain is x / sum(x, 1)
 * on [8, 512].
 *
 * Math: fp32 whatever the storage dtypes; each thread sums its elements in
 * order, then a tree across threads (stock CUDA also sums in a tree: results
 * differ in the last bits); the max propagates NaN as torch's amax does. The
 * output is rounded once to its dtype.
 * Layouts: rows (kRedInner == 1): one CTA per row, its threads striding the
 * row; columns (kRedInner > 1): one thread per (outer, inner) position,
 * stepping kRedInner through the kRedN elements (neighbouring threads read
 * neighbouring addresses). Each pass reads the row or column again; the
 * second read mostly hits L2, which holds what the resident CTAs just read.
 * A softmax's row of at most 16 * BLOCK elements stays in registers between
 * its passes (the max, the sum of exp(x - max), the output), so it is read
 * once; a longer row, or a column, is read three times.
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * the inputs and output as generated (chain_checks.h). A launch failure
 * returns 1.
 * Compiled here (nvcc 13, sm_90a) but not run on this machine: no GPU.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "forge_kernel.h"

#ifndef FORGE_P_BLOCK
#define FORGE_P_BLOCK 512 /* threads per CTA: 128 .. 1024, a multiple of 32 */
#endif

#include "../_common/cuda_common.cuh"  // inlined when forge loads the template (docs/STRATEGIES.md)
#include "../_common/pointwise_cuda_math.cuh"  // pw_k, pw_sel, pw_exp, ... on float
#include "../_common/pointwise_ops.h"  // the op table: pw_op_unary, pw_op_binary
#include "../_common/chain_checks.h"  // CHAIN_FULL/BCAST/VALUE and the call's checks

#define CHAIN_F32 float
#define CHAIN_BF16 __nv_bfloat16
#define CHAIN_F16 __half

// FORGE_CHAIN (forge replaces this line with the generated chain)
#include "../_common/chain_reduce_default.h"  // the template alone: y = x / sum(x, 1) on [8, 512]
#include "../_common/chain_cuda_inputs.cuh"  // ChainPtrs, chain_in, CHAIN_CHECK

namespace {

constexpr int BLOCK = FORGE_P_BLOCK;
static_assert(BLOCK % 32 == 0 && BLOCK >= 128 && BLOCK <= 1024, "FORGE_P_BLOCK: a multiple of 32, 128 .. 1024");

static_assert(CHAIN_RED_KIND >= 0 && CHAIN_RED_KIND <= 3, "CHAIN_RED_KIND: 0 sum, 1 max, 2 softmax, 3 log_softmax");
constexpr bool kSoftmax = CHAIN_RED_KIND >= 2;
constexpr bool kMaxKind = CHAIN_RED_KIND != 0;  // the (first) reduction is a max

__device__ __forceinline__ float red_max(float a, float b) { return (b > a || b != b) ? b : a; }  // NaN wins, as torch's amax
template <bool MAX>
__device__ __forceinline__ float combine(float a, float b) {
  if constexpr (MAX) return red_max(a, b);
  else return a + b;
}
__device__ __forceinline__ float red_add(float a, float b) { return combine<kMaxKind>(a, b); }
constexpr float kRedInit = kMaxKind ? -INFINITY : 0.0f;

// The CTA's values combined, in every thread; `scratch` is free again on return.
template <bool MAX>
__device__ __forceinline__ float block_all(float acc, float* scratch) {
  const float init = MAX ? -INFINITY : 0.0f;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o /= 2) acc = combine<MAX>(acc, __shfl_xor_sync(0xffffffffu, acc, o));
  if (lane == 0) scratch[warp] = acc;
  __syncthreads();
  acc = lane < BLOCK / 32 ? scratch[lane] : init;
#pragma unroll
  for (int o = 16; o > 0; o /= 2) acc = combine<MAX>(acc, __shfl_xor_sync(0xffffffffu, acc, o));
  __syncthreads();
  return acc;
}

// The softmax's result at x, given the max and the sum of exp(x - max).
__device__ __forceinline__ float soft(float x, float max, float sum) {
  if constexpr (CHAIN_RED_KIND == 2) return expf(x - max) / sum;
  else return x - max - logf(sum);
}

#define CHAIN_AT(k, T, DT, MODE, INNER, NN, INNER2, NN2) v[k] = chain_in<k, T, MODE>(p, j, INNER, NN, INNER2, NN2);

__device__ __forceinline__ float pre_at(const ChainPtrs& p, int64_t j) {
  float v[CHAIN_INPUTS];
  CHAIN_INPUT_LIST(CHAIN_AT)
  return chain_pre<float>(v);
}
__device__ __forceinline__ void out_at(const ChainPtrs& p, int64_t j, float r) {
  float v[CHAIN_INPUTS];
  CHAIN_INPUT_LIST(CHAIN_AT)
  static_cast<CHAIN_Y*>(p.y)[j] = Io<CHAIN_Y>::from(chain_out<float>(v, r));
}

// Rows: CTA b reduces row b, then writes it.
__global__ void __launch_bounds__(BLOCK) reduce_rows(ChainPtrs p) {
  __shared__ float scratch[32];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * kRedN;
  float acc = kRedInit;
  for (int64_t k = threadIdx.x; k < kRedN; k += BLOCK) acc = red_add(acc, pre_at(p, base + k));
  const float r = chain_finish<float>(block_all<kMaxKind>(acc, scratch));
  for (int64_t k = threadIdx.x; k < kRedN; k += BLOCK) out_at(p, base + k, r);
}

// Softmax rows: CTA b computes row b's max, then its sum of exp(x - max), then
// writes it; a row of at most 16 * BLOCK elements is read once, into registers.
constexpr int kPer = static_cast<int>((kRedN + BLOCK - 1) / BLOCK);
__global__ void __launch_bounds__(BLOCK) softmax_rows(ChainPtrs p) {
  __shared__ float scratch[32];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * kRedN;
  if constexpr (kPer <= 16) {
    float x[kPer > 0 ? kPer : 1];
    float mx = -INFINITY, sum = 0.0f;
#pragma unroll
    for (int e = 0; e < kPer; ++e) {
      const int64_t k = threadIdx.x + static_cast<int64_t>(e) * BLOCK;
      x[e] = k < kRedN ? pre_at(p, base + k) : -INFINITY;
      mx = red_max(mx, x[e]);
    }
    mx = block_all<true>(mx, scratch);
#pragma unroll
    for (int e = 0; e < kPer; ++e)
      if (threadIdx.x + static_cast<int64_t>(e) * BLOCK < kRedN) sum += expf(x[e] - mx);
    sum = block_all<false>(sum, scratch);
#pragma unroll
    for (int e = 0; e < kPer; ++e) {
      const int64_t k = threadIdx.x + static_cast<int64_t>(e) * BLOCK;
      if (k < kRedN) out_at(p, base + k, soft(x[e], mx, sum));
    }
  } else {
    float mx = -INFINITY, sum = 0.0f;
    for (int64_t k = threadIdx.x; k < kRedN; k += BLOCK) mx = red_max(mx, pre_at(p, base + k));
    mx = block_all<true>(mx, scratch);
    for (int64_t k = threadIdx.x; k < kRedN; k += BLOCK) sum += expf(pre_at(p, base + k) - mx);
    sum = block_all<false>(sum, scratch);
    for (int64_t k = threadIdx.x; k < kRedN; k += BLOCK) out_at(p, base + k, soft(pre_at(p, base + k), mx, sum));
  }
}

// Columns: thread t reduces position (t / kRedInner, t % kRedInner), then writes it.
__global__ void __launch_bounds__(BLOCK) reduce_columns(ChainPtrs p) {
  const int64_t positions = kRedOuter * kRedInner;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * BLOCK + threadIdx.x; t < positions;
       t += static_cast<int64_t>(gridDim.x) * BLOCK) {
    const int64_t base = (t / kRedInner) * kRedN * kRedInner + t % kRedInner;
    if constexpr (kSoftmax) {
      float mx = -INFINITY, sum = 0.0f;
      for (int64_t k = 0; k < kRedN; ++k) mx = red_max(mx, pre_at(p, base + k * kRedInner));
      for (int64_t k = 0; k < kRedN; ++k) sum += expf(pre_at(p, base + k * kRedInner) - mx);
      for (int64_t k = 0; k < kRedN; ++k)
        out_at(p, base + k * kRedInner, soft(pre_at(p, base + k * kRedInner), mx, sum));
      continue;
    }
    float acc = kRedInit;
    for (int64_t k = 0; k < kRedN; ++k) acc = red_add(acc, pre_at(p, base + k * kRedInner));
    const float r = chain_finish<float>(acc);
    for (int64_t k = 0; k < kRedN; ++k) out_at(p, base + k * kRedInner, r);
  }
}

int launch(const ChainPtrs& p, cudaStream_t stream) {
  if (kRedInner == 1) {
    if (kRedOuter > 0x7fffffffLL) return 1;
    if constexpr (kSoftmax) softmax_rows<<<static_cast<unsigned>(kRedOuter), BLOCK, 0, stream>>>(p);
    else reduce_rows<<<static_cast<unsigned>(kRedOuter), BLOCK, 0, stream>>>(p);
  } else {
    const int64_t want = (kRedOuter * kRedInner + BLOCK - 1) / BLOCK;
    reduce_columns<<<static_cast<unsigned>(want < 65535 * 32 ? want : 65535 * 32), BLOCK, 0, stream>>>(p);
  }
  return launch_status();
}

}  // namespace

#include "../_common/chain_bind.h"  // chain_bind: inlined when forge loads the template

extern "C" int forge_kernel(const forge_call* call) {
  ChainPtrs p{};
  if (kRedOuter * kRedN * kRedInner != kChainNumel || chain_bind(call, p)) return 1;
  if (kChainNumel == 0) return 0;
  return launch(p, static_cast<cudaStream_t>(call->stream));
}
