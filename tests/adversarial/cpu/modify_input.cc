// CHEAT: modifying an input. Uses the input buffer as scratch (it holds
// exp(x - max) afterwards), which saves a pass over the output but corrupts
// the caller's tensor. Rejected by verification, which compares the inputs bit
// for bit after the call: "input_modified".
#include <cmath>
#include <cstdint>

#include "forge_kernel.h"

extern "C" int forge_kernel(const forge_call* call) {
  const forge_tensor& x = call->inputs[0];
  const int64_t cols = x.sizes[x.ndim - 1];
  int64_t rows = 1;
  for (int d = 0; d + 1 < x.ndim; ++d) rows *= x.sizes[d];
  float* in = static_cast<float*>(x.data);
  float* out = static_cast<float*>(call->outputs[0].data);
  for (int64_t r = 0; r < rows; ++r) {
    float* xr = in + r * cols;
    float m = -INFINITY, sum = 0;
    for (int64_t c = 0; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
    for (int64_t c = 0; c < cols; ++c) sum += (xr[c] = std::exp(xr[c] - m));
    for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = xr[c] / sum;
  }
  return 0;
}
