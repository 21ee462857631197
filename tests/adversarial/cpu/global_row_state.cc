// A softmax keeping its running max and sum in globals instead of locals (the
// row loop's state is shared by every concurrent call). Must be REJECTED
// (thread_unsafe).
#include <cmath>
#include <cstdint>

#include "forge_kernel.h"

float g_max, g_sum;

extern "C" int forge_kernel(const forge_call* call) {
  const forge_tensor& x = call->inputs[0];
  if (call->n_inputs != 1 || call->n_outputs != 1 || x.dtype != FORGE_FLOAT32 || x.ndim < 1) return 1;
  const int64_t cols = x.sizes[x.ndim - 1];
  int64_t rows = 1;
  for (int d = 0; d + 1 < x.ndim; ++d) rows *= x.sizes[d];
  const float* in = static_cast<const float*>(x.data);
  float* out = static_cast<float*>(call->outputs[0].data);
  volatile float* m = &g_max;  // volatile: every step goes through memory, as unoptimised shared state does
  volatile float* s = &g_sum;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = in + r * cols;
    float* yr = out + r * cols;
    *m = -INFINITY;
    for (int64_t c = 0; c < cols; ++c) *m = xr[c] > *m ? xr[c] : *m;
    *s = 0;
    for (int64_t c = 0; c < cols; ++c) {
      yr[c] = std::exp(xr[c] - *m);
      *s = *s + yr[c];
    }
    const float inv = 1.0f / *s;
    for (int64_t c = 0; c < cols; ++c) yr[c] *= inv;
  }
  return 0;
}
