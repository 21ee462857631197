}  // namespace

#include "../_common/layer_norm_parse.h"  // the call's checks, shared with the CPU templates

extern "C" int forge_kernel(const forge_call* call) {
  LnArgs a;
  if (parse_layer_norm(call, a)) return 1;
  if (a.M == 0) return 0;
  if (!row_fits(a.N)) return 1;
  a.workspace = call->workspace;
#ifdef LN_WORKSPACE
  if (workspace_needed(a) > call->workspace_bytes) return 1;
#endif
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  return with_dtype(a.x_dtype, [&](auto t) {
    using T = decltype(t);
    return with_param_types<T>(a.x_dtype, a.w_dtype, a.stat_dtype,
                               [&](auto tp, auto ts) { return launch<T, decltype(tp), decltype(ts)>(a, stream); });
  });
}

#ifdef LN_WORKSPACE
// A template that defines LN_WORKSPACE asks for workspace_needed(LnArgs) bytes.
extern "C" int64_t forge_workspace_bytes(const forge_call* call) {
  LnArgs a;
  if (parse_layer_norm(call, a)) return 0;
  return workspace_needed(a);
}
#endif
