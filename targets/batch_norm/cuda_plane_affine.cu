/* batch_norm in inference, CUDA strategy "plane_lanes": FORGE_P_LANES
 * threads per NCHW (n, c) plane; the channel's constants are computed once per
 * plane, then the plane streams through.
 *
 * Math (eval mode), per channel c, fp32: invstd = rsqrt(running_var[c] + eps);
 * y = fma((x - running_mean[c]) * invstd, w[c], b[c]) (the stock CUDA
 * arithmetic); save_mean = running_mean, save_invstd = invstd when given C
 * elements, nothing when empty.
 * Op: aten::native_batch_norm(input, weight?, bias?, running_mean?,
 *     running_var?, training, momentum, eps) -> (out, save_mean, save_invstd),
 * training = False; or aten::cudnn_batch_norm, the same with an empty
 * reserve as a fourth output. Shapes: input [N, C, *] NCHW-contiguous (or [N, C]).
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * training false; input/out NCHW-contiguous of one float dtype; running stats
 * present; weight/bias optional; parameters C contiguous elements of one
 * float dtype (the input's or float32); save_* empty or C elements. A launch
 * failure returns 1.
 *
 * Why it is fast: no per-element channel division; LANES = 8..16 for 7x7
 * planes (KERNELS.md: sub-warp groups over 49-element planes), a block per
 * plane for 56x56 and up; 16-byte vectors when HW * sizeof(dtype) % 16 == 0.
 * Compiled here (nvcc 13, sm_90a) but not run on this machine: no GPU.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "forge_kernel.h"

#ifndef FORGE_P_LANES
#define FORGE_P_LANES 32 /* threads per plane: 8, 16, 32, 64, 128, 256 (<= FORGE_P_BLOCK) */
#endif
#ifndef FORGE_P_BLOCK
#define FORGE_P_BLOCK 256 /* threads per block */
#endif
#define ACCEPT_CHANNELS_LAST 0

#include "../_common/cuda_common.cuh"  // inlined when forge loads the template (docs/STRATEGIES.md)

namespace {

constexpr int LANES = FORGE_P_LANES;
constexpr int BLOCK = FORGE_P_BLOCK;
static_assert(BLOCK % 32 == 0 && BLOCK >= 64 && BLOCK <= 1024, "FORGE_P_BLOCK: a multiple of 32 in 64..1024");
static_assert(LANES >= 1 && LANES <= BLOCK && BLOCK % LANES == 0, "FORGE_P_LANES must divide FORGE_P_BLOCK");

#include "../_common/batch_norm_cuda_params.cuh"  // arguments, per-channel constants and saved statistics: inlined when forge loads the template

template <class T, class TP, class TS, int VW, bool VEC>
__global__ void __launch_bounds__(BLOCK) bn_planes(const T* __restrict__ x, const TP* __restrict__ w,
                                                   const TP* __restrict__ b, const TP* __restrict__ rm,
                                                   const TP* __restrict__ rv, T* __restrict__ y, TS* __restrict__ sm,
                                                   TS* __restrict__ si, int64_t planes, int64_t C, int64_t HW,
                                                   float eps) {
  write_saved(rm, rv, sm, si, C, eps);
  constexpr int PER_BLOCK = BLOCK / LANES;
  const int lane = threadIdx.x % LANES;
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * PER_BLOCK + threadIdx.x / LANES; p < planes;
       p += static_cast<int64_t>(gridDim.x) * PER_BLOCK) {
    float mean, invstd, wc, bc;
    channel_params(rm, rv, w, b, p % C, eps, mean, invstd, wc, bc);
    const T* xp = x + p * HW;
    T* yp = y + p * HW;
    for (int64_t j = static_cast<int64_t>(lane) * VW; j < HW; j += static_cast<int64_t>(LANES) * VW) {
      float v[VW];
      if (VEC) load_n<T, VW>(xp + j, v);
      else v[0] = Io<T>::to(xp[j]);
#pragma unroll
      for (int e = 0; e < VW; ++e) v[e] = bn_apply(v[e], mean, invstd, wc, bc);
      if (VEC) store_n<T, VW>(yp + j, v);
      else yp[j] = Io<T>::from(v[0]);
    }
  }
}

template <class T, class TP, class TS>
int launch(const BnArgs& a, cudaStream_t stream) {
  constexpr int VW = 16 / sizeof(T);
  constexpr int PER_BLOCK = BLOCK / LANES;
  const int64_t planes = a.N * a.C;
  const bool vec = aligned16(a.x) && aligned16(a.y) && a.HW % VW == 0;
  int64_t blocks = (planes + PER_BLOCK - 1) / PER_BLOCK;
  const int64_t min_blocks = (a.C + BLOCK - 1) / BLOCK;
  if (blocks < min_blocks) blocks = min_blocks;
  if (blocks > 0x7fffffffLL) blocks = 0x7fffffffLL;
  auto run = [&](auto kernel) {
    kernel<<<static_cast<unsigned>(blocks), BLOCK, 0, stream>>>(
        static_cast<const T*>(a.x), static_cast<const TP*>(a.w), static_cast<const TP*>(a.b),
        static_cast<const TP*>(a.rm), static_cast<const TP*>(a.rv), static_cast<T*>(a.y), static_cast<TS*>(a.save_mean),
        static_cast<TS*>(a.save_invstd), planes, a.C, a.HW, a.eps);
  };
  if (vec) run(bn_planes<T, TP, TS, VW, true>);
  else run(bn_planes<T, TP, TS, 1, false>);
  return launch_status();
}

#include "../_common/batch_norm_cuda_entry.cuh"  // dispatch, argument checks and entry points: inlined when forge loads the template
