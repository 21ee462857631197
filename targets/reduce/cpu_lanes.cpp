/* reduce, CPU strategy "lanes": one reduction of the table in
 * targets/_common/reduce_ops.h (FORGE_P_OP: sum, mean, prod, amax, amin,
 * argmax, argmin, max, min, linalg_vector_norm) over one run of neighbouring dims.
 *
 * Math: the input as [outer, R, inner] (reduce_parse.h); for each (o, i):
 * sum / mean / prod / extreme (and its first index) / 1- or 2-norm of
 * x[o, 0..R-1, i], in fp32 lanes, sums gathered in double every 64 vector steps.
 * Ops: aten::sum.dim_IntList, sum, mean.dim, prod.dim_int, amax, amin,
 * argmax, argmin, max.dim, min.dim, linalg_vector_norm (ord 1 or 2). Input float32/bfloat16/float16; values
 * out in any of them; indices int64.
 * Shapes: any rank <= 8, the reduced dims one run (the last dims: rows; the
 * middle or first: columns; all: one row), keepdim either way.
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * reduce_parse.h's (contiguous input, contiguous outputs of outer * inner
 * elements, the op's scalars), a non-empty input, R < 2^31.
 *
 * Why it is fast: one call, no TensorIterator, no thread wake-up. Rows (inner
 * = 1): FORGE_P_UNROLL independent full-register accumulators along the row.
 * Columns (inner > 1): FORGE_P_COLS vectors of neighbouring outputs are
 * accumulated in registers while the R rows stream past, so each input
 * element is read once, in memory order within a row.
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
#ifndef FORGE_P_UNROLL
#define FORGE_P_UNROLL 2 /* row accumulators: 1, 2, 4 */
#endif
#ifndef FORGE_P_COLS
#define FORGE_P_COLS 4 /* vectors of outputs accumulated at once along columns: 1, 2, 4, 8 */
#endif

#include "../_common/cpu_common.h"  // inlined when forge loads the template (docs/STRATEGIES.md)
#include "../_common/reduce_ops.h"  // the op table: RD_OP and its kind

constexpr int U = FORGE_P_UNROLL;
constexpr int C = FORGE_P_COLS;
static_assert(U >= 1 && U <= 8, "FORGE_P_UNROLL must be 1..8");
static_assert(C >= 1 && C <= 8, "FORGE_P_COLS must be 1..8");
constexpr int64_t FLUSH = 64;  // vector steps between fp32 partial sums and the double total

// The value a padding lane holds: it never changes the result.
inline float rd_identity() {
#if RD_SUM
  return 0.0f;
#elif RD_PROD
  return 1.0f;
#elif RD_IS_MAX
  return -INFINITY;
#else
  return INFINITY;
#endif
}
// rd_identity() in storage type T: the padding of partial loads.
template <class T> inline T rd_fill() {
  T t[W];
  store(t, splat(rd_identity()));
  return t[0];
}
// Does candidate v replace best b (per lane)? Strictly better, or the first
// NaN; later equal values never do, so the first index stays.
inline vi rd_take(vf v, vf b) {
#if RD_IS_MAX
  const vi better = v > b;
#else
  const vi better = v < b;
#endif
  return better | ((v != v) & (b == b));
}
// What a norm sums for each element (P: its ord, 1 or 2); other ops: the element.
template <int P> inline vf rd_term(vf v) {
  if constexpr (P == 2) return v * v;
  else if constexpr (P == 1) return v < splat(0.0f) ? -v : v;
  else return v;
}
inline vf rd_combine(vf acc, vf v) {
#if RD_SUM
  return acc + v;
#elif RD_PROD
  return acc * v;
#else
  return rd_take(v, acc) ? v : acc;
#endif
}

struct Result {
  double value;
  int64_t index;
};

// Does (v, iv) replace the best so far (b, ib) when lanes or pairs are
// folded? The extreme, NaN first, the smallest index among equals.
inline bool replaces(float v, int64_t iv, float b, int64_t ib) {
  const bool vnan = v != v, bnan = b != b;
#if RD_IS_MAX
  const bool better = v > b;
#else
  const bool better = v < b;
#endif
  return (vnan && !bnan) || better || ((v == b || (vnan && bnan)) && iv < ib);
}
inline Result better_of(Result a, Result b) {
  return replaces(static_cast<float>(b.value), b.index, static_cast<float>(a.value), a.index) ? b : a;
}
inline Result fold_extreme(vf best, vi idx) {
  Result r{best[0], idx[0]};
  for (int k = 1; k < W; ++k) r = better_of(r, Result{best[k], idx[k]});
  return r;
}

