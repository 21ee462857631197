// forge's torch-linked pieces (runtime/: the capture library and the TorchScript
// runner; the evaluation worker) are built by forge itself against the torch
// that runs the user's model, with CMake, once per (sources, torch, compiler)
// and cached outside the project in $FORGE_CACHE_DIR (default
// $XDG_CACHE_HOME/forge or ~/.cache/forge), so every project on the machine
// shares one build per torch version. The capture library and the worker are
// separate CMake projects and separate steps: capturing never waits for (or
// fails with) the worker build.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "engine/build.h"

namespace forge {

struct RuntimeLibs {
  std::filesystem::path capture_lib;         // libforge_capture.so
  std::filesystem::path torchscript_runner;  // forge_run_torchscript
  std::string digest;                        // of the capture library's sources + toolchain
  // The evaluation worker (runtime/worker, docs/WORKER.md); empty unless asked for.
  std::filesystem::path worker;  // forge_worker
  std::string worker_digest;     // its build step's key: sources, ABI, toolchain
  std::filesystem::path package_lib;  // libforge.so (runtime/package), built with the worker
};

std::filesystem::path user_cache_dir();

// Digest of every file under `dir` (relative names and contents).
std::string tree_digest(const std::filesystem::path& dir);

// Builds (or finds) the runtime for ctx's toolchain; nullopt when the step failed
// (the failure is in the build report) or, in dry mode, when it is not built yet.
// with_worker: also the evaluation worker (a second step); nullopt when either failed.
std::optional<RuntimeLibs> ensure_runtime(BuildContext& ctx, bool with_worker = false);

}  // namespace forge
