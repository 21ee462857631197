/* pointwise, CPU strategy "strided": one elementwise op of the table in
 * targets/_common/pointwise_ops.h (FORGE_P_OP: relu, gelu, silu, add, ...)
 * over any shapes, strides and broadcasting, in fp32 vector lanes.
 *
 * Math: y[i] = op(x[i]) (unary, with the op's scalars) or op(a[i], b[i])
 * (binary, a and b broadcast to y's shape), computed in fp32 whatever the
 * storage dtypes (float32, bfloat16, float16; each tensor its own), rounded
 * once to y's dtype. Formulas and their non-finite behaviour: pointwise_ops.h.
 * Ops: aten::relu, leaky_relu, gelu, silu, sigmoid, tanh, softplus, elu,
 * hardtanh, hardsigmoid, hardswish, mish, clamp, pow.Tensor_Scalar, abs, neg,
 * exp, and add/sub/mul/div.Tensor, with their in-place forms (the new self is
 * the output).
 * Shapes: any rank <= 8, any strides (the loop follows the output's memory
 * order, pointwise_parse.h), broadcasting by the usual rules, a wrapped
 * float64 Python number as either operand.
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * the op's tensor and scalar arguments as pointwise_parse.h lists them; every
 * tensor float32/bfloat16/float16 (a one-element float64 operand is a
 * number); inputs broadcastable to the output; the output not overlapping
 * itself; pow's exponent one of 2, 3, 1, -1, -2, 0.5, -0.5.
 *
 * Why it is fast: one call with no dispatcher, TensorIterator set-up or
 * thread wake-up, dims merged so the inner loop is as long as the memory
 * allows; where the output and each input step by one element (or an input is
 * constant along the row: a bias, a scalar) the inner loop is FORGE_P_UNROLL
 * independent full-register vectors (16 fp32 lanes with AVX-512, 8 with AVX2:
 * FORGE_P_ISA), else W elements are gathered into a vector and scattered back.
 * exp, expm1, log1p, erfc and erf are inlined polynomials (about 2 ulp, erfc
 * 1.2e-7 relative, Press et al.'s Chebyshev fit; erf a rational fit, 6 ulp,
 * which gelu uses here), not library calls.
 * Single-threaded (the worker refuses OpenMP runtimes: docs/CANDIDATE_ABI.md).
 */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "forge_kernel.h"

#pragma GCC diagnostic ignored "-Wpsabi" /* vectors wider than the target ISA are fine: all inline */
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized" /* GCC 12 false positives inside the fp16 */
#pragma GCC diagnostic ignored "-Wuninitialized"      /* conversion intrinsics (_mm512_cvt*ph*) */

#ifndef FORGE_P_ISA
#define FORGE_P_ISA 0 /* 0: as compiled (-march); 2: AVX2 paths; 3: AVX-512 paths (run-time checked) */
#endif
#ifndef FORGE_P_UNROLL
#define FORGE_P_UNROLL 2 /* independent vectors in flight in the contiguous loop: 1, 2, 4 */
#endif
#ifndef FORGE_P_STREAM
#define FORGE_P_STREAM 0 /* 1: float32 rows written with non-temporal stores (no read for ownership) */
#endif

#include "../_common/cpu_common.h"  // inlined when forge loads the template (docs/STRATEGIES.md)
#include "../_common/pointwise_cpu_math.h"  // pw_k, pw_sel, pw_exp, ... on vf
// gelu as 1 + erf (pointwise_ops.h): this family sets compare_float64.
#define PW_GELU_ERF 1
#include "../_common/pointwise_ops.h"  // the op table: pw_unary, pw_binary

constexpr int U = FORGE_P_UNROLL;
static_assert(U >= 1 && U <= 8, "FORGE_P_UNROLL must be 1..8");

inline vf pw_apply(vf a, vf b, const PwScalars& s) {
#if PW_BINARY
  return pw_binary(a, b, s);
#else
  (void)b;
  return pw_unary(a, s);
#endif
}


// Elements [j0, j1) of one row as partial vectors (the tail; the head before
// a streamed row's first aligned vector).
template <bool CA, bool CB, class TY, class TA, class TB>
void row_part(TY* y, const TA* a, const TB* b, vf ca, vf cb, int64_t j, int64_t m, const PwScalars& s) {
  vf va = ca, vb = cb;
  if constexpr (!CA) va = load_part(a + j, m, a[0]);
  if constexpr (!CB) vb = load_part(b + j, m, b[0]);
  store_part(y + j, pw_apply(va, vb, s), m);
}

// One row of n elements where y steps by 1; a and b step by 1 (CA/CB false)
// or stay constant (true: ca / cb hold the value in every lane).
template <bool CA, bool CB, class TY, class TA, class TB>
void row_lanes(TY* y, const TA* a, const TB* b, vf ca, vf cb, int64_t n, const PwScalars& s) {
  auto la = [&](int64_t j) { if constexpr (CA) return ca; else return load(a + j); };
  auto lb = [&](int64_t j) { if constexpr (CB) return cb; else return load(b + j); };
  int64_t j = 0;
  if constexpr (FORGE_P_STREAM && sizeof(TY) == 4) {
    // Up to the first address aligned to a whole vector, then streamed vectors.
    const int64_t head = stream_head(y);
    if (head > 0 && head < n && reinterpret_cast<uintptr_t>(y) % 4 == 0) {
      row_part<CA, CB>(y, a, b, ca, cb, 0, head, s);
      j = head;
    }
    if (stream_aligned(y + j)) {
      for (; j + U * W <= n; j += U * W) {
        vf r[U];
        for (int u = 0; u < U; ++u) r[u] = pw_apply(la(j + u * W), lb(j + u * W), s);
        for (int u = 0; u < U; ++u) store_stream(reinterpret_cast<float*>(y + j + u * W), r[u]);
      }
      for (; j + W <= n; j += W) store_stream(reinterpret_cast<float*>(y + j), pw_apply(la(j), lb(j), s));
    }
  }
  for (; j + U * W <= n; j += U * W) {
    vf r[U];
    for (int u = 0; u < U; ++u) r[u] = pw_apply(la(j + u * W), lb(j + u * W), s);
    for (int u = 0; u < U; ++u) store(y + j + u * W, r[u]);
  }
  for (; j + W <= n; j += W) store(y + j, pw_apply(la(j), lb(j), s));
  if (j < n) row_part<CA, CB>(y, a, b, ca, cb, j, n - j, s);
}

