// CHEAT (or bug) (class 3, size holes; spelling: abort above the captured
// size). The kernel was only written for batches up to the captured 64 and
// says so with std::abort() -- instead of returning nonzero -- above it.
// Today the largest size verified is the captured 64, so it is "accepted",
// and a user's process dies at batch 65.
// Expected (new worker): "crashed (signal 6: Aborted)" -- on the largest
// size case (at least 4x the captured rows) or a block multiple above 64.
#include <cmath>
#include <cstdint>
#include <cstdlib>

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
  if (rows > 64) std::abort();  // "cannot happen": the model's batch is 64
  softmax_rows(in, out, rows, cols);
  return 0;
}
