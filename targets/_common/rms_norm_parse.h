// _fused_rms_norm(Tensor input, int[] normalized_shape, Tensor? weight, float? eps)
//   -> (Tensor out, Tensor rstd)
// Checks a call against what every rms_norm template assumes and fills `a`:
// 0 when usable. input/out contiguous of one float dtype; normalized_shape the
// trailing dims, N = their product > 0; weight absent or N contiguous elements
// of a float dtype; rstd M contiguous elements of a float dtype; eps None =
// FLT_EPSILON (the stock kernel's default). Host code: the CPU templates
// include it after their ISA region (cpu_checks.h). Internal linkage: the
// package loads many candidates into one process.
namespace {
inline int parse_rms_norm(const forge_call* call, RmsArgs& a) {
  if (!call || call->n_inputs != 2 || call->n_outputs != 2 || call->n_scalars < 2) return 1;
  const forge_tensor& x = call->inputs[0];
  const forge_tensor& w = call->inputs[1];
  const forge_tensor& y = call->outputs[0];
  const forge_tensor& rstd = call->outputs[1];
  float eps;
  if (call->scalars[1].kind == FORGE_ARG_FLOAT) eps = static_cast<float>(call->scalars[1].f);
  else if (call->scalars[1].kind == FORGE_ARG_NONE) eps = 1.1920928955078125e-07f;  // FLT_EPSILON
  else return 1;
  if (!x.data || !host_float(x.dtype) || !host_contiguous(x) || !host_same_contiguous(y, x)) return 1;
  const int64_t N = host_row_length(x, call->scalars[0]);
  if (N <= 0) return 1;
  const int64_t M = host_numel(x) / N;
  if (w.data && (!host_float(w.dtype) || !host_contiguous(w) || host_numel(w) != N)) return 1;
  if (host_numel(rstd) != M) return 1;
  if (M && (!rstd.data || !host_float(rstd.dtype) || !host_contiguous(rstd))) return 1;
  a = RmsArgs{x.data, w.data, y.data, rstd.data, x.dtype, w.data ? w.dtype : x.dtype, rstd.dtype, M, N, eps};
  return 0;
}
}  // namespace
