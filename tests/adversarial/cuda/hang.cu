// CHEAT (or bug): a kernel that never finishes. The worker waits on the stream
// forever; forge kills it when the request's time runs out: "timeout".
#include "forge_kernel.h"

__global__ void spin(volatile int* flag) {
  while (*flag == 0) {
  }
}

__device__ int g_flag = 0;

extern "C" int forge_kernel(const forge_call* call) {
  int* flag = nullptr;
  cudaGetSymbolAddress((void**)&flag, g_flag);
  spin<<<1, 1, 0, (cudaStream_t)call->stream>>>(flag);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
