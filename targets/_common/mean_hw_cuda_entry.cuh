#include "../_common/mean_hw_parse.h"  // the call's checks, shared with the CPU templates

extern "C" int forge_kernel(const forge_call* call) {
  MeanArgs a;
  if (parse_mean_hw(call, a)) return 1;
  if (a.planes == 0) return 0;
  if (a.hw == 0) return 1;  // the mean of nothing: NaN in the stock kernel, not worth a path
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  return with_dtype(a.x_dtype, [&](auto ti) {
    return with_dtype(a.y_dtype, [&](auto to) { return launch<decltype(ti), decltype(to)>(a.x, a.y, a.planes, a.hw, stream); });
  });
}
