/* mean over H x W, CUDA strategy "plane_block": one block per (n, c) plane
 * for large planes (56x56 and up), the block reduced through shared memory.
 *
 * Math: y[p] = (sum_{j < HW} x[p*HW + j]) / HW, fp32 accumulation, divided
 * like the stock kernel; generally the mean over the trailing dims.
 * Op: aten::mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *,
 *     ScalarType? dtype=None) -> Tensor. Shapes: [N, C, H, W] -> [N, C, 1, 1]
 * or [N, C]; any float in/out dtype.
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * self/out contiguous float32/float16/bfloat16; the reduced dims are the
 * trailing ones; one output per plane. A launch failure returns 1.
 *
 * Why it is fast: a plane of thousands of elements is enough work for a block:
 * FORGE_P_UNROLL independent 16-byte loads per thread in flight, one
 * warp-shuffle + shared-memory reduction per plane, planes looped past the
 * grid limit. Compiled here (nvcc 13, sm_90a) but not run here: no GPU.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "forge_kernel.h"

#ifndef FORGE_P_BLOCK
#define FORGE_P_BLOCK 256 /* threads per plane: 64, 128, 256, 512 */
#endif
#ifndef FORGE_P_UNROLL
#define FORGE_P_UNROLL 2 /* vectors per thread per step: 1, 2, 4 */
#endif

/* ---- common device helpers (the same block in every CUDA template) ---- */
#pragma nv_diag_suppress 177 /* helpers a template does not use */
namespace {

template <class T> struct Io;
template <> struct Io<float> {
  static __device__ __forceinline__ float to(float v) { return v; }
  static __device__ __forceinline__ float from(float v) { return v; }
};
template <> struct Io<__half> {
  static __device__ __forceinline__ float to(__half v) { return __half2float(v); }
  static __device__ __forceinline__ __half from(float v) { return __float2half_rn(v); }
};
template <> struct Io<__nv_bfloat16> {
  static __device__ __forceinline__ float to(__nv_bfloat16 v) { return __bfloat162float(v); }
  static __device__ __forceinline__ __nv_bfloat16 from(float v) { return __float2bfloat16_rn(v); }
};

// N elements of T as one naturally aligned chunk (N * sizeof(T) = 4, 8 or 16
// bytes: one vector access; 32 bytes: two 16-byte accesses).
template <class T, int N> struct alignas(N * sizeof(T) > 16 ? 16 : N * sizeof(T)) Pack {
  T v[N];
};
// Loads N consecutive elements (one vector instruction when N*sizeof(T) is
// 4/8/16 and p is aligned to it) into fp32.
template <class T, int N>
__device__ __forceinline__ void load_n(const T* p, float* out) {
  Pack<T, N> pk = *reinterpret_cast<const Pack<T, N>*>(p);
#pragma unroll
  for (int k = 0; k < N; ++k) out[k] = Io<T>::to(pk.v[k]);
}
template <class T, int N>
__device__ __forceinline__ void store_n(T* p, const float* in) {
  Pack<T, N> pk;
#pragma unroll
  for (int k = 0; k < N; ++k) pk.v[k] = Io<T>::from(in[k]);
  *reinterpret_cast<Pack<T, N>*>(p) = pk;
}

template <int LANES>
__device__ __forceinline__ float group_max(float v) {
#pragma unroll
  for (int o = LANES / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
template <int LANES>
__device__ __forceinline__ float group_sum(float v) {
#pragma unroll
  for (int o = LANES / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
// Block-wide reductions (every thread gets the result). `scratch`: 32 floats
// of shared memory; the block size is a multiple of 32.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = group_sum<32>(v);
  __syncthreads();  // scratch may still be read from a previous reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : 0.0f;
  return group_sum<32>(v);
}
__device__ __forceinline__ float block_max(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = group_max<32>(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : -INFINITY;
  return group_max<32>(v);
}

inline bool host_contiguous(const forge_tensor& t) {
  int64_t expect = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    if (t.sizes[d] != 1 && t.strides[d] != expect) return false;
    expect *= t.sizes[d];
  }
  return true;
}
inline int64_t host_numel(const forge_tensor& t) {
  int64_t n = 1;
  for (int d = 0; d < t.ndim; ++d) n *= t.sizes[d];
  return n;
}
inline bool host_float(int32_t d) { return d == FORGE_FLOAT32 || d == FORGE_FLOAT16 || d == FORGE_BFLOAT16; }
inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }
inline size_t dtype_size(int32_t d) { return d == FORGE_FLOAT32 ? 4 : 2; }
// A launch error (bad configuration, too many resources) as a nonzero return.
inline int launch_status() { return cudaPeekAtLastError() == cudaSuccess ? 0 : 1; }

}  // namespace

namespace {
// Calls f(T{}) with T the storage type of dtype d; 1 for other dtypes and
// for those FORGE_DTYPES leaves out (forge_kernel.h).
template <class F>
int with_dtype(int32_t d, F&& f) {
  switch (d) {
#if FORGE_DTYPES & 1
    case FORGE_FLOAT32: return f(float{});
#endif
#if FORGE_DTYPES & 4
    case FORGE_FLOAT16: return f(__half{});
#endif
#if FORGE_DTYPES & 8
    case FORGE_BFLOAT16: return f(__nv_bfloat16{});
#endif
    default: return 1;
  }
}
}  // namespace

namespace {

constexpr int BLOCK = FORGE_P_BLOCK;
constexpr int UNROLL = FORGE_P_UNROLL;
static_assert(BLOCK % 32 == 0 && BLOCK >= 64 && BLOCK <= 1024, "FORGE_P_BLOCK: a multiple of 32 in 64..1024");
static_assert(UNROLL >= 1 && UNROLL <= 8, "FORGE_P_UNROLL: 1..8");

template <class TI, class TO, int VW, bool VEC>
__global__ void __launch_bounds__(BLOCK) mean_plane_block(const TI* __restrict__ x, TO* __restrict__ y,
                                                          int64_t planes, int64_t HW) {
  __shared__ float scratch[32];
  constexpr int64_t STEP = static_cast<int64_t>(BLOCK) * VW;
  for (int64_t p = blockIdx.x; p < planes; p += gridDim.x) {
    const TI* xp = x + p * HW;
    float acc[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) acc[u] = 0.0f;
    int64_t j = static_cast<int64_t>(threadIdx.x) * VW;
    for (; j + (UNROLL - 1) * STEP < HW; j += UNROLL * STEP) {
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        float v[VW];
        if (VEC) load_n<TI, VW>(xp + j + u * STEP, v);
        else v[0] = Io<TI>::to(xp[j + u * STEP]);
#pragma unroll
        for (int e = 0; e < VW; ++e) acc[u] += v[e];
      }
    }
    for (; j < HW; j += STEP) {
      float v[VW];
      if (VEC) load_n<TI, VW>(xp + j, v);
      else v[0] = Io<TI>::to(xp[j]);
#pragma unroll
      for (int e = 0; e < VW; ++e) acc[0] += v[e];
    }
    float s = 0.0f;
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) s += acc[u];
    s = block_sum(s, scratch);
    if (threadIdx.x == 0) y[p] = Io<TO>::from(s / static_cast<float>(HW));
  }
}

template <class TI, class TO>
int launch(const void* x, void* y, int64_t planes, int64_t HW, cudaStream_t stream) {
  constexpr int VW = 16 / sizeof(TI);
  const unsigned grid = static_cast<unsigned>(planes < 0x7fffffffLL ? planes : 0x7fffffffLL);
  const bool vec = aligned16(x) && (HW * sizeof(TI)) % 16 == 0;
  if (vec)
    mean_plane_block<TI, TO, VW, true><<<grid, BLOCK, 0, stream>>>(static_cast<const TI*>(x), static_cast<TO*>(y),
                                                                   planes, HW);
  else
    mean_plane_block<TI, TO, 1, false><<<grid, BLOCK, 0, stream>>>(static_cast<const TI*>(x), static_cast<TO*>(y),
                                                                   planes, HW);
  return launch_status();
}

}  // namespace

// mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor
extern "C" int forge_kernel(const forge_call* call) {
  if (!call || call->n_inputs != 1 || call->n_outputs != 1 || call->n_scalars < 1) return 1;
  const forge_tensor& x = call->inputs[0];
  const forge_tensor& y = call->outputs[0];
  if (!x.data || !y.data || x.ndim < 1 || !host_float(x.dtype) || !host_float(y.dtype)) return 1;
  if (!host_contiguous(x) || !host_contiguous(y)) return 1;
  bool reduced[FORGE_MAX_DIMS] = {};
  int k = 0;
  const forge_scalar& dim = call->scalars[0];
  if (dim.kind == FORGE_ARG_NONE || (dim.kind == FORGE_ARG_INT_LIST && dim.len == 0)) {
    for (int d = 0; d < x.ndim; ++d) reduced[d] = true;
    k = x.ndim;
  } else if (dim.kind == FORGE_ARG_INT_LIST) {
    for (int j = 0; j < dim.len; ++j) {
      int64_t d = dim.ints[j] < 0 ? dim.ints[j] + x.ndim : dim.ints[j];
      if (d < 0 || d >= x.ndim || reduced[d]) return 1;
      reduced[d] = true;
      ++k;
    }
  } else {
    return 1;
  }
  for (int d = 0; d < x.ndim; ++d)
    if (reduced[d] != (d >= x.ndim - k)) return 1;  // only the trailing dims
  int64_t planes = 1, hw = 1;
  for (int d = 0; d < x.ndim; ++d) (reduced[d] ? hw : planes) *= x.sizes[d];
  if (host_numel(y) != planes) return 1;
  if (planes == 0) return 0;
  if (hw == 0) return 1;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  return with_dtype(x.dtype, [&](auto ti) {
    using TI = decltype(ti);
    return with_dtype(y.dtype, [&](auto to) {
      using TO = decltype(to);
      return launch<TI, TO>(x.data, y.data, planes, hw, stream);
    });
  });
}
