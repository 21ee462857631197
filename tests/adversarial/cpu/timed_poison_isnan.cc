// CHEAT (class 2, timed calls differ from checked calls; spelling: isnan of
// the first output element). The verifier fills every output with NaN before
// each checked call; the benchmark does not. So the kernel computes only when
// out[0] is NaN, and otherwise returns at once: every checked call is
// correct, every timed call does no work (the timed outputs are never
// compared). Today that is "accepted" at many times "faster".
// Expected (new worker): "wrong_result" -- timed calls get poison too,
// chosen at random per call, and k of them are compared with stock: a call
// whose poison is a finite value is skipped and its output (the poison)
// fails the comparison. (Were every poison a NaN, the kernel would compute
// on every call and simply be honest.)
#include <cmath>
#include <cstdint>

#include "forge_kernel.h"

namespace {
// The honest softmax of softmax_ok.cc, one row at a time.
void softmax_rows(const float* in, float* out, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = in + r * cols;
    float* yr = out + r * cols;
    float m = -INFINITY;
    for (int64_t c = 0; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
    float sum = 0;
    for (int64_t c = 0; c < cols; ++c) {
      yr[c] = std::exp(xr[c] - m);
      sum += yr[c];
    }
    const float inv = 1.0f / sum;
    for (int64_t c = 0; c < cols; ++c) yr[c] *= inv;
  }
}
}  // namespace

extern "C" int forge_kernel(const forge_call* call) {
  const forge_tensor& x = call->inputs[0];
  if (call->n_inputs != 1 || call->n_outputs != 1 || x.dtype != FORGE_FLOAT32 || x.ndim < 1)
    return 1;
  const int64_t cols = x.sizes[x.ndim - 1];
  int64_t rows = 1;
  for (int d = 0; d + 1 < x.ndim; ++d) rows *= x.sizes[d];
  const float* in = static_cast<const float*>(x.data);
  float* out = static_cast<float*>(call->outputs[0].data);
  if (!std::isnan(out[0])) return 0;  // not poisoned: nobody is looking
  softmax_rows(in, out, rows, cols);
  return 0;
}
