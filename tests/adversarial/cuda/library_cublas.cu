// CHEAT: calling a library. Hands the work to cuBLAS (here a scaling, as a
// stand-in for any vendor routine). Rejected by the static check: "library".
// (Were it to get past: the link refuses the undefined cuBLAS symbols, and the
// worker refuses a library that needs libcublas.)
#include <cublas_v2.h>

#include "forge_kernel.h"

extern "C" int forge_kernel(const forge_call* call) {
  static cublasHandle_t handle = nullptr;
  if (!handle) cublasCreate(&handle);
  cublasSetStream(handle, (cudaStream_t)call->stream);
  const float one = 1.f;
  int n = (int)(call->inputs[0].sizes[0] * call->inputs[0].sizes[1]);
  cublasScopy(handle, n, (const float*)call->inputs[0].data, 1, (float*)call->outputs[0].data, 1);
  return cublasSscal(handle, n, &one, (float*)call->outputs[0].data, 1) == CUBLAS_STATUS_SUCCESS ? 0 : 1;
}
