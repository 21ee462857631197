// forge_kernel of a targets/chain CPU template (after cpu_checks.h): the call
// checked and bound (chain_bind.h), then the template's chain_run(p).
#include "../_common/chain_bind.h"  // chain_bind: inlined when forge loads the template

extern "C" int forge_kernel(const forge_call* call) {
  ChainPtrs p{};
  if (!cpu_ok() || chain_bind(call, p)) return 1;
  if (kChainNumel == 0) return 0;
  return chain_run(p);
}
