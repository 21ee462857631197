/* group_norm, CUDA strategy "block_group": one block per (sample, group),
 * the statistics by two reads of the group's slice, then the affine pass.
 *
 * Math: slice s = x[n, g*D:(g+1)*D, :] (D = C/G channels, D*HxW contiguous
 * elements), fp32: K = s[0]; mean = K + sum (s - K) / |s|;
 * var = sum (s - mean)^2 / |s| (second read); rstd = rsqrt(var + eps);
 * per channel scale = rstd * w[c], bias = fma(-scale, mean, b[c]);
 * y = fma(x, scale, bias) (third read). mean/rstd written per (n, g).
 * Op: aten::native_group_norm(Tensor input, Tensor? weight, Tensor? bias,
 *     SymInt N, SymInt C, SymInt HxW, int group, float eps) -> (out, mean, rstd).
 * Shapes: input [N, C, *] NCHW; out like input; mean/rstd [N, G] in the
 * dtype the caller allocated (the input's dtype).
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * input/out NCHW-contiguous float32/float16/bfloat16 of one dtype with
 * N*C*HxW elements; C % group == 0; weight/bias absent or C contiguous
 * elements of the input's dtype or float32; mean/rstd contiguous N*G
 * elements. A launch failure returns 1.
 *
 * Why it is fast (for small slices, up to a few MB): one block owns a group,
 * so there is no cross-block reduction and no workspace; the second and third
 * reads hit L2 (50 MB on H200) when N*G slices in flight fit; 16-byte vectors
 * when HxW and the pointers allow (a vector then lies in one channel). N*G
 * below ~2x the SM count underfills the GPU: use split_group there.
 * Compiled here (nvcc 13, sm_90a) but not run on this machine: no GPU.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "forge_kernel.h"

#ifndef FORGE_P_BLOCK
#define FORGE_P_BLOCK 512 /* threads per (n, g): 256, 512, 1024 */
#endif

#include "../_common/cuda_common.cuh"  // inlined when forge loads the template (docs/STRATEGIES.md)

