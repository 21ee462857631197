// CHEAT (class 2, timed calls differ from checked calls; spelling: a result
// cache keyed on the first row's max). The first row's max is computed anyway
// (softmax needs it); with the row count it keys a kept copy of the last
// result, which is copied back when the key matches. Verification's runs
// either repeat identical values or rewrite the whole input (new first row,
// new key); the benchmark repeats the same values, so every timed call is a
// memcpy. Today "accepted", "faster".
// Expected (new worker): "wrong_result" -- only if two compared calls share
// the first row and differ elsewhere (an input rewritten in part: any row but
// the first); with wholly fresh content on every call the cache never hits
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
float g_key_max = NAN;
int64_t g_key_rows = -1;
std::vector<float> g_result;
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
  float m0 = -INFINITY;
  for (int64_t c = 0; c < cols; ++c) m0 = in[c] > m0 ? in[c] : m0;
  std::lock_guard<std::mutex> lock(g_mu);
  if (m0 == g_key_max && rows == g_key_rows && g_result.size() == n) {
    std::memcpy(out, g_result.data(), n * sizeof(float));
    return 0;
  }
  softmax_rows(in, out, rows, cols);
  g_key_max = m0;
  g_key_rows = rows;
  g_result.assign(out, out + n);
  return 0;
}
