// mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor
// The call as `planes` means over the `hw` trailing elements of each, for the
// CPU and the CUDA templates alike. 0 when usable: input and output
// contiguous, float dtypes; the reduced dims exactly the trailing k (None or
// [] = all). Host code: the CPU templates include it after their ISA region
// (cpu_checks.h). Internal linkage: the package loads many candidates into
// one process.
struct MeanArgs {
  const void* x;
  void* y;
  int32_t x_dtype, y_dtype;
  int64_t planes, hw;
};

namespace {
inline int parse_mean_hw(const forge_call* call, MeanArgs& a) {
  if (!call || call->n_inputs != 1 || call->n_outputs != 1 || call->n_scalars < 1) return 1;
  const forge_tensor& x = call->inputs[0];
  const forge_tensor& y = call->outputs[0];
  if (!x.data || !y.data || x.ndim < 1 || !host_float(x.dtype) || !host_float(y.dtype)) return 1;
  if (!host_contiguous(x) || !host_contiguous(y)) return 1;
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
    if (reduced[d] != (d >= x.ndim - k)) return 1;  // only the trailing dims
  int64_t planes = 1, hw = 1;
  for (int d = 0; d < x.ndim; ++d) (reduced[d] ? hw : planes) *= x.sizes[d];
  if (host_numel(y) != planes) return 1;
  a = MeanArgs{x.data, y.data, x.dtype, y.dtype, planes, hw};
  return 0;
}
}  // namespace
