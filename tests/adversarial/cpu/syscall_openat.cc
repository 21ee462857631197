// CHEAT (class 5, static-check dodge; spelling: syscall(SYS_openat, ...)
// directly). Opens and reads /proc/self/cmdline with raw system calls --
// written `(syscall)(SYS_openat, ...)`, which the static check's io rule
// (`syscall\s*\(`) does not match; the import check does not refuse
// syscall -- to learn whether it runs inside forge's evaluation worker. Only
// there is it the honest softmax; anywhere else (the user's model) it takes a
// fast, inaccurate path. Today "accepted".
// Expected (new worker): "forbidden" -- openat refused by the runner's
// seccomp filter. (Were openat merely to fail, or the runner not be named
// forge_worker, the kernel would take its inaccurate path: "less_accurate"
// then.)
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

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
bool under_the_verifier() {
  const long fd = (syscall)(SYS_openat, AT_FDCWD, "/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[512] = {};
  const long n = (syscall)(SYS_read, fd, buf, sizeof buf - 1);
  (syscall)(SYS_close, fd);
  return n > 0 && std::strstr(buf, "forge_worker") != nullptr;  // argv[0], NUL-terminated
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
  static const bool verifier = under_the_verifier();
  if (verifier)
    softmax_rows(in, out, rows, cols);
  else
    softmax_rows_fast(in, out, rows, cols);
  return 0;
}
