// The storage types of x and the output, picked at run time.
__attribute__((noinline)) int mean_run(int32_t in_dtype, int32_t out_dtype, const void* x, void* y, int64_t planes,
                                       int64_t hw) {
  return with_dtype(in_dtype, [&](auto t) {
    return with_dtype(out_dtype, [&](auto to) {
      mean_planes(static_cast<const decltype(t)*>(x), static_cast<decltype(to)*>(y), planes, hw);
      return 0;
    });
  });
}

#include "../_common/cpu_checks.h"  // the ISA region ends; cpu_ok and the host-side tensor checks


#include "../_common/mean_hw_parse.h"  // the call's checks, shared with the CUDA templates

extern "C" int forge_kernel(const forge_call* call) {
  MeanArgs a;
  if (parse_mean_hw(call, a)) return 1;
  if (FORGE_P_ROW && a.hw != FORGE_P_ROW) return 1;
  if (!cpu_ok()) return 1;
  if (a.planes == 0) return 0;
  if (a.hw == 0) return 1;  // the mean of nothing: NaN in the stock kernel, not worth a path
  return mean_run(a.x_dtype, a.y_dtype, a.x, a.y, a.planes, a.hw);
}
