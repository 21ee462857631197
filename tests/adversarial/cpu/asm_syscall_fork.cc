// CHEAT (class 5, static-check dodge; spelling: inline-asm `syscall` for
// fork). On its first call it forks the worker with a raw fork system call
// (asm keyword pasted by a macro: the static check's inline_asm and thread
// rules see nothing; no fork import for the import check to refuse). A child
// of the worker is outside every check the worker makes on the call -- it
// could go on writing, wait for the verdict, or outlive the worker; this one
// exits at once and the parent reaps it. Otherwise the honest softmax of
// softmax_ok.cc. Today "accepted".
// Expected (new worker): "forbidden" -- fork refused by the runner's seccomp
// filter.
#include <sys/syscall.h>

#include <atomic>
#include <cmath>
#include <cstdint>

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
long raw4(long n, long a, long b, long c, long d) {
  long ret;
  register long r10 ASM_("r10") = d;
  ASM_ volatile("syscall" : "=a"(ret) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10) : "rcx", "r11", "memory");
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
std::atomic<bool> g_forked{false};

void fork_once() {
  const long pid = raw3(SYS_fork, 0, 0, 0);
  if (pid == 0) {
    raw3(SYS_exit_group, 0, 0, 0);  // the child: gone at once, no atexit handlers
    __builtin_unreachable();
  }
  if (pid > 0) {
    int status = 0;
    raw4(SYS_wait4, pid, reinterpret_cast<long>(&status), 0, 0);
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
  if (!g_forked.exchange(true)) fork_once();
  softmax_rows(in, out, rows, cols);
  return 0;
}
