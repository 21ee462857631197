/* batch_norm in inference, CUDA strategy "flat_affine": the tensor as a flat
 * array of 16-byte vectors (whenever the pointers and numel allow). With
 * NCHW planes of a vector or more, a vector lies in one channel (always when
 * HxW is a multiple of the vector width; 42 of 49 vectors at 7x7 in bf16),
 * or straddles two. When HxW is a multiple of the width, a vector looks up its
 * one channel; otherwise every vector looks up its channel and the next one
 * and selects per element (no divergent path). Smaller NCHW planes go element
 * by element, and channels-last vectors look up each element's channel.
 *
 * Math (eval mode), per channel c, fp32: invstd = rsqrt(running_var[c] + eps);
 * y = fma((x - running_mean[c]) * invstd, w[c], b[c]) - the stock CUDA
 * kernel's arithmetic; save_mean = running_mean, save_invstd = invstd when the
 * caller gives them C elements (CUDA eval returns [C] fp32), nothing when empty.
 * Op: aten::native_batch_norm(input, weight?, bias?, running_mean?,
 *     running_var?, training, momentum, eps) -> (out, save_mean, save_invstd),
 * training = False (bf16 BatchNorm reaches it on CUDA); or
 * aten::cudnn_batch_norm (fp32 BatchNorm), the same with an empty reserve.
 * Shapes: input [N, C, *] NCHW- or channels-last-contiguous, or [N, C]; out
 * with the input's strides.
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * training false; input/out of one float dtype with equal strides; running
 * stats present; weight/bias optional; parameters C contiguous elements of
 * one float dtype (the input's or float32); save_* empty or C elements. A
 * launch failure returns 1.
 *
 * Why it is fast: pure streaming at one read + one write (the floor), 16-byte
 * vectors, FORGE_P_UNROLL vectors in flight per thread, per-channel constants
 * from L1 (__ldg); no per-call allocation of alpha/beta tensors.
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
#ifndef FORGE_P_UNROLL
#define FORGE_P_UNROLL 2 /* 16-byte vectors per thread per step: 1, 2, 4 */
#endif
#define ACCEPT_CHANNELS_LAST 1

#include "../_common/cuda_common.cuh"  // inlined when forge loads the template (docs/STRATEGIES.md)

namespace {

constexpr int BLOCK = FORGE_P_BLOCK;
constexpr int UNROLL = FORGE_P_UNROLL;
static_assert(BLOCK % 32 == 0 && BLOCK >= 64 && BLOCK <= 1024, "FORGE_P_BLOCK: a multiple of 32 in 64..1024");
static_assert(UNROLL >= 1 && UNROLL <= 8, "FORGE_P_UNROLL: 1..8");

#include "../_common/batch_norm_cuda_params.cuh"  // arguments, per-channel constants and saved statistics: inlined when forge loads the template

// Division by HW and by C: a multiply and a shift while flat indices fit in
// 32 bits (SMALL), else 64-bit division (dozens of instructions per vector).
struct ChannelOf {
  int64_t C, HW;
  DivU32 by_c, by_hw;
};
// Channel of flat element i: (i / HW) % C for NCHW, i % C for channels-last.
template <bool SMALL>
__device__ __forceinline__ int64_t channel_of(int64_t i, const ChannelOf& k, bool cl) {
  if (!SMALL) return cl ? i % k.C : (i / k.HW) % k.C;
  const uint32_t q = cl ? static_cast<uint32_t>(i) : k.by_hw.div(static_cast<uint32_t>(i));
  return q - k.by_c.div(q) * static_cast<uint32_t>(k.C);
}
// Elements of the vector at flat NCHW index i that lie in i's plane: HW - i % HW.
template <bool SMALL>
__device__ __forceinline__ int64_t left_in_plane(int64_t i, const ChannelOf& k) {
  if (!SMALL) return k.HW - i % k.HW;
  const uint32_t n = static_cast<uint32_t>(i);
  return k.HW - (n - k.by_hw.div(n) * static_cast<uint32_t>(k.HW));
}

// MODE 0: NCHW vectors within one plane (HxW a multiple of VW); 1: NCHW
// vectors across up to two planes; 2: per element (channels-last vectors, or
// no vectors). One mode per kernel keeps each at its own register count:
// with every path in one kernel, MODE 0 took 42 registers instead of 32, and
// 28x28 ran 5% slower (run M1).
template <class T, class TP, class TS, int VW, bool VEC, bool SMALL, int MODE>
__global__ void __launch_bounds__(BLOCK) bn_flat(const T* __restrict__ x, const TP* __restrict__ w,
                                                 const TP* __restrict__ b, const TP* __restrict__ rm,
                                                 const TP* __restrict__ rv, T* __restrict__ y, TS* __restrict__ sm,
                                                 TS* __restrict__ si, int64_t numel, ChannelOf ch, bool cl, float eps) {
  write_saved(rm, rv, sm, si, ch.C, eps);
  const int64_t nvec = numel / VW;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * BLOCK * UNROLL;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * BLOCK * UNROLL + threadIdx.x; base < nvec; base += stride) {
    float v[UNROLL][VW];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int64_t iv = base + static_cast<int64_t>(u) * BLOCK;
      if (iv < nvec) {
        if (VEC) load_n<T, VW>(x + iv * VW, v[u]);
        else v[u][0] = Io<T>::to(x[iv]);
      }
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int64_t iv = base + static_cast<int64_t>(u) * BLOCK;
      if (iv >= nvec) continue;
      if (MODE == 0) {
        // HW a multiple of VW: the whole vector lies in one channel.
        float mean, invstd, wc, bc;
        channel_params(rm, rv, w, b, channel_of<SMALL>(iv * VW, ch, false), eps, mean, invstd, wc, bc);
#pragma unroll
        for (int e = 0; e < VW; ++e) v[u][e] = bn_apply(v[u][e], mean, invstd, wc, bc);
      } else if (MODE == 1) {
        // A vector may span two planes (HW >= VW by the launch): elements
        // before `split` in channel c0, the rest in the next plane's (c0 + 1,
        // or 0 at the next image). Both channels' constants for every vector,
        // and a select per element: a branch for the one vector in seven that
        // straddles (at 7x7 bf16) cost 2.8 of 14.3 us (run N4), since its lanes
        // waited for their second lookup after the rest of the warp.
        const int split = static_cast<int>(left_in_plane<SMALL>(iv * VW, ch));
        const int64_t c0 = channel_of<SMALL>(iv * VW, ch, false), c1 = c0 + 1 == ch.C ? 0 : c0 + 1;
        float m0, i0, w0, b0, m1, i1, w1, b1;
        channel_params(rm, rv, w, b, c0, eps, m0, i0, w0, b0);
        channel_params(rm, rv, w, b, c1, eps, m1, i1, w1, b1);
#pragma unroll
        for (int e = 0; e < VW; ++e) {
          const bool first = e < split;
          v[u][e] = bn_apply(v[u][e], first ? m0 : m1, first ? i0 : i1, first ? w0 : w1, first ? b0 : b1);
        }
      } else {
#pragma unroll
        for (int e = 0; e < VW; ++e) {  // planes smaller than a vector, channels-last
          float mean, invstd, wc, bc;
          channel_params(rm, rv, w, b, channel_of<SMALL>(iv * VW + e, ch, cl), eps, mean, invstd, wc, bc);
          v[u][e] = bn_apply(v[u][e], mean, invstd, wc, bc);
        }
      }
      if (VEC) store_n<T, VW>(y + iv * VW, v[u]);
      else y[iv] = Io<T>::from(v[u][0]);
    }
  }
}

