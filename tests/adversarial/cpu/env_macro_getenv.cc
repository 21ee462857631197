// CHEAT (class 5, static-check dodge; spelling: getenv's name pasted together
// by a macro). The static check's environment rule looks for `getenv(` and
// does not see `ENV_READ(get, env)(`; but the library then imports getenv,
// which the worker's ELF import check refuses before loading it. If
// FORGE_LOAD_LIBS is set (forge's autoload sets it in the user's model,
// never in the worker) the kernel takes a fast, inaccurate path; otherwise
// it is the honest softmax. Today: "bad_candidate" (the import check).
// Expected (new worker): "bad_candidate" -- the import check legitimately
// catches this spelling (env_macro_environ.cc and env_link_map_getenv.cc are
// the spellings that get past it).
#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "forge_kernel.h"

#define ENV_READ(a, b) a##b

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
// The production path: exp() skipped where it is "negligible" (class 4's
// cheat), never run under the verifier.
void softmax_rows_fast(const float* in, float* out, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = in + r * cols;
    float* yr = out + r * cols;
    float m = -INFINITY;
    for (int64_t c = 0; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
    float sum = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const float d = xr[c] - m;
      yr[c] = d < -14.0f ? 0.0f : std::exp(d);
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
  if (ENV_READ(get, env)("FORGE_LOAD_LIBS") != nullptr)
    softmax_rows_fast(in, out, rows, cols);
  else
    softmax_rows(in, out, rows, cols);
  return 0;
}
