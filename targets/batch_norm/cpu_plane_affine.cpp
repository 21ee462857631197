/* batch_norm in inference, CPU strategy "plane_affine": per-channel affine
 * terms from the running statistics, then y = x * alpha[c] + beta[c] over
 * every contiguous (n, c) plane.
 *
 * Math (eval mode: the running statistics, nothing updated), per channel c in fp32:
 *   invstd = 1 / sqrt(running_var[c] + eps);  alpha = invstd * w[c];
 *   beta = b[c] - running_mean[c] * alpha  (one rounding);  y = fma(x, alpha, beta)
 * which is the stock CPU kernel's arithmetic bit for bit (measured: with a
 * fused multiply-add for beta and y, 100% identical; without, 67-86%; where
 * x * alpha + beta cancels the difference is large relative to y).
 * Op: aten::native_batch_norm(Tensor input, Tensor? weight, Tensor? bias,
 *     Tensor? running_mean, Tensor? running_var, bool training, float momentum,
 *     float eps) -> (out, save_mean, save_invstd), training = False.
 * Shapes: input [N, C, *]; out like input; save_mean and save_invstd are
 * empty ([0]) from the stock CPU kernel in eval mode and [C] (running_mean,
 * invstd; fp32) from the CUDA one: the kernel fills whichever it is given.
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * training false; input/out NCHW-contiguous float32/bfloat16/float16 of one
 * dtype; running_mean and running_var present, weight and bias optional, all
 * with C contiguous elements of one float dtype.
 *
 * Why it is fast: one read and one write at memory speed; the per-channel
 * terms of FORGE_P_CHUNK channels are computed once and kept on the stack
 * while every sample's planes of those channels stream through in memory
 * order; the stock kernel also allocates its output and two alpha/beta
 * tensors per call. Vector loads of one ISA register (FORGE_P_ISA), masked
 * tails. Single-threaded.
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
#ifndef FORGE_P_CHUNK
#define FORGE_P_CHUNK 256 /* channels whose terms are computed at once: 16, 64, 256, 1024 */
#endif
#define FORGE_NHWC 0 /* this strategy: NCHW only */

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

constexpr int CH = FORGE_P_CHUNK;
static_assert(CH >= 1 && CH <= 4096, "FORGE_P_CHUNK must be 1..4096");

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

struct BnArgs {
  const void* x;
  const void* w;   // NULL: weight None (1)
  const void* b;   // NULL: bias None (0)
  const void* rm;  // running_mean
  const void* rv;  // running_var
  void* y;
  void* save_mean;    // NULL when the caller's save_mean has no elements (CPU eval)
  void* save_invstd;  // likewise
  int32_t x_dtype, p_dtype, s_dtype;
  int64_t N, C, HW;
  bool channels_last;
  float eps;
};

// alpha = invstd * w, beta = b - mean * alpha (one rounding), invstd =
// 1 / sqrt(var + eps): the stock CPU kernel's per-channel terms, in fp32.
template <class TP>
inline void channel_terms(const BnArgs& a, int64_t c, float& alpha, float& beta, float& invstd) {
  const TP* w = static_cast<const TP*>(a.w);
  const TP* b = static_cast<const TP*>(a.b);
  const float mean = to_f32(static_cast<const TP*>(a.rm)[c]);
  invstd = 1.0f / sqrtf(to_f32(static_cast<const TP*>(a.rv)[c]) + a.eps);
  alpha = w ? invstd * to_f32(w[c]) : invstd;
  beta = sfma(-mean, alpha, b ? to_f32(b[c]) : 0.0f);
}

// y = fma(x, alpha, beta) over one contiguous plane of a channel.
template <class T>
inline void apply_plane(const T* x, T* y, int64_t hw, float alpha, float beta) {
  const vf av = splat(alpha), bv = splat(beta);
  int64_t i = 0;
  for (; i + 2 * W <= hw; i += 2 * W) {
    store(y + i, vfma(load(x + i), av, bv));
    store(y + i + W, vfma(load(x + i + W), av, bv));
  }
  for (; i + W <= hw; i += W) store(y + i, vfma(load(x + i), av, bv));
  if (i < hw) store_part(y + i, vfma(load_part(x + i, hw - i, T{}), av, bv), hw - i);
}

// NCHW: channels in chunks of CH (their terms on the stack), then every
// sample's planes of the chunk in memory order.
template <class T, class TP>
void bn_nchw(const BnArgs& a) {
  const T* x = static_cast<const T*>(a.x);
  T* y = static_cast<T*>(a.y);
  float alpha[CH], beta[CH];
  for (int64_t c0 = 0; c0 < a.C; c0 += CH) {
    const int64_t nc = a.C - c0 < CH ? a.C - c0 : CH;
    for (int64_t k = 0; k < nc; ++k) {
      float invstd;
      channel_terms<TP>(a, c0 + k, alpha[k], beta[k], invstd);
    }
    for (int64_t n = 0; n < a.N; ++n)
      for (int64_t k = 0; k < nc; ++k) {
        const int64_t off = (n * a.C + c0 + k) * a.HW;
        apply_plane(x + off, y + off, a.HW, alpha[k], beta[k]);
      }
  }
}

