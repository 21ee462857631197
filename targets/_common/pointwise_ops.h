/* ---- the pointwise op table (targets/pointwise, targets/binary) ----
 * One home for what each elementwise op computes, shared by the CPU template
 * (V = a GCC vector of fp32 lanes) and the CUDA template (V = float). The
 * including template defines, before this file:
 *   PW_FN                    the functions' qualifiers (inline / __device__ __forceinline__)
 *   PW_MASK                  the type of `a < b` on two V
 *   pw_k(float c) -> V       a constant in every lane
 *   pw_sel(PW_MASK, V, V)    per lane: the first where the mask is set
 *   pw_any(PW_MASK) -> bool  whether the mask is set in any lane
 *   pw_exp, pw_expm1, pw_log1p, pw_erfc, pw_erf (CPU) (V -> V), each within a few ulp of the
 *                            true function over the whole float range, NaN in
 *                            -> NaN out
 *   pw_batch_norm_eval(x, w, b, mean, var, eps)  batch norm in eval mode on one
 *                            element, in the backend's stock arithmetic (a chain's
 *                            batch norm: rules/search/chain_strategies.cpp)
 * FORGE_P_OP names the op (forge writes the captured op's name: "silu",
 * "add" for add.Tensor / add_.Tensor). All math is fp32, whatever the storage
 * dtype, as the stock kernels do; each formula below gives NaN and +-inf where
 * the stock CPU kernel does (a comment says where that took a particular form).
 *
 * Scalars (PwScalars, filled from the call by pointwise_parse.h, in schema order):
 *   leaky_relu: s0 = negative_slope     softplus: s0 = beta, s1 = threshold
 *   elu: s0 = alpha, s1 = scale, s2 = input_scale   (selu is elu with its constants)
 *   hardtanh: s0 = min_val, s1 = max_val (relu6 is hardtanh(0, 6))
 *   clamp: s0 = min, s1 = max, has_lo / has_hi (None leaves that side open)
 *   pow (Tensor_Scalar): s0 = exponent, one of 2, 3, 0.5, -0.5, -1, -2, 1
 *   gelu: approximate "none" (tanh_approx = 0) or "tanh" (1)
 *   add, sub (Tensor): s0 = alpha
 *   maximum, minimum: NaN when either operand is NaN, as torch's      */
#define PW_relu 1
#define PW_leaky_relu 2
#define PW_gelu 3
#define PW_silu 4
#define PW_sigmoid 5
#define PW_tanh 6
#define PW_softplus 7
#define PW_elu 8
#define PW_hardtanh 9
#define PW_hardsigmoid 10
#define PW_hardswish 11
#define PW_mish 12
#define PW_clamp 13
#define PW_pow 14
#define PW_abs 15
#define PW_neg 16
#define PW_exp 17
#define PW_sqrt 18
#define PW_rsqrt 19
#define PW_add 101
#define PW_sub 102
#define PW_mul 103
#define PW_div 104
#define PW_maximum 105
#define PW_minimum 106
#include "../_common/op_code.h"  // FORGE_OP_CODE

#ifndef FORGE_P_OP
#define FORGE_P_OP relu
#endif
#define PW_OP FORGE_OP_CODE(PW_)
#if PW_OP < 1 || (PW_OP > PW_rsqrt && PW_OP < PW_add) || PW_OP > PW_minimum
#error "FORGE_P_OP: not an op of the pointwise table (targets/_common/pointwise_ops.h)"
#endif
#define PW_BINARY (PW_OP >= PW_add)

struct PwScalars {
  float s0, s1, s2;
  int has_lo, has_hi;
  int tanh_approx;
};

// The loop plan of a call (pointwise_parse.h fills it).
// The plan: the output's dims in its own memory order (outermost first), dims
// of extent 1 dropped and neighbours merged wherever every operand steps
// through them as one, so a contiguous call is one dim and a transposed one
// (whose output stock allocates transposed too) is one dim as well. Each input
// gets a stride per plan dim in elements, 0 where it broadcasts (a dim it lacks
// or has at extent 1). An input of one float64 element (the wrapped Python
// number of `x * 0.5`) is read once on the host as `value`.
struct PwOperand {
  const void* data;
  int32_t dtype;
  int is_value;  // a host float64 scalar: `value`, no data to load
  float value;
  int64_t strides[FORGE_MAX_DIMS];
};
struct PwArgs {
  PwOperand in[2];  // in[1] for binary ops only
  void* y;
  int32_t y_dtype;
  int64_t y_strides[FORGE_MAX_DIMS];
  int ndim;  // plan dims (>= 1)
  int64_t sizes[FORGE_MAX_DIMS];
  int64_t numel;  // 0: nothing to do
  PwScalars s;
};

