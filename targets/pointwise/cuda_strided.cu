/* pointwise, CUDA strategy "strided": one elementwise op of the table in
 * targets/_common/pointwise_ops.h (FORGE_P_OP: relu, gelu, silu, add, ...)
 * over any shapes, strides and broadcasting.
 *
 * Math: y[i] = op(x[i]) or op(a[i], b[i]) (a and b broadcast to y's shape) in
 * fp32 whatever the storage dtypes (float32, bfloat16, float16; each tensor
 * its own), rounded once to y's dtype; formulas in pointwise_ops.h, with the
 * CUDA math library's expf, expm1f, log1pf, erfcf (1-2 ulp).
 * Ops: the table's (relu ... exp, add/sub/mul/div.Tensor), in-place forms too.
 * Shapes: any rank <= 8, any strides, broadcasting, a wrapped float64 Python
 * number in host memory as either operand (read once at launch).
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * as the CPU template (pointwise_parse.h), and a one-element float64 operand
 * must be host memory. A launch failure returns 1.
 *
 * Why it is fast: the dims are merged first (pointwise_parse.h), so a
 * contiguous or transposed call, and a bias or scalar broadcast along it, is
 * one flat loop: FORGE_P_VEC elements per thread as one 16-byte access per
 * tensor where every pointer is aligned to it (else the same kernel with
 * single-element accesses), a constant operand read once per thread. Other
 * layouts run rows of the innermost plan dim, one 64-bit index split per
 * FORGE_P_VEC elements.
 * Compiled here (nvcc 13, sm_90a) but not run on this machine: no GPU.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include <type_traits>

#include "forge_kernel.h"

#ifndef FORGE_P_BLOCK
#define FORGE_P_BLOCK 256 /* threads per block: 128, 256, 512 */
#endif
#ifndef FORGE_P_VEC
#define FORGE_P_VEC 4 /* elements per thread per step: 2, 4, 8 */
#endif

#include "../_common/cuda_common.cuh"  // inlined when forge loads the template (docs/STRATEGIES.md)

#include "../_common/pointwise_cuda_math.cuh"  // pw_k, pw_sel, pw_exp, ... on float

#include "../_common/pointwise_ops.h"  // the op table: pw_unary, pw_binary

namespace {

constexpr int BLOCK = FORGE_P_BLOCK;
constexpr int VEC = FORGE_P_VEC;
static_assert(BLOCK % 32 == 0 && BLOCK >= 32 && BLOCK <= 1024, "FORGE_P_BLOCK: a multiple of 32 up to 1024");
static_assert(VEC == 1 || VEC == 2 || VEC == 4 || VEC == 8, "FORGE_P_VEC: 1, 2, 4 or 8");

__device__ __forceinline__ float pw_apply(float a, float b, const PwScalars& s) {
#if PW_BINARY
  return pw_binary(a, b, s);
#else
  (void)b;
  return pw_unary(a, s);
#endif
}

// An operand constant along the loop: the wrapped number or element 0.
template <class T>
__device__ __forceinline__ float constant_of(const PwOperand& o, int64_t off) {
  return o.is_value ? o.value : Io<T>::to(static_cast<const T*>(o.data)[off]);
}

// The flat plan (one dim, y steps by 1): N elements per thread per step, as
// one access per tensor when N * sizeof is 4-16 bytes and aligned (the host
// checks), a and b stepping by 1 or constant (CA, CB).
template <class TY, class TA, class TB, bool CA, bool CB, int N>
__global__ void __launch_bounds__(BLOCK) pw_flat(PwArgs a) {
  const int64_t n = a.sizes[0];
  const TA* pa = static_cast<const TA*>(a.in[0].data);
  const TB* pb = static_cast<const TB*>(a.in[1].data);
  TY* y = static_cast<TY*>(a.y);
  const float ca = CA ? constant_of<TA>(a.in[0], 0) : 0.0f;
  const float cb = (CB && PW_BINARY) ? constant_of<TB>(a.in[1], 0) : 0.0f;
  const int64_t step = static_cast<int64_t>(gridDim.x) * BLOCK * N;
  for (int64_t i = (static_cast<int64_t>(blockIdx.x) * BLOCK + threadIdx.x) * N; i < n; i += step) {
    float va[N], vb[N], r[N];
    if (i + N <= n) {
      if constexpr (!CA) load_n<TA, N>(pa + i, va);
      if constexpr (!CB) load_n<TB, N>(pb + i, vb);
#pragma unroll
      for (int k = 0; k < N; ++k) r[k] = pw_apply(CA ? ca : va[k], CB ? cb : vb[k], a.s);
      store_n<TY, N>(y + i, r);
    } else {
      for (int64_t j = i; j < n; ++j)
        y[j] = Io<TY>::from(pw_apply(CA ? ca : Io<TA>::to(pa[j]), CB ? cb : Io<TB>::to(pb[j]), a.s));
    }
  }
}

// Any plan: rows of the innermost plan dim, each thread VEC consecutive
// elements of one row; the row's offsets from one index split.
template <class TY, class TA, class TB>
__global__ void __launch_bounds__(BLOCK) pw_rows(PwArgs a, int64_t chunks_per_row, int64_t total_chunks) {
  const int last = a.ndim - 1;
  const int64_t inner = a.sizes[last];
  const TA* pa = static_cast<const TA*>(a.in[0].data);
  const TB* pb = static_cast<const TB*>(a.in[1].data);
  TY* y = static_cast<TY*>(a.y);
  const int64_t step = static_cast<int64_t>(gridDim.x) * BLOCK;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * BLOCK + threadIdx.x; t < total_chunks; t += step) {
    int64_t row = t / chunks_per_row;
    const int64_t j0 = (t - row * chunks_per_row) * VEC;
    int64_t oy = 0, oa = 0, ob = 0;
    for (int d = last - 1; d >= 0; --d) {
      const int64_t q = row / a.sizes[d], c = row - q * a.sizes[d];
      oy += c * a.y_strides[d];
      oa += c * a.in[0].strides[d];
      ob += c * a.in[1].strides[d];
      row = q;
    }
    const int64_t sy = a.y_strides[last], sa = a.in[0].strides[last], sb = a.in[1].strides[last];
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      const int64_t j = j0 + k;
      if (j >= inner) break;
      const float va = a.in[0].is_value ? a.in[0].value : Io<TA>::to(pa[oa + j * sa]);
      float vb = 0.0f;
      if (PW_BINARY) vb = a.in[1].is_value ? a.in[1].value : Io<TB>::to(pb[ob + j * sb]);
      y[oy + j * sy] = Io<TY>::from(pw_apply(va, vb, a.s));
    }
  }
}

