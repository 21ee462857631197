// BUG: a null-pointer write. The worker dies of SIGSEGV: "crashed (signal 11:
// Segmentation fault)".
#include "forge_kernel.h"

extern "C" int forge_kernel(const forge_call* call) {
  volatile float* nowhere = nullptr;
  *nowhere = static_cast<float>(call->n_inputs);
  return 0;
}
