/* rms_norm, CPU strategy "rows": the sum of squares of FORGE_P_ROWS rows in
 * one interleaved read, then the scale pass.
 *
 * Math: for every row r (the last len(normalized_shape) dims, N elements), in
 * fp32: rstd = 1 / sqrt(sum x^2 / N + eps) (eps None: FLT_EPSILON, the fp32
 * machine epsilon, also for 16-bit inputs, as torch's decomposition does);
 * y = (x * rstd) * w.
 * Op: aten::_fused_rms_norm(Tensor input, int[] normalized_shape, Tensor?
 *     weight, float? eps) -> (Tensor out, Tensor rstd): F.rms_norm /
 * nn.RMSNorm reach it (on the CPU it is CompositeImplicitAutograd in torch
 * 2.14 - pow, mean, add, rsqrt, mul, mul, casts - which is what the stock
 * reference computes).
 * Shapes: input [..., *normalized_shape]; out like input; rstd [..., 1...]
 * (one per row) in the dtype the caller allocated (float32 for every input).
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * input/out contiguous float32/bfloat16/float16 of one dtype; weight absent or
 * N contiguous elements of a float dtype; rstd contiguous, one per row;
 * FORGE_P_ROW, when nonzero, equals N. inf gives rstd 0 and y = 0 or NaN, NaN
 * propagates: as the decomposition.
 *
 * Why it is fast: the decomposition runs ~8 ATen ops with 3-4 temporaries the
 * size of the input; this reads the input twice (the second from L1) and
 * writes once. FORGE_P_ROWS rows reduced side by side keep short rows'
 * reductions overlapped. Single-threaded (no OpenMP in candidates).
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
#ifndef FORGE_P_ROWS
#define FORGE_P_ROWS 2 /* rows reduced side by side: 1, 2, 4 */
#endif
#ifndef FORGE_P_ROW
#define FORGE_P_ROW 0 /* 0: row length read at run time; else the row length N, fixed at compile time */
#endif

/* ---- ISA selection (the same block in every CPU template of the library) ----
 * FORGE_P_ISA 0: whatever the compiler flags allow (-march); 2: AVX2+FMA+F16C code
 * and 3: AVX-512 (F, BW, DQ, VL) code compiled in with a target pragma whatever
 * -march says, checked against the running CPU at call time (the kernel
 * returns nonzero, i.e. the package falls back, on a CPU without them). One
 * vector = one register: 16 fp32 lanes (AVX-512), 8 (AVX2) or 4 (SSE); GCC
 * lowers wider generic vectors to scalar code. (GCC 12 does not update the
 * __AVX512*__ macros after a target pragma, hence FORGE_AVX512/FORGE_AVX2.) */
#if FORGE_P_ISA == 3
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")
#define FORGE_AVX512 1
#define FORGE_AVX2 1
#elif FORGE_P_ISA == 2
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#define FORGE_AVX512 0
#define FORGE_AVX2 1
#elif FORGE_P_ISA == 0
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
#define FORGE_AVX512 1
#define FORGE_AVX2 1
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define FORGE_AVX512 0
#define FORGE_AVX2 1
#else
#define FORGE_AVX512 0
#define FORGE_AVX2 0
#endif
#else
#error "FORGE_P_ISA must be 0 (as compiled), 2 (AVX2) or 3 (AVX-512)"
#endif
#define FORGE_VEC (FORGE_AVX512 ? 16 : FORGE_AVX2 ? 8 : 4)

