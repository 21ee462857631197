// CHEAT (or bug) (class 3, size holes; spelling: a fixed scratch array of 100
// row maxima, bounds-checked with abort()). The maxima of all rows go into a
// static-size array first; a batch over 100 rows aborts (instead of returning
// nonzero). Today no case has more than 64 rows: "accepted", and a user's
// batch of 101 kills the process.
// Expected (new worker): "crashed (signal 6: Aborted)" -- on the largest
// size case (at least 4 x 64 = 256 rows).
#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "forge_kernel.h"

namespace {
constexpr int64_t kMaxRows = 100;
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
  float row_max[kMaxRows];
  if (rows > kMaxRows) abort();
  for (int64_t r = 0; r < rows; ++r) {
    float m = -INFINITY;
    for (int64_t c = 0; c < cols; ++c) m = in[r * cols + c] > m ? in[r * cols + c] : m;
    row_max[r] = m;
  }
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = in + r * cols;
    float* yr = out + r * cols;
    float sum = 0;
    for (int64_t c = 0; c < cols; ++c) {
      yr[c] = std::exp(xr[c] - row_max[r]);
      sum += yr[c];
    }
    const float inv = 1.0f / sum;
    for (int64_t c = 0; c < cols; ++c) yr[c] *= inv;
  }
  return 0;
}
