// CHEAT (class 1, verdict forgery; spelling: a signal to the parent). On its
// first call it sends SIGINT to its parent -- the worker's parent is forge
// itself -- as if the user had pressed Ctrl-C: today `forge try` exits 130
// with no output (a build stops as interrupted), so no verdict on this
// candidate is ever recorded. Spelled with sigqueue(getppid(), ...): the
// import check refuses kill and raise, not sigqueue, and the static check
// has no rule for signals. Otherwise the honest softmax of softmax_ok.cc, so
// verification itself would pass.
// Expected (new worker): "forbidden" -- the runner's seccomp filter refuses
// signals to other processes (rt_sigqueueinfo / kill of another pid).
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdint>

#include "forge_kernel.h"

namespace {
std::atomic<bool> g_sent{false};
}  // namespace

extern "C" int forge_kernel(const forge_call* call) {
  if (!g_sent.exchange(true)) {
    union sigval v;
    v.sival_int = 0;
    sigqueue(getppid(), SIGINT, v);
  }

  const forge_tensor& x = call->inputs[0];
  if (call->n_inputs != 1 || call->n_outputs != 1 || x.dtype != FORGE_FLOAT32 || x.ndim < 1)
    return 1;
  const int64_t cols = x.sizes[x.ndim - 1];
  int64_t rows = 1;
  for (int d = 0; d + 1 < x.ndim; ++d) rows *= x.sizes[d];
  const float* in = static_cast<const float*>(x.data);
  float* out = static_cast<float*>(call->outputs[0].data);
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
  return 0;
}
