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
// EVICT_FIRST: a streaming store (st.global.cs) for 16-byte packs, so the
// written lines leave L2 first and data the kernel re-reads stays there.
template <class T, int N, bool EVICT_FIRST = false>
__device__ __forceinline__ void store_n(T* p, const float* in) {
  Pack<T, N> pk;
#pragma unroll
  for (int k = 0; k < N; ++k) pk.v[k] = Io<T>::from(in[k]);
  if (EVICT_FIRST && sizeof(pk) == 16) __stcs(reinterpret_cast<int4*>(p), *reinterpret_cast<const int4*>(&pk));
  else *reinterpret_cast<Pack<T, N>*>(p) = pk;
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
// The same in double, for sums of many fp32 terms; `scratch`: 32 doubles.
__device__ __forceinline__ double block_sum(double v, double* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : 0.0;
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
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

// n / d for 32-bit unsigned n and a divisor fixed at launch, as a multiply
// and a shift (Granlund-Montgomery): a per-vector index split costs two
// instructions instead of a 64-bit division's dozens. Exact for every n < 2^32.
struct DivU32 {
  uint32_t m, s;
  static DivU32 of(uint32_t d) {
    uint32_t s = 0;
    while ((uint64_t{1} << s) < d) ++s;
    const uint64_t m = ((uint64_t{1} << 32) * ((uint64_t{1} << s) - d)) / d + 1;
    return DivU32{static_cast<uint32_t>(m), s};
  }
  __device__ __forceinline__ uint32_t div(uint32_t n) const {
    return static_cast<uint32_t>((static_cast<uint64_t>(__umulhi(n, m)) + n) >> s);
  }
};

#include "../_common/host_checks.h"  // host_contiguous, host_numel, host_float: shared with the CPU templates
inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }
inline size_t dtype_size(int32_t d) { return d == FORGE_FLOAT32 ? 4 : 2; }
// A launch error (bad configuration, too many resources) as a nonzero return,
// cleared: the stock kernel the package falls back to checks the last error.
inline int launch_status() {
  if (cudaPeekAtLastError() == cudaSuccess) return 0;
  (void)cudaGetLastError();
  return 1;
}

// May the host read a float64 at p? Host memory (pageable or pinned), not device memory.
inline bool host_readable(const void* p) {
  cudaPointerAttributes attr;
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    (void)cudaGetLastError();  // clear it: launch_status() must not see it
    return false;
  }
  return attr.type == cudaMemoryTypeUnregistered || attr.type == cudaMemoryTypeHost;
}

}  // namespace

namespace {
#include "../_common/dtype_switch.h"  // with_storage_type: shared with the CPU templates
// with_dtype(d, f): f(T{}) with T = float, __half or __nv_bfloat16 as d names.
template <class F>
int with_dtype(int32_t d, F&& f) {
  return with_storage_type<float, __half, __nv_bfloat16>(d, static_cast<F&&>(f));
}
// The norms' parameter (weight, bias, running stats) and statistics storage
// types beside input type T: each T itself or float32, what torch's CUDA
// kernels take. Calls f(TP{}, TS{}); 1 for any other combination.
template <class T, class F>
int with_param_types(int32_t x_dtype, int32_t p_dtype, int32_t s_dtype, F&& f) {
  if (p_dtype == x_dtype) {
    if (s_dtype == x_dtype) return f(T{}, T{});
    if (s_dtype == FORGE_FLOAT32) return f(T{}, float{});
  } else if (p_dtype == FORGE_FLOAT32) {
    if (s_dtype == x_dtype) return f(float{}, T{});
    if (s_dtype == FORGE_FLOAT32) return f(float{}, float{});
  }
  return 1;
}
}  // namespace
