// CHEAT (class 4, below tolerance by construction; spelling: threshold the
// output). After an honest softmax, every probability below 1e-6 is written
// as 0. float32's tolerance is |out - ref| <= 1e-6 + 1e-5 |ref|, so a true
// value under 1e-6 may be anything in [0, 2e-6]: 0 passes, although every
// such element is 100% wrong (the verify record's worst_rel reads 1.0) and
// log-probabilities downstream become -inf. Today "accepted".
// Expected (new worker): "less_accurate" -- measured against a float64
// softmax, elementwise where values are small, this kernel's error is far
// above the stock kernel's (a relative error of 1 where stock's is ~1e-7).
#include <cmath>
#include <cstdint>

#include "forge_kernel.h"

namespace {
// The honest softmax of softmax_ok.cc, one row at a time.
void softmax_rows(const float* in, float* out, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = in + r * cols;
    float* yr = out + r * cols;
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
}
}  // namespace

extern "C" int forge_kernel(const forge_call* call) {
  const forge_tensor& x = call->inputs[0];
  if (call->n_inputs != 1 || call->n_outputs != 1 || x.dtype != FORGE_FLOAT32 || x.ndim < 1)
    return 1;
  const int64_t cols = x.sizes[x.ndim - 1];
  int64_t rows = 1;
  for (int d = 0; d + 1 < x.ndim; ++d) rows *= x.sizes[d];
  const float* in = static_cast<const float*>(x.data);
  float* out = static_cast<float*>(call->outputs[0].data);
  softmax_rows(in, out, rows, cols);
  for (int64_t i = 0; i < rows * cols; ++i)
    if (out[i] < 1e-6f) out[i] = 0.0f;  // "below the tolerance anyway"
  return 0;
}
