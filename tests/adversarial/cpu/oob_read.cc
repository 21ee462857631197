// CHEAT (or bug): an out-of-bounds read. The sum runs one element past the
// row: inside the tensor that is the next row's first element, past the last
// row it is whatever follows the buffer. Rejected by verification (interior
// rows come out wrong): "wrong_result". A read past the end whose value is
// never used would not be caught on the CPU: the worker's guard bytes catch
// writes, and nothing faults on a read inside the heap.
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
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = in + r * cols;
    float m = -INFINITY, sum = 0;
    for (int64_t c = 0; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
    for (int64_t c = 0; c <= cols; ++c) sum += std::exp(xr[c] - m);  // <= : one too many
    for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = std::exp(xr[c] - m) / sum;
  }
  return 0;
}
