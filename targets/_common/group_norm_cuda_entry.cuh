}  // namespace

#include "../_common/group_norm_parse.h"  // the call's checks, shared with the CPU templates

// The entry points (runtime/abi/forge_kernel.h). A template defines
// launch<T, TW, TS>(GnArgs, stream) and workspace_needed(GnArgs).
extern "C" int forge_kernel(const forge_call* call) {
  GnArgs a;
  if (parse_group_norm(call, a)) return 1;
  if (a.N == 0) return 0;
  if (a.HW == 0) return 1;  // empty groups: the stock kernel's NaN statistics, not worth a path
  a.workspace = call->workspace;
  if (workspace_needed(a) > call->workspace_bytes) return 1;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  return with_dtype(a.x_dtype, [&](auto t) {
    using T = decltype(t);
    return with_param_types<T>(a.x_dtype, a.w_dtype, a.stat_dtype,
                               [&](auto tp, auto ts) { return launch<T, decltype(tp), decltype(ts)>(a, stream); });
  });
}

extern "C" int64_t forge_workspace_bytes(const forge_call* call) {
  GnArgs a;
  if (parse_group_norm(call, a) || a.HW == 0) return 0;
  return workspace_needed(a);
}
