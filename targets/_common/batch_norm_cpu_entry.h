// The storage types of x, the parameters and the saved statistics, picked at
// run time; bn_typed (the template's) runs the op for them.
__attribute__((noinline)) int batch_norm_run(const BnArgs& a) {
  return with_dtype(a.x_dtype, [&](auto t) {
    return with_dtype(a.p_dtype, [&](auto tp) {
      return with_dtype(a.s_dtype, [&](auto ts) {
        bn_typed<decltype(t), decltype(tp), decltype(ts)>(a);
        return 0;
      });
    });
  });
}

#include "../_common/cpu_checks.h"  // the ISA region ends; cpu_ok and the host-side tensor checks

#include "../_common/batch_norm_parse.h"  // the call's checks, shared with the CUDA templates

extern "C" int forge_kernel(const forge_call* call) {
  BnArgs a;
  if (parse_batch_norm(call, FORGE_NHWC, a) || !cpu_ok()) return 1;
  if (a.numel == 0) return 0;
  // [N, C] (HW = 1) is both layouts: rows of C channels, the NHWC loop's case.
  a.channels_last = FORGE_NHWC && (a.channels_last || a.HW == 1);
  return batch_norm_run(a);
}