namespace {

constexpr int BLOCK = FORGE_P_BLOCK;
static_assert(BLOCK % 32 == 0 && BLOCK >= 64 && BLOCK <= 1024, "FORGE_P_BLOCK: a multiple of 32 in 64..1024");

struct GnArgs {
  const void* x;
  const void* w;
  const void* b;
  void* y;
  void* mean;
  void* rstd;
  int64_t N, C, HW, G;
  float eps;
  void* workspace;
};

// The affine pass of one contiguous range [j0, j1) of a (n, g) slice that
// starts at channel c0: y = fma(x, scale[c], bias[c]) with scale = rstd * w[c],
// bias = fma(-scale, mean, b[c]) - the stock CUDA kernel's arithmetic.
// VW elements at a time lie in one channel when HW % VW == 0 (VEC).
template <class T, class TW, int VW, bool VEC>
__device__ __forceinline__ void apply_range(const T* xs, T* ys, const TW* w, const TW* b, int64_t c0, int64_t HW,
                                            int64_t j0, int64_t j1, float mean, float rstd, int stride_threads) {
  for (int64_t j = j0 + static_cast<int64_t>(threadIdx.x) * VW; j < j1; j += static_cast<int64_t>(stride_threads) * VW) {
    if (VEC) {
      const int64_t c = c0 + j / HW;
      const float scale = w ? rstd * Io<TW>::to(w[c]) : rstd;
      const float bias = fmaf(-scale, mean, b ? Io<TW>::to(b[c]) : 0.0f);
      float v[VW];
      load_n<T, VW>(xs + j, v);
#pragma unroll
      for (int e = 0; e < VW; ++e) v[e] = fmaf(v[e], scale, bias);
      store_n<T, VW>(ys + j, v);
    } else {
#pragma unroll
      for (int e = 0; e < VW; ++e) {
        if (j + e >= j1) break;
        const int64_t c = c0 + (j + e) / HW;
        const float scale = w ? rstd * Io<TW>::to(w[c]) : rstd;
        const float bias = fmaf(-scale, mean, b ? Io<TW>::to(b[c]) : 0.0f);
        ys[j + e] = Io<T>::from(fmaf(Io<T>::to(xs[j + e]), scale, bias));
      }
    }
  }
}

template <class T, class TW, class TS, int VW, bool VEC>
__global__ void __launch_bounds__(BLOCK) gn_block_group(const T* __restrict__ x, const TW* __restrict__ w,
                                                        const TW* __restrict__ b, T* __restrict__ y,
                                                        TS* __restrict__ mean_out, TS* __restrict__ rstd_out,
                                                        int64_t groups, int64_t C, int64_t HW, int64_t G, float eps) {
  __shared__ float scratch[32];
  const int64_t D = C / G, n_el = D * HW;
  constexpr int64_t STEP = static_cast<int64_t>(BLOCK) * VW;
  for (int64_t ng = blockIdx.x; ng < groups; ng += gridDim.x) {
    const int64_t n = ng / G, g = ng % G;
    const int64_t off = (n * C + g * D) * HW;
    const T* xs = x + off;
    const float K = Io<T>::to(xs[0]);
    float s = 0.0f;
    for (int64_t j = threadIdx.x * VW; j < n_el; j += STEP) {
      float v[VW];
      if (VEC) load_n<T, VW>(xs + j, v);
      else v[0] = Io<T>::to(xs[j]);
#pragma unroll
      for (int e = 0; e < VW; ++e) s += v[e] - K;
    }
    const float mean_exact = K + block_sum(s, scratch) / static_cast<float>(n_el);
    float q = 0.0f;
    for (int64_t j = threadIdx.x * VW; j < n_el; j += STEP) {
      float v[VW];
      if (VEC) load_n<T, VW>(xs + j, v);
      else v[0] = Io<T>::to(xs[j]);
#pragma unroll
      for (int e = 0; e < VW; ++e) q += (v[e] - mean_exact) * (v[e] - mean_exact);
    }
    const float var = block_sum(q, scratch) / static_cast<float>(n_el);
    // Normalize with mean/rstd as stored in the outputs' dtype, as the stock
    // CUDA kernel does (it keeps them in the input's dtype and reads them back):
    // with 16-bit stats, exact ones differ from stock by several output ulps.
    const float mean = Io<TS>::to(Io<TS>::from(mean_exact));
    const float rstd = Io<TS>::to(Io<TS>::from(rsqrtf(var + eps)));
    if (threadIdx.x == 0) {
      mean_out[ng] = Io<TS>::from(mean);
      rstd_out[ng] = Io<TS>::from(rstd);
    }
    apply_range<T, TW, VW, VEC>(xs, y + off, w, b, g * D, HW, 0, n_el, mean, rstd, BLOCK);
  }
}

inline int64_t workspace_needed(const GnArgs&) { return 0; }

template <class T, class TW, class TS>
int launch(const GnArgs& a, cudaStream_t stream) {
  constexpr int VW = 16 / sizeof(T);
  const int64_t groups = a.N * a.G;
  const unsigned grid = static_cast<unsigned>(groups < 0x7fffffffLL ? groups : 0x7fffffffLL);
  const bool vec = aligned16(a.x) && aligned16(a.y) && a.HW % VW == 0;
  auto run = [&](auto kernel) {
    kernel<<<grid, BLOCK, 0, stream>>>(static_cast<const T*>(a.x), static_cast<const TW*>(a.w),
                                       static_cast<const TW*>(a.b), static_cast<T*>(a.y), static_cast<TS*>(a.mean),
                                       static_cast<TS*>(a.rstd), groups, a.C, a.HW, a.G, a.eps);
  };
  if (vec) run(gn_block_group<T, TW, TS, VW, true>);
  else run(gn_block_group<T, TW, TS, 1, false>);
  return launch_status();
}

template <class T>
int dispatch_w(const GnArgs& a, int32_t x_dtype, int32_t w_dtype, int32_t s_dtype, cudaStream_t stream) {
  if (w_dtype == x_dtype) {
    if (s_dtype == x_dtype) return launch<T, T, T>(a, stream);
    if (s_dtype == FORGE_FLOAT32) return launch<T, T, float>(a, stream);
  } else if (w_dtype == FORGE_FLOAT32) {
    if (s_dtype == x_dtype) return launch<T, float, T>(a, stream);
    if (s_dtype == FORGE_FLOAT32) return launch<T, float, float>(a, stream);
  }
  return 1;
}

// Parses and checks the call; fills `a` and the dtypes. 0 when usable.
int parse(const forge_call* call, GnArgs& a, int32_t& w_dtype, int32_t& s_dtype) {
  if (!call || call->n_inputs != 3 || call->n_outputs != 3 || call->n_scalars < 5) return 1;
  const forge_tensor& x = call->inputs[0];
  const forge_tensor& w = call->inputs[1];
  const forge_tensor& b = call->inputs[2];
  const forge_tensor& y = call->outputs[0];
  const forge_tensor& mean = call->outputs[1];
  const forge_tensor& rstd = call->outputs[2];
  for (int k = 0; k < 4; ++k)
    if (call->scalars[k].kind != FORGE_ARG_INT) return 1;
  if (call->scalars[4].kind != FORGE_ARG_FLOAT) return 1;
  const int64_t N = call->scalars[0].i, C = call->scalars[1].i, HW = call->scalars[2].i, G = call->scalars[3].i;
  if (N < 0 || C < 1 || HW < 1 || G < 1 || C % G != 0) return 1;
  if (!x.data || !host_float(x.dtype) || x.ndim < 2 || !host_contiguous(x)) return 1;
  if (x.sizes[0] != N || x.sizes[1] != C || host_numel(x) != N * C * HW) return 1;
  if (!y.data || y.dtype != x.dtype || y.ndim != x.ndim || !host_contiguous(y)) return 1;
  for (int d = 0; d < x.ndim; ++d)
    if (y.sizes[d] != x.sizes[d]) return 1;
  w_dtype = x.dtype;
  const forge_tensor* wb[2] = {&w, &b};
  for (const forge_tensor* p : wb) {
    if (!p->data) continue;
    if (!host_float(p->dtype) || !host_contiguous(*p) || host_numel(*p) != C) return 1;
    w_dtype = p->dtype;
  }
  if (w.data && b.data && w.dtype != b.dtype) return 1;
  const forge_tensor* stats[2] = {&mean, &rstd};
  for (const forge_tensor* p : stats) {
    if (host_numel(*p) != N * G) return 1;
    if (N && (!p->data || !host_float(p->dtype) || !host_contiguous(*p))) return 1;
  }
  if (N && mean.dtype != rstd.dtype) return 1;
  s_dtype = mean.dtype;
  a = GnArgs{x.data, w.data, b.data, y.data, mean.data, rstd.data, N, C, HW, G,
             static_cast<float>(call->scalars[4].f), nullptr};
  return 0;
}

}  // namespace

// native_group_norm(Tensor input, Tensor? weight, Tensor? bias, SymInt N, SymInt C,
//                   SymInt HxW, int group, float eps) -> (Tensor out, Tensor mean, Tensor rstd)
extern "C" int forge_kernel(const forge_call* call) {
  GnArgs a;
  int32_t w_dtype, s_dtype;
  if (parse(call, a, w_dtype, s_dtype)) return 1;
  if (a.N == 0) return 0;
  a.workspace = call->workspace;
  if (workspace_needed(a) > call->workspace_bytes) return 1;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  return with_dtype(call->inputs[0].dtype, [&](auto t) {
    using T = decltype(t);
    return dispatch_w<T>(a, call->inputs[0].dtype, w_dtype, s_dtype, stream);
  });
}

extern "C" int64_t forge_workspace_bytes(const forge_call* call) {
  GnArgs a;
  int32_t w_dtype, s_dtype;
  if (parse(call, a, w_dtype, s_dtype)) return 0;
  return workspace_needed(a);
}
