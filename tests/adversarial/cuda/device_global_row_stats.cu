// A softmax in two launches that hands each row's max and sum from the first
// to the second through a __device__ array shared by every call: right when
// calls come one at a time, wrong when two threads call it at once on their
// own streams (one call's statistics normalize the other's rows).
// Must be REJECTED (thread_unsafe).
#include <cstdint>

#include "forge_kernel.h"

namespace {

constexpr int kThreads = 256, kMaxRows = 1 << 16;
__device__ float g_max[kMaxRows], g_sum[kMaxRows];

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

__global__ void row_stats(const float* in, int64_t cols) {
  __shared__ float scratch[kThreads / 32];
  const float* x = in + blockIdx.x * cols;
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) m = fmaxf(m, x[c]);
  m = block_reduce(m, true, scratch);
  float s = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) s += expf(x[c] - m);
  s = block_reduce(s, false, scratch);
  if (threadIdx.x == 0) g_max[blockIdx.x] = m, g_sum[blockIdx.x] = s;
}

__global__ void normalize(const float* in, float* out, int64_t cols) {
  const float m = g_max[blockIdx.x], s = g_sum[blockIdx.x];
  for (int64_t c = threadIdx.x; c < cols; c += kThreads)
    out[blockIdx.x * cols + c] = expf(in[blockIdx.x * cols + c] - m) / s;
}

}  // namespace

extern "C" int forge_kernel(const forge_call* call) {
  const forge_tensor& x = call->inputs[0];
  if (call->n_inputs != 1 || call->n_outputs != 1 || x.dtype != FORGE_FLOAT32 || x.ndim < 1) return 1;
  const int64_t cols = x.sizes[x.ndim - 1];
  int64_t rows = 1;
  for (int d = 0; d + 1 < x.ndim; ++d) rows *= x.sizes[d];
  if (rows == 0) return 0;
  if (rows > kMaxRows) return 1;
  auto stream = static_cast<cudaStream_t>(call->stream);
  const float* in = static_cast<const float*>(x.data);
  row_stats<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(in, cols);
  normalize<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(in, static_cast<float*>(call->outputs[0].data), cols);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
