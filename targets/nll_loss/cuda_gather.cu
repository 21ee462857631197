/* nll_loss, CUDA strategy "gather": nll_loss_forward with reduction mean or
 * sum and no class weights (cross entropy's second op).
 *
 * Math: over rows i whose target t_i is not ignore_index, loss = sum of
 * -x[i, t_i] and total = their count; output = loss / total (mean) or loss
 * (sum), total_weight = total. Sums in double, merged in a fixed order.
 * A target outside [0, C) (stock stops on a device assert) makes the output NaN.
 * One row ([C]) whose target is ignored gives 0 under mean, as stock's CUDA
 * kernel does.
 * Ops: aten::nll_loss_forward; log-probabilities float32/bfloat16/float16,
 * int64 targets.
 * Shapes: [N, C] with [N] targets, or [C] with a 0-dim target.
 * Workspace: 16 bytes per block (at most 1024 blocks).
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * nll_loss_parse.h's (contiguous, no weight, reduction mean or sum); the
 * workspace at least forge_workspace_bytes. A launch failure returns 1.
 *
 * Why it is fast: stock reduces every row in one block; here the rows spread
 * over up to 1024 blocks, each block's partial goes to the workspace and one
 * block adds them in order.
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

#include "../_common/cuda_common.cuh"  // inlined when forge loads the template (docs/STRATEGIES.md)
#include "../_common/nll_loss_args.h"  // NllArgs

namespace {

constexpr int BLOCK = FORGE_P_BLOCK;
constexpr int MAX_BLOCKS = 1024;
static_assert(BLOCK % 32 == 0 && BLOCK >= 64 && BLOCK <= 1024, "FORGE_P_BLOCK: a multiple of 32, 64..1024");

struct Part {
  double loss, count;
};

__device__ __forceinline__ Part block_sum_part(Part p) {
  __shared__ Part warps[BLOCK / 32];
#pragma unroll
  for (int o = 16; o > 0; o /= 2) {
    p.loss += __shfl_down_sync(0xffffffffu, p.loss, o);
    p.count += __shfl_down_sync(0xffffffffu, p.count, o);
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warps[warp] = p;
  __syncthreads();
  p = Part{0.0, 0.0};
  if (warp == 0) {
    if (lane < BLOCK / 32) p = warps[lane];
#pragma unroll
    for (int o = 16; o > 0; o /= 2) {
      p.loss += __shfl_down_sync(0xffffffffu, p.loss, o);
      p.count += __shfl_down_sync(0xffffffffu, p.count, o);
    }
  }
  return p;
}

template <class T>
__global__ void __launch_bounds__(BLOCK) nll_partials(NllArgs a, Part* parts) {
  const T* x = static_cast<const T*>(a.x);
  Part p{0.0, 0.0};
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * BLOCK + threadIdx.x; i < a.N;
       i += static_cast<int64_t>(gridDim.x) * BLOCK) {
    const int64_t t = a.t[i];
    if (t == a.ignore) continue;
    p.loss -= (t >= 0 && t < a.C) ? static_cast<double>(Io<T>::to(x[i * a.C + t])) : NAN;
    p.count += 1.0;
  }
  p = block_sum_part(p);
  if (threadIdx.x == 0) parts[blockIdx.x] = p;
}

template <class T>
__global__ void __launch_bounds__(BLOCK) nll_finish(NllArgs a, const Part* parts, int blocks) {
  Part p{0.0, 0.0};
  for (int b = threadIdx.x; b < blocks; b += BLOCK) p.loss += parts[b].loss, p.count += parts[b].count;
  p = block_sum_part(p);
  if (threadIdx.x == 0) {
    // One row whose target is ignored: stock's CUDA kernel gives 0 (its CPU
    // kernel 0/0 = NaN, as the 2D mean over no rows does on both).
    const double out = !a.mean ? p.loss : a.one_row && p.count == 0.0 ? 0.0 : p.loss / p.count;
    *static_cast<T*>(a.y) = Io<T>::from(static_cast<float>(out));
    *static_cast<T*>(a.total) = Io<T>::from(static_cast<float>(p.count));
  }
}

inline int blocks_of(const NllArgs& a) {
  const int64_t want = (a.N + BLOCK - 1) / BLOCK;
  return static_cast<int>(want < MAX_BLOCKS ? want : MAX_BLOCKS);
}

template <class T>
int launch(const NllArgs& a, void* workspace, int64_t workspace_bytes, cudaStream_t stream) {
  const int blocks = blocks_of(a);
  Part* parts = static_cast<Part*>(workspace);
  if (!parts || workspace_bytes < blocks * static_cast<int64_t>(sizeof(Part))) return 1;
  nll_partials<T><<<blocks, BLOCK, 0, stream>>>(a, parts);
  if (launch_status()) return 1;
  nll_finish<T><<<1, BLOCK, 0, stream>>>(a, parts, blocks);
  return launch_status();
}

}  // namespace

#include "../_common/nll_loss_parse.h"  // the call's checks, shared with the CPU template

extern "C" int64_t forge_workspace_bytes(const forge_call* call) {
  NllArgs a;
  if (parse_nll(call, a)) return 0;
  return blocks_of(a) * static_cast<int64_t>(sizeof(Part));
}

extern "C" int forge_kernel(const forge_call* call) {
  NllArgs a;
  if (parse_nll(call, a)) return 1;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  return with_dtype(a.dtype, [&](auto t) { return launch<decltype(t)>(a, call->workspace, call->workspace_bytes, stream); });
}
