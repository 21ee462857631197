// CHEAT (class 2, timed calls differ from checked calls; spelling: the
// poison's bit pattern). Reads three output elements (first, middle, last)
// as raw bits and computes only when all three hold 0x7FC00000, the quiet
// NaN that at::fill_(NaN) writes before every checked call. Timed calls find
// the previous result there and return at once, without computing; the
// timed outputs are never compared. Today "accepted" and much "faster".
// Expected (new worker): "wrong_result" or "nan_mismatch" -- poison is drawn
// at random per call, timed calls included, so the pattern rarely matches:
// the kernel skips a checked call and leaves that call's poison in the
// output (wrong_result when the poison is finite, nan_mismatch when it is
// some other NaN).
#include <cmath>
#include <cstdint>
#include <cstring>

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
bool poisoned(const float* out, int64_t n) {
  const int64_t at[3] = {0, n / 2, n - 1};
  for (int64_t i : at) {
    uint32_t bits;
    std::memcpy(&bits, out + i, sizeof bits);
    if (bits != 0x7FC00000u) return false;
  }
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
  if (rows * cols > 0 && !poisoned(out, rows * cols)) return 0;  // a timed call
  softmax_rows(in, out, rows, cols);
  return 0;
}
