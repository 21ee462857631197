}  // namespace

#include "../_common/batch_norm_parse.h"  // the call's checks, shared with the CPU templates

extern "C" int forge_kernel(const forge_call* call) {
  BnArgs a;
  if (parse_batch_norm(call, ACCEPT_CHANNELS_LAST, a)) return 1;
  if (a.numel == 0) return 0;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  return with_dtype(a.x_dtype, [&](auto t) {
    using T = decltype(t);
    return with_param_types<T>(a.x_dtype, a.p_dtype, a.s_dtype,
                               [&](auto tp, auto ts) { return launch<T, decltype(tp), decltype(ts)>(a, stream); });
  });
}
