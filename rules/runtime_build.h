// forge's torch-linked pieces (runtime/: the capture library and the TorchScript
// runner) are built by forge itself against the torch that runs the user's
// model, with CMake, once per (sources, torch, compiler) and cached outside the
// project in $FORGE_CACHE_DIR (default $XDG_CACHE_HOME/forge or ~/.cache/forge),
// so every project on the machine shares one build per torch version.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "engine/build.h"

namespace forge {

struct RuntimeLibs {
  std::filesystem::path capture_lib;       // libforge_capture.so
  std::filesystem::path torchscript_runner;  // forge_run_torchscript
  std::string digest;                      // of the capture library's sources + toolchain
};

std::filesystem::path user_cache_dir();

// Digest of every file under `dir` (relative names and contents).
std::string tree_digest(const std::filesystem::path& dir);

// Builds (or finds) the runtime for ctx's toolchain; nullopt when the step failed
// (the failure is in the build report) or, in dry mode, when it is not built yet.
std::optional<RuntimeLibs> ensure_runtime(BuildContext& ctx);

}  // namespace forge
