// CHEAT (class 7, timer tampering; spelling: a std::chrono hook in the
// candidate, installed by patching libstdc++'s code). On its first call the
// kernel makes the page of std::chrono::steady_clock::now() writable
// (mprotect: no static rule, no import refused) and overwrites its first 12
// bytes with "movabs rax, hook; jmp rax". The hook, defined in the candidate,
// reads CLOCK_MONOTONIC itself (clock_gettime) and subtracts an offset; each
// kernel call adds 90% of its own duration to the offset just before
// returning, so the worker's reading right after a candidate call comes
// early: every timed candidate call looks 10x shorter, stock calls time
// right, the clock stays monotonic. Results are honest. Today "accepted",
// ~10x the honest speedup.
// Expected (new worker): "timing_mismatch" -- the judge's own clock, in a
// process the candidate cannot write, disagrees with the runner's figures.
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <mutex>

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
using Clock = std::chrono::steady_clock;

std::atomic<int64_t> g_offset_ns{0};

int64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

Clock::time_point hooked_now() {
  return Clock::time_point(std::chrono::nanoseconds(monotonic_ns() - g_offset_ns.load()));
}

void install_hook() {
  unsigned char* target = reinterpret_cast<unsigned char*>(&Clock::now);
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t start = reinterpret_cast<uintptr_t>(target) & ~(page - 1);
  if (mprotect(reinterpret_cast<void*>(start), 2 * page, PROT_READ | PROT_WRITE | PROT_EXEC) != 0) return;
  unsigned char jump[12] = {0x48, 0xB8, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xE0};  // movabs rax, imm64; jmp rax
  const uint64_t hook = reinterpret_cast<uint64_t>(&hooked_now);
  std::memcpy(jump + 2, &hook, sizeof hook);
  std::memcpy(target, jump, sizeof jump);
  mprotect(reinterpret_cast<void*>(start), 2 * page, PROT_READ | PROT_EXEC);
}

std::once_flag g_once;
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
  std::call_once(g_once, install_hook);
  const int64_t t0 = monotonic_ns();
  softmax_rows(in, out, rows, cols);
  g_offset_ns.fetch_add((monotonic_ns() - t0) * 9 / 10);  // the worker's next reading comes 90% "earlier"
  return 0;
}
