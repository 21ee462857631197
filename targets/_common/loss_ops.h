/* ---- the pairwise loss op table (targets/loss) ----
 * FORGE_P_OP names the op, as forge writes the captured op's name ($op);
 * with z = input - target, per element:
 *   mse_loss          z^2
 *   smooth_l1_loss    |z| < beta ? 0.5 z^2 / beta : |z| - 0.5 beta   (beta = 0: |z|)
 *   huber_loss        |z| < delta ? 0.5 z^2 : delta (|z| - 0.5 delta)
 * in fp32, then reduction 0 (none: per element), 1 (mean) or 2 (sum), summed
 * in double. Which scalars each takes: loss_parse.h. */
#define LS_mse_loss 1
#define LS_smooth_l1_loss 2
#define LS_huber_loss 3
#include "../_common/op_code.h"  // FORGE_OP_CODE

#ifndef FORGE_P_OP
#define FORGE_P_OP mse_loss
#endif
#define LS_OP FORGE_OP_CODE(LS_)
#if LS_OP < LS_mse_loss || LS_OP > LS_huber_loss
#error "FORGE_P_OP: not an op of the loss table (targets/_common/loss_ops.h)"
#endif

#ifdef __CUDACC__
#define LS_HD __host__ __device__ __forceinline__
#else
#define LS_HD inline
#endif

// A call (loss_parse.h fills it): n elements of input and target, same layout.
struct LossArgs {
  const void* x;
  const void* t;
  void* y;  // reduction 0: n elements; else one
  int32_t x_dtype, y_dtype;
  int64_t n;
  int32_t reduction;  // 0 none, 1 mean, 2 sum
  float k;            // beta (smooth_l1) or delta (huber)
};

// The element's loss, in stock's order of operations; generic over scalar and
// vector float types V (the CPU's vectors use their lane-wise operators).
template <class V>
LS_HD V loss_of(V x, V t, float k) {
  const V z = x - t;
#if LS_OP == LS_mse_loss
  (void)k;
  return z * z;
#else
  const V a = z < 0 ? -z : z;
#if LS_OP == LS_smooth_l1_loss
  if (k == 0.0f) return a;
  return a < k ? 0.5f * a * a / k : a - 0.5f * k;
#else
  return a < k ? 0.5f * a * a : k * (a - 0.5f * k);
#endif
#endif
}
