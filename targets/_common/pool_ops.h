/* ---- the pooling op table (targets/pool) ----
 * FORGE_P_OP names the op, as forge writes the captured op's name ($op):
 *   max_pool2d_with_indices    max and its index in the (H, W) plane
 *   max_pool3d_with_indices    max and its index in the (D, H, W) volume
 *   avg_pool2d, avg_pool3d     window sum / (window size, its in-bounds part,
 *                              or divisor_override)
 * Max: padding never wins, NaN does (the last NaN of the window, as stock),
 * ties give the first index; a window of -inf gives its first in-bounds index.
 * Avg: fp32 sums in (d, h, w) order, as the stock kernels add them.
 * Every op runs as 3D over [planes, D, H, W] (D = 1 in 2D).
 * Which scalars each takes: pool_parse.h. */
#define PL_max_pool2d_with_indices 1
#define PL_max_pool3d_with_indices 2
#define PL_avg_pool2d 3
#define PL_avg_pool3d 4
#include "../_common/op_code.h"  // FORGE_OP_CODE

#ifndef FORGE_P_OP
#define FORGE_P_OP max_pool2d_with_indices
#endif
#define PL_OP FORGE_OP_CODE(PL_)
#if PL_OP < PL_max_pool2d_with_indices || PL_OP > PL_avg_pool3d
#error "FORGE_P_OP: not an op of the pooling table (targets/_common/pool_ops.h)"
#endif
#define PL_MAX (PL_OP <= PL_max_pool3d_with_indices)
#define PL_SPATIAL (PL_OP == PL_max_pool3d_with_indices || PL_OP == PL_avg_pool3d ? 3 : 2)

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

// Output (od, oh, ow) of the plane ld(i) reads (i: the in-plane offset);
// the max's in-plane index into *index.
template <class LD>
PL_HD float pool_one(const PoolArgs& a, const LD& ld, int od, int oh, int ow, int64_t* index) {
  int d0 = od * a.sD - a.pD, h0 = oh * a.sH - a.pH, w0 = ow * a.sW - a.pW;
#if PL_MAX
  const int d1 = pl_min(d0 + (a.kD - 1) * a.dD + 1, a.D), h1 = pl_min(h0 + (a.kH - 1) * a.dH + 1, a.H),
            w1 = pl_min(w0 + (a.kW - 1) * a.dW + 1, a.W);
  while (d0 < 0) d0 += a.dD;
  while (h0 < 0) h0 += a.dH;
  while (w0 < 0) w0 += a.dW;
  float best = -INFINITY;
  int bi = (d0 * a.H + h0) * a.W + w0;
  for (int d = d0; d < d1; d += a.dD)
    for (int h = h0; h < h1; h += a.dH) {
      const int row = (d * a.H + h) * a.W;
      for (int w = w0; w < w1; w += a.dW) {
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
  int d1 = pl_min(d0 + a.kD, a.D + a.pD), h1 = pl_min(h0 + a.kH, a.H + a.pH), w1 = pl_min(w0 + a.kW, a.W + a.pW);
  const int pool = (d1 - d0) * (h1 - h0) * (w1 - w0);
  d0 = pl_max(d0, 0), h0 = pl_max(h0, 0), w0 = pl_max(w0, 0);
  d1 = pl_min(d1, a.D), h1 = pl_min(h1, a.H), w1 = pl_min(w1, a.W);
  if (d0 >= d1 || h0 >= h1 || w0 >= w1) return 0.0f;
  float sum = 0.0f;
  for (int d = d0; d < d1; ++d)
    for (int h = h0; h < h1; ++h) {
      const int row = (d * a.H + h) * a.W;
      for (int w = w0; w < w1; ++w) sum += ld(row + w);
    }
  const int div = a.divisor ? a.divisor : a.count_include_pad ? pool : (d1 - d0) * (h1 - h0) * (w1 - w0);
  (void)index;
  return sum / static_cast<float>(div);
#endif
}
