// CHEAT (class 5, static-check dodge; spelling: inline-asm `syscall` for
// openat). Reads /proc/self/cmdline with openat/read/close made by inline
// assembly -- the asm keyword pasted together by a macro, so the static
// check's inline_asm rule does not see it, and no libc import at all -- to
// learn whether it runs inside forge's evaluation worker: only there is it
// the honest softmax; elsewhere (the user's model) a fast, inaccurate one.
// Today "accepted".
// Expected (new worker): "forbidden" -- openat refused by the runner's
// seccomp filter (a raw syscall instruction meets the filter like any other).
// (Were openat merely to fail, or the runner not be named forge_worker, the
// kernel would take its inaccurate path: "less_accurate" then.)
#include <fcntl.h>
#include <sys/syscall.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "forge_kernel.h"

// Raw x86-64 system calls. The keyword is pasted together so that the static
// check's inline_asm rule (which looks for asm / __asm / __asm__) does not see it.
#define ASM_ __as##m__

namespace {
long raw3(long n, long a, long b, long c) {
  long ret;
  ASM_ volatile("syscall" : "=a"(ret) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
  return ret;
}
}  // namespace

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
  static const char path[] = "/proc/self/cmdline";
  const long fd = raw3(SYS_openat, AT_FDCWD, reinterpret_cast<long>(path), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[512] = {};
  const long n = raw3(SYS_read, fd, reinterpret_cast<long>(buf), sizeof buf - 1);
  raw3(SYS_close, fd, 0, 0);
  return n > 0 && std::strstr(buf, "forge_worker") != nullptr;
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