namespace {

// tanh(x) = expm1(2x) / (expm1(2x) + 2) for |x| <= 0.55: no cancellation near
// 0 (tanh(1e-4) keeps its relative accuracy); beyond, sign(x) (1 - 2 / (exp(2|x|)
// + 1)), rounded once near +-1, so that 1 + tanh(x) (MinGPT's GELU) keeps what
// fp32 can hold of it; |x| > 9 is +-1 in fp32 (expm1 would overflow).
template <class V> PW_FN V pw_tanh(V x) {
  const V e = pw_expm1(x + x);
  const V near0 = e / (e + pw_k(2.0f));
  const V a = pw_sel(x < pw_k(0.0f), -x, x);
  const V far = pw_k(1.0f) - pw_k(2.0f) / (pw_exp(a + a) + pw_k(1.0f));
  V r = pw_sel(a > pw_k(0.55f), pw_sel(x < pw_k(0.0f), -far, far), near0);
  r = pw_sel(x > pw_k(9.0f), pw_k(1.0f), r);
  return pw_sel(x < pw_k(-9.0f), pw_k(-1.0f), r);
}
// 1 / (1 + exp(-x)): -inf gives 0, +inf 1.
template <class V> PW_FN V pw_sigmoid(V x) { return pw_k(1.0f) / (pw_k(1.0f) + pw_exp(-x)); }

#ifndef __CUDACC__
// What stock's CPU gelu gives at +inf (torch 2.14, a float tensor of several
// elements): NaN where this template was first verified and in CI, +inf (the
// formula) on an AMD EPYC with AVX2 and no AVX-512. Taken to follow AVX-512,
// by the four features by which torch's and oneDNN's kernels choose their
// AVX-512 code; not checked on other CPUs.
inline float pw_stock_gelu_at_inf() {
  static const float v = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                                 __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")
                             ? NAN
                             : INFINITY;
  return v;
}
#endif

// The table's ops by code (PW_relu ...), for the single-op templates
// (pw_unary/pw_binary below: FORGE_P_OP's code) and for fused chains
// (targets/chain: one call per op of the chain).
template <int OP, class V> PW_FN V pw_op_unary(V x, const PwScalars& s) {
  (void)s;
  if constexpr (OP == PW_relu) {
    return pw_sel(x < pw_k(0.0f), pw_k(0.0f), x);  // NaN stays NaN
  } else if constexpr (OP == PW_leaky_relu) {
    return pw_sel(x > pw_k(0.0f), x, x * pw_k(s.s0));
  } else if constexpr (OP == PW_gelu) {
    if (s.tanh_approx) {
      // 0.5 x (1 + tanh(u)) = x * sigmoid(2u): no cancellation at negative x.
      const V u = pw_k(0.7978845608028654f) * (x + pw_k(0.044715f) * x * x * x);
      return x / (pw_k(1.0f) + pw_exp(pw_k(-2.0f) * u));
    }
#if defined(PW_GELU_ERF) && !defined(__CUDACC__)
    // 0.5 x (1 + erf(x / sqrt 2)), as the stock CPU kernel's vector path
    // computes it: no exp, half the time of the erfc form. Below x = -2 its
    // 1 + erf cancels, as stock's does; stock's erf is itself off by more than
    // the family's atol near x = -3.45, where this form is nearer the true
    // value, so only a template of a family with compare_float64 defines
    // PW_GELU_ERF (targets/pointwise/cpu_strided.cpp).
    const V r = pw_k(0.5f) * x * (pw_k(1.0f) + pw_erf(x * pw_k(0.70710678118654752f)));
#else
    // 0.5 x (1 + erf(x / sqrt 2)) = 0.5 x erfc(-x / sqrt 2): no cancellation at
    // negative x; -inf gives NaN (-inf * 0) as stock does.
    const V r = pw_k(0.5f) * x * pw_erfc(x * pw_k(-0.70710678118654752f));
#endif
#ifndef __CUDACC__
    return pw_sel(x == pw_k(INFINITY), pw_k(pw_stock_gelu_at_inf()), r);
#else
    return r;
#endif
  } else if constexpr (OP == PW_silu) {
    return x / (pw_k(1.0f) + pw_exp(-x));  // -inf gives NaN (-inf / inf), as stock does
  } else if constexpr (OP == PW_sigmoid) {
    return pw_sigmoid(x);
  } else if constexpr (OP == PW_tanh) {
    return pw_tanh(x);
  } else if constexpr (OP == PW_softplus) {
    const V xb = x * pw_k(s.s0);
    return pw_sel(xb > pw_k(s.s1), x, pw_log1p(pw_exp(xb)) / pw_k(s.s0));
  } else if constexpr (OP == PW_elu) {
    // stock: x <= 0 ? expm1(x * input_scale) * (alpha * scale) : x * scale;
    // expm1 only where a lane needs it (stock's vector path skips it likewise:
    // 6x faster on positive inputs). NaN is not > 0: it takes the expm1 path.
    const PW_MASK pos = x > pw_k(0.0f);
    if (!pw_any(!pos)) return x * pw_k(s.s1);
    return pw_sel(pos, x * pw_k(s.s1), pw_expm1(x * pw_k(s.s2)) * pw_k(s.s0 * s.s1));
  } else if constexpr (OP == PW_hardtanh) {
    V r = pw_sel(x < pw_k(s.s0), pw_k(s.s0), x);
    return pw_sel(r > pw_k(s.s1), pw_k(s.s1), r);
  } else if constexpr (OP == PW_clamp) {
    V r = x;
    if (s.has_lo) r = pw_sel(r < pw_k(s.s0), pw_k(s.s0), r);
    if (s.has_hi) r = pw_sel(r > pw_k(s.s1), pw_k(s.s1), r);
    return r;
  } else if constexpr (OP == PW_hardsigmoid || OP == PW_hardswish) {
    V t = x + pw_k(3.0f);
    t = pw_sel(t < pw_k(0.0f), pw_k(0.0f), t);
    t = pw_sel(t > pw_k(6.0f), pw_k(6.0f), t);
  if constexpr (OP == PW_hardsigmoid) return t / pw_k(6.0f);
    else return x * t / pw_k(6.0f);
  } else if constexpr (OP == PW_mish) {
    // x tanh(log1p(e^x)) = x n / (n + 2), n = e^x (e^x + 2); x > 20: tanh is 1
    // in fp32; x < -20: n / (n + 2) is e^x in fp32, and (x h) h with h = e^(x/2)
    // keeps x e^x exact where e^x alone is subnormal (x e^x is normal down to -87).
    const V e = pw_exp(x);
    const V n = e * (e + pw_k(2.0f));
    const V h = pw_exp(pw_k(0.5f) * x);
    const V r = pw_sel(x < pw_k(-20.0f), x * h * h, x * (n / (n + pw_k(2.0f))));
    return pw_sel(x > pw_k(20.0f), x, r);
  } else if constexpr (OP == PW_pow) {
    // The exponents pointwise_parse.h accepts; others fall back to stock.
    if (s.s0 == 2.0f) return x * x;
    if (s.s0 == 3.0f) return x * x * x;
    if (s.s0 == 1.0f) return x;
    if (s.s0 == -1.0f) return pw_k(1.0f) / x;
    if (s.s0 == -2.0f) return pw_k(1.0f) / (x * x);
    if (s.s0 == 0.5f) return pw_sqrt(x);
    return pw_k(1.0f) / pw_sqrt(x);  // -0.5
  } else if constexpr (OP == PW_abs) {
    return pw_sel(x < pw_k(0.0f), -x, x);
  } else if constexpr (OP == PW_neg) {
    return -x;
  } else if constexpr (OP == PW_exp) {
    return pw_exp(x);
  } else if constexpr (OP == PW_sqrt) {
    return pw_sqrt(x);
  } else if constexpr (OP == PW_rsqrt) {
    return pw_k(1.0f) / pw_sqrt(x);
  } else {
    return x;  // a binary op: pw_op_binary
  }
}

// Elementwise with broadcasting: a op b, in fp32.
template <int OP, class V> PW_FN V pw_op_binary(V a, V b, const PwScalars& s) {
  (void)s;
  if constexpr (OP == PW_add) {
    return a + b * pw_k(s.s0);
  } else if constexpr (OP == PW_sub) {
    return a - b * pw_k(s.s0);
  } else if constexpr (OP == PW_mul) {
    return a * b;
  } else if constexpr (OP == PW_div) {
    return a / b;
  } else if constexpr (OP == PW_maximum) {
    return pw_sel(a != a, a, pw_sel(b != b, b, pw_sel(a < b, b, a)));
  } else if constexpr (OP == PW_minimum) {
    return pw_sel(a != a, a, pw_sel(b != b, b, pw_sel(b < a, b, a)));
  } else {
    (void)b;
    return a;
  }
}

template <class V> PW_FN V pw_unary(V x, const PwScalars& s) { return pw_op_unary<PW_OP>(x, s); }
template <class V> PW_FN V pw_binary(V a, V b, const PwScalars& s) { return pw_op_binary<PW_OP>(a, b, s); }

}  // namespace
