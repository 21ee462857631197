// CHEAT: a silent precision drop. Reads the float32 input as half precision
// and accumulates in half: ~1e-3 relative error, far outside float32's
// tolerance (rtol 1e-5). Rejected by verification: "wrong_result".
#include <cuda_fp16.h>

#include <cstdint>

#include "forge_kernel.h"

__global__ void softmax_rows_half(const float* in, float* out, int64_t rows, int64_t cols) {
  int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float* x = in + r * cols;
  float* y = out + r * cols;
  __half m = __float2half(-65504.f), s = __float2half(0.f);
  for (int64_t c = 0; c < cols; ++c) m = __hmax(m, __float2half(x[c]));
  for (int64_t c = 0; c < cols; ++c) s = __hadd(s, hexp(__hsub(__float2half(x[c]), m)));
  for (int64_t c = 0; c < cols; ++c)
    y[c] = __half2float(__hdiv(hexp(__hsub(__float2half(x[c]), m)), s));
}

extern "C" int forge_kernel(const forge_call* call) {
  const forge_tensor& x = call->inputs[0];
  int64_t rows = x.sizes[0], cols = x.sizes[x.ndim - 1];
  softmax_rows_half<<<(rows + 127) / 128, 128, 0, (cudaStream_t)call->stream>>>(
      (const float*)x.data, (float*)call->outputs[0].data, rows, cols);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
