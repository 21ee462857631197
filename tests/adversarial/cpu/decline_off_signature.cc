// A softmax that handles only the captured row count and declines every other
// size (a nonzero return: the package would fall back to stock everywhere but
// the captured call). Must be REJECTED (declined: more than the family allows).
#include <cmath>
#include <cstdint>

#include "forge_kernel.h"

extern "C" int forge_kernel(const forge_call* call) {
  const forge_tensor& x = call->inputs[0];
  if (call->n_inputs != 1 || call->n_outputs != 1 || x.dtype != FORGE_FLOAT32 || x.ndim != 2) return 1;
  if (x.sizes[0] != 64) return 2;
  const int64_t rows = x.sizes[0], cols = x.sizes[1];
  const float* in = static_cast<const float*>(x.data);
  float* out = static_cast<float*>(call->outputs[0].data);
  for (int64_t r = 0; r < rows; ++r) {
    float m = -INFINITY, sum = 0;
    for (int64_t c = 0; c < cols; ++c) m = std::fmax(m, in[r * cols + c]);
    for (int64_t c = 0; c < cols; ++c) sum += (out[r * cols + c] = std::exp(in[r * cols + c] - m));
    for (int64_t c = 0; c < cols; ++c) out[r * cols + c] /= sum;
  }
  return 0;
}
