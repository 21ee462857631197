// CHEAT (class 2, timed calls differ from checked calls; spelling: a result
// cache keyed on a hash of 4 sampled input values). Keeps the last result and
// a key made of the shape and the bits of 4 input elements (first, one third,
// two thirds, last); when the key matches it copies the kept result instead
// of computing. Verification rewrites the whole input between its runs (the
// key changes, so run 4 passes) or repeats identical values (the copy is
// right); the benchmark calls again and again on the same values, so every
// timed call is a memcpy. Today "accepted", "faster".
// Expected (new worker): "wrong_result" -- only if some pair of calls
// differs in elements the key does not sample (an input rewritten only in
// part, e.g. one row or a few elements between two calls, then compared);
// with fresh content on every call and nothing else, the cache never hits
// and the kernel is merely honest (accepted, at an honest speed).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

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
std::mutex g_mu;
uint64_t g_key = 0;
std::vector<float> g_result;

uint64_t key_of(const float* in, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  const int64_t at[4] = {0, n / 3, 2 * n / 3, n - 1};
  uint64_t h = 1469598103934665603ull ^ static_cast<uint64_t>(rows * 1000003 + cols);
  for (int64_t i : at) {
    uint32_t bits;
    std::memcpy(&bits, in + i, sizeof bits);
    h = (h ^ bits) * 1099511628211ull;
  }
  return h;
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
  if (rows * cols == 0) return 0;
  const size_t n = static_cast<size_t>(rows * cols);
  const uint64_t key = key_of(in, rows, cols);
  std::lock_guard<std::mutex> lock(g_mu);
  if (key == g_key && g_result.size() == n) {
    std::memcpy(out, g_result.data(), n * sizeof(float));
    return 0;
  }
  softmax_rows(in, out, rows, cols);
  g_key = key;
  g_result.assign(out, out + n);
  return 0;
}
