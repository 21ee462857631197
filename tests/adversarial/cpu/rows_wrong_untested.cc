// CHEAT (or bug) (class 3, size holes; spelling: wrong at row counts the
// verifier never tries). An even row count other than the captured 64 takes
// a "two rows at a time" path whose second row reuses the first row's sum:
// wrong at 2, 4, 6, 8, ... rows, right at 1, 3, 17 (odd) and 64 (its own
// path) -- exactly today's edge sizes and the captured one, so today it is
// "accepted", and the package would use it at batch 2.
// Expected (new worker): "wrong_result" -- every row count 1..64 is tried,
// so 2 rows (the first even count) fails.
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
// Two rows per pass, both maxima and sums in one sweep; the second row is
// normalized with the first row's sum (the bug).
void softmax_pairs(const float* in, float* out, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r + 1 < rows; r += 2) {
    const float* xa = in + r * cols;
    const float* xb = xa + cols;
    float* ya = out + r * cols;
    float* yb = ya + cols;
    float ma = -INFINITY, mb = -INFINITY;
    for (int64_t c = 0; c < cols; ++c) {
      ma = xa[c] > ma ? xa[c] : ma;
      mb = xb[c] > mb ? xb[c] : mb;
    }
    float sa = 0, sb = 0;
    for (int64_t c = 0; c < cols; ++c) {
      ya[c] = std::exp(xa[c] - ma);
      yb[c] = std::exp(xb[c] - mb);
      sa += ya[c];
      sb += yb[c];
    }
    const float ia = 1.0f / sa, ib = 1.0f / sa;  // should be 1 / sb
    (void)sb;
    for (int64_t c = 0; c < cols; ++c) {
      ya[c] *= ia;
      yb[c] *= ib;
    }
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
  if (rows % 2 == 0 && rows != 64)
    softmax_pairs(in, out, rows, cols);
  else
    softmax_rows(in, out, rows, cols);
  return 0;
}
