// CHEAT: a hard-coded shape. Tuned for the captured [64, 1000] input: rows in
// blocks of 16, with no tail loop (64 is a multiple of 16). Right on the
// captured shape; any other row count leaves rows unwritten. Rejected by the
// edge cases of the signature family (1, 3 and 17 rows): the unwritten rows
// still hold the NaN the worker filled the output with ("nan_mismatch").
#include <cmath>
#include <cstdint>

#include "forge_kernel.h"

extern "C" int forge_kernel(const forge_call* call) {
  const forge_tensor& x = call->inputs[0];
  const int64_t cols = x.sizes[x.ndim - 1];
  int64_t rows = 1;
  for (int d = 0; d + 1 < x.ndim; ++d) rows *= x.sizes[d];
  const float* in = static_cast<const float*>(x.data);
  float* out = static_cast<float*>(call->outputs[0].data);
  for (int64_t r0 = 0; r0 + 16 <= rows; r0 += 16) {
    for (int64_t r = r0; r < r0 + 16; ++r) {
      const float* xr = in + r * cols;
      float* yr = out + r * cols;
      float m = -INFINITY, sum = 0;
      for (int64_t c = 0; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
      for (int64_t c = 0; c < cols; ++c) sum += (yr[c] = std::exp(xr[c] - m));
      for (int64_t c = 0; c < cols; ++c) yr[c] /= sum;
    }
  }
  return 0;
}
