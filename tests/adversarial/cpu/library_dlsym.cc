// CHEAT: calling a library op. A kernel cannot link torch (the link refuses
// undefined symbols, the worker refuses libtorch), so it looks the stock kernel
// up at run time: dlsym of torch's C++ softmax entry. Rejected by the static
// check: "dynamic_loading". (Were it to get past, the worker refuses a library
// that imports dlsym, "library_call", and counts ATen ops during the call.)
#include <dlfcn.h>

#include "forge_kernel.h"

using CpuSoftmax = void (*)(const void* self, long dim, bool half_to_float, void* out);

extern "C" int forge_kernel(const forge_call* call) {
  void* sym = dlsym(RTLD_DEFAULT, "_ZN2at3cpu8_softmaxERKNS_6TensorElb");
  if (!sym) return 1;
  reinterpret_cast<CpuSoftmax>(sym)(call->inputs[0].data, -1, false, call->outputs[0].data);
  return 0;
}
