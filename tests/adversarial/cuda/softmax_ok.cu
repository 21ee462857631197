// A correct softmax over the last dimension of a contiguous float32 tensor on
// the caller's stream: one block per row, block-wide max and sum reductions.
// Must be ACCEPTED. A row of all -inf gives NaN, as the stock kernel does.
#include <cstdint>

#include "forge_kernel.h"

namespace {

constexpr int kThreads = 256;

__device__ float block_reduce(float v, bool is_max, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) {
    float other = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? fmaxf(v, other) : v + other;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = threadIdx.x < kThreads / 32 ? scratch[threadIdx.x] : (is_max ? -INFINITY : 0.f);
  if (warp == 0)
    for (int o = 16; o > 0; o >>= 1) {
      float other = __shfl_xor_sync(0xffffffffu, v, o);
      v = is_max ? fmaxf(v, other) : v + other;
    }
  if (threadIdx.x == 0) scratch[0] = v;
  __syncthreads();
  v = scratch[0];
  __syncthreads();
  return v;
}

__global__ void softmax_rows(const float* in, float* out, int64_t cols) {
  __shared__ float scratch[kThreads / 32];
  const float* x = in + blockIdx.x * cols;
  float* y = out + blockIdx.x * cols;
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) m = fmaxf(m, x[c]);
  m = block_reduce(m, true, scratch);
  float s = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) s += expf(x[c] - m);
  s = block_reduce(s, false, scratch);
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) y[c] = expf(x[c] - m) / s;
}

}  // namespace

extern "C" int forge_kernel(const forge_call* call) {
  const forge_tensor& x = call->inputs[0];
  if (call->n_inputs != 1 || call->n_outputs != 1 || x.dtype != FORGE_FLOAT32 || x.ndim < 1)
    return 1;
  const int64_t cols = x.sizes[x.ndim - 1];
  int64_t rows = 1;
  for (int d = 0; d + 1 < x.ndim; ++d) rows *= x.sizes[d];
  if (rows == 0) return 0;
  softmax_rows<<<static_cast<unsigned>(rows), kThreads, 0, static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const float*>(x.data), static_cast<float*>(call->outputs[0].data), cols);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
