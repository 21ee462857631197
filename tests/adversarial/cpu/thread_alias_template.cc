// CHEAT (class 5, static-check dodge; spelling: std::thread behind a
// namespace alias and an alias template). `lane<>` is std::thread, but the
// source never says "std::thread" (nor "thread name(" ): the static check's
// thread rule does not match, and the import check has nothing to refuse
// (the thread is started inside libstdc++). Each call hands the second half
// of the rows to a lane and joins it: right results, no thread left after
// the call, so today "accepted" (on two idle cores up to 2x "faster").
// Expected (new worker): "forbidden" -- a thread started during the call
// (clone refused by the runner's seccomp filter).
#include <cmath>
#include <cstdint>
#include <thread>

#include "forge_kernel.h"

namespace sys = std;
template <typename = void>
using lane = sys::thread;

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
  const int64_t first = rows / 2;
  if (first == 0) {
    softmax_rows(in, out, rows, cols);
    return 0;
  }
  lane<> helper([=] { softmax_rows(in + first * cols, out + first * cols, rows - first, cols); });
  softmax_rows(in, out, first, cols);
  helper.join();
  return 0;
}
