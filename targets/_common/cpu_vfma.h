#ifndef FORGE_CPU_VFMA_H  // inlined by more than one block of a template (cpu_fma.h, pointwise_cpu_math.h)
#define FORGE_CPU_VFMA_H
// a * b + c with one rounding (the stock CPU kernel's fused multiply-add; its
// results are matched bit for bit only with a real FMA). Without FMA hardware
// (FORGE_P_ISA 0 under -march=x86-64-v2) the product is formed exactly in
// double and rounded twice: identical except in rare double-rounding ties.
inline vf vfma(vf a, vf b, vf c) {
#if FORGE_AVX512
  return (vf)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c);
#elif FORGE_AVX2
  return (vf)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c);
#elif defined(__FMA__)
  return (vf)_mm_fmadd_ps((__m128)a, (__m128)b, (__m128)c);
#else
  vf r;
  for (int k = 0; k < W; ++k) r[k] = static_cast<float>(static_cast<double>(a[k]) * b[k] + c[k]);
  return r;
#endif
}
inline float sfma(float a, float b, float c) { return vfma(splat(a), splat(b), splat(c))[0]; }
#endif
