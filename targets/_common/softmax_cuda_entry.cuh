#include "../_common/softmax_parse.h"  // the call's checks, shared with the CPU templates

extern "C" int forge_kernel(const forge_call* call) {
  SoftmaxArgs a;
  if (parse_softmax(call, a)) return 1;
  if (a.rows == 0) return 0;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  return with_dtype(a.x_dtype, [&](auto ti) {
    return with_dtype(a.y_dtype, [&](auto to) { return launch<decltype(ti), decltype(to)>(a.x, a.y, a.rows, a.L, stream); });
  });
}