inline int64_t blocks_for(int64_t work) {
  const int64_t b = (work + BLOCK - 1) / BLOCK;
  return b < 1 ? 1 : (b > 0x7fffffff ? 0x7fffffff : b);
}

template <class TY, class TA, class TB>
int launch(const PwArgs& a, cudaStream_t stream) {
  const PwOperand &A = a.in[0], &B = a.in[1];
  const bool ca = A.is_value || A.strides[0] == 0, cb = !PW_BINARY || B.is_value || B.strides[0] == 0;
  const bool flat = a.ndim == 1 && a.y_strides[0] == 1 && (ca || A.strides[0] == 1) && (cb || B.strides[0] == 1);
  if (flat) {
    // One access per tensor for VEC elements where every streamed pointer is
    // aligned to VEC elements of its type (16 bytes at most per access).
    auto fits = [](const void* p, size_t bytes) {
      const size_t align = bytes > 16 ? 16 : bytes;
      return (reinterpret_cast<uintptr_t>(p) & (align - 1)) == 0;
    };
    const bool vec = fits(a.y, VEC * sizeof(TY)) && (ca || fits(A.data, VEC * sizeof(TA))) &&
                     (cb || fits(B.data, VEC * sizeof(TB)));
    const int64_t blocks = blocks_for((a.sizes[0] + VEC - 1) / VEC);
    auto go = [&](auto va, auto vb) {
      constexpr bool CA = decltype(va)::value, CB = decltype(vb)::value;
      if (vec) pw_flat<TY, TA, TB, CA, CB, VEC><<<static_cast<unsigned>(blocks), BLOCK, 0, stream>>>(a);
      else pw_flat<TY, TA, TB, CA, CB, 1><<<static_cast<unsigned>(blocks_for(a.sizes[0])), BLOCK, 0, stream>>>(a);
      return launch_status();
    };
    using T = std::true_type;
    using F = std::false_type;
    if (!ca && !cb) return go(F{}, F{});
    if (!ca) return go(F{}, T{});
    if (!cb) return go(T{}, F{});
    return go(T{}, T{});
  }
  const int64_t inner = a.sizes[a.ndim - 1];
  const int64_t chunks_per_row = (inner + VEC - 1) / VEC;
  const int64_t total = a.numel / inner * chunks_per_row;
  pw_rows<TY, TA, TB><<<static_cast<unsigned>(blocks_for(total)), BLOCK, 0, stream>>>(a, chunks_per_row, total);
  return launch_status();
}

template <class F>
int with_operand(const PwOperand& o, F&& f) {
  if (o.is_value) return f(float{});
  return with_dtype(o.dtype, static_cast<F&&>(f));
}


}  // namespace

#include "../_common/pointwise_parse.h"  // the call's checks and loop plan, shared with the CPU template

extern "C" int forge_kernel(const forge_call* call) {
  PwArgs a;
  if (parse_pointwise(call, a, host_readable)) return 1;
  if (a.numel == 0) return 0;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  return with_dtype(a.y_dtype, [&](auto ty) {
    return with_operand(a.in[0], [&](auto ta) {
#if PW_BINARY
      return with_operand(a.in[1], [&](auto tb) {
        return launch<decltype(ty), decltype(ta), decltype(tb)>(a, stream);
      });
#else
      return launch<decltype(ty), decltype(ta), float>(a, stream);
#endif
    });
  });
}
