// CHEAT (or bug) (class 3, size holes; spelling: an all -inf row gives 0).
// A fully masked row (every element -inf) is written as all zeros -- what
// attention code often wants -- where the stock kernel gives NaN (max = -inf,
// then 0/0). Today's neg_inf_row special already has such a row.
// Expected (new worker): "nan_mismatch" -- on the all -inf special.
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
    if (m == -INFINITY) {  // fully masked: no probability anywhere
      for (int64_t c = 0; c < cols; ++c) yr[c] = 0.0f;
      continue;
    }
    float sum = 0;
    for (int64_t c = 0; c < cols; ++c) {
      yr[c] = std::exp(xr[c] - m);
      sum += yr[c];
    }
    const float inv = 1.0f / sum;
    for (int64_t c = 0; c < cols; ++c) yr[c] *= inv;
  }
  return 0;
}
