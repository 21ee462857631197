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
// The lane numbers 0 .. W-1 (element offsets and indices within a vector).
inline vi iota() {
  vi v;
  for (int k = 0; k < W; ++k) v[k] = k;
  return v;
}

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
// A full vector of fp32 to an address aligned to its size, bypassing the
// caches: the line is not read first (a plain store reads it for ownership),
// so a large output costs one pass over memory instead of two. Weakly
// ordered: a kernel that streams fences (_mm_sfence) before it returns.
inline void store_stream(float* p, vf v) {
#if FORGE_AVX512
  _mm512_stream_ps(p, (__m512)v);
#elif FORGE_AVX2
  _mm256_stream_ps(p, (__m256)v);
#else
  _mm_stream_ps(p, (__m128)v);
#endif
}
// The fp32 elements from y to the first address store_stream takes (aligned
// to a whole vector), for a y aligned to 4 bytes.
inline int64_t stream_head(const void* y) {
  return static_cast<int64_t>((W - (reinterpret_cast<uintptr_t>(y) / 4) % W) % W);
}
inline bool stream_aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % (W * 4) == 0; }
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
#include "../_common/dtype_switch.h"  // with_storage_type: shared with the CUDA templates
// with_dtype(d, f): f(T{}) with T = float, f16 or bf16 as d names. Nested
// calls pick the types of several tensors: the instantiations are made here,
// inside the ISA region.
template <class F> inline int with_dtype(int32_t d, F&& f) {
  return with_storage_type<float, f16, bf16>(d, static_cast<F&&>(f));
}
