// sum.dim_IntList over dim 1 of a contiguous float32 [R, N, C] tensor with
// every term rounded to bfloat16 first: a precision drop passed off as the
// float32 op, off by far more than stock's own error. Must be REJECTED
// (wrong_result) with compare_float64 too.
#include <cstdint>
#include <cstring>

#include "forge_kernel.h"

static float to_bf16(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  b = (b + 0x7FFFu + ((b >> 16) & 1u)) & 0xFFFF0000u;  // round to nearest even
  std::memcpy(&v, &b, 4);
  return v;
}

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
      for (int64_t n = 0; n < N; ++n) acc += to_bf16(in[(r * N + n) * C + c]);
      out[r * C + c] = acc;
    }
  return 0;
}
