// CHEAT (class 2, timed calls differ from checked calls; spelling: a result
// cache keyed on four sampled input values, read to the host with cudaMemcpy
// -- which synchronizes). The key is (rows, cols, x[0], x[n/3], x[2n/3],
// x[n-1]); on a hit the cached output is copied from a __device__ array
// instead of computing. The old benchmark called again and again on the same
// content. During a CUDA graph capture (cudaStreamIsCapturing, which nothing
// refuses) it computes honestly, since a cudaMemcpy there would break the
// capture.
// Expected (new worker): "neutral" -- every timed call gets fresh content, so
// the key misses and the kernel computes (and the blocking cudaMemcpy inside
// the timed window makes it slower than honest); verification's repeats of
// the same content hit and return the right values. ("wrong_result" only
// where two checked calls differ in elements the key does not sample.) (On
// the H200, stand-alone: ~60-80 us on the events against ~10 us honest.)
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
constexpr int64_t kCap = 1 << 20;  // floats: up to 1024 x 1000
__device__ float g_cache[kCap];

struct Key {
  int64_t rows = -1, cols = -1;
  float v[4] = {0, 0, 0, 0};
  bool operator==(const Key& o) const {
    if (rows != o.rows || cols != o.cols) return false;
    for (int i = 0; i < 4; ++i)
      if (!(v[i] == o.v[i])) return false;  // a NaN never matches
    return true;
  }
};
Key g_key;

__global__ void copy(float* dst, const float* src, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    dst[i] = src[i];
}
}  // namespace

extern "C" int forge_kernel(const forge_call* call) {
  int64_t rows, cols;
  if (!shape_of(call, &rows, &cols)) return 1;
  if (rows == 0) return 0;
  const int64_t n = rows * cols;
  cudaStream_t s = stream_of(call);
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(s, &capturing) != cudaSuccess || capturing != cudaStreamCaptureStatusNone || n > kCap ||
      n < 4) {
    softmax_rows<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(in_of(call), out_of(call), cols);
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
  }
  Key k;
  k.rows = rows;
  k.cols = cols;
  const int64_t at[4] = {0, n / 3, 2 * n / 3, n - 1};
  for (int i = 0; i < 4; ++i)
    if (cudaMemcpy(&k.v[i], in_of(call) + at[i], sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess) return 1;
  float* cache = nullptr;
  if (cudaGetSymbolAddress(reinterpret_cast<void**>(&cache), g_cache) != cudaSuccess) return 1;
  if (k == g_key) {
    copy<<<256, 256, 0, s>>>(out_of(call), cache, n);  // a hit: no softmax
  } else {
    softmax_rows<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(in_of(call), out_of(call), cols);
    copy<<<256, 256, 0, s>>>(cache, out_of(call), n);
    g_key = k;
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
