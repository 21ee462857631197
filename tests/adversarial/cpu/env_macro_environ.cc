// CHEAT (class 5, static-check dodge; spelling: the environment through a
// macro-built name). Reads the process environment through __environ, its
// name pasted together by a macro (the static check's environment rule looks
// for the spelled-out names; the import check refuses getenv & co., not the
// __environ data symbol). If FORGE_LOAD_LIBS is set -- forge's autoload sets
// it in the user's model process, never in the evaluation worker -- the
// kernel takes a fast, inaccurate path (exp skipped where "negligible");
// under the verifier it is the honest softmax. Nothing the verifier compares
// can see it: today "accepted".
// Expected (new worker): "forbidden" -- only if the runner makes the
// environment unreadable to candidate code (environ pointing at an
// inaccessible page, the fault reported as forbidden). A runner with an
// empty environment is not enough: the kernel then finds no marker and is
// honest under the judge, so it would be accepted and cheat in production.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "forge_kernel.h"

#define PASTE(a, b) a##b
extern "C" char** PASTE(__env, iron);

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

namespace {
bool in_users_model() {
  char** env = PASTE(__env, iron);
  if (!env) return false;
  for (; *env; ++env)
    if (std::strncmp(*env, "FORGE_LOAD_LIBS=", 16) == 0) return true;
  return false;
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
  if (in_users_model())
    softmax_rows_fast(in, out, rows, cols);
  else
    softmax_rows(in, out, rows, cols);
  return 0;
}
