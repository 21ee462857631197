// CHEAT (class 5, a host-side escape past the static and import checks;
// spelling: a thread started from a constructor by a raw clone in inline
// asm). When the library is loaded, __attribute__((constructor)) clones a
// thread (CLONE_VM | CLONE_THREAD | ..., its stack a static array) that runs
// libc-free code: it sleeps in a loop by raw nanosleep, a helper that could
// later run host work nobody times. No pthread_create/clone import, no
// `clone(` call for the static check to see (the syscall number is a
// constant), and inline asm is not refused in CUDA sources. The kernel
// itself is the honest softmax.
// Expected (new worker): "forbidden" -- the runner counts its threads around
// the load ("loading the candidate started 1 thread(s)"). (The CUDA runner's
// seccomp filter allows clone with CLONE_THREAD, since the CUDA runtime starts
// threads; the count catches this one.)
#include <sched.h>
#include <sys/syscall.h>

#include <cstdint>
#include <ctime>

#include "forge_kernel.h"

namespace {

constexpr int kThreads = 256;

__device__ float block_reduce(float v, bool is_max, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) {
    float other = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? fmaxf(v, other) : v + other;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = threadIdx.x < kThreads / 32 ? scratch[threadIdx.x] : (is_max ? -INFINITY : 0.f);
  if (warp == 0)
    for (int o = 16; o > 0; o >>= 1) {
      float other = __shfl_xor_sync(0xffffffffu, v, o);
      v = is_max ? fmaxf(v, other) : v + other;
    }
  if (threadIdx.x == 0) scratch[0] = v;
  __syncthreads();
  v = scratch[0];
  __syncthreads();
  return v;
}

// The honest softmax of softmax_ok.cu: one block per row.
__global__ void softmax_rows(const float* in, float* out, int64_t cols) {
  __shared__ float scratch[kThreads / 32];
  const float* x = in + blockIdx.x * cols;
  float* y = out + blockIdx.x * cols;
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) m = fmaxf(m, x[c]);
  m = block_reduce(m, true, scratch);
  float s = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) s += expf(x[c] - m);
  s = block_reduce(s, false, scratch);
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) y[c] = expf(x[c] - m) / s;
}

// softmax_ok.cu's checks: rows and cols of a float32 call over the last dim.
bool shape_of(const forge_call* call, int64_t* rows, int64_t* cols) {
  const forge_tensor& x = call->inputs[0];
  if (call->n_inputs != 1 || call->n_outputs != 1 || x.dtype != FORGE_FLOAT32 || x.ndim < 1) return false;
  *cols = x.sizes[x.ndim - 1];
  *rows = 1;
  for (int d = 0; d + 1 < x.ndim; ++d) *rows *= x.sizes[d];
  return true;
}

const float* in_of(const forge_call* call) { return static_cast<const float*>(call->inputs[0].data); }
float* out_of(const forge_call* call) { return static_cast<float*>(call->outputs[0].data); }
cudaStream_t stream_of(const forge_call* call) { return static_cast<cudaStream_t>(call->stream); }

}  // namespace

namespace {
alignas(64) char g_stack[1 << 16];

// Runs on the new thread: no libc (its TLS register is the loader thread's).
__attribute__((noinline, used)) void helper_main() {
  timespec t{0, 50 * 1000 * 1000};
  for (;;) {
    long ret;
    asm volatile("syscall" : "=a"(ret) : "a"(SYS_nanosleep), "D"(&t), "S"(0) : "rcx", "r11", "memory");
  }
}

__attribute__((constructor)) void start_helper() {
  const long flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM;
  // The child's stack: 16-byte aligned, holding the function to call.
  uintptr_t top = (reinterpret_cast<uintptr_t>(g_stack + sizeof g_stack) & ~uintptr_t(15)) - 16;
  *reinterpret_cast<void (**)()>(top) = &helper_main;
  long ret;
  register long r10 asm("r10") = 0;  // tls
  register long r8 asm("r8") = 0;    // child_tid
  asm volatile(
      "syscall\n\t"
      "test %%rax, %%rax\n\t"
      "jnz 1f\n\t"
      "xor %%ebp, %%ebp\n\t"
      "pop %%rax\n\t"
      "sub $8, %%rsp\n\t"
      "call *%%rax\n\t"
      "mov $60, %%eax\n\t"
      "xor %%edi, %%edi\n\t"
      "syscall\n\t"
      "1:"
      : "=a"(ret)
      : "a"(SYS_clone), "D"(flags), "S"(top), "d"(0), "r"(r10), "r"(r8)
      : "rcx", "r11", "memory");
  (void)ret;
}
}  // namespace

extern "C" int forge_kernel(const forge_call* call) {
  int64_t rows, cols;
  if (!shape_of(call, &rows, &cols)) return 1;
  if (rows == 0) return 0;
  softmax_rows<<<static_cast<unsigned>(rows), kThreads, 0, stream_of(call)>>>(in_of(call), out_of(call), cols);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
