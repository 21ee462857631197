#include "rules/cluster/device_executor.h"

#include "engine/environment.h"
#include "rules/capture/ceiling.h"
#include "rules/cluster/slurm_executor.h"

namespace forge {

namespace {

std::unique_ptr<Executor> make_slurm_device_executor(BuildContext& ctx, const RuntimeLibs& rt) {
  SlurmExecutorOptions ex;
  const SlurmSpec& spec = ctx.manifest.slurm;
  ex.slurm.partition = spec.partition;
  ex.slurm.account = spec.account;
  ex.slurm.time_limit = spec.time_limit;
  ex.slurm.gres = spec.gres;
  ex.slurm.max_parallel = spec.max_parallel;
  ex.slurm.retries = spec.retries;
  ex.slurm.poll_seconds = spec.poll_seconds;
  ex.worker = rt.worker;
  // The node's own device: the GPU Slurm gave the job (CUDA_VISIBLE_DEVICES).
  ex.args = {"--backend", ctx.device.backend == "cuda" ? "cuda" : "cpu"};
  if (auto ceiling = copy_ceiling(ctx))
    ex.args.insert(ex.args.end(), {"--ceiling", std::to_string(*ceiling)});
  ex.env["PATH"] = forge_path_env();
  ex.work_dir = ctx.manifest.store / "build" / "slurm";
  ex.fingerprint = rt.worker_digest;
  Progress* progress = &ctx.builder.progress();
  ex.warn = [progress](const std::string& m) { progress->warn(m); };
  return make_slurm_executor(ex);
}

}  // namespace

std::unique_ptr<Executor> make_device_executor(BuildContext& ctx, const RuntimeLibs& rt) {
  if (ctx.options.executor.value_or(ctx.manifest.executor) == "slurm")
    return make_slurm_device_executor(ctx, rt);
  LocalExecutorOptions ex;
  ex.worker = rt.worker;
  ex.args = {"--backend", ctx.device.backend == "cuda" ? "cuda" : "cpu"};
  if (auto ceiling = copy_ceiling(ctx))
    ex.args.insert(ex.args.end(), {"--ceiling", std::to_string(*ceiling)});
  ex.env["PATH"] = forge_path_env();
  ex.log = ctx.manifest.store / "build" / "worker.log";
  ex.fingerprint = rt.worker_digest;
  return make_local_executor(ex);
}

}  // namespace forge
