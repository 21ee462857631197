// CHEAT (or bug): abort() on the host side of a CUDA candidate. The worker
// dies: "crashed (signal 6: Aborted)".
#include <cstdlib>

#include "forge_kernel.h"

extern "C" int forge_kernel(const forge_call* call) {
  if (call) std::abort();
  return 0;
}
