/* layer_norm, CPU strategy "strided": native_layer_norm on an input of any
 * strides whose row (the normalized dims) steps through memory by one stride
 * (a transposed or permuted view, a broadcast dim of stride 0), read where it
 * lies instead of through a contiguous copy.
 *
 * Math: for every row (N elements), as two_pass (sums in double, the rest in fp32):
 *   mean = sum x / N;  var = sum (x - mean)^2 / N  (biased);
 *   rstd = 1 / sqrt(max(var, 0) + eps);  y = ((x - mean) * rstd) * w + b
 * Op: aten::native_layer_norm(Tensor input, SymInt[] normalized_shape,
 *     Tensor? weight, Tensor? bias, float eps) -> (out, mean, rstd).
 * Shapes: input [..., *normalized_shape] with any outer strides; out of the
 * input's sizes (the stock CPU kernel allocates it contiguous; any outer
 * strides are taken); mean and rstd one value per row, row-major over the
 * outer dims, in the dtype the caller allocated.
 *
 * Per call, from the strides:
 *   rows:   the row is unit-stride in input and out (only outer dims are
 *           permuted): vector loads along each row, FORGE_P_UNROLL accumulators.
 *   lanes:  the row is strided and an outer dim has unit stride in the input
 *           (x.t(), x.transpose(0, 1) then a norm over the last dim): W rows
 *           side by side, one per vector lane, so each step along the row is
 *           one vector load of W neighbouring rows; FORGE_P_UNROLL steps in
 *           flight; out written lane by lane (one vector store where out's
 *           rows are unit-stride neighbours too).
 *   gather: anything else: one row at a time, element by element, double sums.
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * input/out float32, bfloat16 or float16 of one dtype and shape; the
 * normalized dims of input and out each step by one stride; weight and bias
 * absent or N elements in one stride (one float dtype for both); mean and
 * rstd contiguous with one element per row; FORGE_P_ROW, when nonzero,
 * equals N. NaN propagates to the row.
 * Single-threaded (the worker refuses OpenMP runtimes).
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
#ifndef FORGE_P_UNROLL
#define FORGE_P_UNROLL 2 /* independent accumulators per pass: 1, 2, 4 */
#endif
#ifndef FORGE_P_ROW
#define FORGE_P_ROW 0 /* 0: row length read at run time; else the row length N, fixed at compile time */
#endif

#include "../_common/cpu_common.h"  // inlined when forge loads the template (docs/STRATEGIES.md)

constexpr int U = FORGE_P_UNROLL;
static_assert(U >= 1 && U <= 8, "FORGE_P_UNROLL must be 1..8");

#include "../_common/layer_norm_strided_args.h"  // the call's fields: inlined when forge loads the template

#include "../_common/layer_norm_cpu_moments.h"  // row_moments, rstd_of: inlined when forge loads the template

// ---- rows: one unit-stride row ----
template <class T, class TW>
inline void row_apply(const T* x, T* y, const TW* w, const TW* b, int64_t n_runtime, float mean, float rstd) {
  const int64_t N = FORGE_P_ROW ? FORGE_P_ROW : n_runtime;
  const vf mv = splat(mean), rv = splat(rstd);
  int64_t i = 0;
  for (; i + W <= N; i += W) {
    vf v = (load(x + i) - mv) * rv;
    if (w) v = v * load(w + i);
    if (b) v = v + load(b + i);
    store(y + i, v);
  }
  if (i < N) {
    const int64_t n = N - i;
    vf v = (load_part(x + i, n, T{}) - mv) * rv;
    if (w) v = v * load_part(w + i, n, TW{});
    if (b) v = v + load_part(b + i, n, TW{});
    store_part(y + i, v, n);
  }
}

// ---- lanes: `n` (<= W) rows that are unit-stride neighbours in x ----
// Row element c of lane k is x[c * xs + k]; out's is y[c * ys + k * yl];
// lane k's row index is m + k * ml.
template <bool FULL, class T, class TW, class TS>
inline void lanes_block(const LnStrided& a, const T* x, T* y, TS* mean_out, TS* rstd_out, int64_t m, int n,
                        int64_t yl, int64_t ml) {
  const int64_t N = FORGE_P_ROW ? FORGE_P_ROW : a.N;
  const int64_t xs = a.xs, ys = a.ys;
  auto ld = [&](int64_t c) { return FULL ? load(x + c * xs) : load_part(x + c * xs, n, T{}); };
  // Each lane's sums in double, as row_moments (layer_norm_cpu_moments.h).
  const vd n_d = splat_d(static_cast<double>(N));
  vd s[U];
  for (int u = 0; u < U; ++u) s[u] = vd{};
  int64_t c = 0;
  for (; c + U <= N; c += U)
    for (int u = 0; u < U; ++u) s[u] += widen(ld(c + u));
  for (; c < N; ++c) s[0] += widen(ld(c));
  for (int u = 1; u < U; ++u) s[0] += s[u];
  const vf mean = narrow(s[0] / n_d);
  for (int u = 0; u < U; ++u) s[u] = vd{};
  for (c = 0; c + U <= N; c += U)
    for (int u = 0; u < U; ++u) {
      const vd d = widen(ld(c + u) - mean);
      s[u] += d * d;
    }
  for (; c < N; ++c) {
    const vd d = widen(ld(c) - mean);
    s[0] += d * d;
  }
  for (int u = 1; u < U; ++u) s[0] += s[u];
  const vf var = narrow(s[0] / n_d);
  vf rstd;
  for (int k = 0; k < W; ++k) rstd[k] = rstd_of(var[k], a.eps);
  for (int k = 0; k < n; ++k) {
    store1(mean_out + m + k * ml, mean[k]);
    store1(rstd_out + m + k * ml, rstd[k]);
  }
  const TW* w = static_cast<const TW*>(a.w);
  const TW* b = static_cast<const TW*>(a.b);
  for (c = 0; c < N; ++c) {
    vf v = (ld(c) - mean) * rstd;
    if (w) v = v * splat(to_f32(w[c * a.ws]));
    if (b) v = v + splat(to_f32(b[c * a.bs]));
    T* yc = y + c * ys;
    if (yl == 1) {
      if (FULL) store(yc, v);
      else store_part(yc, v, n);
    } else {
      T tmp[W];
      store(tmp, v);
      for (int k = 0; k < n; ++k) yc[k * yl] = tmp[k];
    }
  }
}

