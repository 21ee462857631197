// CHEAT (class 2, timed calls differ from checked calls; spelling: a call
// counter). Verification comes first and makes a fixed number of calls --
// for this target today 16 cases x 4 runs = 64 -- and the benchmark after
// it: so the kernel is honest for its first 64 calls and afterwards returns
// at once (the benchmark's outputs keep what they held, nobody compares
// them). (The brief said 40: today's verification alone makes 64 calls, so
// 40 would be caught by verification; a cheater tunes the count.) Today
// "accepted", much "faster".
// Expected (new worker): "wrong_result" or "nan_mismatch" -- call counts and
// order are randomized and k timed calls (fresh inputs, fresh poison) are
// compared with stock: a call after the 64th leaves that call's poison
// (finite: wrong_result; a NaN: nan_mismatch), and the new verification,
// with many more cases, passes 64 calls by itself.
#include <atomic>
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

namespace {
std::atomic<int64_t> g_calls{0};
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
  if (g_calls.fetch_add(1) >= 64) return 0;  // verification is over
  softmax_rows(in, out, rows, cols);
  return 0;
}
