// The Slurm executor: each evaluation is a Slurm job that runs forge_worker on
// a node, reading one request file and writing one reply file (docs/WORKER.md;
// the worker answers requests from stdin and exits at its end). Requests,
// replies and the candidate .so and samples they name live under the store,
// which must therefore be on a filesystem the nodes share.
//
// A batch of requests is one job array, `sbatch --array=0-N%K`, K =
// max_parallel, so Slurm never runs more than K evaluations at once; with
// `gres: gpu:1` each job gets its own GPU through the CUDA_VISIBLE_DEVICES
// Slurm sets (the worker uses device 0 of what it sees).
//
// Per task, in <work_dir>/<batch>/<index>/:
//   request.jsonl   the evaluate request (one line, id "1")
//   timeout         seconds the worker may run (start + request), for `timeout`
//   reply.jsonl     what the worker printed: its hello, then the reply line
//   exit            the worker's exit status, written last (its presence = done)
//   devices         CUDA_VISIBLE_DEVICES as the job saw it
//   worker.log      the worker's stderr
//
// Completion is read from the files; squeue (rules/cluster/slurm_queue.h) says why a
// task ended without them: CANCELLED, TIMEOUT (the job's time limit),
// PREEMPTED, NODE_FAIL, OUT_OF_MEMORY... Such a task says nothing about the
// candidate: it is reported (warn) and resubmitted up to `retries` times, then
// comes back as verdict "error" reason "slurm_<state>" (not cached, so the next
// build tries again). A worker that timed out or crashed inside its job is the
// candidate's doing, as with the local executor: "timeout", "crashed (...)".
// SIGINT/SIGTERM while jobs are out cancels them (scancel), then forge dies of
// the signal as usual.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "rules/evaluate/executor.h"
#include "store/store.h"
#include "util/process.h"

namespace forge {

struct SlurmOptions {
  std::string partition;    // -p; "" = the cluster's default
  std::string account;      // -A; "" = none
  std::string time_limit;   // --time (Slurm's formats: "10", "0:30", "1:00:00"); "" = derived
  std::string gres;         // --gres, e.g. "gpu:1"; "" = none
  int max_parallel = 4;     // the array's %K
  int retries = 2;          // resubmissions of a task Slurm killed, pre-empted or timed out
  double poll_seconds = 2;  // between looks at the files and squeue
  std::vector<std::string> sbatch_args;  // extra, appended as given
};

struct SlurmExecutorOptions {
  SlurmOptions slurm;
  std::filesystem::path worker;   // forge_worker, at a path the nodes see
  std::vector<std::string> args;  // e.g. {"--backend", "cpu"}
  std::map<std::string, std::string> env;  // exported in the job script
  std::filesystem::path work_dir;  // shared with the nodes (under the store)
  std::string fingerprint;         // of the worker build
  double start_timeout_seconds = 300;  // the worker's start, added to each request's timeout
  store::WarnFn warn;                          // job failures, retries
  CommandRunner* runner = nullptr;      // sbatch/squeue/scancel; null = a process runner
};

std::unique_ptr<Executor> make_slurm_executor(SlurmExecutorOptions options);

}  // namespace forge
