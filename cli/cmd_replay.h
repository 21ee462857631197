// Re-evaluating history now (docs/HISTORY.md, "Replaying"):
//   forge replay [REV [TARGET]]   every kernel in REV's tree (default the history
//                                 ref's tip; only TARGET's, an id or prefix, when
//                                 given) rebuilt, re-verified and re-benchmarked
//                                 against the target as captured now, beside what
//                                 history recorded. Exit 0 when all still verify.
//   forge bisect TARGET --slower-than US | --fails-on INPUT
//                                 the first commit (first parents, oldest first,
//                                 among those that changed TARGET's kernel) where
//                                 the kernel is slower than US µs now, or is
//                                 rejected on INPUT. Exit 0 when found, else 1.
// Both evaluate through cli/evaluation.h: each evaluation is a cached step, so a
// second replay with nothing changed (toolchain, device, worker, capture) runs
// nothing and says "cached".
#pragma once

#include "cli/cli.h"

namespace forge::cli {

int cmd_replay(const Invocation& inv);
int cmd_bisect(const Invocation& inv);

}  // namespace forge::cli
