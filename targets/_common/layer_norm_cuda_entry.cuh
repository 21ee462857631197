// Dispatch over (x dtype) x (weight dtype: x's or float32) x (stat dtype:
// float32 or x's).
template <class T>
int dispatch_w(const LnArgs& a, cudaStream_t stream) {
  if (a.w_dtype == a.x_dtype) {
    if (a.stat_dtype == FORGE_FLOAT32) return launch<T, T, float>(a, stream);
    if (a.stat_dtype == a.x_dtype) return launch<T, T, T>(a, stream);
  } else if (a.w_dtype == FORGE_FLOAT32) {
    if (a.stat_dtype == FORGE_FLOAT32) return launch<T, float, float>(a, stream);
    if (a.stat_dtype == a.x_dtype) return launch<T, float, T>(a, stream);
  }
  return 1;
}

}  // namespace

#include "../_common/layer_norm_parse.h"  // the call's checks, shared with the CPU templates

extern "C" int forge_kernel(const forge_call* call) {
  LnArgs a;
  if (parse_layer_norm(call, a)) return 1;
  if (a.M == 0) return 0;
  if (!row_fits(a.N)) return 1;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  return with_dtype(a.x_dtype, [&](auto t) { return dispatch_w<decltype(t)>(a, stream); });
}
