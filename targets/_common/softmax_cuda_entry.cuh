extern "C" int forge_kernel(const forge_call* call) {
  if (!call || call->n_inputs != 1 || call->n_outputs != 1 || call->n_scalars < 2) return 1;
  const forge_tensor& x = call->inputs[0];
  const forge_tensor& y = call->outputs[0];
  if (!x.data || !y.data || x.ndim < 1 || x.ndim != y.ndim) return 1;
  if (call->scalars[0].kind != FORGE_ARG_INT) return 1;
  int64_t dim = call->scalars[0].i;
  if (dim < 0) dim += x.ndim;
  if (dim != x.ndim - 1) return 1;
  for (int d = 0; d < x.ndim; ++d)
    if (x.sizes[d] != y.sizes[d]) return 1;
  if (!host_contiguous(x) || !host_contiguous(y)) return 1;
  const int64_t numel = host_numel(x), L = x.sizes[x.ndim - 1];
  if (numel == 0) return 0;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  return with_dtype(x.dtype, [&](auto ti) {
    using TI = decltype(ti);
    return with_dtype(y.dtype, [&](auto to) {
      using TO = decltype(to);
      return launch<TI, TO>(x.data, y.data, numel / L, L, stream);
    });
  });
}
