/* ---- the scan op table (targets/scan) ----
 * FORGE_P_OP names the op, as forge writes the captured op's name ($op):
 *   cumsum     y[..., l, ...] = x[..., 0, ...] + ... + x[..., l, ...]
 *   cumprod    the same with products
 * Both run in double (what the stock CPU kernels accumulate in), rounded once
 * per output. Which scalars each takes: scan_parse.h. */
#define SC_cumsum 1
#define SC_cumprod 2
#include "../_common/op_code.h"  // FORGE_OP_CODE

#ifndef FORGE_P_OP
#define FORGE_P_OP cumsum
#endif
#define SC_OP FORGE_OP_CODE(SC_)
#if SC_OP < SC_cumsum || SC_OP > SC_cumprod
#error "FORGE_P_OP: not an op of the scan table (targets/_common/scan_ops.h)"
#endif
#define SC_IDENTITY (SC_OP == SC_cumsum ? 0.0 : 1.0)
#define SC_COMBINE(a, b) (SC_OP == SC_cumsum ? (a) + (b) : (a) * (b))

// A call as [outer, L, inner] (scan_parse.h fills it): the scan runs along L
// for each of the outer * inner positions; input and output contiguous.
struct ScanArgs {
  const void* x;
  void* y;
  int32_t x_dtype, y_dtype;
  int64_t outer, L, inner;
};
