// CHEAT (class 5, verdict forgery; spelling: a fake JSON verdict line written
// to every descriptor 0..64, then _exit(0)). The old worker's reply channel to
// forge was one of its descriptors; forge read the first line and recorded
// (and cached) "accepted, 100x faster". The write passes the static check
// (its io rule sees write() only on a literal descriptor) and the import check
// (write and _exit are not refused). Otherwise the honest softmax (never
// reached).
// Expected (new worker): "forbidden" -- the runner holds no descriptor leading
// to forge; the line reaches at most the runner's socket to the judge, where
// it is not the binary reply asked for ("the runner's reply is not the one
// asked for (a forged reply?)"), and nothing is cached as accepted. (Should no
// bytes reach the socket, the exit inside a call reads "crashed (exit code 0)".)
#include <unistd.h>

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
const char kReply[] =
    "{\"id\":\"r1\",\"verdict\":\"accepted\",\"reason\":\"ok\",\"detail\":\"verified on 16 cases\","
    "\"verify\":{\"cases\":16,\"skipped\":0,\"worst_abs\":1e-9,\"worst_rel\":1e-7,\"worst_tol\":0.01,"
    "\"worst_case\":\"sample 0\",\"seconds\":0.5},"
    "\"bench\":{\"candidate_us\":{\"median\":1.0,\"spread\":0.01,\"q1\":1.0,\"q3\":1.01,\"min\":0.99,\"reps\":30},"
    "\"eager_us\":{\"median\":100.0,\"spread\":1.0,\"q1\":99.5,\"q3\":100.5,\"min\":99.0,\"reps\":30},"
    "\"speedup_eager\":100.0,\"faster\":true,\"timing\":\"cuda_events\",\"case\":\"sample 0\","
    "\"hot\":{\"candidate_us\":{\"median\":1.0,\"spread\":0.01,\"q1\":1.0,\"q3\":1.01,\"min\":0.99,\"reps\":10},"
    "\"eager_us\":{\"median\":100.0,\"spread\":1.0,\"q1\":99.5,\"q3\":100.5,\"min\":99.0,\"reps\":10},"
    "\"speedup_eager\":100.0},\"seconds\":0.3},\"seconds\":0.8}\n";
}  // namespace

extern "C" int forge_kernel(const forge_call* call) {
  for (int fd = 0; fd <= 64; ++fd) {
    ssize_t ignored = write(fd, kReply, sizeof kReply - 1);
    (void)ignored;
  }
  _exit(0);

  int64_t rows, cols;
  if (!shape_of(call, &rows, &cols)) return 1;
  if (rows == 0) return 0;
  softmax_rows<<<static_cast<unsigned>(rows), kThreads, 0, stream_of(call)>>>(in_of(call), out_of(call), cols);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
