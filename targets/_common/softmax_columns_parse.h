// _softmax / _log_softmax(Tensor self, int dim, bool half_to_float) over any
// dim, as [outer, L, inner]: L the softmax dim's extent, inner the elements
// after it (1 when dim is the last). 0 when usable: input and output
// contiguous with equal sizes (the output's dtype is the template's to
// check). Host code, shared by the CPU and CUDA columns templates; the
// struct it fills is softmax_columns_args.h's.

namespace {
inline int parse_softmax_columns(const forge_call* call, SoftmaxColumns& a) {
  if (!call || call->n_inputs != 1 || call->n_outputs != 1 || call->n_scalars < 2) return 1;
  const forge_tensor& x = call->inputs[0];
  const forge_tensor& y = call->outputs[0];
  if (!x.data || !y.data || x.ndim < 1 || x.ndim != y.ndim || x.ndim > FORGE_MAX_DIMS) return 1;
  if (call->scalars[0].kind != FORGE_ARG_INT) return 1;
  int64_t dim = call->scalars[0].i;
  if (dim < 0) dim += x.ndim;
  if (dim < 0 || dim >= x.ndim) return 1;
  for (int d = 0; d < x.ndim; ++d)
    if (x.sizes[d] != y.sizes[d]) return 1;
  if (!host_contiguous(x) || !host_contiguous(y)) return 1;
  a = SoftmaxColumns{x.data, y.data, x.dtype, y.dtype, 1, x.sizes[dim], 1};
  for (int d = 0; d < dim; ++d) a.outer *= x.sizes[d];
  for (int d = static_cast<int>(dim) + 1; d < x.ndim; ++d) a.inner *= x.sizes[d];
  if (host_numel(x) == 0) a.outer = 0;
  return 0;
}
}  // namespace
