// Asked for gelu with approximate='none', computes x * sigmoid(1.702 x) ("quick
// gelu", off by up to about 2e-2). Must be REJECTED (wrong_result) with the
// family's compare_float64 on, like gelu_tanh_for_erf.cc: a second spelling
// of an approximation passed off as the exact op.
#include <cmath>
#include <cstdint>

#include "forge_kernel.h"

extern "C" int forge_kernel(const forge_call* call) {
  if (call->n_inputs != 1 || call->n_outputs != 1) return 1;
  const forge_tensor& x = call->inputs[0];
  if (x.dtype != FORGE_FLOAT32 || call->outputs[0].dtype != FORGE_FLOAT32) return 1;
  int64_t n = 1;
  for (int d = 0; d < x.ndim; ++d) n *= x.sizes[d];
  const float* in = static_cast<const float*>(x.data);
  float* out = static_cast<float*>(call->outputs[0].data);
  for (int64_t i = 0; i < n; ++i) out[i] = in[i] / (1.0f + std::exp(-1.702f * in[i]));
  return 0;
}
