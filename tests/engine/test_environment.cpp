#include <doctest/doctest.h>

#include "engine/environment.h"
#include "tests/engine/fake_runner.h"
#include "util/error.h"

namespace forge {
using test::exited;

TEST_SUITE_BEGIN("engine::Environment");

namespace {
test::FakeRunner probe_runner(std::string torch_json, std::string smi) {
  return test::FakeRunner([=](const Command& c) {
    if (c.argv[0] == "python3") return exited(0, torch_json + "\n");
    if (c.argv[0] == "nvidia-smi") return exited(smi.empty() ? 9 : 0, smi + "\n");
    if (c.argv[0] == "c++") return exited(0, "g++ (Debian 12.2.0-14) 12.2.0\nCopyright\n");
    if (c.argv[0] == "cmake") return exited(0, "cmake version 4.4.3\n");
    return exited(0, "");
  });
}
}  // namespace

TEST_CASE("the toolchain probe reads python, torch and compilers") {
  auto r = probe_runner(
      R"({"python":"/v/bin/python3","python_version":"3.11.7","torch":"2.14.1+cu130","cuda":"13.0","prefix":"/v/torch/share/cmake","cuda_available":false})",
      "");
  Toolchain tc = probe_toolchain(r);
  CHECK(tc.python == "/v/bin/python3");
  CHECK(tc.torch_version == "2.14.1+cu130");
  CHECK(tc.torch_prefix == "/v/torch/share/cmake");
  CHECK(tc.cxx == "g++ (Debian 12.2.0-14) 12.2.0");
  CHECK(tc.cmake_version == "cmake version 4.4.3");
  CHECK(tc.fingerprint().find("torch 2.14.1+cu130") != std::string::npos);
  // Without a GPU torch can see, auto means the CPU backend.
  DeviceInfo d = probe_device(r, DeviceSpec{}, tc);
  CHECK(d.backend == "cpu");
  // Asking for CUDA where there is none is an error, not a silent CPU build.
  DeviceSpec cuda;
  cuda.backend = "cuda";
  CHECK_THROWS_WITH_AS(probe_device(r, cuda, tc),
                       "device.backend is cuda but torch 2.14.1+cu130 sees no CUDA device here",
                       Error);
}

TEST_CASE("on a GPU the device is named by nvidia-smi; Hopper gets sm_90a") {
  auto r = probe_runner(
      R"({"python":"/p","python_version":"3.12","torch":"2.11.0+cu130","cuda":"13.0","prefix":"/x","cuda_available":true})",
      "NVIDIA H200, 9.0, 580.159.04");
  Toolchain tc = probe_toolchain(r);
  DeviceInfo d = probe_device(r, DeviceSpec{}, tc);
  CHECK(d.backend == "cuda");
  CHECK(d.name == "NVIDIA H200");
  CHECK(d.arch == "sm_90a");
  CHECK(d.driver == "580.159.04");
  DeviceSpec pinned;
  pinned.arch = "sm_90";
  CHECK(probe_device(r, pinned, tc).arch == "sm_90");
}

TEST_CASE("a python that cannot run is a clear error") {
  test::FakeRunner r([](const Command&) { return exited(127, "", "python3: not found"); });
  CHECK_THROWS_AS(probe_toolchain(r), Error);
}

TEST_SUITE_END();
}  // namespace forge
