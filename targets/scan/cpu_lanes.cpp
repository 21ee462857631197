/* scan, CPU strategy "lanes": an inclusive scan of the table in
 * targets/_common/scan_ops.h (FORGE_P_OP: cumsum, cumprod) along one dim.
 *
 * Math: the input as [outer, L, inner] (scan_parse.h); for each (o, i),
 * y[o, l, i] = x[o, 0, i] (+ or *) ... x[o, l, i], carried in double and
 * rounded once per output (as the stock CPU kernels do).
 * Ops: aten::cumsum, aten::cumprod; input and output float32/bfloat16/float16.
 * Shapes: any rank <= 8, any dim.
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * scan_parse.h's (contiguous non-empty input and output of one shape).
 *
 * Why it is fast: one call, no TensorIterator, no thread wake-up. Rows
 * (inner = 1): with FORGE_P_ROWS 0, tiles of W/2 rows x W columns transposed
 * in registers, so one vector op advances the carries of W/2 rows a column; else
 * FORGE_P_ROWS rows scanned side by side, so their independent carries hide
 * the add's latency. Rows are read and written in vectors (the conversions of
 * bf16/fp16 vectorized). Columns (inner > 1): FORGE_P_COLS
 * vectors of neighbouring columns carried in double registers while the L
 * rows stream past in memory order.
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
#ifndef FORGE_P_ROWS
#define FORGE_P_ROWS 0 /* 0: tiles of W/2 rows, transposed; 1..8: rows scanned side by side */
#endif
#ifndef FORGE_P_COLS
#define FORGE_P_COLS 4 /* vectors of columns carried at once: 1..8 */
#endif

#include "../_common/cpu_common.h"  // inlined when forge loads the template (docs/STRATEGIES.md)
#include "../_common/cpu_double_lanes.h"  // vd, widen, narrow, dsum: inlined when forge loads the template
#include "../_common/scan_ops.h"    // the op table: SC_OP
#include "../_common/cpu_transpose.h"  // transpose_block

constexpr int ROWS = FORGE_P_ROWS;
constexpr int C = FORGE_P_COLS;
static_assert(ROWS >= 0 && ROWS <= 8, "FORGE_P_ROWS must be 0 (tiles of W/2 rows) or 1..8");
constexpr int SIDE = ROWS > 0 ? ROWS : 4;  // rows side by side (below a tile, with ROWS 0)
static_assert(C >= 1 && C <= 8, "FORGE_P_COLS must be 1..8");

// NR rows of length L from x (rows L apart) to y, W elements of each per step.
template <int NR, class T, class TY>
void scan_rows(const T* x, TY* y, int64_t L) {
  double acc[NR];
  for (int r = 0; r < NR; ++r) acc[r] = SC_IDENTITY;
  for (int64_t j = 0; j < L; j += W) {
    const int64_t n = L - j < W ? L - j : W;
    vf v[NR];
    for (int r = 0; r < NR; ++r) v[r] = n == W ? load(x + r * L + j) : load_part(x + r * L + j, n, T{});
    for (int k = 0; k < n; ++k)
      for (int r = 0; r < NR; ++r) {
        acc[r] = SC_COMBINE(acc[r], static_cast<double>(v[r][k]));
        v[r][k] = static_cast<float>(acc[r]);
      }
    for (int r = 0; r < NR; ++r) {
      if (n == W) store(y + r * L + j, v[r]);
      else store_part(y + r * L + j, v[r], n);
    }
  }
}

// Tiles of HR = W/2 rows x W columns: a row's W elements widen to two
// register halves of HR doubles (vd), and each half's HR x HR block transposed
// in registers makes a vector of one column across the HR rows. HR rows keep
// HR input and HR output lines in flight: rows whose stride is a multiple of
// 4 KiB share L1 sets (8 ways), which W rows' 2W lines overflow.
constexpr int HR = W / 2;
typedef int64_t vlh __attribute__((vector_size(W * 4)));  // HR lanes: vdh's shuffle masks

inline void transpose(vdh* v) { transpose_block<vdh, vlh, HR>(v); }

