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
#if FORGE_VEC == 4
#define FORGE_LO 0, 1
#define FORGE_HI 2, 3
#define FORGE_ALL 0, 1, 2, 3
#elif FORGE_VEC == 8
#define FORGE_LO 0, 1, 2, 3
#define FORGE_HI 4, 5, 6, 7
#define FORGE_ALL 0, 1, 2, 3, 4, 5, 6, 7
#else
#define FORGE_LO 0, 1, 2, 3, 4, 5, 6, 7
#define FORGE_HI 8, 9, 10, 11, 12, 13, 14, 15
#define FORGE_ALL 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
#endif
inline vd widen(vf v) {
  return {__builtin_convertvector(__builtin_shufflevector(v, v, FORGE_LO), vdh),
          __builtin_convertvector(__builtin_shufflevector(v, v, FORGE_HI), vdh)};
}
inline vf narrow(vd v) {
  return __builtin_shufflevector(__builtin_convertvector(v.lo, vfh), __builtin_convertvector(v.hi, vfh), FORGE_ALL);
}
#undef FORGE_LO
#undef FORGE_HI
#undef FORGE_ALL
inline double dsum(vd v) {
  double s = 0;
  for (int k = 0; k < W / 2; ++k) s += v.lo[k];
  for (int k = 0; k < W / 2; ++k) s += v.hi[k];
  return s;
}
