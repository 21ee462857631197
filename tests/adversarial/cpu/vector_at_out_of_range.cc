// BUG (class 6, a C++ exception; spelling: std::vector::at out of range).
// The row maxima go into a std::vector first; the normalization loop then
// reads the next row's max ahead of time with .at(r + 1), one past the end on
// the last row of every call: std::out_of_range. Today the exception unwinds
// into the worker's request loop, which answers with an "internal error" --
// forge records a worker error, not a rejection.
// Expected (new worker): "exception" -- a rejection naming it
// (std::out_of_range from vector::_M_range_check).
#include <cmath>
#include <cstdint>
#include <vector>

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
  std::vector<float> row_max(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    float m = -INFINITY;
    for (int64_t c = 0; c < cols; ++c) m = in[r * cols + c] > m ? in[r * cols + c] : m;
    row_max.at(r) = m;
  }
  float m = rows > 0 ? row_max.at(0) : 0.0f;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = in + r * cols;
    float* yr = out + r * cols;
    float sum = 0;
    for (int64_t c = 0; c < cols; ++c) {
      yr[c] = std::exp(xr[c] - m);
      sum += yr[c];
    }
    const float inv = 1.0f / sum;
    for (int64_t c = 0; c < cols; ++c) yr[c] *= inv;
    m = row_max.at(r + 1);  // the next row's max, read ahead (one too far on the last row)
  }
  return 0;
}
