/* Double lanes for CPU templates whose sums run over long rows: an fp32
 * accumulator's error grows with its partial sum, a double's stays below
 * fp32's last digit. W doubles are two registers; as a struct of two halves
 * GCC keeps them in registers (a W-double generic vector wider than a
 * register is spilled every step). Needs cpu_common.h (W, vf, FORGE_VEC). */
typedef double vdh __attribute__((vector_size(W * 4)));  // W/2 doubles: one register
typedef float vfh __attribute__((vector_size(W * 2)));   // W/2 floats
struct vd {
  vdh lo, hi;
};
inline vd operator+(vd a, vd b) { return {a.lo + b.lo, a.hi + b.hi}; }
inline vd operator*(vd a, vd b) { return {a.lo * b.lo, a.hi * b.hi}; }
inline vd operator/(vd a, vd b) { return {a.lo / b.lo, a.hi / b.hi}; }
inline vd operator+(vd a, double b) { return {a.lo + b, a.hi + b}; }
inline vd& operator+=(vd& a, vd b) { return a = a + b; }
inline vd splat_d(double a) { return vd{} + a; }
// widen/narrow: one conversion per register half. GCC 12 lowers the generic
// spelling (shuffle, then convert) to 2-lane conversions and inserts, so the
// AVX2 and AVX-512 widths use the intrinsics; the generic one is SSE's (W 4).
inline vd widen(vf v) {
#if FORGE_VEC == 8
  return {(vdh)_mm256_cvtps_pd(_mm256_castps256_ps128((__m256)v)),
          (vdh)_mm256_cvtps_pd(_mm256_extractf128_ps((__m256)v, 1))};
#elif FORGE_VEC == 16
  return {(vdh)_mm512_cvtps_pd(_mm512_castps512_ps256((__m512)v)),
          (vdh)_mm512_cvtps_pd(_mm512_extractf32x8_ps((__m512)v, 1))};
#else
  return {__builtin_convertvector(__builtin_shufflevector(v, v, 0, 1), vdh),
          __builtin_convertvector(__builtin_shufflevector(v, v, 2, 3), vdh)};
#endif
}
inline vf narrow(vd v) {
#if FORGE_VEC == 8
  return (vf)_mm256_insertf128_ps(_mm256_castps128_ps256(_mm256_cvtpd_ps((__m256d)v.lo)),
                                  _mm256_cvtpd_ps((__m256d)v.hi), 1);
#elif FORGE_VEC == 16
  return (vf)_mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps((__m512d)v.lo)),
                                _mm512_cvtpd_ps((__m512d)v.hi), 1);
#else
  return __builtin_shufflevector(__builtin_convertvector(v.lo, vfh), __builtin_convertvector(v.hi, vfh), 0, 1, 2, 3);
#endif
}
inline double dsum(vd v) {
  double s = 0;
  for (int k = 0; k < W / 2; ++k) s += v.lo[k];
  for (int k = 0; k < W / 2; ++k) s += v.hi[k];
  return s;
}
