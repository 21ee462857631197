// native_group_norm(Tensor input, Tensor? weight, Tensor? bias, SymInt N, SymInt C,
//                   SymInt HxW, int group, float eps) -> (Tensor out, Tensor mean, Tensor rstd)
// Checks a call against what every group_norm template assumes and fills `a`
// (workspace NULL): 0 when usable. input/out contiguous (NCHW), one float
// dtype, N*C*HxW elements, C divisible by group; weight and bias absent or C
// contiguous elements of one float dtype; mean and rstd N*G contiguous
// elements of one float dtype. Host code: the CPU templates include it after
// their ISA region (cpu_checks.h), so it runs on any x86-64. Internal linkage:
// the package loads many candidates into one process.
namespace {
inline int parse_group_norm(const forge_call* call, GnArgs& a) {
  if (!call || call->n_inputs != 3 || call->n_outputs != 3 || call->n_scalars < 5) return 1;
  const forge_tensor& x = call->inputs[0];
  const forge_tensor& w = call->inputs[1];
  const forge_tensor& b = call->inputs[2];
  const forge_tensor& y = call->outputs[0];
  const forge_tensor& mean = call->outputs[1];
  const forge_tensor& rstd = call->outputs[2];
  for (int k = 0; k < 4; ++k)
    if (call->scalars[k].kind != FORGE_ARG_INT) return 1;
  if (call->scalars[4].kind != FORGE_ARG_FLOAT) return 1;
  const int64_t N = call->scalars[0].i, C = call->scalars[1].i, HW = call->scalars[2].i, G = call->scalars[3].i;
  if (N < 0 || C < 1 || HW < 0 || G < 1 || C % G != 0) return 1;
  if (!x.data || !host_float(x.dtype) || x.ndim < 2 || !host_contiguous(x)) return 1;
  if (x.sizes[0] != N || x.sizes[1] != C || host_numel(x) != N * C * HW) return 1;
  if (!host_same_contiguous(y, x)) return 1;
  int32_t w_dtype;
  if (!host_affine_ok(w, b, C, x.dtype, &w_dtype) || !host_stats_ok(mean, rstd, N * G)) return 1;
  a = GnArgs{x.data, w.data,  b.data,     y.data, mean.data, rstd.data, x.dtype, w_dtype, mean.dtype, N, C, HW, G,
             static_cast<float>(call->scalars[4].f), nullptr};
  return 0;
}
}  // namespace
