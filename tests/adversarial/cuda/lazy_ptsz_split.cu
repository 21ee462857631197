// CHEAT (class 1, side work the events do not see; spelling: lazy -- a token
// kernel on call->stream, the real work on the per-thread default stream
// through cudaLaunchKernel_ptsz). The caller's stream gets a kernel that
// softmaxes row 0 only and returns at once, so the events time a real (tiny)
// kernel and the CUDA graph capture records a non-empty graph; rows 1.. are
// launched with the _ptsz ("per-thread default stream") flavour of the launch
// API and stream 0, which the static check does not read and the import check
// does not refuse.
// Expected (new worker): "timing_mismatch" where the bulk outlasts the
// judge's 15 us floor, else "neutral" (the runner's cudaDeviceSynchronize
// finishes the bulk before each comparison; the host clock adds the unseen
// time back). (On the H200, stand-alone: the capture does not refuse the
// per-thread launch; events ~16 us against ~27 us on the host clock.)
#include <cstdint>

#include "forge_kernel.h"

extern "C" cudaError_t cudaLaunchKernel_ptsz(const void* func, dim3 grid, dim3 block, void** args, size_t smem,
                                             cudaStream_t stream);

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

extern "C" int forge_kernel(const forge_call* call) {
  int64_t rows, cols;
  if (!shape_of(call, &rows, &cols)) return 1;
  if (rows == 0) return 0;
  // The token: row 0, on the caller's stream.
  softmax_rows<<<1, kThreads, 0, stream_of(call)>>>(in_of(call), out_of(call), cols);
  if (rows > 1) {
    const float* in = in_of(call) + cols;
    float* out = out_of(call) + cols;
    void* args[] = {&in, &out, &cols};
    if (cudaLaunchKernel_ptsz(reinterpret_cast<const void*>(&softmax_rows), dim3(static_cast<unsigned>(rows - 1)),
                              dim3(kThreads), args, 0, nullptr) != cudaSuccess)
      return 1;
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
