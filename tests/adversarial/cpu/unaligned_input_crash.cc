// CHEAT (or bug) (class 3, size holes; spelling: an alignment assumption).
// Written for 64-byte aligned rows (what the worker's fresh buffers always
// are); an input that is a view with a storage offset -- x[1:], a slice of a
// bigger tensor, as the package will be handed -- hits a "cannot happen"
// branch that writes through a null pointer (instead of returning nonzero or
// taking a scalar path). Today every case is a fresh aligned buffer:
// "accepted".
// Expected (new worker): "crashed (signal 11: Segmentation fault)" -- on the
// storage-offset case.
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
  if (reinterpret_cast<uintptr_t>(in) % 64 != 0 || reinterpret_cast<uintptr_t>(out) % 64 != 0) {
    volatile float* unreachable = nullptr;
    *unreachable = 0.0f;  // "the allocator always aligns"
  }
  softmax_rows(in, out, rows, cols);
  return 0;
}
