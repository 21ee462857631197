// Asked for gelu with approximate='none', computes the cheaper tanh
// approximation (off by up to about 5e-4): wrong against stock and against the
// float64 evaluation alike. Must be REJECTED (wrong_result) with the family's
// compare_float64 on: the float64 second chance accepts only results within
// the tolerance of the true value.
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
  for (int64_t i = 0; i < n; ++i) {
    const float v = in[i];
    out[i] = 0.5f * v * (1.0f + std::tanh(0.7978845608f * (v + 0.044715f * v * v * v)));
  }
  return 0;
}
