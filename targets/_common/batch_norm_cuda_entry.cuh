template <class T>
int dispatch_p(const BnArgs& a, cudaStream_t stream) {
  if (a.p_dtype == a.x_dtype) {
    if (a.s_dtype == FORGE_FLOAT32) return launch<T, T, float>(a, stream);
    if (a.s_dtype == a.x_dtype) return launch<T, T, T>(a, stream);
  } else if (a.p_dtype == FORGE_FLOAT32) {
    if (a.s_dtype == FORGE_FLOAT32) return launch<T, float, float>(a, stream);
    if (a.s_dtype == a.x_dtype) return launch<T, float, T>(a, stream);
  }
  return 1;
}

}  // namespace

#include "../_common/batch_norm_parse.h"  // the call's checks, shared with the CPU templates

extern "C" int forge_kernel(const forge_call* call) {
  BnArgs a;
  if (parse_batch_norm(call, ACCEPT_CHANNELS_LAST, a)) return 1;
  if (a.numel == 0) return 0;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  return with_dtype(a.x_dtype, [&](auto t) { return dispatch_p<decltype(t)>(a, stream); });
}
