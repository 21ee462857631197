// CHEAT: a silent precision drop. Rounds every float32 input to bfloat16 (8
// bits of mantissa) before computing, as a kernel that loads half the bytes
// would. Errors of ~0.4% relative are far outside float32's tolerance
// (rtol 1e-5): rejected by verification, "wrong_result".
#include <cmath>
#include <cstdint>
#include <cstring>

#include "forge_kernel.h"

namespace {
float to_bf16(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000u;  // round to nearest even
  std::memcpy(&v, &bits, sizeof v);
  return v;
}
}  // namespace

extern "C" int forge_kernel(const forge_call* call) {
  const forge_tensor& x = call->inputs[0];
  const int64_t cols = x.sizes[x.ndim - 1];
  int64_t rows = 1;
  for (int d = 0; d + 1 < x.ndim; ++d) rows *= x.sizes[d];
  const float* in = static_cast<const float*>(x.data);
  float* out = static_cast<float*>(call->outputs[0].data);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = in + r * cols;
    float* yr = out + r * cols;
    float m = -INFINITY, sum = 0;
    for (int64_t c = 0; c < cols; ++c) m = std::fmax(m, to_bf16(xr[c]));
    for (int64_t c = 0; c < cols; ++c) sum += (yr[c] = to_bf16(std::exp(to_bf16(xr[c]) - m)));
    for (int64_t c = 0; c < cols; ++c) yr[c] = to_bf16(yr[c] / sum);
  }
  return 0;
}