// HR rows of length L from x (rows L apart) to y, a tile per step: the HR
// carries (one per row) advanced a column per vector op. The same order of
// operations per row as scan_rows.
template <class T, class TY>
void scan_row_tiles(const T* x, TY* y, int64_t L) {
  vdh acc = vdh{} + SC_IDENTITY;
  for (int64_t j = 0; j < L; j += W) {
    const int64_t n = L - j < W ? L - j : W;
    vdh lo[HR], hi[HR];  // columns [0, HR) and [HR, W) of the tile
#pragma GCC unroll 8
    for (int r = 0; r < HR; ++r) {
      const vd d = widen(n == W ? load(x + r * L + j) : load_part(x + r * L + j, n, T{}));
      lo[r] = d.lo;
      hi[r] = d.hi;
    }
    transpose(lo);
    transpose(hi);
#pragma GCC unroll 8
    for (int c = 0; c < HR; ++c) lo[c] = acc = SC_COMBINE(acc, lo[c]);
#pragma GCC unroll 8
    for (int c = 0; c < HR; ++c) hi[c] = acc = SC_COMBINE(acc, hi[c]);  // columns past the row's end unused
    transpose(lo);
    transpose(hi);
#pragma GCC unroll 8
    for (int r = 0; r < HR; ++r) {
      const vf v = narrow(vd{lo[r], hi[r]});
      if (n == W) store(y + r * L + j, v);
      else store_part(y + r * L + j, v, n);
    }
  }
}

// Columns [c0, c0 + cols) (cols <= C * W) of one outer position: x and y at
// its first element, rows `inner` apart.
template <class T, class TY>
void scan_columns(const T* x, TY* y, int64_t L, int64_t inner, int64_t cols) {
  const int nv = static_cast<int>((cols + W - 1) / W);
  const int64_t last_n = cols - static_cast<int64_t>(nv - 1) * W;
  vd acc[C];
  for (int v = 0; v < nv; ++v) acc[v] = vd{} + SC_IDENTITY;
  for (int64_t l = 0; l < L; ++l)
    for (int v = 0; v < nv; ++v) {
      const int64_t at = l * inner + static_cast<int64_t>(v) * W;
      const bool part = v == nv - 1 && last_n < W;
      const vf xv = part ? load_part(x + at, last_n, T{}) : load(x + at);
      acc[v] = SC_COMBINE(acc[v], widen(xv));
      const vf yv = narrow(acc[v]);
      if (part) store_part(y + at, yv, last_n);
      else store(y + at, yv);
    }
}

template <class T, class TY>
__attribute__((noinline)) int scan_run(const ScanArgs& a) {
  const T* x = static_cast<const T*>(a.x);
  TY* y = static_cast<TY*>(a.y);
  const int64_t L = a.L;
  if (a.inner == 1) {
    int64_t r = 0;
    if (ROWS == 0)
      for (; r + HR <= a.outer; r += HR) scan_row_tiles(x + r * L, y + r * L, L);
    for (; r + SIDE <= a.outer; r += SIDE) scan_rows<SIDE>(x + r * L, y + r * L, L);
    for (; r < a.outer; ++r) scan_rows<1>(x + r * L, y + r * L, L);
    return 0;
  }
  const int64_t plane = L * a.inner;
  for (int64_t o = 0; o < a.outer; ++o)
    for (int64_t c0 = 0; c0 < a.inner; c0 += C * W)
      scan_columns(x + o * plane + c0, y + o * plane + c0, L, a.inner, a.inner - c0 < C * W ? a.inner - c0 : C * W);
  return 0;
}

__attribute__((noinline)) int scan_dispatch(const ScanArgs& a) {
  return with_dtype(a.x_dtype, [&](auto t) {
    return with_dtype(a.y_dtype, [&](auto ty) { return scan_run<decltype(t), decltype(ty)>(a); });
  });
}

#include "../_common/cpu_checks.h"  // the ISA region ends; cpu_ok and the host-side tensor checks

#include "../_common/scan_parse.h"  // the call's checks and [outer, L, inner], shared with the CUDA template

extern "C" int forge_kernel(const forge_call* call) {
  ScanArgs a;
  if (parse_scan(call, a) || !cpu_ok()) return 1;
  return scan_dispatch(a);
}
