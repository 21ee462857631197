// Not a cheat: a candidate that does not compile. Rejected "compile_error";
// `forge try` prints the compiler's output verbatim.
#include "forge_kernel.h"

extern "C" int forge_kernel(const forge_call* call) {
  return softmax_rows(call);  // never declared
}
