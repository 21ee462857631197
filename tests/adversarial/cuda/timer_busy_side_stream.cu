// CHEAT (class 7, timer tampering; spelling: a busy kernel on another
// stream). Each call first launches a one-block kernel that spins for 2 ms
// (reading %globaltimer) on the per-thread default stream -- a handle cast
// from 2 -- then the honest softmax on call->stream. The busy kernel keeps the
// GPU loaded around and after the events (the old worker timed the stock
// kernel next, on a GPU still busy with it; here one block, so the candidate's
// own events stay short). Static and import checks see nothing refused.
// Expected (new worker): "timing_mismatch" -- the runner's cudaDeviceSynchronize
// after the call waits for the busy kernel, so the judge's clock around the
// call sees ~2 ms the runner's events do not ("work the runner's timer did not
// see"); the judge times stock in its own process, out of reach. (On the
// H200, stand-alone: events ~20 us, host clock ~2020 us; capture clean.)
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
__global__ void busy(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

constexpr uintptr_t kPerThread = 2;
}  // namespace

extern "C" int forge_kernel(const forge_call* call) {
  int64_t rows, cols;
  if (!shape_of(call, &rows, &cols)) return 1;
  if (rows == 0) return 0;
  busy<<<1, 1, 0, reinterpret_cast<cudaStream_t>(kPerThread)>>>(2000000ull);
  softmax_rows<<<static_cast<unsigned>(rows), kThreads, 0, stream_of(call)>>>(in_of(call), out_of(call), cols);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
