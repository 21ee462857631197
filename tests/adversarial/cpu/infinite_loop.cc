// CHEAT (or bug): an infinite loop. The call never returns; the worker is
// killed when the request's time runs out: "timeout". (volatile keeps the
// compiler from treating the side-effect-free loop as undefined and removing it.)
#include "forge_kernel.h"

extern "C" int forge_kernel(const forge_call* call) {
  volatile int spin = 1;
  while (spin) {
  }
  return call == nullptr;
}
