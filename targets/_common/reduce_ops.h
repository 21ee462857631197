/* ---- the reduction op table (targets/reduce, mean_hw's generic strategy) ----
 * FORGE_P_OP names the op, as forge writes the captured op's name ($op):
 *   sum, mean           fp32 partial sums gathered in double, mean = sum / R
 *   prod                fp32 products (the stock kernels' precision and overflow)
 *   amax, amin          the extreme value; NaN wins (stock propagates NaN)
 *   argmax, argmin      its index within the reduced block (flattened over the
 *                       reduced dims); NaN counts as the extreme, ties and NaNs
 *                       give the first index, as stock does
 *   max, min            max.dim / min.dim: the value and its index
 *   linalg_vector_norm  ord 2: sqrt of the sum of squares; ord 1: the sum of
 *                       |x|; gathered like sums
 * Which scalars each op takes: reduce_parse.h. */
#define RD_sum 1
#define RD_mean 2
#define RD_prod 3
#define RD_amax 4
#define RD_amin 5
#define RD_argmax 6
#define RD_argmin 7
#define RD_max 8
#define RD_min 9
#define RD_linalg_vector_norm 10
#include "../_common/op_code.h"  // FORGE_OP_CODE

#ifndef FORGE_P_OP
#define FORGE_P_OP sum
#endif
#define RD_OP FORGE_OP_CODE(RD_)
#if RD_OP < RD_sum || RD_OP > RD_linalg_vector_norm
#error "FORGE_P_OP: not an op of the reduction table (targets/_common/reduce_ops.h)"
#endif
// The kinds the kernels are written for.
#define RD_SUM (RD_OP == RD_sum || RD_OP == RD_mean || RD_OP == RD_linalg_vector_norm)
#define RD_NORM (RD_OP == RD_linalg_vector_norm)
#define RD_PROD (RD_OP == RD_prod)
#define RD_EXTREME (RD_OP >= RD_amax && RD_OP <= RD_min)
#define RD_IS_MAX (RD_OP == RD_amax || RD_OP == RD_argmax || RD_OP == RD_max)
#define RD_WITH_INDEX (RD_OP == RD_argmax || RD_OP == RD_argmin || RD_OP == RD_max || RD_OP == RD_min)
#define RD_WITH_VALUE (RD_OP != RD_argmax && RD_OP != RD_argmin)

// A call as [outer, R, inner] (reduce_parse.h fills it).
struct ReduceArgs {
  const void* x;
  void* y;        // values (NULL for argmax/argmin)
  int64_t* idx;   // indices (argmax/argmin: output 0; max.dim/min.dim: output 1), else NULL
  int32_t x_dtype, y_dtype;
  int64_t outer, R, inner;  // numel = outer * R * inner
  int64_t sR, sO;            // element strides of the R and outer positions (inner steps by 1)
  int ord;                   // linalg_vector_norm's ord (1 or 2), else 0
  // A value reduction over two runs of dims, the kept ones between ([R1, outer,
  // R], inner 1): each output also reduces over R1 rows sR1 apart. Else R1 = 1.
  int64_t R1, sR1;
};
