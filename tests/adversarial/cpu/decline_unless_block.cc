// A softmax written for blocks of 16 rows that declines any row count not a
// multiple of 16: most of the size sweep. Must be REJECTED (declined: more
// than the family allows).
#include <cmath>
#include <cstdint>

#include "forge_kernel.h"

extern "C" int forge_kernel(const forge_call* call) {
  const forge_tensor& x = call->inputs[0];
  if (call->n_inputs != 1 || call->n_outputs != 1 || x.dtype != FORGE_FLOAT32 || x.ndim != 2) return 1;
  const int64_t rows = x.sizes[0], cols = x.sizes[1];
  if (rows % 16 != 0) return 3;
  const float* in = static_cast<const float*>(x.data);
  float* out = static_cast<float*>(call->outputs[0].data);
  for (int64_t b = 0; b < rows; b += 16)
    for (int64_t r = b; r < b + 16; ++r) {
      const float* xr = in + r * cols;
      float* yr = out + r * cols;
      float m = -INFINITY, sum = 0;
      for (int64_t c = 0; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
      for (int64_t c = 0; c < cols; ++c) sum += (yr[c] = std::exp(xr[c] - m));
      const float inv = 1.0f / sum;
      for (int64_t c = 0; c < cols; ++c) yr[c] *= inv;
    }
  return 0;
}
