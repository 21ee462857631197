/* pool, CUDA strategy "windows": one pooling op of the table in
 * targets/_common/pool_ops.h (FORGE_P_OP: max_pool2d_with_indices,
 * max_pool3d_with_indices, avg_pool2d, avg_pool3d).
 *
 * Math: pool_ops.h's pool_one per output: the max (and its in-plane index) or
 * the average of each window, with stride, padding, dilation (max), ceil_mode,
 * count_include_pad and divisor_override (avg), as the stock kernels define them.
 * Ops: aten::max_pool2d_with_indices, max_pool3d_with_indices, avg_pool2d,
 * avg_pool3d (1D pooling on CUDA and 1D average pooling are the 2D ops); float32/bfloat16/float16 values, int64 indices.
 * Shapes: [N, C, spatial...] or [C, spatial...], contiguous (NCHW / NCDHW).
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * pool_parse.h's (contiguous input and outputs of the stock shapes, padding
 * at most half the window, planes under 2^31 elements). A launch failure
 * returns 1.
 *
 * Why it is fast: a thread computes ITEMS neighbouring outputs of one output
 * row, so neighbouring threads read neighbouring (overlapping) windows through
 * L1 and the flat index is split into (plane, od, oh, ow) once per ITEMS
 * outputs, in 32-bit arithmetic when the output has under 2^32 elements.
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
#ifndef FORGE_P_ITEMS
#define FORGE_P_ITEMS 2 /* neighbouring outputs of a row per thread: 1..8 */
#endif

#include "../_common/cuda_common.cuh"  // inlined when forge loads the template (docs/STRATEGIES.md)
#include "../_common/pool_ops.h"       // the op table and pool_one

namespace {

constexpr int BLOCK = FORGE_P_BLOCK;
constexpr int ITEMS = FORGE_P_ITEMS;
static_assert(BLOCK % 32 == 0 && BLOCK >= 32 && BLOCK <= 1024, "FORGE_P_BLOCK: a multiple of 32 up to 1024");
static_assert(ITEMS >= 1 && ITEMS <= 8, "FORGE_P_ITEMS: 1..8");

// I: the index type of the thread space (uint32_t when it fits).
template <class T, class I>
__global__ void __launch_bounds__(BLOCK) pool_windows(PoolArgs a, I threads) {
  const I row_threads = static_cast<I>((a.OW + ITEMS - 1) / ITEMS);
  const int64_t in_plane = static_cast<int64_t>(a.D) * a.H * a.W;
  for (I t = static_cast<I>(blockIdx.x) * BLOCK + threadIdx.x; t < threads; t += static_cast<I>(gridDim.x) * BLOCK) {
    const I row = t / row_threads;  // (plane, od, oh)
    const int ow0 = static_cast<int>(t - row * row_threads) * ITEMS;
    const I po = row / static_cast<I>(a.OH);
    const int oh = static_cast<int>(row - po * static_cast<I>(a.OH));
    const I plane = po / static_cast<I>(a.OD);
    const int od = static_cast<int>(po - plane * static_cast<I>(a.OD));
    const T* x = static_cast<const T*>(a.x) + static_cast<int64_t>(plane) * in_plane;
    const auto ld = [x](int i) { return Io<T>::to(__ldg(x + i)); };
    const int64_t out = static_cast<int64_t>(row) * a.OW + ow0;
    T* y = static_cast<T*>(a.y) + out;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
      if (ow0 + k < a.OW) {
        int64_t index;
        y[k] = Io<T>::from(pool_one(a, ld, od, oh, ow0 + k, &index));
        if constexpr (PL_INDICES) a.idx[out + k] = index;
      }
    }
  }
}

inline unsigned grid_of(int64_t threads) {
  const int64_t blocks = (threads + BLOCK - 1) / BLOCK;
  return static_cast<unsigned>(blocks < (int64_t{1} << 20) ? blocks : (int64_t{1} << 20));
}

template <class T>
int launch(const PoolArgs& a, cudaStream_t stream) {
  const int64_t threads = a.planes * a.OD * a.OH * ((a.OW + ITEMS - 1) / ITEMS);
  if (threads < (int64_t{1} << 32) - BLOCK * static_cast<int64_t>(1 << 20))
    pool_windows<T, uint32_t><<<grid_of(threads), BLOCK, 0, stream>>>(a, static_cast<uint32_t>(threads));
  else
    pool_windows<T, uint64_t><<<grid_of(threads), BLOCK, 0, stream>>>(a, static_cast<uint64_t>(threads));
  return launch_status();
}

}  // namespace

#include "../_common/pool_parse.h"  // the call's checks and [planes, D, H, W], shared with the CPU template

extern "C" int forge_kernel(const forge_call* call) {
  PoolArgs a;
  if (parse_pool(call, a)) return 1;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  return with_dtype(a.x_dtype, [&](auto t) { return launch<decltype(t)>(a, stream); });
}
