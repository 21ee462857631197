// The storage types of x and the output, picked at run time.
__attribute__((noinline)) int softmax_dispatch(int32_t in_dtype, int32_t out_dtype, const void* x, void* y,
                                               int64_t rows, int64_t L) {
  return with_dtype(in_dtype, [&](auto ti) {
    return with_dtype(out_dtype, [&](auto to) {
      softmax_rows<decltype(ti), decltype(to)>(x, y, rows, L);
      return 0;
    });
  });
}

#include "../_common/cpu_checks.h"  // the ISA region ends; cpu_ok and the host-side tensor checks

#include "../_common/softmax_parse.h"  // the call's checks, shared with the CUDA templates

extern "C" int forge_kernel(const forge_call* call) {
  SoftmaxArgs a;
  if (parse_softmax(call, a) || !cpu_ok()) return 1;
  if (a.rows == 0) return 0;
  return softmax_dispatch(a.x_dtype, a.y_dtype, a.x, a.y, a.rows, a.L);
}
