/* group_norm, CUDA strategy "block_group": one block per (sample, group),
 * the statistics by two reads of the group's slice, then the affine pass.
 *
 * Math: slice s = x[n, g*D:(g+1)*D, :] (D = C/G channels, D*HxW contiguous
 * elements), fp32: K = s[0]; mean = K + sum (s - K) / |s|;
 * var = sum (s - mean)^2 / |s| (second read); rstd = rsqrt(var + eps);
 * per channel scale = rstd * w[c], bias = fma(-scale, mean, b[c]);
 * y = fma(x, scale, bias) (third read). mean/rstd written per (n, g).
 * Op: aten::native_group_norm(Tensor input, Tensor? weight, Tensor? bias,
 *     SymInt N, SymInt C, SymInt HxW, int group, float eps) -> (out, mean, rstd).
 * Shapes: input [N, C, *] NCHW; out like input; mean/rstd [N, G] in the
 * dtype the caller allocated (the input's dtype).
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * input/out NCHW-contiguous float32/float16/bfloat16 of one dtype with
 * N*C*HxW elements; C % group == 0; weight/bias absent or C contiguous
 * elements of the input's dtype or float32; mean/rstd contiguous N*G
 * elements. A launch failure returns 1.
 *
 * Why it is fast (for small slices, up to a few MB): one block owns a group,
 * so there is no cross-block reduction and no workspace; the second and third
 * reads hit L2 (50 MB on H200) when N*G slices in flight fit; 16-byte vectors
 * when HxW and the pointers allow (a vector then lies in one channel). N*G
 * below ~2x the SM count underfills the GPU: use split_group there.
 * Compiled here (nvcc 13, sm_90a) but not run on this machine: no GPU.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "forge_kernel.h"

#ifndef FORGE_P_BLOCK
#define FORGE_P_BLOCK 512 /* threads per (n, g): 256, 512, 1024 */
#endif

#include "../_common/cuda_common.cuh"  // inlined when forge loads the template (docs/STRATEGIES.md)
#include "../_common/pointwise_cuda_math.cuh"  // a chain's epilogue (chain_epilogue.h): the pointwise math
#include "../_common/pointwise_ops.h"  // and its op table

// FORGE_CHAIN (forge replaces this line with the generated chain)

namespace {

constexpr int BLOCK = FORGE_P_BLOCK;
static_assert(BLOCK % 32 == 0 && BLOCK >= 64 && BLOCK <= 1024, "FORGE_P_BLOCK: a multiple of 32 in 64..1024");

#include "../_common/group_norm_args.h"  // the call's fields: inlined when forge loads the template

#include "../_common/group_norm_apply_range.cuh"  // the affine pass of a slice range: inlined when forge loads the template

template <class T, class TW, class TS, int VW, bool VEC>
__global__ void __launch_bounds__(BLOCK) gn_block_group(const T* __restrict__ x, const TW* __restrict__ w,
                                                        const TW* __restrict__ b, T* __restrict__ y,
                                                        TS* __restrict__ mean_out, TS* __restrict__ rstd_out,
                                                        int64_t groups, int64_t C, int64_t HW, int64_t G, float eps,
                                                        DivU32 hw) {
  __shared__ float scratch[32];
  const int64_t D = C / G, n_el = D * HW;
  constexpr int64_t STEP = static_cast<int64_t>(BLOCK) * VW;
  for (int64_t ng = blockIdx.x; ng < groups; ng += gridDim.x) {
    const int64_t n = ng / G, g = ng % G;
    const int64_t off = (n * C + g * D) * HW;
    const T* xs = x + off;
    const float K = Io<T>::to(xs[0]);
    float s = 0.0f;
    for (int64_t j = threadIdx.x * VW; j < n_el; j += STEP) {
      float v[VW];
      if (VEC) load_n<T, VW>(xs + j, v);
      else v[0] = Io<T>::to(xs[j]);
#pragma unroll
      for (int e = 0; e < VW; ++e) s += v[e] - K;
    }
    const float mean_exact = K + block_sum(s, scratch) / static_cast<float>(n_el);
    float q = 0.0f;
    for (int64_t j = threadIdx.x * VW; j < n_el; j += STEP) {
      float v[VW];
      if (VEC) load_n<T, VW>(xs + j, v);
      else v[0] = Io<T>::to(xs[j]);
#pragma unroll
      for (int e = 0; e < VW; ++e) q += (v[e] - mean_exact) * (v[e] - mean_exact);
    }
    const float var = block_sum(q, scratch) / static_cast<float>(n_el);
    // Normalize with mean/rstd as stored in the outputs' dtype, as the stock
    // CUDA kernel does (it keeps them in the input's dtype and reads them back):
    // with 16-bit stats, exact ones differ from stock by several output ulps.
    const float mean = Io<TS>::to(Io<TS>::from(mean_exact));
    const float rstd = Io<TS>::to(Io<TS>::from(rsqrtf(var + eps)));
    if (threadIdx.x == 0 && mean_out) {  // a chain's kernel has no statistics outputs
      mean_out[ng] = Io<TS>::from(mean);
      rstd_out[ng] = Io<TS>::from(rstd);
    }
    float v[1][VW];
    load_batch<T, VW, VEC, 1>(xs, threadIdx.x * VW, n_el, STEP, v);
    apply_range<T, TW, VW, VEC, 1>(xs, y + off, w, b, g * D, hw, 0, n_el, mean, rstd, BLOCK, v);
  }
}

inline int64_t workspace_needed(const GnArgs&) { return 0; }

template <class T, class TW, class TS>
int launch(const GnArgs& a, cudaStream_t stream) {
  constexpr int VW = 16 / sizeof(T);
  const int64_t groups = a.N * a.G;
  const unsigned grid = static_cast<unsigned>(groups < 0x7fffffffLL ? groups : 0x7fffffffLL);
  const bool vec = aligned16(a.x) && aligned16(a.y) && a.HW % VW == 0;
  auto run = [&](auto kernel) {
    kernel<<<grid, BLOCK, 0, stream>>>(static_cast<const T*>(a.x), static_cast<const TW*>(a.w),
                                       static_cast<const TW*>(a.b), static_cast<T*>(a.y), static_cast<TS*>(a.mean),
                                       static_cast<TS*>(a.rstd), groups, a.C, a.HW, a.G, a.eps,
                                       DivU32::of(static_cast<uint32_t>(a.HW)));
  };
  if (vec) run(gn_block_group<T, TW, TS, VW, true>);
  else run(gn_block_group<T, TW, TS, 1, false>);
  return launch_status();
}

#include "../_common/group_norm_cuda_entry.cuh"  // argument checks and the entry points: inlined when forge loads the template
