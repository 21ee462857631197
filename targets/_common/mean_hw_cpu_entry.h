// The storage types of x and the output, picked at run time.
__attribute__((noinline)) int mean_run(int32_t in_dtype, int32_t out_dtype, const void* x, void* y, int64_t planes,
                                       int64_t hw) {
  return with_float_type(in_dtype, [&](auto t) {
    return with_float_type(out_dtype, [&](auto to) {
      mean_planes(static_cast<const decltype(t)*>(x), static_cast<decltype(to)*>(y), planes, hw);
      return 0;
    });
  });
}

#include "../_common/cpu_checks.h"  // the ISA region ends; cpu_ok, host_contiguous, host_float, host_numel


// mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor
extern "C" int forge_kernel(const forge_call* call) {
  if (!call || call->n_inputs != 1 || call->n_outputs != 1 || call->n_scalars < 1) return 1;
  const forge_tensor& x = call->inputs[0];
  const forge_tensor& y = call->outputs[0];
  if (!x.data || !y.data || x.ndim < 1 || !host_float(x.dtype) || !host_float(y.dtype)) return 1;
  if (!host_contiguous(x) || !host_contiguous(y)) return 1;
  // The reduced dims must be exactly the trailing k dims (None or [] = all).
  bool reduced[FORGE_MAX_DIMS] = {};
  int k = 0;
  const forge_scalar& dim = call->scalars[0];
  if (dim.kind == FORGE_ARG_NONE || (dim.kind == FORGE_ARG_INT_LIST && dim.len == 0)) {
    for (int d = 0; d < x.ndim; ++d) reduced[d] = true;
    k = x.ndim;
  } else if (dim.kind == FORGE_ARG_INT_LIST) {
    for (int j = 0; j < dim.len; ++j) {
      int64_t d = dim.ints[j] < 0 ? dim.ints[j] + x.ndim : dim.ints[j];
      if (d < 0 || d >= x.ndim || reduced[d]) return 1;
      reduced[d] = true;
      ++k;
    }
  } else {
    return 1;
  }
  for (int d = 0; d < x.ndim; ++d)
    if (reduced[d] != (d >= x.ndim - k)) return 1;
  int64_t planes = 1, hw = 1, out_numel = 1;
  for (int d = 0; d < x.ndim; ++d) (reduced[d] ? hw : planes) *= x.sizes[d];
  for (int d = 0; d < y.ndim; ++d) out_numel *= y.sizes[d];
  if (out_numel != planes) return 1;
  if (FORGE_P_ROW && hw != FORGE_P_ROW) return 1;
  if (!cpu_ok()) return 1;
  if (planes == 0) return 0;
  if (hw == 0) return 1;  // the mean of nothing: NaN in the stock kernel, not worth a path
  return mean_run(x.dtype, y.dtype, x.data, y.data, planes, hw);
}
