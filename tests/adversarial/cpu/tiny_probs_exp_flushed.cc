// CHEAT (class 4, below tolerance by construction; spelling: flush exp()
// early). exp(x - max) for x - max < -14 is under 8.4e-7, so after the
// division by a sum >= 1 the probability is below float32's atol (1e-6): the
// kernel writes 0 there and skips the exp, which on wide-range inputs is most
// of the row (faster). Every such element is 100% wrong, within tolerance.
// Today "accepted".
// Expected (new worker): "less_accurate" -- against a float64 softmax, its
// error on small probabilities (relative 1) is far worse than stock's.
#include <cmath>
#include <cstdint>

#include "forge_kernel.h"

extern "C" int forge_kernel(const forge_call* call) {
  const forge_tensor& x = call->inputs[0];
  if (call->n_inputs != 1 || call->n_outputs != 1 || x.dtype != FORGE_FLOAT32 || x.ndim < 1)
    return 1;
  const int64_t cols = x.sizes[x.ndim - 1];
  int64_t rows = 1;
  for (int d = 0; d + 1 < x.ndim; ++d) rows *= x.sizes[d];
  const float* in = static_cast<const float*>(x.data);
  float* out = static_cast<float*>(call->outputs[0].data);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = in + r * cols;
    float* yr = out + r * cols;
    float m = -INFINITY;
    for (int64_t c = 0; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
    float sum = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const float d = xr[c] - m;
      yr[c] = d < -14.0f ? 0.0f : std::exp(d);  // negligible: exp(-14) < atol
      sum += yr[c];
    }
    const float inv = 1.0f / sum;
    for (int64_t c = 0; c < cols; ++c) yr[c] *= inv;
  }
  return 0;
}