namespace {

constexpr int W = FORGE_VEC;

typedef float vf __attribute__((vector_size(W * 4)));
typedef int32_t vi __attribute__((vector_size(W * 4)));
typedef uint32_t vu __attribute__((vector_size(W * 4)));
typedef uint16_t vh __attribute__((vector_size(W * 2)));

struct bf16 { uint16_t u; };
struct f16 { uint16_t u; };

inline vf splat(float a) { return vf{} + a; }

// ---- loads: W elements of any storage type as fp32 ----
inline vf load(const float* p) { vf v; memcpy(&v, p, sizeof v); return v; }
inline vf load(const bf16* p) {
  vh h; memcpy(&h, p, sizeof h);
  return (vf)(__builtin_convertvector(h, vu) << 16);
}
inline vf load(const f16* p) {
#if FORGE_AVX512
  return (vf)_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
#elif FORGE_AVX2
  return (vf)_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
#else
  vh h16; memcpy(&h16, p, sizeof h16);
  vu h = __builtin_convertvector(h16, vu);
  vu sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  vu normal = sign | ((e + 112u) << 23) | (m << 13);
  vu special = sign | 0x7f800000u | (m << 13);
  vf sub = __builtin_convertvector(m, vf) * splat(5.9604644775390625e-8f);  // m * 2^-24
  vu subbits = ((vu)sub) | sign;
  vu r = e == 31u ? special : normal;
  r = e == 0u ? subbits : r;
  return (vf)r;
#endif
}
// Partial loads: the first n (< W) elements, the rest `fill`. AVX-512 masked
// loads never touch memory past the end; elsewhere through a small stack copy.
template <class T> inline vf load_part(const T* p, int64_t n, T fill) {
#if FORGE_AVX512
  const __mmask16 m = static_cast<__mmask16>((1u << n) - 1u);
  if constexpr (sizeof(T) == 4) {
    float f;
    memcpy(&f, &fill, 4);
    return (vf)_mm512_mask_loadu_ps(_mm512_set1_ps(f), m, p);
  } else {
    uint16_t u;
    memcpy(&u, &fill, 2);
    __m256i h = _mm256_mask_loadu_epi16(_mm256_set1_epi16(static_cast<short>(u)), m, p);
    T tmp[W];
    memcpy(tmp, &h, sizeof tmp);
    return load(tmp);
  }
#else
  T tmp[W];
  for (int k = 0; k < W; ++k) tmp[k] = k < n ? p[k] : fill;
  return load(tmp);
#endif
}

// ---- stores: fp32 lanes to the storage type, round to nearest even ----
inline void store(float* p, vf v) { memcpy(p, &v, sizeof v); }
inline void store(bf16* p, vf v) {
  vu b = (vu)v;
  vu r = (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
  vu nan = ((b >> 16) & 0x8000u) | 0x7fc0u;
  r = v != v ? nan : r;
  vh h = __builtin_convertvector(r, vh);
  memcpy(p, &h, sizeof h);
}
inline void store(f16* p, vf v) {
#if FORGE_AVX512
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph((__m512)v, _MM_FROUND_TO_NEAREST_INT));
#elif FORGE_AVX2
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph((__m256)v, _MM_FROUND_TO_NEAREST_INT));
#else
  vu x = (vu)v;
  vu sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
  vu normal = (a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13;
  vu sub = (vu)(((vf)a) + splat(0.5f)) - 0x3f000000u;
  vu r = a >= 0x38800000u ? normal : sub;
  r = a >= 0x477ff000u ? vu{} + 0x7c00u : r;
  r = a > 0x7f800000u ? vu{} + 0x7e00u : r;
  vh h = __builtin_convertvector(r | sign, vh);
  memcpy(p, &h, sizeof h);
#endif
}
// Partial stores: the first n (< W) lanes; masked on AVX-512.
template <class T> inline void store_part(T* p, vf v, int64_t n) {
  T tmp[W];
  store(tmp, v);
#if FORGE_AVX512
  const __mmask16 m = static_cast<__mmask16>((1u << n) - 1u);
  if constexpr (sizeof(T) == 4) {
    _mm512_mask_storeu_ps(p, m, _mm512_loadu_ps(tmp));
  } else {
    _mm256_mask_storeu_epi16(p, m, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tmp)));
  }
#else
  for (int k = 0; k < n; ++k) p[k] = tmp[k];
#endif
}
template <class T> T neg_inf();
template <> inline float neg_inf<float>() { return -INFINITY; }
template <> inline bf16 neg_inf<bf16>() { return bf16{0xff80}; }
template <> inline f16 neg_inf<f16>() { return f16{0xfc00}; }

inline vf vmax(vf a, vf b) { return b > a ? b : a; }  // a NaN in b is dropped; the sum catches it

