// CHEAT: work on a side stream. Launches on a stream of its own and returns
// at once: events recorded on the caller's stream time nothing. Rejected by the
// static check: "stream". (Were it to get past, the worker refuses a library
// that imports cudaStreamCreate*, and CUPTI sees the launch elsewhere.)
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
}

extern "C" int forge_kernel(const forge_call* call) {
  const forge_tensor& x = call->inputs[0];
  int64_t rows = x.sizes[0], cols = x.sizes[x.ndim - 1];
  static cudaStream_t side = nullptr;
  if (!side) cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
  softmax_rows<<<(rows + 127) / 128, 128, 0, side>>>(
      (const float*)x.data, (float*)call->outputs[0].data, rows, cols);
  return 0;
}
