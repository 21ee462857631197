/* pool, CPU strategy "windows": one pooling op of the table in
 * targets/_common/pool_ops.h (FORGE_P_OP: max_pool2d_with_indices,
 * max_pool3d_with_indices, avg_pool2d, avg_pool3d, max_pool1d).
 *
 * Math: pool_ops.h's pool_one per output: the max (and its in-plane index) or
 * the average of each window, with stride, padding, dilation (max), ceil_mode,
 * count_include_pad and divisor_override (avg), as the stock kernels define them.
 * Ops: aten::max_pool2d_with_indices, max_pool3d_with_indices, avg_pool2d,
 * avg_pool3d, max_pool1d (1D pooling on CUDA and 1D average pooling are the
 * 2D ops); float32/bfloat16/float16 values, int64 indices.
 * Shapes: [N, C, spatial...] or [C, spatial...], contiguous (NCHW / NCDHW).
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * pool_parse.h's (contiguous input and outputs of the stock shapes, padding
 * at most half the window, planes under 2^31 elements).
 *
 * Why it is fast: one call, no TensorIterator or thread wake-up, 32-bit window
 * arithmetic. The outputs of a row whose windows lie inside the input along W
 * go W per vector (each window element one vector load, or a strided gather
 * when the stride is not 1), compared or added in stock's order; the rest
 * one by one. A row's outputs are gathered in fp32 and stored as vectors.
 * Rows with fewer than FORGE_P_ACROSS such outputs (windows nearly as wide
 * as the row) go W planes at a time instead, a plane per lane: each window
 * row's elements are loaded W per plane and transposed in registers, then
 * added or compared one at a time in stock's order. A 1D values-only max
 * whose windows cross the row's ends pools a copy of the row between -inf
 * pads, so its border outputs go W at a time too.
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
#ifndef FORGE_P_SPAN
#define FORGE_P_SPAN 256 /* outputs of a row gathered before their vector stores: 64..1024 */
#endif
#ifndef FORGE_P_ACROSS
#define FORGE_P_ACROSS 8 /* rows with fewer interior outputs go W planes at a time; 0: never */
#endif

#include "../_common/cpu_common.h"  // inlined when forge loads the template (docs/STRATEGIES.md)
#include "../_common/pool_ops.h"    // the op table, pool_window and pool_one
#include "../_common/cpu_transpose.h"  // transpose_block

constexpr int SPAN = FORGE_P_SPAN;
static_assert(SPAN >= W && SPAN <= 1024 && SPAN % 16 == 0, "FORGE_P_SPAN: a multiple of 16, 64..1024");
constexpr int ACROSS = FORGE_P_ACROSS;
static_assert(ACROSS >= 0 && ACROSS <= 1024, "FORGE_P_ACROSS: 0..1024");

inline float elem(const float* p, int i) { return p[i]; }
inline float elem(const bf16* p, int i) {
  const uint32_t b = static_cast<uint32_t>(p[i].u) << 16;
  float f;
  memcpy(&f, &b, 4);
  return f;
}
inline float elem(const f16* p, int i) {
#if FORGE_AVX2
  return _cvtsh_ss(p[i].u);
#else
  return to_f32(p[i]);
#endif
}

// n (<= W) elements step apart from p, as one vector; `room`: the elements
// readable from p. Lanes past n hold whatever lies there (a full load when
// the room allows); stride 2 reads two vectors and keeps the even lanes.
template <class T> inline vf load_step(const T* p, int step, int n, int64_t room) {
  if (step == 1) return n == W || room >= W ? load(p) : load_part(p, n, T{});
  if (step == 2 && room >= 2 * W) return __builtin_shuffle(load(p), load(p + W), iota() * 2);
  T tmp[W] = {};
  for (int k = 0; k < n; ++k) tmp[k] = p[k * step];
  return load(tmp);
}

