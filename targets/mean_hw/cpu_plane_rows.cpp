/* mean over H x W (adaptive_avg_pool2d(x, 1)), CPU strategy "plane_rows":
 * one vector of planes at a time (16 with AVX-512), summed side by side and
 * reduced together by a transpose tree.
 *
 * Math: y[p] = (sum_{j < HW} x[p*HW + j]) / HW for every plane p (every
 * (n, c) of NCHW), fp32 lanes, divided like the stock kernel. More generally
 * the mean over the trailing k dims of a contiguous tensor.
 * Op: aten::mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *,
 *     ScalarType? dtype=None) -> Tensor (adaptive_avg_pool2d(x, 1) reaches
 * it as dim = [-1, -2], keepdim = True).
 * Shapes: self [N, C, H, W] (any rank); out [N, C, 1, 1] or [N, C].
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * self and out contiguous float32/bfloat16/float16, the reduced dims are
 * exactly the trailing ones, one output element per plane; FORGE_P_ROW, when
 * nonzero, equals HW. NaN/inf propagate as in a plain sum.
 *
 * Why it is fast: small planes (7x7 = 49, 14x14 = 196 elements: 4 to 13
 * AVX-512 vectors) spend as much on the horizontal sum and the scalar store
 * as on the loads. Here W planes (W = lanes per vector) keep W independent add
 * chains in flight, then one transpose tree (log2 W levels of two-source
 * shuffles) turns their W partial-sum vectors into one vector of W plane sums:
 * one divide and one vector store serve W outputs. FORGE_P_ROW = HW fixes the
 * trip counts at compile time. No TensorIterator, no allocation.
 * Single-threaded.
 */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <utility>
#include <string.h>

#include "forge_kernel.h"

#pragma GCC diagnostic ignored "-Wpsabi" /* vectors wider than the target ISA are fine: all inline */
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized" /* GCC 12 false positives inside the fp16 */
#pragma GCC diagnostic ignored "-Wuninitialized"      /* conversion intrinsics (_mm512_cvt*ph*) */

#ifndef FORGE_P_ISA
#define FORGE_P_ISA 0 /* 0: as compiled (-march); 2: AVX2 paths; 3: AVX-512 paths (run-time checked) */
#endif
#ifndef FORGE_P_UNROLL
#define FORGE_P_UNROLL 1 /* vectors of one plane loaded per step: 1, 2 */
#endif
#ifndef FORGE_P_ROW
#define FORGE_P_ROW 0 /* 0: plane size read at run time; else HW, fixed at compile time */
#endif

#include "../_common/cpu_common.h"  // inlined when forge loads the template (docs/STRATEGIES.md)

constexpr int U = FORGE_P_UNROLL;
static_assert(U == 1 || U == 2, "FORGE_P_UNROLL must be 1 or 2");

// Shuffle masks of one level of the transpose tree. Before the level each
// vector holds W/G planes with G lanes each (plane-major); a pair (a, b) is
// folded into one vector of 2W/G planes with G/2 lanes each: lane k takes
// (plane slot k/(G/2), lane k%(G/2)) from the low and the high half of that
// plane's G lanes, slots from a first, then from b.
struct Masks {
  int lo[W], hi[W];
};
constexpr Masks level_masks(int G) {
  Masks m{};
  const int h = G / 2, per = W / G;
  for (int k = 0; k < W; ++k) {
    const int slot = k / h, j = k % h;
    const int src = slot < per ? 0 : W;
    const int plane = slot % per;
    m.lo[k] = src + plane * G + j;
    m.hi[k] = src + plane * G + h + j;
  }
  return m;
}
template <size_t... I>
inline vi mask_vec(const int* a, std::index_sequence<I...>) {
  return vi{a[I]...};
}
template <int G>
inline void fold_level(vf* s, int n) {
  static constexpr Masks m = level_masks(G);
  const vi lo = mask_vec(m.lo, std::make_index_sequence<W>{});
  const vi hi = mask_vec(m.hi, std::make_index_sequence<W>{});
  for (int i = 0; i < n / 2; ++i)
    s[i] = __builtin_shuffle(s[2 * i], s[2 * i + 1], lo) + __builtin_shuffle(s[2 * i], s[2 * i + 1], hi);
}
// W vectors of per-plane partial sums -> one vector, lane j = total of plane j.
inline vf transpose_sum(vf* s) {
  fold_level<W>(s, W);
  if constexpr (W >= 4) fold_level<W / 2>(s, W / 2);
  if constexpr (W >= 8) fold_level<W / 4>(s, W / 4);
  if constexpr (W >= 16) fold_level<W / 8>(s, W / 8);
  return s[0];
}

template <class T, class TO>
void mean_planes(const T* x, TO* y, int64_t planes, int64_t hw_runtime) {
  const int64_t HW = FORGE_P_ROW ? FORGE_P_ROW : hw_runtime;
  const float denom = static_cast<float>(HW);
  const vf dv = splat(denom);
  int64_t p = 0;
  for (; p + W <= planes; p += W) {
    const T* xp = x + p * HW;
    vf s[W], t[W];
    for (int r = 0; r < W; ++r) s[r] = t[r] = splat(0.0f);
    int64_t i = 0;
    if constexpr (U == 2)
      for (; i + 2 * W <= HW; i += 2 * W)
        for (int r = 0; r < W; ++r) {
          s[r] += load(xp + r * HW + i);
          t[r] += load(xp + r * HW + i + W);
        }
    for (; i + W <= HW; i += W)
      for (int r = 0; r < W; ++r) s[r] += load(xp + r * HW + i);
    if (i < HW)
      for (int r = 0; r < W; ++r) s[r] += load_part(xp + r * HW + i, HW - i, T{});
    if constexpr (U == 2)
      for (int r = 0; r < W; ++r) s[r] += t[r];
    store(y + p, transpose_sum(s) / dv);
  }
  for (; p < planes; ++p) {
    const T* xp = x + p * HW;
    vf s = splat(0.0f);
    int64_t i = 0;
    for (; i + W <= HW; i += W) s += load(xp + i);
    if (i < HW) s += load_part(xp + i, HW - i, T{});
    store1(y + p, hsum(s) / denom);
  }
}

#include "../_common/mean_hw_cpu_entry.h"  // dispatch, argument checks and entry points: inlined when forge loads the template