template <class T, class TP, class TS>
int launch(const BnArgs& a, cudaStream_t stream) {
  constexpr int VW = 16 / sizeof(T);
  // Vectors need aligned pointers and a whole number of them; NCHW planes
  // smaller than a vector go element by element (a vector over C + 1 planes
  // starts and ends in one channel).
  const bool vec = aligned16(a.x) && aligned16(a.y) && a.numel % VW == 0 && (a.channels_last || a.HW >= VW);
  const int64_t nvec = vec ? a.numel / VW : a.numel;
  int64_t blocks = (nvec + static_cast<int64_t>(BLOCK) * UNROLL - 1) / (static_cast<int64_t>(BLOCK) * UNROLL);
  const int64_t min_blocks = (a.C + BLOCK - 1) / BLOCK;  // write_saved covers C with the grid
  if (blocks < min_blocks) blocks = min_blocks;
  if (blocks > 0x7fffffffLL) blocks = 0x7fffffffLL;
  const bool small = a.numel <= 0xffffffffLL && a.C > 0 && a.HW > 0;
  const ChannelOf ch{a.C, a.HW, DivU32::of(small ? static_cast<uint32_t>(a.C) : 1),
                     DivU32::of(small ? static_cast<uint32_t>(a.HW) : 1)};
  auto run = [&](auto kernel) {
    kernel<<<static_cast<unsigned>(blocks), BLOCK, 0, stream>>>(
        static_cast<const T*>(a.x), static_cast<const TP*>(a.w), static_cast<const TP*>(a.b),
        static_cast<const TP*>(a.rm), static_cast<const TP*>(a.rv), static_cast<T*>(a.y), static_cast<TS*>(a.save_mean),
        static_cast<TS*>(a.save_invstd), a.numel, ch, a.channels_last, a.eps);
  };
  const int mode = !vec || a.channels_last ? 2 : a.HW % VW ? 1 : 0;
  if (!vec) small ? run(bn_flat<T, TP, TS, 1, false, true, 2>) : run(bn_flat<T, TP, TS, 1, false, false, 2>);
  else if (mode == 0) small ? run(bn_flat<T, TP, TS, VW, true, true, 0>) : run(bn_flat<T, TP, TS, VW, true, false, 0>);
  else if (mode == 1) small ? run(bn_flat<T, TP, TS, VW, true, true, 1>) : run(bn_flat<T, TP, TS, VW, true, false, 1>);
  else small ? run(bn_flat<T, TP, TS, VW, true, true, 2>) : run(bn_flat<T, TP, TS, VW, true, false, 2>);
  return launch_status();
}

#include "../_common/batch_norm_cuda_entry.cuh"  // dispatch, argument checks and entry points: inlined when forge loads the template
