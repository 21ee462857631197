// The storage types of x, weight/bias and mean/rstd, picked at run time.
__attribute__((noinline)) int layer_norm_run(const LnArgs& a) {
  return with_dtype(a.x_dtype, [&](auto t) {
    return with_dtype(a.w_dtype, [&](auto tw) {
      return with_dtype(a.stat_dtype, [&](auto ts) {
        ln_rows<decltype(t), decltype(tw), decltype(ts)>(a);
        return 0;
      });
    });
  });
}

#include "../_common/cpu_checks.h"  // the ISA region ends; cpu_ok and the host-side tensor checks


#include "../_common/layer_norm_parse.h"  // the call's checks, shared with the CUDA templates

extern "C" int forge_kernel(const forge_call* call) {
  LnArgs a;
  if (parse_layer_norm(call, a)) return 1;
  if (FORGE_P_ROW && a.N != FORGE_P_ROW) return 1;
  if (!cpu_ok()) return 1;
  if (a.M == 0) return 0;
  return layer_norm_run(a);
}
