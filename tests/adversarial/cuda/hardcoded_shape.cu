// CHEAT: a hard-coded shape. Assumes the row count is a multiple of 16, as
// captured (64): other row counts leave rows unwritten. Rejected by the
// signature family's edge cases (1, 3, 17 rows): "nan_mismatch".
#include <cstdint>

#include "forge_kernel.h"

__global__ void softmax_rows(const float* in, float* out, int64_t cols) {
  const float* x = in + blockIdx.x * 16 * cols + threadIdx.x * cols;
  float* y = out + blockIdx.x * 16 * cols + threadIdx.x * cols;
  float m = -INFINITY, s = 0.f;
  for (int64_t c = 0; c < cols; ++c) m = fmaxf(m, x[c]);
  for (int64_t c = 0; c < cols; ++c) s += expf(x[c] - m);
  for (int64_t c = 0; c < cols; ++c) y[c] = expf(x[c] - m) / s;
}

extern "C" int forge_kernel(const forge_call* call) {
  const forge_tensor& x = call->inputs[0];
  int64_t rows = x.sizes[0], cols = x.sizes[x.ndim - 1];
  if (rows / 16 > 0)
    softmax_rows<<<(unsigned)(rows / 16), 16, 0, (cudaStream_t)call->stream>>>(
        (const float*)x.data, (float*)call->outputs[0].data, cols);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
