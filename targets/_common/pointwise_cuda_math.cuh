// The math pointwise_ops.h asks for, on one fp32 value per thread: the CUDA
// math library's expf, expm1f, log1pf, erfcf (1-2 ulp).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#define PW_FN __device__ __forceinline__
#define PW_MASK bool
__device__ __forceinline__ float pw_k(float c) { return c; }
__device__ __forceinline__ float pw_sel(bool m, float a, float b) { return m ? a : b; }
__device__ __forceinline__ bool pw_any(bool m) { return m; }
__device__ __forceinline__ float pw_exp(float x) { return expf(x); }
__device__ __forceinline__ float pw_expm1(float x) { return expm1f(x); }
__device__ __forceinline__ float pw_log1p(float x) { return log1pf(x); }
__device__ __forceinline__ float pw_erfc(float x) { return erfcf(x); }
__device__ __forceinline__ float pw_sqrt(float x) { return sqrtf(x); }
// Batch norm in eval mode on one element as the stock CUDA kernel computes it
// (the batch_norm family's batch_norm_cuda_params.cuh).
__device__ __forceinline__ float pw_batch_norm_eval(float x, float w, float b, float mean, float var, float eps) {
  return fmaf((x - mean) * rsqrtf(var + eps), w, b);
}
// A cast to a 16-bit type and back (a chain's x.to(torch.bfloat16)): round to nearest even.
__device__ __forceinline__ float pw_round_bf16(float x) { return __bfloat162float(__float2bfloat16(x)); }
__device__ __forceinline__ float pw_round_f16(float x) { return __half2float(__float2half(x)); }
