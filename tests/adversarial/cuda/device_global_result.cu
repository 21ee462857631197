// A softmax that writes its whole result into one __device__ buffer shared by
// every call, then copies it out with a second launch: right when calls come
// one at a time, wrong when two threads call it at once on their own streams
// (one call copies out the other's rows). Must be REJECTED (thread_unsafe).
#include <cstdint>

#include "forge_kernel.h"

namespace {

constexpr int kThreads = 256;
constexpr int64_t kCap = int64_t{1} << 22;
__device__ float g_result[kCap];

__global__ void softmax_into_global(const float* in, int64_t cols) {
  __shared__ float red[kThreads];
  const float* x = in + blockIdx.x * cols;
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) m = fmaxf(m, x[c]);
  red[threadIdx.x] = m;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + w]);
    __syncthreads();
  }
  m = red[0];
  __syncthreads();
  float s = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) s += expf(x[c] - m);
  red[threadIdx.x] = s;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) red[threadIdx.x] += red[threadIdx.x + w];
    __syncthreads();
  }
  s = red[0];
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) g_result[blockIdx.x * cols + c] = expf(x[c] - m) / s;
}

__global__ void copy_out(float* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    out[i] = g_result[i];
}

}  // namespace

extern "C" int forge_kernel(const forge_call* call) {
  const forge_tensor& x = call->inputs[0];
  if (call->n_inputs != 1 || call->n_outputs != 1 || x.dtype != FORGE_FLOAT32 || x.ndim < 1) return 1;
  const int64_t cols = x.sizes[x.ndim - 1];
  int64_t rows = 1;
  for (int d = 0; d + 1 < x.ndim; ++d) rows *= x.sizes[d];
  if (rows == 0) return 0;
  if (rows * cols > kCap) return 1;
  auto stream = static_cast<cudaStream_t>(call->stream);
  softmax_into_global<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(static_cast<const float*>(x.data), cols);
  copy_out<<<264, 256, 0, stream>>>(static_cast<float*>(call->outputs[0].data), rows * cols);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
