/* chain, CUDA strategy "group_norm_prologue": pointwise ops, a group norm
 * that reads their result, pointwise ops after it (conv -> add bias ->
 * sigmoid -> GroupNorm), in one kernel: the prologue's result is never stored.
 *
 * forge generates the chain's part from the target (rules/search/
 * chain_strategies.h, norm_definition) and puts it where the FORGE_CHAIN line
 * stands, as for the CPU template (cpu_group_norm_prologue.cpp). Without it
 * (this file alone) the chain is y = silu(x) * x, which has no norm: the
 * kernel is compiled for checking only then and declines every call.
 *
 * Math: one block per (sample, group) slice of C/G channels x HxW (a warp
 * per slice, the prologue's values in registers, for slices of up to 1024
 * elements: a GEMM's [N, C] in groups of channels): the
 * prologue's values v in fp32; mean = sum v / n, var = sum (v - mean)^2 / n,
 * each thread's terms and the block's sum in double;
 * r = v * (rstd * w[c]) + (b[c] - rstd * w[c] * mean), then chain_finish.
 * The prologue is computed in all three passes (mean, variance, output): its
 * inputs are read three times, a slice of up to a few MB again from L2; with
 * ONE_PASS, twice: mean and variance from the sums of v - K and (v - K)^2 in
 * double, K the slice's first value.
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * the inputs and output as generated (chain_checks.h), every tensor's sizes
 * exactly the captured ones. A launch failure returns 1.
 * Compiled here (nvcc 13, sm_90a) but not run on this machine: no GPU.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "forge_kernel.h"

#ifndef FORGE_P_BLOCK
#define FORGE_P_BLOCK 512 /* threads per block (one block per slice): 256, 512, 1024 */
#endif
#ifndef FORGE_P_ONE_PASS
#define FORGE_P_ONE_PASS 0 /* 1: a slice's moments in one read (shifted sums), 2 reads in all instead of 3 */
#endif

#include "../_common/cuda_common.cuh"  // inlined when forge loads the template (docs/STRATEGIES.md)
#include "../_common/pointwise_cuda_math.cuh"  // pw_k, pw_sel, pw_exp, ... on float
#include "../_common/pointwise_ops.h"  // the op table: pw_op_unary, pw_op_binary
#include "../_common/chain_checks.h"  // CHAIN_FULL/BCAST/VALUE and the call's checks

#define CHAIN_F32 float
#define CHAIN_BF16 __nv_bfloat16
#define CHAIN_F16 __half

// FORGE_CHAIN (forge replaces this line with the generated chain)
#include "../_common/chain_default.h"  // the template alone: no norm (below)
#include "../_common/chain_cuda_inputs.cuh"  // ChainPtrs, chain_in, CHAIN_CHECK

#ifndef CHAIN_GN_N  // the template alone: a chain without a norm, declined at run time
#define CHAIN_GN_N 0LL
#define CHAIN_GN_C 1LL
#define CHAIN_GN_HW 1LL
#define CHAIN_GN_G 1LL
#define CHAIN_GN_EPS 1e-5f
#define CHAIN_GN_W -1
#define CHAIN_GN_B -1
template <class V>
__device__ __forceinline__ V chain_prologue(const V* in) {
  return in[0];
}
template <class V>
__device__ __forceinline__ V chain_finish(const V*, V r) {
  return r;
}
#define CHAIN_GN_ALONE 1
#endif

