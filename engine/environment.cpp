#include "engine/environment.h"

#include <sys/utsname.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "util/error.h"

namespace forge {
namespace fs = std::filesystem;

namespace {

std::string first_line(const std::string& s) {
  auto nl = s.find('\n');
  return s.substr(0, nl);
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string run_line(CommandRunner& runner, std::vector<std::string> argv) {
  Command c;
  c.argv = std::move(argv);
  c.env["PATH"] = forge_path_env();
  c.timeout_seconds = 60;
  CommandResult r = runner.run(c);
  return r.ok() ? trim(first_line(r.out)) : "";
}

constexpr const char* kTorchProbe = R"(
import json, sys
info = {"python": sys.executable, "python_version": sys.version.split()[0]}
try:
    import torch
    info.update(torch=torch.__version__, cuda=torch.version.cuda or "",
                prefix=torch.utils.cmake_prefix_path, cuda_available=torch.cuda.is_available())
except Exception as e:
    info["torch_error"] = str(e)
print(json.dumps(info))
)";

}  // namespace

std::string forge_path_env() {
  std::string path = std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin:/bin";
  fs::path venv = fs::path(FORGE_SOURCE_DIR) / ".venv" / "bin";
  std::error_code ec;
  if (fs::is_directory(venv, ec)) path = venv.string() + ":" + path;
  return path;
}

std::string Toolchain::fingerprint() const {
  return "python " + python_version + "|torch " + torch_version + "|cuda " + torch_cuda + "|" +
         cxx + "|nvcc " + nvcc + "|cmake " + cmake_version;
}

Toolchain probe_toolchain(CommandRunner& runner) {
  Toolchain tc;
  Command c;
  c.argv = {"python3", "-c", kTorchProbe};
  c.env["PATH"] = forge_path_env();
  c.timeout_seconds = 120;
  CommandResult r = runner.run(c);
  if (!r.ok()) throw Error("cannot run python3 to find torch (" + r.describe() + ")");
  auto info = nlohmann::json::parse(first_line(r.out), nullptr, false);
  if (!info.is_object()) throw Error("unexpected answer from the python probe: " + r.out);
  tc.python = info.value("python", "");
  tc.python_version = info.value("python_version", "");
  tc.torch_version = info.value("torch", "");
  tc.torch_cuda = info.value("cuda", "");
  tc.torch_prefix = info.value("prefix", "");
  tc.torch_cuda_available = info.value("cuda_available", false);
  tc.cxx = run_line(runner, {"c++", "--version"});
  std::string nvcc = run_line(runner, {"sh", "-c", "nvcc --version | tail -n 2 | head -n 1"});
  tc.nvcc = nvcc;
  // The cmake that knows C++20 for CUDA: the venv's (pip wheel) when present.
  tc.cmake = "cmake";
  tc.cmake_version = run_line(runner, {"cmake", "--version"});
  return tc;
}

DeviceInfo probe_device(CommandRunner& runner, const DeviceSpec& spec, const Toolchain& tc) {
  DeviceInfo d;
  bool want_cuda = spec.backend == "cuda" || (spec.backend == "auto" && tc.torch_cuda_available);
  if (spec.backend == "cuda" && !tc.torch_cuda_available)
    throw Error("device.backend is cuda but torch " + tc.torch_version +
                " sees no CUDA device here");
  if (want_cuda) {
    d.backend = "cuda";
    std::string q = run_line(
        runner, {"nvidia-smi", "--query-gpu=name,compute_cap,driver_version", "--format=csv,noheader"});
    // "NVIDIA H200, 9.0, 580.65.06"
    auto c1 = q.find(", "), c2 = q.rfind(", ");
    if (c1 != std::string::npos && c2 != c1) {
      d.name = q.substr(0, c1);
      std::string cap = q.substr(c1 + 2, c2 - c1 - 2);
      cap.erase(std::remove(cap.begin(), cap.end(), '.'), cap.end());
      d.arch = "sm_" + cap + (cap == "90" ? "a" : "");
      d.driver = q.substr(c2 + 2);
    }
    if (spec.arch != "auto") d.arch = spec.arch;
    return d;
  }
  d.backend = "cpu";
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      d.name = trim(line.substr(line.find(':') + 2));
      break;
    }
  }
  utsname u{};
  ::uname(&u);
  d.arch = u.machine;
  return d;
}

}  // namespace forge
