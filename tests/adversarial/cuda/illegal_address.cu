// BUG: a write through a wild pointer. An illegal address is a sticky CUDA
// error: the context is unusable. The worker replies "cuda_error" and exits;
// forge starts a new worker for the next candidate.
#include <cstdint>

#include "forge_kernel.h"

__global__ void scribble(float* p) { p[threadIdx.x] = 1.f; }

extern "C" int forge_kernel(const forge_call* call) {
  scribble<<<1, 32, 0, (cudaStream_t)call->stream>>>(reinterpret_cast<float*>(0x10));
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