namespace {

constexpr int BLOCK = FORGE_P_BLOCK;
static_assert(BLOCK % 32 == 0 && BLOCK >= 64 && BLOCK <= 1024, "FORGE_P_BLOCK: a multiple of 32, 64 to 1024");
static_assert(CHAIN_GN_G > 0 && CHAIN_GN_C % CHAIN_GN_G == 0, "C divisible by the group count");
constexpr int64_t kSlice = CHAIN_GN_C / CHAIN_GN_G * CHAIN_GN_HW;

#define CHAIN_LOAD_1(k, T, DT, MODE, INNER, NN, INNER2, NN2) v[k] = chain_in<k, T, MODE>(p, j, INNER, NN, INNER2, NN2);

// The chain's inputs at output element j.
struct At {
  float v[CHAIN_INPUTS];
  __device__ __forceinline__ At(const ChainPtrs& p, int64_t j) { CHAIN_INPUT_LIST(CHAIN_LOAD_1) }
};

// The output at an element: the prologue's value v normalized, its channel's
// weight and bias applied, then the chain's finish.
__device__ __forceinline__ float normalized(const At& a, float v, float mean, float rstd) {
#if CHAIN_GN_W >= 0
  const float scale = rstd * a.v[CHAIN_GN_W];
#else
  const float scale = rstd;
#endif
#if CHAIN_GN_B >= 0
  const float bias = a.v[CHAIN_GN_B] - scale * mean;
#else
  const float bias = -scale * mean;
#endif
  return chain_finish<float>(a.v, fmaf(v, scale, bias));
}

__global__ void __launch_bounds__(BLOCK) chain_group_norm(ChainPtrs p) {
  __shared__ double scratch[32];
  CHAIN_Y* y = static_cast<CHAIN_Y*>(p.y);
  const int64_t off = static_cast<int64_t>(blockIdx.x) * kSlice;
#if FORGE_P_ONE_PASS
  // Sums of d = v - K and d^2 in double, K the slice's first value: d is
  // exact in double, and the shift keeps mean^2 from swamping the variance.
  const double K = chain_prologue<float>(At(p, off).v);
  double s1 = 0.0, s2 = 0.0;
  for (int64_t i = threadIdx.x; i < kSlice; i += BLOCK) {
    const double d = static_cast<double>(chain_prologue<float>(At(p, off + i).v)) - K;
    s1 += d;
    s2 += d * d;
  }
  const double m1 = block_sum(s1, scratch) / static_cast<double>(kSlice);
  const float mean = static_cast<float>(K + m1);
  const double v2 = block_sum(s2, scratch) / static_cast<double>(kSlice) - m1 * m1;
  const double var = v2 < 0.0 ? 0.0 : v2;  // NaN stays NaN
#else
  double s1 = 0.0;
  for (int64_t i = threadIdx.x; i < kSlice; i += BLOCK) s1 += chain_prologue<float>(At(p, off + i).v);
  const float mean = static_cast<float>(block_sum(s1, scratch) / static_cast<double>(kSlice));
  double s2 = 0.0;
  for (int64_t i = threadIdx.x; i < kSlice; i += BLOCK) {
    const float d = chain_prologue<float>(At(p, off + i).v) - mean;
    s2 += static_cast<double>(d * d);
  }
  const double var = block_sum(s2, scratch) / static_cast<double>(kSlice);
#endif
  const float rstd = static_cast<float>(rsqrt(var + static_cast<double>(CHAIN_GN_EPS)));  // NaN stays NaN
  for (int64_t i = threadIdx.x; i < kSlice; i += BLOCK) {
    const At a(p, off + i);
    const float v = chain_prologue<float>(a.v);
    y[off + i] = Io<CHAIN_Y>::from(normalized(a, v, mean, rstd));
  }
}

// Slices of up to kSmallSlice elements (a GEMM's [N, C] in groups of
// channels: HxW 1, 64-element slices, millions of them): a warp per slice,
// the prologue's values kept in registers, computed once; the same sums in
// double, the inputs read again for the output from L1.
constexpr int64_t kSmallSlice = 1024;
constexpr int kPer = kSlice <= kSmallSlice ? static_cast<int>((kSlice + 31) / 32) : 1;  // 1: never launched

__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__global__ void __launch_bounds__(BLOCK) chain_group_norm_small(ChainPtrs p, int64_t slices) {
  CHAIN_Y* y = static_cast<CHAIN_Y*>(p.y);
  const int lane = threadIdx.x & 31;
  constexpr int64_t kWarps = BLOCK / 32;
  for (int64_t s = blockIdx.x * kWarps + threadIdx.x / 32; s < slices; s += static_cast<int64_t>(gridDim.x) * kWarps) {
    const int64_t off = s * kSlice;  // s is the same in the whole warp: its shuffles see every lane
    float v[kPer];
    double s1 = 0.0;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int64_t i = lane + 32LL * k;
      v[k] = i < kSlice ? chain_prologue<float>(At(p, off + i).v) : 0.0f;
      if (i < kSlice) s1 += v[k];
    }
    const float mean = static_cast<float>(warp_sum(s1) / static_cast<double>(kSlice));
    double s2 = 0.0;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const float d = v[k] - mean;
      if (lane + 32LL * k < kSlice) s2 += static_cast<double>(d * d);
    }
    const double var = warp_sum(s2) / static_cast<double>(kSlice);
    const float rstd = static_cast<float>(rsqrt(var + static_cast<double>(CHAIN_GN_EPS)));  // NaN stays NaN
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int64_t i = lane + 32LL * k;
      if (i >= kSlice) break;
      const At a(p, off + i);
      y[off + i] = Io<CHAIN_Y>::from(normalized(a, v[k], mean, rstd));
    }
  }
}

}  // namespace

#include "../_common/chain_bind.h"  // chain_bind: inlined when forge loads the template

extern "C" int forge_kernel(const forge_call* call) {
#ifdef CHAIN_GN_ALONE
  if (call) return 1;
#endif
  ChainPtrs p{};
  if (CHAIN_GN_N * CHAIN_GN_C * CHAIN_GN_HW != kChainNumel || chain_bind(call, p)) return 1;
  if (kChainNumel == 0) return 0;
  const int64_t slices = CHAIN_GN_N * CHAIN_GN_G;
  const cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  if constexpr (kSlice <= kSmallSlice) {
    const int64_t blocks = (slices + BLOCK / 32 - 1) / (BLOCK / 32);
    chain_group_norm_small<<<static_cast<unsigned>(blocks < 2147483647LL ? blocks : 2147483647LL), BLOCK, 0, stream>>>(
        p, slices);
    return launch_status();
  }
  if (slices > 2147483647LL) return 1;
  chain_group_norm<<<static_cast<unsigned>(slices), BLOCK, 0, stream>>>(p);
  return launch_status();
}
