// A softmax whose exp values go through one static row buffer shared by every
// call: right when calls come one at a time, wrong when two threads call it at
// once (each overwrites the other's row). Must be REJECTED (thread_unsafe).
#include <cmath>
#include <cstdint>

#include "forge_kernel.h"

static float g_row[1 << 16];

extern "C" int forge_kernel(const forge_call* call) {
  const forge_tensor& x = call->inputs[0];
  if (call->n_inputs != 1 || call->n_outputs != 1 || x.dtype != FORGE_FLOAT32 || x.ndim < 1) return 1;
  const int64_t cols = x.sizes[x.ndim - 1];
  if (cols > (1 << 16)) return 1;
  int64_t rows = 1;
  for (int d = 0; d + 1 < x.ndim; ++d) rows *= x.sizes[d];
  const float* in = static_cast<const float*>(x.data);
  float* out = static_cast<float*>(call->outputs[0].data);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = in + r * cols;
    float m = -INFINITY;
    for (int64_t c = 0; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
    float sum = 0;
    for (int64_t c = 0; c < cols; ++c) {
      g_row[c] = std::exp(xr[c] - m);
      sum += g_row[c];
    }
    const float inv = 1.0f / sum;
    for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = g_row[c] * inv;
  }
  return 0;
}
