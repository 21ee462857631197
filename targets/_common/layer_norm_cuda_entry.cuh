}  // namespace

#include "../_common/layer_norm_parse.h"  // the call's checks, shared with the CPU templates

extern "C" int forge_kernel(const forge_call* call) {
  LnArgs a;
  if (parse_layer_norm(call, a)) return 1;
  if (a.M == 0) return 0;
  if (!row_fits(a.N)) return 1;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  return with_dtype(a.x_dtype, [&](auto t) {
    using T = decltype(t);
    return with_param_types<T>(a.x_dtype, a.w_dtype, a.stat_dtype,
                               [&](auto tp, auto ts) { return launch<T, decltype(tp), decltype(ts)>(a, stream); });
  });
}
