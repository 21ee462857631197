// CHEAT (or bug): an out-of-bounds write. Correct rows, then one element past
// the end of the output. The worker's guard bytes around every buffer see it:
// "out_of_bounds".
#include <cstdint>

#include "forge_kernel.h"

__global__ void softmax_rows(const float* in, float* out, int64_t rows, int64_t cols) {
  int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float* x = in + r * cols;
  float* y = out + r * cols;
  float m = -INFINITY, s = 0.f;
  for (int64_t c = 0; c < cols; ++c) m = fmaxf(m, x[c]);
  for (int64_t c = 0; c < cols; ++c) s += expf(x[c] - m);
  for (int64_t c = 0; c < cols; ++c) y[c] = expf(x[c] - m) / s;
  if (r == rows - 1) y[cols] = 0.f;  // one past the end
}

extern "C" int forge_kernel(const forge_call* call) {
  const forge_tensor& x = call->inputs[0];
  int64_t rows = x.sizes[0], cols = x.sizes[x.ndim - 1];
  softmax_rows<<<(rows + 127) / 128, 128, 0, (cudaStream_t)call->stream>>>(
      (const float*)x.data, (float*)call->outputs[0].data, rows, cols);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
