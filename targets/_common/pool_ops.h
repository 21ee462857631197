/* ---- the pooling op table (targets/pool) ----
 * FORGE_P_OP names the op, as forge writes the captured op's name ($op):
 *   max_pool2d_with_indices    max and its index in the (H, W) plane
 *   max_pool3d_with_indices    max and its index in the (D, H, W) volume
 *   avg_pool2d, avg_pool3d     window sum / (window size, its in-bounds part,
 *                              or divisor_override)
 *   max_pool1d                 the max alone, over the last dim (CPU calls
 *                              without autograd: the composite computes it)
 * Max: padding never wins, NaN does (the last NaN of the window, as stock),
 * ties give the first index; a window of -inf gives its first in-bounds index.
 * Avg: fp32 sums in (d, h, w) order, as the stock kernels add them.
 * Every op runs as 3D over [planes, D, H, W] (D = 1 in 2D; D = H = 1 in 1D).
 * Which scalars each takes: pool_parse.h. */
#define PL_max_pool2d_with_indices 1
#define PL_max_pool3d_with_indices 2
#define PL_avg_pool2d 3
#define PL_avg_pool3d 4
#define PL_max_pool1d 5
#include "../_common/op_code.h"  // FORGE_OP_CODE

#ifndef FORGE_P_OP
#define FORGE_P_OP max_pool2d_with_indices
#endif
#define PL_OP FORGE_OP_CODE(PL_)
#if PL_OP < PL_max_pool2d_with_indices || PL_OP > PL_max_pool1d
#error "FORGE_P_OP: not an op of the pooling table (targets/_common/pool_ops.h)"
#endif
#define PL_MAX (PL_OP <= PL_max_pool3d_with_indices || PL_OP == PL_max_pool1d)
#define PL_INDICES (PL_OP <= PL_max_pool3d_with_indices)  // a second output, the max's in-plane index
#define PL_SPATIAL (PL_OP == PL_max_pool3d_with_indices || PL_OP == PL_avg_pool3d ? 3 : PL_OP == PL_max_pool1d ? 1 : 2)

#ifdef __CUDACC__
#define PL_HD __host__ __device__ __forceinline__
#else
#define PL_HD inline
#endif

// A call as [planes, D, H, W] -> [planes, OD, OH, OW] (pool_parse.h fills it).
// In-plane extents and offsets are 32-bit: a plane holds under 2^31 elements.
struct PoolArgs {
  const void* x;
  void* y;
  int64_t* idx;  // the max's indices (output 1); NULL for avg
  int32_t x_dtype, y_dtype;
  int64_t planes;  // N * C
  int32_t D, H, W, OD, OH, OW;
  int32_t kD, kH, kW, sD, sH, sW, pD, pH, pW, dD, dH, dW;
  int32_t count_include_pad, divisor;  // avg; divisor 0: none given
};

PL_HD int pl_min(int a, int b) { return a < b ? a : b; }
PL_HD int pl_max(int a, int b) { return a > b ? a : b; }

// The window of output (od, oh, ow), every plane's the same: its in-bounds
// elements are d in [d0, d1), h in [h0, h1), w in [w0, w1), stepping by the
// dilation (max) or 1 (avg). The max starts at the first in-bounds element
// and its index there; the avg's window is empty when any range is, and
// `div` is its divisor.
struct PoolWindow {
  int d0, d1, h0, h1, w0, w1;
  int div;  // avg only
};
PL_HD PoolWindow pool_window(const PoolArgs& a, int od, int oh, int ow) {
  PoolWindow r;
  int d0 = od * a.sD - a.pD, h0 = oh * a.sH - a.pH, w0 = ow * a.sW - a.pW;
#if PL_MAX
  r.d1 = pl_min(d0 + (a.kD - 1) * a.dD + 1, a.D), r.h1 = pl_min(h0 + (a.kH - 1) * a.dH + 1, a.H),
  r.w1 = pl_min(w0 + (a.kW - 1) * a.dW + 1, a.W);
  while (d0 < 0) d0 += a.dD;
  while (h0 < 0) h0 += a.dH;
  while (w0 < 0) w0 += a.dW;
  r.d0 = d0, r.h0 = h0, r.w0 = w0, r.div = 1;
#else
  const int d1 = pl_min(d0 + a.kD, a.D + a.pD), h1 = pl_min(h0 + a.kH, a.H + a.pH), w1 = pl_min(w0 + a.kW, a.W + a.pW);
  const int pool = (d1 - d0) * (h1 - h0) * (w1 - w0);
  r.d0 = pl_max(d0, 0), r.h0 = pl_max(h0, 0), r.w0 = pl_max(w0, 0);
  r.d1 = pl_min(d1, a.D), r.h1 = pl_min(h1, a.H), r.w1 = pl_min(w1, a.W);
  r.div = a.divisor ? a.divisor : a.count_include_pad ? pool : (r.d1 - r.d0) * (r.h1 - r.h0) * (r.w1 - r.w0);
#endif
  return r;
}
PL_HD bool pool_empty(const PoolWindow& w) { return w.d0 >= w.d1 || w.h0 >= w.h1 || w.w0 >= w.w1; }

// Output (od, oh, ow) of the plane ld(i) reads (i: the in-plane offset);
// the max's in-plane index into *index.
template <class LD>
PL_HD float pool_one(const PoolArgs& a, const LD& ld, int od, int oh, int ow, int64_t* index) {
  const PoolWindow r = pool_window(a, od, oh, ow);
#if PL_MAX
  float best = -INFINITY;
  int bi = (r.d0 * a.H + r.h0) * a.W + r.w0;
  for (int d = r.d0; d < r.d1; d += a.dD)
    for (int h = r.h0; h < r.h1; h += a.dH) {
      const int row = (d * a.H + h) * a.W;
      for (int w = r.w0; w < r.w1; w += a.dW) {
        const float v = ld(row + w);
        if (v > best || v != v) {
          best = v;
          bi = row + w;
        }
      }
    }
  *index = bi;
  return best;
#else
  (void)index;
  if (pool_empty(r)) return 0.0f;
  float sum = 0.0f;
  for (int d = r.d0; d < r.d1; ++d)
    for (int h = r.h0; h < r.h1; ++h) {
      const int row = (d * a.H + h) * a.W;
      for (int w = r.w0; w < r.w1; ++w) sum += ld(row + w);
    }
  return sum / static_cast<float>(r.div);
#endif
}
