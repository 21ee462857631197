// How forge runs a user's program with its libraries loaded: the model's
// command from forge.yaml (capture, the package's end-to-end check) or any
// command (`forge run`). Libraries reach every process that imports torch
// through the torch.backends entry point in runtime/autoload (docs/CAPTURE.md).
#pragma once

#include <string>
#include <vector>

#include "engine/manifest.h"
#include "rules/capture/runtime_build.h"
#include "util/process.h"

namespace forge {

// Digest of the files the model's command names ("python infer.py" ->
// infer.py) and of its TorchScript file and inputs: editing one changes it.
std::string named_files_digest(const ModelSpec& m);

// Digest of the model's `env`. With `threads`, also of what sets torch's
// intra-op threads in its runs: OMP_NUM_THREADS and MKL_NUM_THREADS as it
// inherits them from forge's environment, or, with neither set, this
// machine's core count. Which CPU kernels the package may use depends on it
// (docs/PACKAGE.md), so the end-to-end check keys on it.
std::string model_env_digest(const ModelSpec& m, bool threads);

// PYTHONPATH (autoload first) and FORGE_LOAD_LIBS for `libs` (empty: none).
void add_autoload_env(Command& c, const std::vector<std::string>& libs);

// The model's command (its `run`, or the TorchScript runner of `rt`), in its
// workdir with its env and forge's PATH, loading `libs`.
Command model_command(const ModelSpec& m, const RuntimeLibs& rt, const std::vector<std::string>& libs);

}  // namespace forge