inline vf vexp(vf x) {
  const vf big = splat(88.7228390f), small = splat(-87.0f);
  vi is_big = x > big, is_small = x < small;
  vf xc = is_big ? splat(0.0f) : x;
  xc = is_small ? splat(0.0f) : xc;
  const vf magic = splat(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
  vf n = (xc * splat(1.44269504088896341f) + magic) - magic;
  vf r = xc - n * splat(0.693359375f);
  r = r - n * splat(-2.12194440e-4f);
  vf p = splat(1.0f / 5040.0f);
  p = p * r + splat(1.0f / 720.0f);
  p = p * r + splat(1.0f / 120.0f);
  p = p * r + splat(1.0f / 24.0f);
  p = p * r + splat(1.0f / 6.0f);
  p = p * r + splat(0.5f);
  p = p * r + splat(1.0f);
  p = p * r + splat(1.0f);
  vi ni = __builtin_convertvector(n, vi);
  vi n1 = ni >> 1, n2 = ni - n1;
  vf s1 = (vf)((n1 + 127) << 23), s2 = (vf)((n2 + 127) << 23);
  vf res = p * s1 * s2;
  res = is_small ? splat(0.0f) : res;
  res = is_big ? splat(INFINITY) : res;
  return res;
}

// Horizontal max / sum: log2(W) rotate-and-combine steps.
template <int S> inline vf rot(vf v) {
  vi idx;
  for (int k = 0; k < W; ++k) idx[k] = (k + S) % W;
  return __builtin_shuffle(v, idx);
}
inline float hmax(vf v) {
  if constexpr (W >= 32) v = vmax(v, rot<16>(v));
  if constexpr (W >= 16) v = vmax(v, rot<8>(v));
  if constexpr (W >= 8) v = vmax(v, rot<4>(v));
  v = vmax(v, rot<2>(v));
  v = vmax(v, rot<1>(v));
  return v[0];
}
inline float hsum(vf v) {
  if constexpr (W >= 32) v += rot<16>(v);
  if constexpr (W >= 16) v += rot<8>(v);
  if constexpr (W >= 8) v += rot<4>(v);
  v += rot<2>(v);
  v += rot<1>(v);
  return v[0];
}
// One element of any storage type as fp32, and back.
template <class T> inline float to_f32(T v) {
  T tmp[W];
  for (int k = 0; k < W; ++k) tmp[k] = v;
  return load(tmp)[0];
}
template <class T> inline void store1(T* p, float v) {
  T tmp[W];
  store(tmp, splat(v));
  *p = tmp[0];
}

constexpr int R = FORGE_P_ROWS;
static_assert(R >= 1 && R <= 8, "FORGE_P_ROWS must be 1..8");

struct RmsArgs {
  const void* x;
  const void* w;  // NULL: weight None
  void* y;
  void* rstd;
  int32_t x_dtype, w_dtype, s_dtype;
  int64_t M, N;
  float eps;
};

template <class T, class TW, class TS>
void rms_rows(const RmsArgs& a) {
  const T* x = static_cast<const T*>(a.x);
  T* y = static_cast<T*>(a.y);
  const TW* w = static_cast<const TW*>(a.w);
  TS* rstd_out = static_cast<TS*>(a.rstd);
  const int64_t N = FORGE_P_ROW ? FORGE_P_ROW : a.N;
  for (int64_t r0 = 0; r0 < a.M; r0 += R) {
    const int nr = a.M - r0 < R ? static_cast<int>(a.M - r0) : R;
    vf q[R];
    for (int k = 0; k < R; ++k) q[k] = splat(0.0f);
    int64_t i = 0;
    for (; i + W <= N; i += W)
      for (int k = 0; k < nr; ++k) {
        vf v = load(x + (r0 + k) * N + i);
        q[k] += v * v;
      }
    if (i < N)
      for (int k = 0; k < nr; ++k) {
        vf v = load_part(x + (r0 + k) * N + i, N - i, T{});
        q[k] += v * v;
      }
    for (int k = 0; k < nr; ++k) {
      const int64_t r = r0 + k;
      const float rstd = 1.0f / sqrtf(hsum(q[k]) / static_cast<float>(N) + a.eps);
      store1(rstd_out + r, rstd);
      const vf rv = splat(rstd);
      const T* xr = x + r * N;
      T* yr = y + r * N;
      int64_t j = 0;
      for (; j + W <= N; j += W) {
        vf v = load(xr + j) * rv;
        if (w) v = v * load(w + j);
        store(yr + j, v);
      }
      if (j < N) {
        vf v = load_part(xr + j, N - j, T{}) * rv;
        if (w) v = v * load_part(w + j, N - j, TW{});
        store_part(yr + j, v, N - j);
      }
    }
  }
}

template <class T, class TW>
int rms_s_dispatch(const RmsArgs& a) {
  switch (a.s_dtype) {
    case FORGE_FLOAT32: rms_rows<T, TW, float>(a); return 0;
    case FORGE_BFLOAT16: rms_rows<T, TW, bf16>(a); return 0;
    case FORGE_FLOAT16: rms_rows<T, TW, f16>(a); return 0;
    default: return 1;
  }
}

template <class T>
int rms_w_dispatch(const RmsArgs& a) {
  switch (a.w_dtype) {
    case FORGE_FLOAT32: return rms_s_dispatch<T, float>(a);
    case FORGE_BFLOAT16: return rms_s_dispatch<T, bf16>(a);
    case FORGE_FLOAT16: return rms_s_dispatch<T, f16>(a);
    default: return 1;
  }
}

__attribute__((noinline)) int rms_norm_run(const RmsArgs& a) {
  switch (a.x_dtype) {
    case FORGE_FLOAT32: return rms_w_dispatch<float>(a);
    case FORGE_BFLOAT16: return rms_w_dispatch<bf16>(a);
    case FORGE_FLOAT16: return rms_w_dispatch<f16>(a);
    default: return 1;
  }
}

}  // namespace

