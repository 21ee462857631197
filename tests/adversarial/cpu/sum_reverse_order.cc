// sum.dim_IntList over dim 1 of a contiguous float32 [R, N, C] tensor, each
// output summed in fp32 from the last term to the first: an honest order,
// about ten times further from the float64 sum than torch's cascade sum on a
// CPU. Must be ACCEPTED where the family sets compare_float64 (its error stays
// within the accuracy rule's factor of stock's), REJECTED without it: where a
// sum cancels it differs from stock by more than the family's atol.
#include <cstdint>

#include "forge_kernel.h"

extern "C" int forge_kernel(const forge_call* call) {
  if (call->n_inputs != 1 || call->n_outputs != 1) return 1;
  const forge_tensor& x = call->inputs[0];
  const forge_tensor& y = call->outputs[0];
  if (x.dtype != FORGE_FLOAT32 || y.dtype != FORGE_FLOAT32 || x.ndim != 3 || y.ndim != 2) return 1;
  const int64_t R = x.sizes[0], N = x.sizes[1], C = x.sizes[2];
  if (x.strides[2] != 1 || x.strides[1] != C || x.strides[0] != N * C) return 1;
  if (y.sizes[0] != R || y.sizes[1] != C || y.strides[1] != 1 || y.strides[0] != C) return 1;
  const float* in = static_cast<const float*>(x.data);
  float* out = static_cast<float*>(y.data);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) {
      float acc = 0.f;
      for (int64_t n = N - 1; n >= 0; --n) acc += in[(r * N + n) * C + c];
      out[r * C + c] = acc;
    }
  return 0;
}