template <int P, class T>
Result reduce_row(const T* x, int64_t R) {
  const T fill_t = rd_fill<T>();
#if RD_EXTREME
  // U independent (best, index) pairs hide the compare-and-select latency;
  // pair u starts at element u * W (padding lanes never win: index >= R).
  vf best[U];
  vi bi[U];
  for (int u = 0; u < U; ++u) {
    const int64_t at = static_cast<int64_t>(u) * W, n = R - at;
    best[u] = n >= W ? load(x + at) : n > 0 ? load_part(x + at, n, fill_t) : splat(rd_identity());
    bi[u] = iota() + static_cast<int32_t>(n > 0 ? at : R);
  }
  int64_t j = static_cast<int64_t>(U) * W;
  for (; j + U * W <= R; j += U * W)
    for (int u = 0; u < U; ++u) {
      const vf v = load(x + j + u * W);
      const vi take = rd_take(v, best[u]);
      best[u] = take ? v : best[u];
      if constexpr (RD_WITH_INDEX) bi[u] = take ? iota() + static_cast<int32_t>(j + u * W) : bi[u];
    }
  for (; j < R; j += W) {
    const int64_t n = R - j < W ? R - j : W;
    const vf v = n == W ? load(x + j) : load_part(x + j, n, fill_t);
    const vi take = rd_take(v, best[0]) & (iota() < static_cast<int32_t>(n));
    best[0] = take ? v : best[0];
    bi[0] = take ? iota() + static_cast<int32_t>(j) : bi[0];
  }
  Result r = fold_extreme(best[0], bi[0]);
  for (int u = 1; u < U; ++u) r = better_of(r, fold_extreme(best[u], bi[u]));
  return r;
#else
  double total = RD_PROD ? 1.0 : 0.0;
  float ptotal = 1.0f;
  int64_t j = 0;
  while (j < R) {
    vf acc[U];
    for (int u = 0; u < U; ++u) acc[u] = splat(rd_identity());
    const int64_t end = R - j > FLUSH * U * W ? j + FLUSH * U * W : R;
    for (; j + U * W <= end; j += U * W)
      for (int u = 0; u < U; ++u) acc[u] = rd_combine(acc[u], rd_term<P>(load(x + j + u * W)));
    for (; j + W <= end; j += W) acc[0] = rd_combine(acc[0], rd_term<P>(load(x + j)));
    if (j < end) {
      acc[0] = rd_combine(acc[0], rd_term<P>(load_part(x + j, end - j, fill_t)));
      j = end;
    }
    for (int u = 1; u < U; ++u) acc[0] = rd_combine(acc[0], acc[u]);
#if RD_SUM
    total += hsum(acc[0]);
#else
    for (int k = 0; k < W; ++k) ptotal *= acc[0][k];
#endif
  }
  if (RD_PROD) total = ptotal;
  return Result{total, 0};
#endif
}

// Two rows' results of one output ([R1, outer, R]: a value reduction, no index).
inline Result merge_rows(Result a, Result b) {
#if RD_EXTREME
  return better_of(a, b);
#else
  return Result{a.value + b.value, 0};
#endif
}

template <int P, class TY>
inline void put(const ReduceArgs& a, int64_t at, Result r, int64_t R) {
#if RD_OP == RD_mean
  r.value /= static_cast<double>(R);
#elif RD_NORM
  (void)R;
  if (P == 2) r.value = sqrt(r.value);
#else
  (void)R;
#endif
  if constexpr (RD_WITH_VALUE) store1(static_cast<TY*>(a.y) + at, static_cast<float>(r.value));
  if constexpr (RD_WITH_INDEX) a.idx[at] = r.index;
}

