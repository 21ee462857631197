// CHEAT (class 2, timed calls differ from checked calls; spelling: the guard
// bytes before the input). Checked calls get canary guards around every
// buffer (today 64 KiB of 0xA5); the benchmark's buffers are plain
// allocations. So the kernel reads the 64 bytes before its input and
// computes only when they are one repeated nonzero byte (any canary value);
// after a plain allocation they hold the allocator's chunk header, and the
// kernel returns without computing. Today "accepted", much "faster".
// Expected (new worker): "wrong_result" or "nan_mismatch" -- timed calls sit
// between guards as well and k of them are compared; the guards' pattern is
// random per call, so a call whose guard is not one repeated byte is skipped
// and its output is that call's poison (were every guard one repeated byte,
// the kernel would compute every time and be honest).
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
bool guarded(const void* p) {
  const unsigned char* before = static_cast<const unsigned char*>(p) - 64;
  if (before[0] == 0) return false;
  for (int i = 1; i < 64; ++i)
    if (before[i] != before[0]) return false;
  return true;
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
  if (!guarded(in)) return 0;  // no canary: the benchmark
  softmax_rows(in, out, rows, cols);
  return 0;
}
