// CHEAT (or bug) (class 3, size holes; spelling: a NaN-dropping max and
// sum). The row max is std::fmax (which drops NaN) and a NaN element is
// skipped in the sum and written as 0, as a "masked softmax" would do: a row
// holding a NaN comes out as a clean distribution over its other elements,
// where the stock kernel gives the whole row NaN. Today no case has a NaN
// input: "accepted".
// Expected (new worker): "nan_mismatch" -- on the NaN-input special (the
// stock output is NaN where this one is finite).
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
    for (int64_t c = 0; c < cols; ++c) m = std::fmax(m, xr[c]);
    float sum = 0;
    for (int64_t c = 0; c < cols; ++c) {
      yr[c] = std::isnan(xr[c]) ? 0.0f : std::exp(xr[c] - m);
      sum += yr[c];
    }
    const float inv = 1.0f / sum;
    for (int64_t c = 0; c < cols; ++c) yr[c] *= inv;
  }
  return 0;
}
