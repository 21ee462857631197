// Where a build's candidates are evaluated: forge.yaml's `executor:` (or
// --executor) picks this machine's worker (rules/evaluate/executor.h) or Slurm
// jobs (rules/cluster/slurm_executor.h, docs/CLUSTER.md).
#pragma once

#include <memory>

#include "engine/build.h"
#include "rules/capture/runtime_build.h"
#include "rules/evaluate/executor.h"

namespace forge {

// The executor for ctx's device (local, or Slurm when asked), over the worker
// of `rt`, told the copy ceiling forge measured (so the worker need not
// measure it again).
std::unique_ptr<Executor> make_device_executor(BuildContext& ctx, const RuntimeLibs& rt);

}  // namespace forge