// ---- gather: one row of any stride ----
template <class T, class TW, class TS>
inline void gather_row(const LnStrided& a, const T* x, T* y, TS* mean_out, TS* rstd_out, int64_t m) {
  const int64_t N = a.N;
  const TW* w = static_cast<const TW*>(a.w);
  const TW* b = static_cast<const TW*>(a.b);
  const double K = to_f32(x[0]);
  double s = 0;
  for (int64_t c = 0; c < N; ++c) s += to_f32(x[c * a.xs]) - K;
  const float mean = static_cast<float>(K + s / static_cast<double>(N));
  double q = 0;
  for (int64_t c = 0; c < N; ++c) {
    const double d = static_cast<double>(to_f32(x[c * a.xs])) - mean;
    q += d * d;
  }
  const float rstd = rstd_of(static_cast<float>(q / static_cast<double>(N)), a.eps);
  store1(mean_out + m, mean);
  store1(rstd_out + m, rstd);
  for (int64_t c = 0; c < N; ++c) {
    float v = (to_f32(x[c * a.xs]) - mean) * rstd;
    if (w) v = v * to_f32(w[c * a.ws]);
    if (b) v = v + to_f32(b[c * a.bs]);
    store1(y + c * a.ys, v);
  }
}

template <class T, class TW, class TS>
void ln_strided(const LnStrided& a) {
  const T* x = static_cast<const T*>(a.x);
  T* y = static_cast<T*>(a.y);
  TS* mean_out = static_cast<TS*>(a.mean);
  TS* rstd_out = static_cast<TS*>(a.rstd);
  const bool rows = a.xs == 1 && a.ys == 1 && (!a.w || a.ws == 1) && (!a.b || a.bs == 1);
  int L = -1;  // the lanes path's dim: an outer dim of unit stride in x
  if (!rows)
    for (int d = 0; d < a.outer; ++d)
      if (a.size[d] > 1 && a.xstride[d] == 1) L = d;
  int64_t idx[FORGE_MAX_DIMS] = {};
  for (;;) {
    int64_t xo = 0, yo = 0, m = 0;
    for (int d = 0; d < a.outer; ++d)
      if (d != L) xo += idx[d] * a.xstride[d], yo += idx[d] * a.ystride[d], m += idx[d] * a.mstride[d];
    if (L >= 0) {
      const int64_t yl = a.ystride[L], ml = a.mstride[L];
      for (int64_t j = 0; j < a.size[L]; j += W) {
        const int64_t n = a.size[L] - j < W ? a.size[L] - j : W;
        const T* xb = x + xo + j;
        T* yb = y + yo + j * yl;
        if (n == W) lanes_block<true, T, TW, TS>(a, xb, yb, mean_out, rstd_out, m + j * ml, W, yl, ml);
        else lanes_block<false, T, TW, TS>(a, xb, yb, mean_out, rstd_out, m + j * ml, static_cast<int>(n), yl, ml);
      }
    } else if (rows) {
      float mean, rstd;
      row_moments<U>(x + xo, a.N, a.eps, mean, rstd);
      store1(mean_out + m, mean);
      store1(rstd_out + m, rstd);
      row_apply(x + xo, y + yo, static_cast<const TW*>(a.w), static_cast<const TW*>(a.b), a.N, mean, rstd);
    } else {
      gather_row<T, TW, TS>(a, x + xo, y + yo, mean_out, rstd_out, m);
    }
    int d = a.outer - 1;  // the next outer position (L is walked above), last dim fastest
    for (; d >= 0; --d) {
      if (d == L) continue;
      if (++idx[d] < a.size[d]) break;
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

// The storage types of x, weight/bias and mean/rstd, picked at run time.
__attribute__((noinline)) int layer_norm_strided_run(const LnStrided& a) {
  return with_dtype(a.x_dtype, [&](auto t) {
    return with_dtype(a.w_dtype, [&](auto tw) {
      return with_dtype(a.stat_dtype, [&](auto ts) {
        ln_strided<decltype(t), decltype(tw), decltype(ts)>(a);
        return 0;
      });
    });
  });
}

#include "../_common/cpu_checks.h"  // the ISA region ends; cpu_ok and the host-side tensor checks

#include "../_common/layer_norm_strided_parse.h"  // the call's checks

extern "C" int forge_kernel(const forge_call* call) {
  LnStrided a;
  if (parse_layer_norm_strided(call, a)) return 1;
  if (FORGE_P_ROW && a.N != FORGE_P_ROW) return 1;
  if (!cpu_ok()) return 1;
  if (a.M == 0) return 0;
  return layer_norm_strided_run(a);
}
