// What the build runs on: the user's Python/torch toolchain and the device.
// Both are probed once per build and enter step keys, so changing torch, the
// compiler or the GPU invalidates exactly the steps that depend on them.
#pragma once

#include <string>

#include "engine/manifest.h"
#include "util/process.h"

namespace forge {

struct Toolchain {
  std::string python;         // absolute path of the interpreter that runs models
  std::string python_version;
  std::string torch_version;  // "" when torch is not importable
  std::string torch_cuda;     // torch.version.cuda, "" for CPU builds
  std::string torch_prefix;   // torch.utils.cmake_prefix_path
  bool torch_cuda_available = false;
  std::string cxx;            // "g++ (Debian 12.2.0-14) 12.2.0"
  std::string nvcc;           // "" when absent
  std::string cmake;          // path of the cmake forge builds runtime pieces with
  std::string cmake_version;

  // One short string for step keys.
  std::string fingerprint() const;
};

struct DeviceInfo {
  std::string backend;  // "cpu" | "cuda"
  std::string name;     // "NVIDIA H200" / CPU model name
  std::string arch;     // "sm_90a" / "x86_64"
  std::string driver;   // CUDA driver version, "" on CPU
  std::string fingerprint() const { return backend + "|" + name + "|" + arch + "|" + driver; }
};

Toolchain probe_toolchain(CommandRunner& runner);
DeviceInfo probe_device(CommandRunner& runner, const DeviceSpec& spec, const Toolchain& tc);

// PATH with the project's .venv/bin (when forge runs from a source tree that has
// one) ahead of the inherited PATH: "a `run:` command runs in forge's own environment".
std::string forge_path_env();

}  // namespace forge
