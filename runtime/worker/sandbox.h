// The runner's sandbox: a seccomp filter installed after the device context is
// up and the candidate is loaded, before its first call (docs/WORKER.md, the
// threat model). Torch-free.
#pragma once

#include <string>

namespace forge::runner {

struct SandboxOptions {
  // Stage 1, around the candidate's load (dlopen runs its constructors): files
  // may be opened read-only, since the loader opens the library itself. Stage
  // 2, before its first call: no file may be opened at all.
  bool read_only_open = false;
  // CPU candidates are single-threaded (docs/CANDIDATE_ABI.md): every clone is
  // refused. The CUDA runtime may start helper threads, so the CUDA runner
  // allows clone with CLONE_THREAD and refuses only new processes; threads
  // are then caught by counting them after each call.
  bool allow_threads = false;
  // Diagnosis (FORGE_SANDBOX_DIAGNOSE=1 in the judge's environment): a refused
  // call raises SIGSYS instead of killing at once, so a handler can print its
  // number first. A candidate could catch that signal, so never by default.
  bool trap = false;
};

// Installs the filter for this process and every thread it starts later.
// Filters stack: stage 2 on top of stage 1 only narrows what is allowed.
// A refused system call kills the process with SIGSYS (SECCOMP_RET_KILL_PROCESS):
// the judge reads that as "forbidden". Returns "" or why it failed.
std::string install_sandbox(const SandboxOptions& options);

}  // namespace forge::runner
