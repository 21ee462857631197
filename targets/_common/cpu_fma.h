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

#include "../_common/chain_epilogue.h"  // FORGE_EPILOGUE: a chain's tail after the affine pass, or nothing

// y = fma(x, scale, bias) over one contiguous plane of a channel: group_norm's
// and batch_norm's affine pass, one rounding per element like the stock kernels
// (then FORGE_EPILOGUE, where a chain's template defines one).
template <class T>
inline void apply_plane(const T* x, T* y, int64_t hw, float scale, float bias) {
  const vf sv = splat(scale), bv = splat(bias);
  int64_t i = 0;
  for (; i + 2 * W <= hw; i += 2 * W) {
    store(y + i, FORGE_EPILOGUE(vfma(load(x + i), sv, bv)));
    store(y + i + W, FORGE_EPILOGUE(vfma(load(x + i + W), sv, bv)));
  }
  for (; i + W <= hw; i += W) store(y + i, FORGE_EPILOGUE(vfma(load(x + i), sv, bv)));
  if (i < hw) store_part(y + i, FORGE_EPILOGUE(vfma(load_part(x + i, hw - i, T{}), sv, bv)), hw - i);
}
