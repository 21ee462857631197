// CHEAT: caching by pointer. Keeps the first result for an input address in a
// static device array and, on a later call with the same address, copies it
// instead of computing. Rejected by verification: the worker refills the same
// buffers with new values and calls again -> "wrong_result".
#include <cstdint>

#include "forge_kernel.h"

__device__ float g_cache[64 * 1000];

__global__ void softmax_rows(const float* in, float* out, int64_t rows, int64_t cols) {
  int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float* x = in + r * cols;
  float* y = out + r * cols;
  float m = -INFINITY, s = 0.f;
  for (int64_t c = 0; c < cols; ++c) m = fmaxf(m, x[c]);
  for (int64_t c = 0; c < cols; ++c) s += expf(x[c] - m);
  for (int64_t c = 0; c < cols; ++c) y[c] = expf(x[c] - m) / s;
}

__global__ void copy(float* dst, const float* src, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) dst[i] = src[i];
}

extern "C" int forge_kernel(const forge_call* call) {
  static const void* cached_input = nullptr;
  const forge_tensor& x = call->inputs[0];
  int64_t rows = x.sizes[0], cols = x.sizes[x.ndim - 1], n = rows * cols;
  cudaStream_t stream = (cudaStream_t)call->stream;
  float* out = (float*)call->outputs[0].data;
  float* cache = nullptr;
  cudaGetSymbolAddress((void**)&cache, g_cache);
  const bool fits = n <= 64 * 1000;
  if (fits && x.data == cached_input) {
    copy<<<(n + 255) / 256, 256, 0, stream>>>(out, cache, n);
  } else {
    softmax_rows<<<(rows + 127) / 128, 128, 0, stream>>>((const float*)x.data, out, rows, cols);
    if (fits) {
      copy<<<(n + 255) / 256, 256, 0, stream>>>(cache, out, n);
      cached_input = x.data;
    }
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
