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
// The fields of a call whose sizes and eps are N, C, HW, G, eps (mean and rstd
// NULL: a chain's kernel, whose statistics are no output), or 1.
inline int group_norm_fields(const forge_tensor& x, const forge_tensor& w, const forge_tensor& b, const forge_tensor& y,
                             int64_t N, int64_t C, int64_t HW, int64_t G, float eps, int32_t stat_dtype,
                             void* mean, void* rstd, GnArgs& a) {
  if (N < 0 || C < 1 || HW < 0 || G < 1 || C % G != 0) return 1;
  if (!x.data || !host_float(x.dtype) || x.ndim < 2 || !host_contiguous(x)) return 1;
  if (x.sizes[0] != N || x.sizes[1] != C || host_numel(x) != N * C * HW) return 1;
  if (!host_same_contiguous(y, x)) return 1;
  int32_t w_dtype;
  if (!host_affine_ok(w, b, C, x.dtype, &w_dtype)) return 1;
  a = GnArgs{x.data, w.data, b.data, y.data, mean, rstd, x.dtype, w_dtype, stat_dtype, N, C, HW, G, eps, nullptr};
  return 0;
}

#ifdef FORGE_CHAIN_HEAD
// A chain that starts with native_group_norm (chain_epilogue.h): inputs
// (input, weight, bias), one output (the chain's last op's), no scalars; N, C,
// HxW, group and eps are the chain's constants (CHAIN_GN_*), and the
// statistics round through the input's dtype as the stock kernel's outputs do.
inline int parse_group_norm(const forge_call* call, GnArgs& a) {
  if (!call || call->n_inputs != 3 || call->n_outputs != 1 || call->n_scalars != 0) return 1;
  return group_norm_fields(call->inputs[0], call->inputs[1], call->inputs[2], call->outputs[0], CHAIN_GN_N,
                           CHAIN_GN_C, CHAIN_GN_HW, CHAIN_GN_G, CHAIN_GN_EPS, call->inputs[0].dtype, nullptr,
                           nullptr, a);
}
#else
inline int parse_group_norm(const forge_call* call, GnArgs& a) {
  if (!call || call->n_inputs != 3 || call->n_outputs != 3 || call->n_scalars < 5) return 1;
  const forge_tensor& mean = call->outputs[1];
  const forge_tensor& rstd = call->outputs[2];
  for (int k = 0; k < 4; ++k)
    if (call->scalars[k].kind != FORGE_ARG_INT) return 1;
  if (call->scalars[4].kind != FORGE_ARG_FLOAT) return 1;
  const int64_t N = call->scalars[0].i, C = call->scalars[1].i, HW = call->scalars[2].i, G = call->scalars[3].i;
  if (G < 1 || !host_stats_ok(mean, rstd, N * G)) return 1;
  return group_norm_fields(call->inputs[0], call->inputs[1], call->inputs[2], call->outputs[0], N, C, HW, G,
                           static_cast<float>(call->scalars[4].f), mean.dtype, mean.data, rstd.data, a);
}
#endif
}  // namespace