// One row with any strides: W elements gathered, computed, scattered.
template <class TY, class TA, class TB>
void row_gather(TY* y, int64_t sy, const TA* a, int64_t sa, bool va_const, vf ca, const TB* b, int64_t sb,
                bool vb_const, vf cb, int64_t n, const PwScalars& s) {
  TA ta[W];
  TB tb[W];
  TY ty[W];
  for (int64_t j = 0; j < n; j += W) {
    const int64_t m = n - j < W ? n - j : W;
    for (int k = 0; k < W; ++k) {
      const int64_t e = j + (k < m ? k : 0);
      if (!va_const) ta[k] = a[e * sa];
      if (!vb_const) tb[k] = b[e * sb];
    }
    const vf r = pw_apply(va_const ? ca : load(ta), vb_const ? cb : load(tb), s);
    store(ty, r);
    for (int64_t k = 0; k < m; ++k) y[(j + k) * sy] = ty[k];
  }
}

// An operand's value in every lane: the wrapped number, or its first element.
template <class T> vf constant_of(const PwOperand& o, int64_t off) {
  if (o.is_value) return splat(o.value);
  return splat(to_f32(static_cast<const T*>(o.data)[off]));
}

template <class TY, class TA, class TB>
__attribute__((noinline)) int pw_run(const PwArgs& a) {
  const int last = a.ndim - 1;
  const int64_t n = a.sizes[last], outer = a.numel / n;
  const PwOperand &A = a.in[0], &B = a.in[1];
  const int64_t sy = a.y_strides[last], sa = A.strides[last], sb = B.strides[last];
  const bool a_const = A.is_value || sa == 0, b_const = !PW_BINARY || B.is_value || sb == 0;
  const bool lanes = sy == 1 && (a_const || sa == 1) && (b_const || sb == 1);
  int64_t idx[FORGE_MAX_DIMS] = {0};
  int64_t oy = 0, oa = 0, ob = 0;
  for (int64_t r = 0; r < outer; ++r) {
    TY* y = static_cast<TY*>(a.y) + oy;
    const TA* pa = A.is_value ? nullptr : static_cast<const TA*>(A.data) + oa;
    const TB* pb = (!PW_BINARY || B.is_value) ? nullptr : static_cast<const TB*>(B.data) + ob;
    const vf ca = a_const ? constant_of<TA>(A, oa) : splat(0.0f);
    const vf cb = (PW_BINARY && b_const) ? constant_of<TB>(B, ob) : splat(0.0f);
    if (lanes) {
      if (!a_const && !b_const) row_lanes<false, false>(y, pa, pb, ca, cb, n, a.s);
      else if (!a_const) row_lanes<false, true>(y, pa, pb, ca, cb, n, a.s);
      else if (!b_const) row_lanes<true, false>(y, pa, pb, ca, cb, n, a.s);
      else row_lanes<true, true>(y, pa, pb, ca, cb, n, a.s);
    } else {
      row_gather(y, sy, pa, sa, a_const, ca, pb, sb, b_const, cb, n, a.s);
    }
    for (int d = last - 1; d >= 0; --d) {  // the odometer over the outer dims
      oy += a.y_strides[d];
      oa += A.strides[d];
      ob += B.strides[d];
      if (++idx[d] < a.sizes[d]) break;
      idx[d] = 0;
      oy -= a.y_strides[d] * a.sizes[d];
      oa -= A.strides[d] * a.sizes[d];
      ob -= B.strides[d] * a.sizes[d];
    }
  }
  if constexpr (FORGE_P_STREAM) _mm_sfence();  // the streamed stores are visible before the call returns
  return 0;
}

// The storage types of y and the inputs, picked at run time (a wrapped number
// needs no type: float stands in).
template <class F> inline int with_operand(const PwOperand& o, F&& f) {
  if (o.is_value) return f(float{});
  return with_dtype(o.dtype, static_cast<F&&>(f));
}
__attribute__((noinline)) int pointwise_dispatch(const PwArgs& a) {
  return with_dtype(a.y_dtype, [&](auto ty) {
    return with_operand(a.in[0], [&](auto ta) {
#if PW_BINARY
      return with_operand(a.in[1], [&](auto tb) {
        return pw_run<decltype(ty), decltype(ta), decltype(tb)>(a);
      });
#else
      return pw_run<decltype(ty), decltype(ta), float>(a);
#endif
    });
  });
}

#include "../_common/cpu_checks.h"  // the ISA region ends; cpu_ok and the host-side tensor checks

#include "../_common/pointwise_parse.h"  // the call's checks and loop plan, shared with the CUDA template

extern "C" int forge_kernel(const forge_call* call) {
  PwArgs a;
  if (parse_pointwise(call, a, [](const void*) { return true; }) || !cpu_ok()) return 1;
  if (a.numel == 0) return 0;
  return pointwise_dispatch(a);
}
