// CHEAT: returning / aliasing an input. In this ABI the caller allocates the
// output, so a kernel cannot return its input; the closest it can do is to
// compute in place in the input buffer and point the output's descriptor at
// it (call->outputs is writable), saving the output traffic. Rejected by the
// worker's descriptor check: "aliased_output".
#include <cmath>
#include <cstdint>

#include "forge_kernel.h"

extern "C" int forge_kernel(const forge_call* call) {
  const forge_tensor& x = call->inputs[0];
  const int64_t cols = x.sizes[x.ndim - 1];
  int64_t rows = 1;
  for (int d = 0; d + 1 < x.ndim; ++d) rows *= x.sizes[d];
  float* data = static_cast<float*>(x.data);  // the input, written in place
  for (int64_t r = 0; r < rows; ++r) {
    float* xr = data + r * cols;
    float m = -INFINITY, sum = 0;
    for (int64_t c = 0; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
    for (int64_t c = 0; c < cols; ++c) sum += (xr[c] = std::exp(xr[c] - m));
    for (int64_t c = 0; c < cols; ++c) xr[c] /= sum;
  }
  call->outputs[0].data = x.data;
  return 0;
}
