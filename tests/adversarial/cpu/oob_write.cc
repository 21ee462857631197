// CHEAT (or bug): an out-of-bounds write. Computes correctly, then writes one
// element past the end of the output. The worker surrounds every buffer with
// guard bytes and checks them after the call: "out_of_bounds".
#include <cmath>
#include <cstdint>

#include "forge_kernel.h"

extern "C" int forge_kernel(const forge_call* call) {
  const forge_tensor& x = call->inputs[0];
  const int64_t cols = x.sizes[x.ndim - 1];
  int64_t rows = 1;
  for (int d = 0; d + 1 < x.ndim; ++d) rows *= x.sizes[d];
  const float* in = static_cast<const float*>(x.data);
  float* out = static_cast<float*>(call->outputs[0].data);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = in + r * cols;
    float* yr = out + r * cols;
    float m = -INFINITY, sum = 0;
    for (int64_t c = 0; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
    for (int64_t c = 0; c < cols; ++c) sum += (yr[c] = std::exp(xr[c] - m));
    for (int64_t c = 0; c < cols; ++c) yr[c] /= sum;
  }
  out[rows * cols] = 0.0f;  // one past the end
  return 0;
}
