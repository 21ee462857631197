// mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor
extern "C" int forge_kernel(const forge_call* call) {
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
  if (planes == 0) return 0;
  if (hw == 0) return 1;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  return with_dtype(x.dtype, [&](auto ti) {
    using TI = decltype(ti);
    return with_dtype(y.dtype, [&](auto to) {
      using TO = decltype(to);
      return launch<TI, TO>(x.data, y.data, planes, hw, stream);
    });
  });
}
