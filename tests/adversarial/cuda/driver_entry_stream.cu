// CHEAT (class 1, side work the events do not see; spelling: a stream of its
// own from cuStreamCreate, found through cudaGetDriverEntryPointByVersion).
// The name is only a string literal (the static check blanks strings before
// its stream rule looks for cuStreamCreate), and the library imports
// cudaGetDriverEntryPointByVersion, not cuStreamCreate (the import check
// refuses only the latter). The softmax runs on that non-blocking stream;
// call->stream gets nothing.
// Expected (new worker): "timing_mismatch" where the kernel outlasts the
// judge's 15 us floor, else "neutral" (the runner's cudaDeviceSynchronize
// finishes the side work before every comparison, the graph capture of
// call->stream records an empty graph while the real launch runs, and the
// judge's clock adds the unseen time back). If the stream creation is made
// during the first call under the sandbox and the driver needs a refused
// system call for it: "forbidden". (On the H200, stand-alone, no sandbox:
// results right, capture and replay clean, events ~10 us vs host ~20 us.)
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
using StreamCreate = int (*)(void** stream, unsigned flags);  // CUresult cuStreamCreate(CUstream*, unsigned)
constexpr unsigned kNonBlocking = 1;                           // CU_STREAM_NON_BLOCKING

cudaStream_t own_stream() {
  static cudaStream_t s = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q{};
    void* made = nullptr;
    if (cudaGetDriverEntryPointByVersion("cuStreamCreate", &fn, 12000, cudaEnableDefault, &q) != cudaSuccess || !fn ||
        reinterpret_cast<StreamCreate>(fn)(&made, kNonBlocking) != 0)
      return static_cast<cudaStream_t>(nullptr);
    return static_cast<cudaStream_t>(made);
  }();
  return s;
}
}  // namespace

extern "C" int forge_kernel(const forge_call* call) {
  int64_t rows, cols;
  if (!shape_of(call, &rows, &cols)) return 1;
  if (rows == 0) return 0;
  cudaStream_t side = own_stream();
  if (!side) side = stream_of(call);
  softmax_rows<<<static_cast<unsigned>(rows), kThreads, 0, side>>>(in_of(call), out_of(call), cols);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
