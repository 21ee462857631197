// Reading the history branch (rules/history/repo.h, docs/HISTORY.md):
//   forge log [TARGET]   one line per commit touching TARGET (an id or prefix;
//                        all when absent): short sha, target, speedup, proposer
//   forge diff A B       unified diff of the kernels/ trees of two revisions
// Both read git only: no store lock, no toolchain probe.
#pragma once

#include "cli/cli.h"

namespace forge::cli {

int cmd_log(const Invocation& inv);
int cmd_diff(const Invocation& inv);

}  // namespace forge::cli
