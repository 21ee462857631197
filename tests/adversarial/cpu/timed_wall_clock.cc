// CHEAT (class 2, timed calls differ from checked calls; spelling: wall time
// since the first call). Verification runs first, the benchmark after it. So
// the kernel is honest for the first 0.5 s after its first call and
// afterwards returns at once, leaving whatever the output holds. (Today's
// softmax verification takes longer than 0.5 s on a loaded 2-core VM, about
// 11-13 s, so there the kernel is caught by verification itself; on a
// machine where verification is quicker than the window it is not.)
// Expected (new worker): "wrong_result" or "nan_mismatch" (or
// "thread_unsafe", when the window ends in the concurrency check) -- timed calls are
// checked too (k of them, with fresh inputs and random poison), and call
// order and count are randomized: a call after the window leaves that
// call's poison in the output (finite: wrong_result; NaN: nan_mismatch).
#include <atomic>
#include <chrono>
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
constexpr double WINDOW = 0.5;  // seconds
std::atomic<int64_t> g_first_ns{0};

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
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
  const int64_t t = now_ns();
  int64_t first = 0;
  if (g_first_ns.compare_exchange_strong(first, t)) first = t;
  if (static_cast<double>(t - first) * 1e-9 > WINDOW) return 0;  // the benchmark by now
  softmax_rows(in, out, rows, cols);
  return 0;
}
