/* layer_norm, CPU strategy "one_read": the statistics of FORGE_P_ROWS rows in
 * one interleaved read (shifted sums), then the normalize pass.
 *
 * Math: for every row r (N elements), K = the row's first element, the sums
 * gathered in double (fp32 within FLUSH vector steps; y in fp32):
 *   S1 = sum (x - K), S2 = sum (x - K)^2;  mean = K + S1/N;
 *   var = S2/N - (S1/N)^2 (biased);  rstd = 1 / sqrt(max(var, 0) + eps);
 *   y = ((x - mean) * rstd) * w + b
 * The shift by K keeps S1/N within a few std of zero for ordinary rows, so the
 * subtraction loses at most a few bits (it is not the two-pass algorithm: a row
 * whose first element is a far outlier loses (|x0 - mean|/std)^2 fp32 ulps of var).
 * Op: aten::native_layer_norm(Tensor input, SymInt[] normalized_shape,
 *     Tensor? weight, Tensor? bias, float eps) -> (out, mean, rstd).
 * Shapes: input [..., *normalized_shape]; out like input; mean and rstd one
 * value per row, in the dtype the caller allocated (outputs[1..2]).
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * input/out contiguous float32, bfloat16 or float16 of one dtype; weight and
 * bias absent or contiguous with N elements (one float dtype for both); mean
 * and rstd contiguous with one element per row; FORGE_P_ROW, when nonzero,
 * equals N. NaN propagates to the row.
 *
 * Why it is fast: the statistics need one read instead of two, and
 * FORGE_P_ROWS rows are reduced side by side, so short rows (N = 64: four
 * AVX-512 vectors) keep several independent add chains and horizontal
 * reductions in flight; FORGE_P_ROW = N fixes every trip count at compile
 * time. No allocation, no dispatcher, no thread wake-up. Single-threaded.
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

#include "../_common/cpu_common.h"  // inlined when forge loads the template (docs/STRATEGIES.md)
#include "../_common/layer_norm_cpu_moments.h"  // FLUSH, rstd_of, double lanes: inlined when forge loads the template

constexpr int R = FORGE_P_ROWS;
static_assert(R >= 1 && R <= 8, "FORGE_P_ROWS must be 1..8");

inline void finish_moments(vd s1, vd s2, double K, int64_t N, float eps, float& mean, float& rstd) {
  const double m1 = dsum(s1) / static_cast<double>(N);
  const float var = static_cast<float>(dsum(s2) / static_cast<double>(N) - m1 * m1);
  mean = static_cast<float>(K + m1);
  rstd = rstd_of(var, eps);
}

// Statistics of `nr` (<= R) consecutive rows starting at x.
template <class T>
inline void block_moments(const T* x, int64_t n_runtime, int nr, float eps, float* mean, float* rstd) {
  const int64_t N = FORGE_P_ROW ? FORGE_P_ROW : n_runtime;
  const int64_t full = N - N % W;
  vd t1[R], t2[R];
  vf kv[R];
  float K[R];
  for (int r = 0; r < R; ++r) {
    K[r] = r < nr ? to_f32(x[r * N]) : 0.0f;
    kv[r] = splat(K[r]);
    t1[r] = vd{};
    t2[r] = vd{};
  }
  int64_t i = 0;
  while (i < full) {
    vf s1[R], s2[R];
    for (int r = 0; r < R; ++r) s1[r] = s2[r] = splat(0.0f);
    const int64_t end = i + FLUSH * W < full ? i + FLUSH * W : full;
    if (nr == R) {
      for (; i < end; i += W)
        for (int r = 0; r < R; ++r) {
          vf d = load(x + r * N + i) - kv[r];
          s1[r] += d;
          s2[r] += d * d;
        }
    } else {
      for (; i < end; i += W)
        for (int r = 0; r < nr; ++r) {
          vf d = load(x + r * N + i) - kv[r];
          s1[r] += d;
          s2[r] += d * d;
        }
    }
    for (int r = 0; r < nr; ++r) {
      t1[r] += widen(s1[r]);
      t2[r] += widen(s2[r]);
    }
  }
  if (i < N) {
    const vi live = iota() < static_cast<int32_t>(N - i);
    for (int r = 0; r < nr; ++r) {
      vf d = load_part(x + r * N + i, N - i, T{}) - kv[r];
      d = live ? d : splat(0.0f);
      t1[r] += widen(d);
      t2[r] += widen(d * d);
    }
  }
  for (int r = 0; r < nr; ++r) finish_moments(t1[r], t2[r], K[r], N, eps, mean[r], rstd[r]);
}

// The normalize pass: y = ((x - mean) * rstd) * w + b, the stock order.
template <class T, class TW, bool HAS_W, bool HAS_B>
inline void ln_apply(const T* x, T* y, const TW* w, const TW* b, int64_t n_runtime, float mean, float rstd) {
  const int64_t N = FORGE_P_ROW ? FORGE_P_ROW : n_runtime;
  const vf mv = splat(mean), rv = splat(rstd);
  int64_t i = 0;
  for (; i + W <= N; i += W) {
    vf v = (load(x + i) - mv) * rv;
    if constexpr (HAS_W) v = v * load(w + i);
    if constexpr (HAS_B) v = v + load(b + i);
    store(y + i, v);
  }
  if (i < N) {
    const int64_t n = N - i;
    vf v = (load_part(x + i, n, T{}) - mv) * rv;
    if constexpr (HAS_W) v = v * load_part(w + i, n, TW{});
    if constexpr (HAS_B) v = v + load_part(b + i, n, TW{});
    store_part(y + i, v, n);
  }
}

#include "../_common/layer_norm_args.h"  // the call's fields, shared with the CUDA templates: inlined when forge loads the template

template <class T, class TW, class TS>
void ln_rows(const LnArgs& a) {
  const T* x = static_cast<const T*>(a.x);
  T* y = static_cast<T*>(a.y);
  const TW* w = static_cast<const TW*>(a.w);
  const TW* b = static_cast<const TW*>(a.b);
  TS* mean_out = static_cast<TS*>(a.mean);
  TS* rstd_out = static_cast<TS*>(a.rstd);
  const int64_t N = a.N;
  for (int64_t r0 = 0; r0 < a.M; r0 += R) {
    const int nr = a.M - r0 < R ? static_cast<int>(a.M - r0) : R;
    float mean[R], rstd[R];
    block_moments(x + r0 * N, N, nr, a.eps, mean, rstd);
    for (int k = 0; k < nr; ++k) {
      const int64_t r = r0 + k;
      store1(mean_out + r, mean[k]);
      store1(rstd_out + r, rstd[k]);
      const T* xr = x + r * N;
      T* yr = y + r * N;
      if (w && b) ln_apply<T, TW, true, true>(xr, yr, w, b, N, mean[k], rstd[k]);
      else if (w) ln_apply<T, TW, true, false>(xr, yr, w, b, N, mean[k], rstd[k]);
      else if (b) ln_apply<T, TW, false, true>(xr, yr, w, b, N, mean[k], rstd[k]);
      else ln_apply<T, TW, false, false>(xr, yr, w, b, N, mean[k], rstd[k]);
    }
  }
}

#include "../_common/layer_norm_cpu_entry.h"  // dispatch, argument checks and entry points: inlined when forge loads the template
