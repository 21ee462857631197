/* loss, CUDA strategy "fused": one pairwise loss of the table in
 * targets/_common/loss_ops.h (FORGE_P_OP: mse_loss, smooth_l1_loss,
 * huber_loss) with its reduction, in one pass.
 *
 * Math: each element's loss of (input, target) in fp32 (loss_ops.h), then
 * reduction 0 (the losses), 1 (their mean) or 2 (their sum), each thread's
 * sum in double, merged in a fixed order (deterministic).
 * Ops: aten::mse_loss, smooth_l1_loss, huber_loss; float32/bfloat16/float16.
 * Shapes: any, input and target of one shape.
 * Workspace (reduced): BLOCKS * 8 bytes.
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * loss_parse.h's (contiguous, same-shape, non-empty input and target; beta
 * >= 0, delta > 0); the workspace at least forge_workspace_bytes. A launch
 * failure returns 1.
 *
 * Why it is fast: stock writes every element's loss to a temporary and reads
 * it back to reduce it; here BLOCKS blocks stride over 16-byte packs of both
 * inputs and keep the losses in registers, each block's partial goes to the
 * workspace, and one block adds the partials in order: the inputs are read
 * once and nothing else is written.
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
#ifndef FORGE_P_BLOCKS
#define FORGE_P_BLOCKS 1024 /* blocks of the reducing pass (at most): 128..4096 */
#endif

#include "../_common/cuda_common.cuh"  // inlined when forge loads the template (docs/STRATEGIES.md)
#include "../_common/loss_ops.h"       // the op table and loss_of

namespace {

constexpr int BLOCK = FORGE_P_BLOCK;
constexpr int BLOCKS = FORGE_P_BLOCKS;
static_assert(BLOCK % 32 == 0 && BLOCK >= 64 && BLOCK <= 1024, "FORGE_P_BLOCK: a multiple of 32, 64..1024");
static_assert(BLOCKS >= 1 && BLOCKS <= 65535, "FORGE_P_BLOCKS: 1..65535");

__device__ __forceinline__ double block_sum_d(double v) {
  __shared__ double warps[BLOCK / 32];
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warps[warp] = v;
  __syncthreads();
  v = 0.0;
  if (warp == 0) {
    v = lane < BLOCK / 32 ? warps[lane] : 0.0;
#pragma unroll
    for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
  }
  return v;
}

// Reduction 0: the losses, N elements per access (aligned: the host checks).
template <class T, class TY, int N>
__global__ void __launch_bounds__(BLOCK) loss_each(LossArgs a) {
  const T* x = static_cast<const T*>(a.x);
  const T* t = static_cast<const T*>(a.t);
  TY* y = static_cast<TY*>(a.y);
  const int64_t packs = a.n / N, stride = static_cast<int64_t>(gridDim.x) * BLOCK;
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * BLOCK + threadIdx.x; p < packs; p += stride) {
    float xv[N], tv[N], out[N];
    load_n<T, N>(x + p * N, xv);
    load_n<T, N>(t + p * N, tv);
#pragma unroll
    for (int k = 0; k < N; ++k) out[k] = loss_of(xv[k], tv[k], a.k);
    store_n<TY, N>(y + p * N, out);
  }
  for (int64_t i = packs * N + static_cast<int64_t>(blockIdx.x) * BLOCK + threadIdx.x; i < a.n; i += stride)
    y[i] = Io<TY>::from(loss_of(Io<T>::to(x[i]), Io<T>::to(t[i]), a.k));
}

// Reductions 1 and 2: block b's partial sum into parts[b].
template <class T, int N>
__global__ void __launch_bounds__(BLOCK) loss_partials(LossArgs a, double* parts) {
  const T* x = static_cast<const T*>(a.x);
  const T* t = static_cast<const T*>(a.t);
  const int64_t packs = a.n / N, stride = static_cast<int64_t>(gridDim.x) * BLOCK;
  double sum = 0.0;
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * BLOCK + threadIdx.x; p < packs; p += stride) {
    float xv[N], tv[N], s = 0.0f;
    load_n<T, N>(x + p * N, xv);
    load_n<T, N>(t + p * N, tv);
#pragma unroll
    for (int k = 0; k < N; ++k) s += loss_of(xv[k], tv[k], a.k);
    sum += s;
  }
  for (int64_t i = packs * N + static_cast<int64_t>(blockIdx.x) * BLOCK + threadIdx.x; i < a.n; i += stride)
    sum += loss_of(Io<T>::to(x[i]), Io<T>::to(t[i]), a.k);
  sum = block_sum_d(sum);
  if (threadIdx.x == 0) parts[blockIdx.x] = sum;
}

// One block: the partials in order, the mean or the sum into the output.
template <class TY>
__global__ void __launch_bounds__(BLOCK) loss_finish(LossArgs a, const double* parts, int blocks) {
  double sum = 0.0;
  for (int b = threadIdx.x; b < blocks; b += BLOCK) sum += parts[b];
  sum = block_sum_d(sum);
  if (threadIdx.x == 0) {
    if (a.reduction == 1) sum /= static_cast<double>(a.n);
    *static_cast<TY*>(a.y) = Io<TY>::from(static_cast<float>(sum));
  }
}

inline int blocks_of(const LossArgs& a) {
  const int64_t want = (a.n + BLOCK * 4 - 1) / (BLOCK * 4);
  return static_cast<int>(want < BLOCKS ? want : BLOCKS);
}

template <class T, class TY>
int launch(const LossArgs& a, void* workspace, int64_t workspace_bytes, cudaStream_t stream) {
  constexpr int V = 16 / sizeof(T);
  const bool vec = aligned16(a.x) && aligned16(a.t) && (a.reduction != 0 || aligned16(a.y));
  const int blocks = blocks_of(a);
  if (a.reduction == 0) {
    if (vec) loss_each<T, TY, V><<<blocks, BLOCK, 0, stream>>>(a);
    else loss_each<T, TY, 1><<<blocks, BLOCK, 0, stream>>>(a);
    return launch_status();
  }
  double* parts = static_cast<double*>(workspace);
  if (!parts || workspace_bytes < blocks * static_cast<int64_t>(sizeof(double))) return 1;
  if (vec) loss_partials<T, V><<<blocks, BLOCK, 0, stream>>>(a, parts);
  else loss_partials<T, 1><<<blocks, BLOCK, 0, stream>>>(a, parts);
  if (launch_status()) return 1;
  loss_finish<TY><<<1, BLOCK, 0, stream>>>(a, parts, blocks);
  return launch_status();
}

}  // namespace

#include "../_common/loss_parse.h"  // the call's checks, shared with the CPU template

extern "C" int64_t forge_workspace_bytes(const forge_call* call) {
  LossArgs a;
  if (parse_loss(call, a) || a.reduction == 0) return 0;
  return blocks_of(a) * static_cast<int64_t>(sizeof(double));
}

extern "C" int forge_kernel(const forge_call* call) {
  LossArgs a;
  if (parse_loss(call, a)) return 1;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  return with_dtype(a.x_dtype, [&](auto t) {
    return with_dtype(a.y_dtype, [&](auto ty) {
      return launch<decltype(t), decltype(ty)>(a, call->workspace, call->workspace_bytes, stream);
    });
  });
}
