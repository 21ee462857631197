// BUG: a device-side trap (what a failed device assert does). Sticky: the
// worker replies "cuda_error" and exits.
#include "forge_kernel.h"

__global__ void fail() { __trap(); }

extern "C" int forge_kernel(const forge_call* call) {
  fail<<<1, 1, 0, (cudaStream_t)call->stream>>>();
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
