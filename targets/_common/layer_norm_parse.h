// native_layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight,
//                   Tensor? bias, float eps) -> (Tensor out, Tensor mean, Tensor rstd)
// Checks a call against what every layer_norm template assumes and fills `a`:
// 0 when usable. input/out contiguous of one float dtype; normalized_shape
// the trailing dims, N = their product > 0; weight and bias absent or N
// contiguous elements of one float dtype; mean and rstd M contiguous elements
// of one float dtype. Host code: the CPU templates include it after their ISA
// region (cpu_checks.h). Internal linkage: the package loads many candidates
// into one process.
namespace {
inline int parse_layer_norm(const forge_call* call, LnArgs& a) {
  if (!call || call->n_inputs != 3 || call->n_outputs != 3 || call->n_scalars < 2) return 1;
  const forge_tensor& x = call->inputs[0];
  const forge_tensor& w = call->inputs[1];
  const forge_tensor& b = call->inputs[2];
  const forge_tensor& y = call->outputs[0];
  const forge_tensor& mean = call->outputs[1];
  const forge_tensor& rstd = call->outputs[2];
  if (call->scalars[1].kind != FORGE_ARG_FLOAT) return 1;
  if (!x.data || !host_float(x.dtype) || !host_contiguous(x) || !host_same_contiguous(y, x)) return 1;
  const int64_t N = host_row_length(x, call->scalars[0]);
  if (N <= 0) return 1;
  const int64_t M = host_numel(x) / N;
  int32_t w_dtype;  // mean and rstd: shaped input.shape[:axis] + [1]*k, M elements
  if (!host_affine_ok(w, b, N, x.dtype, &w_dtype) || !host_stats_ok(mean, rstd, M)) return 1;
  a = LnArgs{x.data,  w.data,  b.data,     y.data, mean.data, rstd.data,
             x.dtype, w_dtype, mean.dtype, M,      N,         static_cast<float>(call->scalars[1].f)};
  return 0;
}
}  // namespace
