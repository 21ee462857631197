}  // namespace (opened by cpu_common.h)

/* ---- end of the ISA region: host-side checks (every CPU entry) ----
 * Compiled for the baseline x86-64 ISA, so they run on any CPU: cpu_ok()
 * says whether the ISA the compute code was compiled for is present before
 * any of that code runs. */
#if FORGE_P_ISA != 0
#pragma GCC pop_options
#endif

namespace {
inline bool cpu_ok() {
#if FORGE_P_ISA == 3
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
#elif FORGE_P_ISA == 2
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
#else
  return true;
#endif
}

#include "../_common/host_checks.h"  // the host-side tensor checks, shared with the CUDA templates
}  // namespace
