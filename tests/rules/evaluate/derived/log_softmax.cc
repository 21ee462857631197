// log_softmax over the last dim, float32, contiguous rows.
#include <cmath>
#include "forge_kernel.h"
extern "C" int forge_kernel(const forge_call* call) {
  const forge_tensor& x = call->inputs[0];
  forge_tensor& y = call->outputs[0];
  if (x.dtype != FORGE_FLOAT32 || y.dtype != FORGE_FLOAT32 || x.ndim < 1) return 1;
  const int64_t dim = call->scalars[0].i;
  if (dim != -1 && dim != x.ndim - 1) return 1;
  const int64_t cols = x.sizes[x.ndim - 1];
  int64_t rows = 1;
  for (int d = 0; d + 1 < x.ndim; ++d) rows *= x.sizes[d];
  const float* in = static_cast<const float*>(x.data);
  float* out = static_cast<float*>(y.data);
  for (int64_t r = 0; r < rows; ++r) {
    const float* a = in + r * cols;
    float m = -INFINITY;
    for (int64_t c = 0; c < cols; ++c) m = std::fmax(m, a[c]);
    double s = 0;
    for (int64_t c = 0; c < cols; ++c) s += std::exp(static_cast<double>(a[c]) - m);
    const double lse = m + std::log(s);
    for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = static_cast<float>(a[c] - lse);
  }
  return 0;
}
