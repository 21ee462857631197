// CHEAT: aliasing an input. Computes in place in the input and points the
// output descriptor at it (the closest this ABI allows to returning the
// input). Rejected by the worker's descriptor check: "aliased_output".
#include <cstdint>

#include "forge_kernel.h"

__global__ void softmax_rows_inplace(float* data, int64_t rows, int64_t cols) {
  int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float* x = data + r * cols;
  float m = -INFINITY, s = 0.f;
  for (int64_t c = 0; c < cols; ++c) m = fmaxf(m, x[c]);
  for (int64_t c = 0; c < cols; ++c) s += (x[c] = expf(x[c] - m));
  for (int64_t c = 0; c < cols; ++c) x[c] /= s;
}

extern "C" int forge_kernel(const forge_call* call) {
  const forge_tensor& x = call->inputs[0];
  int64_t rows = x.sizes[0], cols = x.sizes[x.ndim - 1];
  softmax_rows_inplace<<<(rows + 127) / 128, 128, 0, (cudaStream_t)call->stream>>>(
      (float*)x.data, rows, cols);
  call->outputs[0].data = x.data;
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
