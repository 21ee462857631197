// The vector math pointwise_ops.h asks for, on cpu_common.h's vf (fp32 lanes).
// Inside the ISA region. Each is within a few ulp over the whole float range
// and passes NaN through.
#define PW_FN inline __attribute__((always_inline))
#define PW_MASK vi

inline vf pw_k(float c) { return splat(c); }
inline vf pw_sel(vi m, vf a, vf b) { return m ? a : b; }
// Whether any lane's mask is set: lets an op skip a costly branch that no lane takes.
inline bool pw_any(vi m) {
#if FORGE_AVX512
  return _mm512_movepi32_mask((__m512i)m) != 0;
#elif FORGE_AVX2
  return _mm256_movemask_ps((__m256)m) != 0;
#else
  return _mm_movemask_ps((__m128)m) != 0;
#endif
}
inline vf pw_exp(vf x) { return vexp(x); }

inline vf pw_sqrt(vf x) {
#if FORGE_AVX512
  return (vf)_mm512_sqrt_ps((__m512)x);
#elif FORGE_AVX2
  return (vf)_mm256_sqrt_ps((__m256)x);
#else
  return (vf)_mm_sqrt_ps((__m128)x);
#endif
}

#include "../_common/cpu_vfma.h"  // vfma: one rounding, as the stock kernels

// Batch norm in eval mode on one element as the stock CPU kernel computes it:
// alpha = (1 / sqrt(var + eps)) * w, beta = fma(-mean, alpha, b), y = fma(x, alpha,
// beta) (bit for bit: the batch_norm family's CPU templates, docs/STRATEGIES.md).
inline vf pw_batch_norm_eval(vf x, vf w, vf b, vf mean, vf var, float eps) {
  const vf alpha = pw_k(1.0f) / pw_sqrt(var + pw_k(eps)) * w;
  return vfma(x, alpha, vfma(-mean, alpha, b));
}

// A cast to a 16-bit type and back (a chain's x.to(torch.bfloat16)): through
// cpu_common.h's conversions, the ones every store to that type makes.
inline vf pw_round_bf16(vf x) {
  bf16 t[W];
  store(t, x);
  return load(t);
}
inline vf pw_round_f16(vf x) {
  f16 t[W];
  store(t, x);
  return load(t);
}

// exp(x) - 1: the Taylor series through x^8 for |x| < 0.5 (truncation below
// 1e-8 relative), exp(x) - 1 beyond, where it does not cancel.
inline vf pw_expm1(vf x) {
  vf p = splat(1.0f / 40320.0f);
  p = p * x + splat(1.0f / 5040.0f);
  p = p * x + splat(1.0f / 720.0f);
  p = p * x + splat(1.0f / 120.0f);
  p = p * x + splat(1.0f / 24.0f);
  p = p * x + splat(1.0f / 6.0f);
  p = p * x + splat(0.5f);
  p = p * x * x + x;
  const vf ax = x < splat(0.0f) ? -x : x;
  return ax < splat(0.5f) ? p : vexp(x) - splat(1.0f);
}

// log(u) for u > 0, normal or +inf: u = 2^e m with m in [sqrt(1/2), sqrt(2)),
// log(m) = 2 atanh(f / (2 + f)) with f = m - 1 by its odd series through s^11
// (|s| <= 0.172: truncation 3e-10), e ln2 in two parts (Cody-Waite).
inline vf pw_log_pos(vf u) {
  vi bits = (vi)u;
  vi e = ((bits >> 23) & 0xff) - 127;
  vf m = (vf)((bits & 0x007fffff) | 0x3f800000);
  const vi big = m > splat(1.41421356f);
  m = big ? m * splat(0.5f) : m;
  e = big ? e + 1 : e;
  const vf f = m - splat(1.0f);
  const vf s = f / (splat(2.0f) + f), z = s * s;
  vf p = splat(2.0f / 11.0f);
  p = p * z + splat(2.0f / 9.0f);
  p = p * z + splat(2.0f / 7.0f);
  p = p * z + splat(2.0f / 5.0f);
  p = p * z + splat(2.0f / 3.0f);
  const vf ef = __builtin_convertvector(e, vf);
  const vf r = ef * splat(0.693359375f) + (ef * splat(-2.12194440e-4f) + (s * z * p + (s + s)));
  return u == splat(INFINITY) ? u : r;
}

// log(1 + x) for x >= -1: log(u) * x / (u - 1) with u = 1 + x rounded (exact
// to fp32 rounding, also where u rounds to 1: then x itself).
inline vf pw_log1p(vf x) {
  const vf u = splat(1.0f) + x;
  const vf r = pw_log_pos(u) * (x / (u - splat(1.0f)));
  vf out = u == splat(1.0f) ? x : r;
  out = u == splat(INFINITY) ? u : out;
  return x != x ? x : out;
}

// erf(x) = x P(x^2) / Q(x^2) for |x| < 3.92, a rational fit of degrees 5/5 in
// x^2 made for this file (relative error 1.9e-8 in exact arithmetic, 6 ulp in
// fp32 over [0, 4]); +-1 beyond, where erf rounds to +-1 in fp32. No exp: the
// erf form of gelu on the CPU costs one division and 13 multiply-adds.
inline vf pw_erf(vf x) {
  const vf t = x * x;
  vf p = splat(2.050080746e-06f);
  p = p * t + splat(2.848826827e-04f);
  p = p * t + splat(3.765628743e-03f);
  p = p * t + splat(5.274875889e-02f);
  p = p * t + splat(1.904067798e-01f);
  p = p * t + splat(1.128379146e+00f);
  vf q = splat(3.809164543e-05f);
  q = q * t + splat(1.162537790e-03f);
  q = q * t + splat(1.496924063e-02f);
  q = q * t + splat(1.141092358e-01f);
  q = q * t + splat(5.020763561e-01f);
  q = q * t + splat(1.0f);
  const vf r = x * p / q;
  const vf ax = x < splat(0.0f) ? -x : x;
  return ax >= splat(3.92f) ? (x < splat(0.0f) ? splat(-1.0f) : splat(1.0f)) : r;  // NaN: r
}

// erfc(x): Press et al.'s Chebyshev fit, erfc(z) = t exp(-z^2 + P(t)) with
// t = 1 / (1 + z/2), z = |x| (fractional error below 1.2e-7 for every z);
// erfc(-z) = 2 - erfc(z).
inline vf pw_erfc(vf x) {
  const vf z = x < splat(0.0f) ? -x : x;
  const vf t = splat(1.0f) / (splat(1.0f) + splat(0.5f) * z);
  vf p = splat(0.17087277f);
  p = p * t + splat(-0.82215223f);
  p = p * t + splat(1.48851587f);
  p = p * t + splat(-1.13520398f);
  p = p * t + splat(0.27886807f);
  p = p * t + splat(-0.18628806f);
  p = p * t + splat(0.09678418f);
  p = p * t + splat(0.37409196f);
  p = p * t + splat(1.00002368f);
  p = p * t + splat(-1.26551223f);
  vf r = t * vexp(p - z * z);
  r = z == splat(INFINITY) ? splat(0.0f) : r;  // t = 0 and exp(-inf): 0, not 0 * inf
  return x < splat(0.0f) ? splat(2.0f) - r : r;
}