// The window's rows in (D, H) for output (od, oh): [d0, d1) x [h0, h1) with
// steps (the max's dilation), and the avg's divisor factor of those two dims.
struct Rows {
  int d0, d1, sd, h0, h1, sh;
  int64_t pool_dh, count_dh;
};
inline Rows rows_of(const PoolArgs& a, int od, int oh) {
  Rows r;
  r.d0 = od * a.sD - a.pD, r.h0 = oh * a.sH - a.pH;
#if PL_MAX
  r.d1 = pl_min(r.d0 + (a.kD - 1) * a.dD + 1, a.D), r.h1 = pl_min(r.h0 + (a.kH - 1) * a.dH + 1, a.H);
  while (r.d0 < 0) r.d0 += a.dD;
  while (r.h0 < 0) r.h0 += a.dH;
  r.sd = a.dD, r.sh = a.dH;
  r.pool_dh = r.count_dh = 0;
#else
  r.d1 = pl_min(r.d0 + a.kD, a.D + a.pD), r.h1 = pl_min(r.h0 + a.kH, a.H + a.pH);
  r.pool_dh = static_cast<int64_t>(r.d1 - r.d0) * (r.h1 - r.h0);
  r.d0 = pl_max(r.d0, 0), r.h0 = pl_max(r.h0, 0), r.d1 = pl_min(r.d1, a.D), r.h1 = pl_min(r.h1, a.H);
  r.count_dh = static_cast<int64_t>(r.d1 - r.d0) * (r.h1 - r.h0);
  r.sd = r.sh = 1;
#endif
  return r;
}

// U vectors of neighbouring outputs from output ow (the last vector's first
// n of them) of a row whose windows lie inside [0, W) along W, the window
// walked in stock's (d, h, w) order. The U vectors' compare (or add) chains
// are independent, so their latencies overlap. Values into buf (buf[0] is
// output ow), indices into idx.
template <int U, bool UNIT, class T>
__attribute__((always_inline)) inline void interior_vectors(const PoolArgs& a, const T* x, int64_t in_plane, const Rows& r, int ow, int n,
                             float* buf, int64_t* idx) {
  const int step = PL_MAX ? a.dW : 1;
  const int w0 = ow * a.sW - a.pW;
  vf acc[U];
#if PL_MAX
  vi bi[U];   // with indices
  vf nanv[U]; // without: the last NaN seen, else 0
#pragma GCC unroll 4
  for (int u = 0; u < U; ++u) {
    acc[u] = splat(-INFINITY);
    bi[u] = iota() * a.sW + ((r.d0 * a.H + r.h0) * a.W + w0 + u * W * a.sW);
    nanv[u] = splat(0.0f);
  }
#else
#pragma GCC unroll 4
  for (int u = 0; u < U; ++u) acc[u] = splat(0.0f);
#endif
  for (int d = r.d0; d < r.d1; d += r.sd)
    for (int h = r.h0; h < r.h1; h += r.sh) {
      const int row = (d * a.H + h) * a.W;
      for (int kw = 0; kw < a.kW; ++kw) {
#pragma GCC unroll 4
        for (int u = 0; u < U; ++u) {
          const int at = row + w0 + kw * step + u * W * a.sW;
          const int m = u == U - 1 ? n : W;
          const vf v = UNIT && m == W ? load(x + at) : load_step(x + at, a.sW, m, in_plane - at);
#if PL_INDICES
          const vi take = (v > acc[u]) | (v != v);
          acc[u] = take ? v : acc[u];
          bi[u] = take ? iota() * a.sW + at : bi[u];
#elif PL_MAX
          // The max alone: one maxps (ties and NaN keep acc), NaNs kept
          // aside; the same value as the compare above gives, NaN included.
          acc[u] = v > acc[u] ? v : acc[u];
          nanv[u] = v != v ? v : nanv[u];
#else
          acc[u] += v;
#endif
        }
      }
    }
#if !PL_MAX
  const int64_t div = a.divisor ? a.divisor : (a.count_include_pad ? r.pool_dh : r.count_dh) * a.kW;
  const vf dv = splat(static_cast<float>(div));
#endif
#pragma GCC unroll 4
  for (int u = 0; u < U; ++u) {
    const int m = u == U - 1 ? n : W;
#if PL_MAX
    const vf v = PL_INDICES ? acc[u] : (nanv[u] != nanv[u] ? nanv[u] : acc[u]);
    if (idx)
      for (int k = 0; k < m; ++k) idx[u * W + k] = bi[u][k];
#else
    const vf v = acc[u] / dv;
#endif
    if (m == W) store(buf + u * W, v);  // buf has room for a whole vector past its last output
    else store_part(buf + u * W, v, m);
  }
}

