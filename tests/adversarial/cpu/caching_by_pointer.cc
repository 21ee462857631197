// CHEAT: caching by pointer. The first call on an input address computes and
// keeps the result; every later call on the same address copies the kept
// result back, whatever the input now holds. A benchmark that reuses one
// buffer times a memcpy. Rejected by verification: the worker refills the same
// input buffers with new values and calls again -> "wrong_result".
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "forge_kernel.h"

namespace {
const void* g_cached_input = nullptr;
std::vector<float> g_cached_output;

void softmax_rows(const float* in, float* out, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = in + r * cols;
    float* yr = out + r * cols;
    float m = -INFINITY, sum = 0;
    for (int64_t c = 0; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
    for (int64_t c = 0; c < cols; ++c) sum += (yr[c] = std::exp(xr[c] - m));
    for (int64_t c = 0; c < cols; ++c) yr[c] /= sum;
  }
}
}  // namespace

extern "C" int forge_kernel(const forge_call* call) {
  const forge_tensor& x = call->inputs[0];
  const int64_t cols = x.sizes[x.ndim - 1];
  int64_t rows = 1;
  for (int d = 0; d + 1 < x.ndim; ++d) rows *= x.sizes[d];
  const size_t n = static_cast<size_t>(rows * cols);
  float* out = static_cast<float*>(call->outputs[0].data);
  if (x.data == g_cached_input && g_cached_output.size() == n) {
    std::memcpy(out, g_cached_output.data(), n * sizeof(float));
    return 0;
  }
  softmax_rows(static_cast<const float*>(x.data), out, rows, cols);
  g_cached_input = x.data;
  g_cached_output.assign(out, out + n);
  return 0;
}
