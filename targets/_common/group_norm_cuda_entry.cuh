// native_group_norm(Tensor input, Tensor? weight, Tensor? bias, SymInt N, SymInt C,
//                   SymInt HxW, int group, float eps) -> (Tensor out, Tensor mean, Tensor rstd)
extern "C" int forge_kernel(const forge_call* call) {
  GnArgs a;
  int32_t w_dtype, s_dtype;
  if (parse(call, a, w_dtype, s_dtype)) return 1;
  if (a.N == 0) return 0;
  a.workspace = call->workspace;
  if (workspace_needed(a) > call->workspace_bytes) return 1;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  return with_dtype(call->inputs[0].dtype, [&](auto t) {
    using T = decltype(t);
    return dispatch_w<T>(a, call->inputs[0].dtype, w_dtype, s_dtype, stream);
  });
}

extern "C" int64_t forge_workspace_bytes(const forge_call* call) {
  GnArgs a;
  int32_t w_dtype, s_dtype;
  if (parse(call, a, w_dtype, s_dtype)) return 0;
  return workspace_needed(a);
}
