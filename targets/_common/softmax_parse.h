// _softmax(Tensor self, int dim, bool half_to_float) -> Tensor
// The call as `rows` softmaxes of `L` elements, for the CPU and the CUDA
// templates alike. 0 when usable: input and output contiguous with equal
// sizes, dim the last one (the output's dtype is the template's to check).
// Host code: the CPU templates include it after their ISA region
// (cpu_checks.h). Internal linkage: the package loads many candidates into one
// process.
struct SoftmaxArgs {
  const void* x;
  void* y;
  int32_t x_dtype, y_dtype;
  int64_t rows, L;  // rows = 0: nothing to do
};

namespace {
inline int parse_softmax(const forge_call* call, SoftmaxArgs& a) {
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
  a = SoftmaxArgs{x.data, y.data, x.dtype, y.dtype, numel == 0 ? 0 : numel / L, L};
  return 0;
}
}  // namespace