#if FORGE_P_ISA != 0
#pragma GCC pop_options
#endif

namespace {
// The ISA the compute code was compiled for is present on this CPU.
bool cpu_ok() {
#if FORGE_P_ISA == 3
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
#elif FORGE_P_ISA == 2
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
#else
  return true;
#endif
}

bool is_contiguous(const forge_tensor& t) {
  int64_t expect = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    if (t.sizes[d] != 1 && t.strides[d] != expect) return false;
    expect *= t.sizes[d];
  }
  return true;
}
}  // namespace

namespace {
bool float_dtype(int32_t d) { return d == FORGE_FLOAT32 || d == FORGE_BFLOAT16 || d == FORGE_FLOAT16; }
int64_t numel_of(const forge_tensor& t) {
  int64_t n = 1;
  for (int d = 0; d < t.ndim; ++d) n *= t.sizes[d];
  return n;
}
}  // namespace

// _fused_rms_norm(Tensor input, int[] normalized_shape, Tensor? weight, float? eps)
//   -> (Tensor out, Tensor rstd)
extern "C" int forge_kernel(const forge_call* call) {
  if (!call || call->n_inputs != 2 || call->n_outputs != 2 || call->n_scalars < 2) return 1;
  const forge_tensor& x = call->inputs[0];
  const forge_tensor& w = call->inputs[1];
  const forge_tensor& y = call->outputs[0];
  const forge_tensor& rstd = call->outputs[1];
  const forge_scalar& shape = call->scalars[0];
  if (shape.kind != FORGE_ARG_INT_LIST || shape.len < 1 || shape.len > x.ndim) return 1;
  float eps;
  if (call->scalars[1].kind == FORGE_ARG_FLOAT) eps = static_cast<float>(call->scalars[1].f);
  else if (call->scalars[1].kind == FORGE_ARG_NONE) eps = 1.1920928955078125e-07f;  // FLT_EPSILON
  else return 1;
  if (!x.data || !float_dtype(x.dtype) || !is_contiguous(x)) return 1;
  if (!y.data || y.dtype != x.dtype || y.ndim != x.ndim || !is_contiguous(y)) return 1;
  for (int d = 0; d < x.ndim; ++d)
    if (y.sizes[d] != x.sizes[d]) return 1;
  int64_t N = 1;
  for (int k = 0; k < shape.len; ++k) {
    if (shape.ints[k] != x.sizes[x.ndim - shape.len + k]) return 1;
    N *= shape.ints[k];
  }
  if (N == 0) return 1;
  if (FORGE_P_ROW && N != FORGE_P_ROW) return 1;
  const int64_t M = numel_of(x) / N;
  if (w.data && (!float_dtype(w.dtype) || !is_contiguous(w) || numel_of(w) != N)) return 1;
  if (numel_of(rstd) != M) return 1;
  if (M && (!rstd.data || !float_dtype(rstd.dtype) || !is_contiguous(rstd))) return 1;
  if (!cpu_ok()) return 1;
  if (M == 0) return 0;
  RmsArgs a{x.data, w.data, y.data, rstd.data, x.dtype, w.data ? w.dtype : x.dtype, rstd.dtype, M, N, eps};
  return rms_norm_run(a);
}
