// A softmax that computes the whole result into a buffer allocated on first
// use and kept in a static pointer, then copies it out: one buffer for every
// thread that calls it. Must be REJECTED (thread_unsafe).
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "forge_kernel.h"

extern "C" int forge_kernel(const forge_call* call) {
  static float* buf = nullptr;
  static int64_t cap = 0;
  const forge_tensor& x = call->inputs[0];
  if (call->n_inputs != 1 || call->n_outputs != 1 || x.dtype != FORGE_FLOAT32 || x.ndim < 1) return 1;
  const int64_t cols = x.sizes[x.ndim - 1];
  int64_t rows = 1;
  for (int d = 0; d + 1 < x.ndim; ++d) rows *= x.sizes[d];
  if (rows * cols > cap) {
    buf = static_cast<float*>(std::realloc(buf, sizeof(float) * static_cast<size_t>(rows * cols)));
    if (!buf) return 1;
    cap = rows * cols;
  }
  const float* in = static_cast<const float*>(x.data);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = in + r * cols;
    float* yr = buf + r * cols;
    float m = -INFINITY;
    for (int64_t c = 0; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
    float sum = 0;
    for (int64_t c = 0; c < cols; ++c) {
      yr[c] = std::exp(xr[c] - m);
      sum += yr[c];
    }
    const float inv = 1.0f / sum;
    for (int64_t c = 0; c < cols; ++c) yr[c] *= inv;
  }
  std::memcpy(call->outputs[0].data, buf, sizeof(float) * static_cast<size_t>(rows * cols));
  return 0;
}
