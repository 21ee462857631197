// SiLU, x * sigmoid(x), float32, any layout the signature fixes (contiguous here).
#include <cmath>
#include "forge_kernel.h"
extern "C" int forge_kernel(const forge_call* call) {
  const forge_tensor& x = call->inputs[0];
  forge_tensor& y = call->outputs[0];
  if (x.dtype != FORGE_FLOAT32 || y.dtype != FORGE_FLOAT32) return 1;
  int64_t n = 1;
  for (int d = 0; d < x.ndim; ++d) n *= x.sizes[d];
  const float* in = static_cast<const float*>(x.data);
  float* out = static_cast<float*>(y.data);
  for (int64_t i = 0; i < n; ++i) out[i] = in[i] / (1.0f + std::exp(-in[i]));
  return 0;
}
