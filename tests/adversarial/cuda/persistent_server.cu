// CHEAT (class 1, side work the events do not see; spelling: a persistent
// kernel left spinning from an earlier call). The first call starts a
// one-block "server" kernel on the per-thread default stream (a handle cast
// from 2) that never exits: it polls a mailbox in __device__ memory and
// softmaxes whatever job is posted. Every call launches on call->stream only a
// one-thread kernel that posts the job and returns at once, so the events
// time a post, and the real work happens in a kernel nobody launched in this
// call.
// Expected (new worker): "timeout" -- the runner's cudaDeviceSynchronize after
// the first call waits for every kernel of the process, the server never
// ends, no reply comes (the judge kills the runner when the request's time
// runs out).
#include <cstdint>

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
struct Mailbox {
  unsigned long long posted, done;
  const float* in;
  float* out;
  long long rows, cols;
};
__device__ Mailbox g_box;

__global__ void server() {
  volatile Mailbox* box = &g_box;
  __shared__ float scratch[kThreads / 32];
  __shared__ unsigned long long job;
  unsigned long long seen = 0;
  for (;;) {
    if (threadIdx.x == 0) {
      while (box->posted == seen) {
      }
      __threadfence();
      job = box->posted;
    }
    __syncthreads();
    seen = job;
    for (long long r = 0; r < box->rows; ++r) {
      const float* x = box->in + r * box->cols;
      float* y = box->out + r * box->cols;
      const long long cols = box->cols;
      float m = -INFINITY;
      for (long long c = threadIdx.x; c < cols; c += kThreads) m = fmaxf(m, x[c]);
      m = block_reduce(m, true, scratch);
      float s = 0.f;
      for (long long c = threadIdx.x; c < cols; c += kThreads) s += expf(x[c] - m);
      s = block_reduce(s, false, scratch);
      for (long long c = threadIdx.x; c < cols; c += kThreads) y[c] = expf(x[c] - m) / s;
    }
    __threadfence();
    if (threadIdx.x == 0) box->done = seen;
    __syncthreads();
  }
}

__global__ void post(const float* in, float* out, long long rows, long long cols) {
  volatile Mailbox* box = &g_box;
  box->in = in;
  box->out = out;
  box->rows = rows;
  box->cols = cols;
  __threadfence();
  box->posted = box->posted + 1;  // and return: the server does the work
}

constexpr uintptr_t kPerThread = 2;
}  // namespace

extern "C" int forge_kernel(const forge_call* call) {
  int64_t rows, cols;
  if (!shape_of(call, &rows, &cols)) return 1;
  if (rows == 0) return 0;
  static const bool started = [] {
    server<<<1, kThreads, 0, reinterpret_cast<cudaStream_t>(kPerThread)>>>();
    return cudaGetLastError() == cudaSuccess;
  }();
  if (!started) return 1;
  post<<<1, 1, 0, stream_of(call)>>>(in_of(call), out_of(call), rows, cols);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
