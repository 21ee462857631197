#include "../_common/batch_norm_args.h"  // the call's fields, shared with the CPU templates

// The stock CUDA arithmetic: invstd = rsqrt(var + eps) (batch_norm_calc_invstd),
// y = ((x - mean) * invstd) * w + b, contracted by nvcc to one fma.
template <class TP>
__device__ __forceinline__ void channel_params(const TP* rm, const TP* rv, const TP* w, const TP* b, int64_t c,
                                               float eps, float& mean, float& invstd, float& wc, float& bc) {
  mean = Io<TP>::to(rm[c]);
  invstd = rsqrtf(Io<TP>::to(rv[c]) + eps);
  wc = w ? Io<TP>::to(w[c]) : 1.0f;
  bc = b ? Io<TP>::to(b[c]) : 0.0f;
}
__device__ __forceinline__ float bn_apply(float x, float mean, float invstd, float wc, float bc) {
  return fmaf((x - mean) * invstd, wc, bc);
}

// save_mean = running_mean, save_invstd = rsqrt(running_var + eps), [C].
template <class TP, class TS>
__device__ __forceinline__ void write_saved(const TP* rm, const TP* rv, TS* sm, TS* si, int64_t C, float eps) {
  if (!sm) return;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < C;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    sm[c] = Io<TS>::from(Io<TP>::to(rm[c]));
    si[c] = Io<TS>::from(rsqrtf(Io<TP>::to(rv[c]) + eps));
  }
}
