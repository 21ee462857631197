template <class T>
int dispatch_w(const GnArgs& a, cudaStream_t stream) {
  if (a.w_dtype == a.x_dtype) {
    if (a.stat_dtype == a.x_dtype) return launch<T, T, T>(a, stream);
    if (a.stat_dtype == FORGE_FLOAT32) return launch<T, T, float>(a, stream);
  } else if (a.w_dtype == FORGE_FLOAT32) {
    if (a.stat_dtype == a.x_dtype) return launch<T, float, T>(a, stream);
    if (a.stat_dtype == FORGE_FLOAT32) return launch<T, float, float>(a, stream);
  }
  return 1;
}

}  // namespace

#include "../_common/group_norm_parse.h"  // the call's checks, shared with the CPU templates
