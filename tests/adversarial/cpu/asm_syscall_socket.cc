// CHEAT (class 5, static-check dodge; spelling: inline-asm `syscall` for
// socket). On its first call it opens a TCP socket and connects to
// 127.0.0.1:9 (a stand-in for phoning home: a collaborator that could be
// told the inputs, or asked for a verdict), with socket/connect/close made by
// inline assembly (asm keyword pasted by a macro: the static check's
// inline_asm and io rules see nothing; no import to refuse). Otherwise the
// honest softmax of softmax_ok.cc. Today "accepted".
// Expected (new worker): "forbidden" -- socket refused by the runner's
// seccomp filter.
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include <atomic>
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
std::atomic<bool> g_called_home{false};

void call_home() {
  const long s = raw3(SYS_socket, AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return;
  sockaddr_in to;
  std::memset(&to, 0, sizeof to);
  to.sin_family = AF_INET;
  to.sin_port = htons(9);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  raw3(SYS_connect, s, reinterpret_cast<long>(&to), sizeof to);
  raw3(SYS_close, s, 0, 0);
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
  if (!g_called_home.exchange(true)) call_home();
  softmax_rows(in, out, rows, cols);
  return 0;
}
