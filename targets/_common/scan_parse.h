// A scan call (targets/scan's op table) as [outer, L, inner]:
//   cumsum(Tensor self, int dim, *, ScalarType? dtype)   cumprod: the same
// The input and the output contiguous and non-empty, of the same shape, float
// types (the dtype argument only names the output's, which the call's output
// tensor already has). Shared by the CPU and the CUDA templates. Host code:
// the CPU templates include it after their ISA region (cpu_checks.h).

namespace {

inline int parse_scan(const forge_call* call, ScanArgs& a) {
  if (!call || call->n_inputs != 1 || call->n_outputs != 1 || call->n_scalars != 2) return 1;
  const forge_tensor& x = call->inputs[0];
  const forge_tensor& y = call->outputs[0];
  const forge_scalar& dim = call->scalars[0];
  const int nd = x.ndim;
  if (!x.data || !y.data || nd < 0 || nd > FORGE_MAX_DIMS || dim.kind != FORGE_ARG_INT) return 1;
  if (!host_float(x.dtype) || !host_float(y.dtype) || !host_contiguous(x) || !host_contiguous(y)) return 1;
  if (y.ndim != nd || host_numel(x) == 0) return 1;
  for (int d = 0; d < nd; ++d)
    if (y.sizes[d] != x.sizes[d]) return 1;
  const int64_t k = dim.i < 0 ? dim.i + (nd ? nd : 1) : dim.i;
  if (k < 0 || k >= (nd ? nd : 1)) return 1;
  a.outer = a.L = a.inner = 1;
  for (int d = 0; d < nd; ++d) (d < k ? a.outer : d == k ? a.L : a.inner) *= x.sizes[d];
  a.x = x.data;
  a.y = y.data;
  a.x_dtype = x.dtype;
  a.y_dtype = y.dtype;
  return 0;
}

}  // namespace