// Outputs [lo, hi) of a row whose windows lie inside [0, W) along W: four
// vectors of them at a time, then one. UNIT: stride 1 (plain vector loads).
template <bool UNIT, class T>
void interior_outputs(const PoolArgs& a, const T* x, int64_t in_plane, const Rows& r, int lo, int hi, float* buf,
                      int64_t* idx) {
  int ow = lo;
  for (; ow + 4 * W <= hi; ow += 4 * W)
    interior_vectors<4, UNIT>(a, x, in_plane, r, ow, W, buf + (ow - lo), idx ? idx + (ow - lo) : nullptr);
  for (; ow < hi; ow += W)
    interior_vectors<1, UNIT>(a, x, in_plane, r, ow, hi - ow < W ? hi - ow : W, buf + (ow - lo),
                              idx ? idx + (ow - lo) : nullptr);
}
template <class T>
void interior_run(const PoolArgs& a, const T* x, int64_t in_plane, const Rows& r, int lo, int hi, float* buf,
                  int64_t* idx) {
  if (a.sW == 1) interior_outputs<true>(a, x, in_plane, r, lo, hi, buf, idx);
  else interior_outputs<false>(a, x, in_plane, r, lo, hi, buf, idx);
}

// Planes [0, W) from x (in_plane apart) into y (out_plane apart), a plane per
// lane, for rows whose outputs are too few to fill interior_run's vectors
// (a window nearly as wide as the row). Each output's window is walked in
// pool_one's order; a window row's elements are loaded W per plane and the
// W x W block transposed in registers, so lane k adds or compares plane k's
// values one at a time, as stock does.
template <class T>
void planes_run(const PoolArgs& a, const T* x, T* y, int64_t* idx, int64_t in_plane, int64_t out_plane) {
  const int step = PL_MAX ? a.dW : 1;
  for (int od = 0; od < a.OD; ++od)
    for (int oh = 0; oh < a.OH; ++oh)
      for (int ow = 0; ow < a.OW; ++ow) {
        const PoolWindow r = pool_window(a, od, oh, ow);
#if PL_MAX
        vf best = splat(-INFINITY);
        vi bi = vi{} + ((r.d0 * a.H + r.h0) * a.W + r.w0);
#else
        vf sum = splat(0.0f);
#endif
        for (int d = r.d0; d < r.d1; d += PL_MAX ? a.dD : 1)
          for (int h = r.h0; h < r.h1; h += PL_MAX ? a.dH : 1) {
            const int row = (d * a.H + h) * a.W;
            for (int w = r.w0; w < r.w1; w += W * step) {
              const int n = pl_min(W, (r.w1 - w + step - 1) / step);
              const int at = row + w;
              vf m[W];
#pragma GCC unroll 16
              for (int k = 0; k < W; ++k) m[k] = load_step(x + k * in_plane + at, step, n, in_plane - at);
              transpose_block<vf, vi, W>(m);
#pragma GCC unroll 16
              for (int c = 0; c < W; ++c) {
                if (c == n) break;
#if PL_MAX
                const vi take = (m[c] > best) | (m[c] != m[c]);
                best = take ? m[c] : best;
                if constexpr (PL_INDICES) bi = take ? vi{} + (at + c * step) : bi;
#else
                sum += m[c];
#endif
              }
            }
          }
#if PL_MAX
        const vf v = best;
#else
        const vf v = pool_empty(r) ? splat(0.0f) : sum / splat(static_cast<float>(r.div));
#endif
        const int64_t o = (static_cast<int64_t>(od) * a.OH + oh) * a.OW + ow;
        T out[W];
        store(out, v);
        for (int k = 0; k < W; ++k) y[k * out_plane + o] = out[k];
#if PL_INDICES
        for (int k = 0; k < W; ++k) idx[k * out_plane + o] = bi[k];
#else
        (void)idx;
#endif
      }
}

// n outputs gathered in fp32 at buf, stored to y as vectors.
template <class T>
inline void store_span(T* y, const float* buf, int n) {
  int k = 0;
  for (; k + W <= n; k += W) store(y + k, load(buf + k));
  if (k < n) store_part(y + k, load(buf + k), n - k);
}

