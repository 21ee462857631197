// BUG (class 6, a C++ exception; spelling: throw std::runtime_error). The
// kernel processes rows in blocks of 16 and, for a row count that is not a
// multiple of 16, throws instead of returning nonzero (as the ABI asks) or
// handling the tail. The captured 64 rows are fine; the 1-row edge case
// throws out of forge_kernel. Today the exception unwinds into the worker's
// request loop, which answers with an "internal error" -- forge records a
// worker error, not a rejection, and a search stops on that target.
// Expected (new worker): "exception" -- a rejection naming the exception
// (std::runtime_error: "softmax: rows must be a multiple of 16").
#include <cmath>
#include <cstdint>
#include <stdexcept>

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
  if (rows % 16 != 0) throw std::runtime_error("softmax: rows must be a multiple of 16");
  for (int64_t r0 = 0; r0 < rows; r0 += 16)
    softmax_rows(in + r0 * cols, out + r0 * cols, 16, cols);
  return 0;
}
