// gelu (approximate='none') of a contiguous float32 tensor, computed in double
// and rounded once: the correctly rounded result. Must be ACCEPTED where the
// family sets compare_float64, although near x = -3.45 it differs from torch's
// CPU kernel by more than the family's atol (stock's vectorized erf is off
// there, not this kernel). ±inf follow the formula (+inf, NaN); stock's
// vector path gives +inf on some CPUs and NaN on others, so the test that
// sends it leaves infinities out of its cases.
#include <cmath>
#include <cstdint>

#include "forge_kernel.h"

extern "C" int forge_kernel(const forge_call* call) {
  if (call->n_inputs != 1 || call->n_outputs != 1) return 1;
  const forge_tensor& x = call->inputs[0];
  const forge_tensor& y = call->outputs[0];
  if (x.dtype != FORGE_FLOAT32 || y.dtype != FORGE_FLOAT32) return 1;
  int64_t n = 1, expect = 1;
  for (int d = x.ndim - 1; d >= 0; --d) {
    if (x.sizes[d] != 1 && (x.strides[d] != expect || y.strides[d] != expect)) return 1;  // contiguous only
    expect *= x.sizes[d];
    n *= x.sizes[d];
  }
  const float* in = static_cast<const float*>(x.data);
  float* out = static_cast<float*>(y.data);
  for (int64_t i = 0; i < n; ++i) {
    const double v = in[i];
    out[i] = static_cast<float>(0.5 * v * (1.0 + std::erf(v * 0.70710678118654752440)));
  }
  return 0;
}