// save_mean / save_invstd: empty on the CPU in eval mode; C elements
// (running_mean, rsqrt(running_var + eps)) on CUDA in eval mode.
template <class TP, class TS>
void bn_save(const BnArgs& a) {
  if (!a.save_mean) return;
  TS* sm = static_cast<TS*>(a.save_mean);
  TS* si = static_cast<TS*>(a.save_invstd);
  for (int64_t c = 0; c < a.C; ++c) {
    float alpha, beta, invstd;
    channel_terms<TP>(a, c, alpha, beta, invstd);
    store1(sm + c, to_f32(static_cast<const TP*>(a.rm)[c]));
    store1(si + c, invstd);
  }
}

template <class T, class TP>
int bn_save_dispatch(const BnArgs& a) {
  switch (a.s_dtype) {
    case FORGE_FLOAT32: bn_save<TP, float>(a); break;
    case FORGE_BFLOAT16: bn_save<TP, bf16>(a); break;
    case FORGE_FLOAT16: bn_save<TP, f16>(a); break;
    default: return 1;
  }
  bn_nchw<T, TP>(a);
  return 0;
}

template <class T>
int bn_p_dispatch(const BnArgs& a) {
  switch (a.p_dtype) {
    case FORGE_FLOAT32: return bn_save_dispatch<T, float>(a);
    case FORGE_BFLOAT16: return bn_save_dispatch<T, bf16>(a);
    case FORGE_FLOAT16: return bn_save_dispatch<T, f16>(a);
    default: return 1;
  }
}

__attribute__((noinline)) int batch_norm_run(const BnArgs& a) {
  switch (a.x_dtype) {
    case FORGE_FLOAT32: return bn_p_dispatch<float>(a);
    case FORGE_BFLOAT16: return bn_p_dispatch<bf16>(a);
    case FORGE_FLOAT16: return bn_p_dispatch<f16>(a);
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
// [N, C, *] with C fastest: strides (C*HW, 1, then row-major over * times C).
bool is_channels_last(const forge_tensor& t) {
  if (t.ndim < 2) return false;
  const int64_t C = t.sizes[1];
  if (C != 1 && t.strides[1] != 1) return false;
  int64_t expect = C;
  for (int d = t.ndim - 1; d >= 2; --d) {
    if (t.sizes[d] != 1 && t.strides[d] != expect) return false;
    expect *= t.sizes[d];
  }
  return t.sizes[0] == 1 || t.strides[0] == expect;
}
}  // namespace

// native_batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean,
//                   Tensor? running_var, bool training, float momentum, float eps)
//   -> (Tensor out, Tensor save_mean, Tensor save_invstd)      (training=False only)
extern "C" int forge_kernel(const forge_call* call) {
  if (!call || call->n_inputs != 5 || call->n_outputs != 3 || call->n_scalars < 3) return 1;
  const forge_tensor& x = call->inputs[0];
  const forge_tensor& w = call->inputs[1];
  const forge_tensor& b = call->inputs[2];
  const forge_tensor& rm = call->inputs[3];
  const forge_tensor& rv = call->inputs[4];
  const forge_tensor& y = call->outputs[0];
  const forge_tensor& sm = call->outputs[1];
  const forge_tensor& si = call->outputs[2];
  if (call->scalars[0].kind != FORGE_ARG_BOOL || call->scalars[0].i != 0) return 1;  // eval mode only
  if (call->scalars[2].kind != FORGE_ARG_FLOAT) return 1;
  if (!x.data || x.ndim < 2 || !float_dtype(x.dtype)) return 1;
  if (!y.data || y.ndim != x.ndim || y.dtype != x.dtype) return 1;
  for (int d = 0; d < x.ndim; ++d)
    if (y.sizes[d] != x.sizes[d] || (x.sizes[d] != 1 && y.strides[d] != x.strides[d])) return 1;
  const int64_t N = x.sizes[0], C = x.sizes[1];
  const int64_t NC = N * C;
  const int64_t HW = NC ? numel_of(x) / NC : 0;
  const bool nchw = is_contiguous(x), nhwc = is_channels_last(x);
  if (!nchw && !(FORGE_NHWC && nhwc)) return 1;
  // [N, C] (HW = 1) is both: rows of C channels, the NHWC loop's case.
  const bool channels_last = FORGE_NHWC && nhwc && (!nchw || HW == 1);
  // running stats required (eval); weight/bias optional; one float dtype, C elements, contiguous.
  if (!rm.data || !rv.data) return 1;
  const forge_tensor* params[4] = {&w, &b, &rm, &rv};
  int32_t p_dtype = rm.dtype;
  for (const forge_tensor* p : params) {
    if (!p->data) continue;
    if (p->dtype != p_dtype || !float_dtype(p->dtype) || numel_of(*p) != C || !is_contiguous(*p)) return 1;
  }
  // save_mean / save_invstd: both empty, or both C contiguous elements of one dtype.
  const int64_t ns = numel_of(sm);
  if (numel_of(si) != ns || (ns != 0 && ns != C)) return 1;
  if (ns && (!sm.data || !si.data || sm.dtype != si.dtype || !float_dtype(sm.dtype) || !is_contiguous(sm) ||
             !is_contiguous(si)))
    return 1;
  if (!cpu_ok()) return 1;
  if (numel_of(x) == 0) return 0;
  BnArgs a{x.data,  w.data,  b.data,   rm.data, rv.data, y.data, ns ? sm.data : nullptr, ns ? si.data : nullptr,
           x.dtype, p_dtype, ns ? sm.dtype : FORGE_FLOAT32, N, C, HW, channels_last,
           static_cast<float>(call->scalars[2].f)};
  return batch_norm_run(a);
}