#if PL_MAX && !PL_INDICES
// The values-only max of a 1D row whose windows cross its ends (padding,
// ceil_mode): the row copied in fp32 between -inf pads, so every output's
// window lies inside the copy and all of them go through interior_run. The
// max is unchanged: a pad never wins, and a window of pads alone is -inf
// either way. false: the copy would not fit PAD_ROW.
constexpr int PAD_ROW = 4096;
template <class T>
bool padded_row(const PoolArgs& a, const T* x, T* y, float* buf) {
  if (a.W > PAD_ROW || a.pW > PAD_ROW || a.sW > PAD_ROW) return false;  // and len below cannot overflow
  const int len = a.W + 2 * a.pW + a.sW + 2 * W;  // past the last window's end, a vector's load
  if (len > PAD_ROW) return false;
  alignas(64) float row[PAD_ROW];
  for (int i = 0; i < a.pW; ++i) row[i] = -INFINITY;
  int i = 0;
  for (; i + W <= a.W; i += W) store(row + a.pW + i, load(x + i));
  for (; i < a.W; ++i) row[a.pW + i] = elem(x, i);
  for (i = a.pW + a.W; i < len; ++i) row[i] = -INFINITY;
  PoolArgs p = a;
  p.W = len, p.pW = 0;
  const Rows r = rows_of(p, 0, 0);
  for (int c0 = 0; c0 < a.OW; c0 += SPAN) {
    const int n = a.OW - c0 < SPAN ? a.OW - c0 : SPAN;
    interior_run(p, row, len, r, c0, c0 + n, buf, nullptr);
    store_span(y + c0, buf, n);
  }
  return true;
}
#endif

template <class T>
__attribute__((noinline)) int pool_run(const PoolArgs& a) {
  const int64_t in_plane = static_cast<int64_t>(a.D) * a.H * a.W, out_plane = static_cast<int64_t>(a.OD) * a.OH * a.OW;
  // The outputs whose windows are inside the input along W: [lo, hi).
  const int span = (a.kW - 1) * (PL_MAX ? a.dW : 1);
  const int top = a.W - 1 + a.pW - span;
  const int hi = top < 0 ? 0 : pl_min(top / a.sW + 1, a.OW);
  const int lo = pl_min((a.pW + a.sW - 1) / a.sW, hi);
  int64_t pl = 0;
  if (hi - lo < ACROSS)
    for (; pl + W <= a.planes; pl += W)
      planes_run(a, static_cast<const T*>(a.x) + pl * in_plane, static_cast<T*>(a.y) + pl * out_plane,
                 PL_INDICES ? a.idx + pl * out_plane : nullptr, in_plane, out_plane);
  float buf[SPAN + W];
  for (; pl < a.planes; ++pl) {
    const T* x = static_cast<const T*>(a.x) + pl * in_plane;
#if PL_MAX && !PL_INDICES
    if (a.D == 1 && a.H == 1 && (lo > 0 || hi < a.OW) && padded_row(a, x, static_cast<T*>(a.y) + pl * out_plane, buf))
      continue;
#endif
    const auto ld = [x](int i) { return elem(x, i); };
    for (int od = 0; od < a.OD; ++od)
      for (int oh = 0; oh < a.OH; ++oh) {
        const int64_t row = pl * out_plane + (static_cast<int64_t>(od) * a.OH + oh) * a.OW;
        const Rows r = rows_of(a, od, oh);
        const bool vector = r.d0 < r.d1 && r.h0 < r.h1;  // else stock's empty-window rules, per output
        T* y = static_cast<T*>(a.y) + row;
        for (int c0 = 0; c0 < a.OW; c0 += SPAN) {
          const int n = a.OW - c0 < SPAN ? a.OW - c0 : SPAN;
          const int vlo = vector ? pl_min(pl_max(lo, c0), c0 + n) : c0 + n;
          const int vhi = vector ? pl_max(pl_min(hi, c0 + n), vlo) : c0 + n;
          for (int ow = c0; ow < c0 + n; ++ow) {
            if (ow == vlo && vlo < vhi) {
              interior_run(a, x, in_plane, r, vlo, vhi, buf + (vlo - c0), PL_INDICES ? a.idx + row + vlo : nullptr);
              ow = vhi - 1;
              continue;
            }
            int64_t index;
            buf[ow - c0] = pool_one(a, ld, od, oh, ow, &index);
            if constexpr (PL_INDICES) a.idx[row + ow] = index;
          }
          store_span(y + c0, buf, n);
        }
      }
  }
  return 0;
}

__attribute__((noinline)) int pool_dispatch(const PoolArgs& a) {
  return with_dtype(a.x_dtype, [&](auto t) { return pool_run<decltype(t)>(a); });
}

#include "../_common/cpu_checks.h"  // the ISA region ends; cpu_ok and the host-side tensor checks

#include "../_common/pool_parse.h"  // the call's checks and [planes, D, H, W], shared with the CUDA template

extern "C" int forge_kernel(const forge_call* call) {
  PoolArgs a;
  if (parse_pool(call, a) || !cpu_ok()) return 1;
  return pool_dispatch(a);
}
