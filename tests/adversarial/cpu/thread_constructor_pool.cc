// CHEAT (class 5, static-check dodge; spelling: a thread pool started from
// __attribute__((constructor)), std::thread spelled by a macro). The helper
// thread starts when the library is loaded -- before the worker counts
// threads around any call -- and waits on a condition variable; each call
// hands it the second half of the rows and waits for it to finish, so the
// results are final on return and the thread count is the same before and
// after every call. Today "accepted" (on two idle cores up to 2x "faster").
// Expected (new worker): "forbidden" -- a thread started at load (clone
// refused by the seccomp filter, or a thread found alive after the load).
#include <condition_variable>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <thread>

#include "forge_kernel.h"

#define STD_(name) std::name

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
// The pool's state lives in a function-local static (the constructor below
// may run before this file's other globals are initialized), never destroyed
// (the pool thread waits on it until the process ends).
struct Pool {
  std::mutex mu;
  std::condition_variable cv;
  const float* in = nullptr;
  float* out = nullptr;
  int64_t rows = 0, cols = 0;
  bool pending = false, ready = false;
};

Pool& pool() {
  static Pool* p = new Pool;
  return *p;
}

void pool_main() {
  Pool& p = pool();
  std::unique_lock<std::mutex> lock(p.mu);
  p.ready = true;
  p.cv.notify_all();
  for (;;) {
    p.cv.wait(lock, [&] { return p.pending; });
    lock.unlock();
    softmax_rows(p.in, p.out, p.rows, p.cols);
    lock.lock();
    p.pending = false;
    p.cv.notify_all();
  }
}

__attribute__((constructor)) void start_pool() {
  Pool& p = pool();
  STD_(thread)(pool_main).detach();
  std::unique_lock<std::mutex> lock(p.mu);
  p.cv.wait(lock, [&] { return p.ready; });
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
  Pool& p = pool();
  const int64_t first = rows / 2;
  {
    std::lock_guard<std::mutex> lock(p.mu);
    p.in = in + first * cols;
    p.out = out + first * cols;
    p.rows = rows - first;
    p.cols = cols;
    p.pending = true;
  }
  p.cv.notify_all();
  softmax_rows(in, out, first, cols);
  std::unique_lock<std::mutex> lock(p.mu);
  p.cv.wait(lock, [&] { return !p.pending; });
  return 0;
}