// Columns: for one outer position (x at its first element), the outputs
// [c0, c0 + cols) (cols <= C * W) accumulated over the R rows, sR apart.
template <int P, class T, class TY>
void reduce_columns(const ReduceArgs& a, const T* x, int64_t o, int64_t c0, int64_t cols) {
  const int64_t R = a.R, sR = a.sR;
  const int nv = static_cast<int>((cols + W - 1) / W);
  const int64_t last_n = cols - static_cast<int64_t>(nv - 1) * W;
  const T fill_t = rd_fill<T>();
  auto at = [&](int64_t r, int v) {
    const T* p = x + r * sR + c0 + static_cast<int64_t>(v) * W;
    return v == nv - 1 && last_n < W ? load_part(p, last_n, fill_t) : load(p);
  };
  vf acc[C];
#if RD_EXTREME
  vi bi[C];
  for (int v = 0; v < nv; ++v) acc[v] = at(0, v), bi[v] = vi{};
  for (int64_t r = 1; r < R; ++r)
    for (int v = 0; v < nv; ++v) {
      const vf x_v = at(r, v);
      const vi take = rd_take(x_v, acc[v]);
      acc[v] = take ? x_v : acc[v];
      if constexpr (RD_WITH_INDEX) bi[v] = take ? vi{} + static_cast<int32_t>(r) : bi[v];
    }
#else
  // fp32 partials over FLUSH rows; beyond that they are gathered in double.
  double total[C * W];
  const bool gather = RD_SUM && R > FLUSH;
  if (gather)
    for (int k = 0; k < nv * W; ++k) total[k] = 0.0;
  for (int v = 0; v < nv; ++v) acc[v] = splat(rd_identity());
  for (int64_t r0 = 0; r0 < R; r0 += FLUSH) {
    const int64_t r1 = R - r0 > FLUSH ? r0 + FLUSH : R;
    for (int64_t r = r0; r < r1; ++r)
      for (int v = 0; v < nv; ++v) acc[v] = rd_combine(acc[v], rd_term<P>(at(r, v)));
    if (gather) {
      for (int v = 0; v < nv; ++v) {
        for (int k = 0; k < W; ++k) total[v * W + k] += acc[v][k];
        acc[v] = splat(0.0f);
      }
    }
  }
  if (gather)
    for (int v = 0; v < nv; ++v)
      for (int k = 0; k < W; ++k) acc[v][k] = static_cast<float>(P == 2 ? sqrt(total[v * W + k]) : total[v * W + k]);
  else if (P == 2)
    for (int v = 0; v < nv; ++v)
      for (int k = 0; k < W; ++k) acc[v][k] = sqrt(acc[v][k]);
#if RD_OP == RD_mean
  for (int v = 0; v < nv; ++v) acc[v] = acc[v] / splat(static_cast<float>(R));
#endif
#endif
  const int64_t out0 = o * a.inner + c0;
  if constexpr (RD_WITH_VALUE) {
    TY* y = static_cast<TY*>(a.y) + out0;
    for (int v = 0; v < nv; ++v) {
      if (v == nv - 1 && last_n < W) store_part(y + v * W, acc[v], last_n);
      else store(y + v * W, acc[v]);
    }
  }
#if RD_WITH_INDEX
  for (int64_t k = 0; k < cols; ++k) a.idx[out0 + k] = bi[k / W][k % W];
#endif
}

template <int P, class T, class TY>
__attribute__((noinline)) int reduce_run(const ReduceArgs& a) {
  const T* x = static_cast<const T*>(a.x);
  if (a.inner == 1) {
    for (int64_t o = 0; o < a.outer; ++o) {
      Result r = reduce_row<P>(x + o * a.sO, a.R);
      for (int64_t r1 = 1; r1 < a.R1; ++r1) r = merge_rows(r, reduce_row<P>(x + o * a.sO + r1 * a.sR1, a.R));
      put<P, TY>(a, o, r, a.R * a.R1);
    }
    return 0;
  }
  for (int64_t o = 0; o < a.outer; ++o)
    for (int64_t c0 = 0; c0 < a.inner; c0 += C * W)
      reduce_columns<P, T, TY>(a, x + o * a.sO, o, c0, a.inner - c0 < C * W ? a.inner - c0 : C * W);
  return 0;
}
// A norm's ord picks the element term at compile time.
template <class T, class TY>
int reduce_ord(const ReduceArgs& a) {
#if RD_NORM
  return a.ord == 2 ? reduce_run<2, T, TY>(a) : reduce_run<1, T, TY>(a);
#else
  return reduce_run<0, T, TY>(a);
#endif
}

__attribute__((noinline)) int reduce_dispatch(const ReduceArgs& a) {
  return with_dtype(a.x_dtype, [&](auto t) {
    if constexpr (!RD_WITH_VALUE) return reduce_ord<decltype(t), float>(a);
    else return with_dtype(a.y_dtype, [&](auto ty) { return reduce_ord<decltype(t), decltype(ty)>(a); });
  });
}

#include "../_common/cpu_checks.h"  // the ISA region ends; cpu_ok and the host-side tensor checks

#include "../_common/reduce_parse.h"  // the call's checks and [outer, R, inner], shared with the CUDA template

extern "C" int forge_kernel(const forge_call* call) {
  ReduceArgs a;
  if (parse_reduce(call, a) || !cpu_ok()) return 1;
  if (a.R >= (int64_t{1} << 31)) return 1;  // indices in int32 lanes
  return reduce_dispatch(a);
}
