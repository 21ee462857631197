// The runtime forge loads into the user's Python links the shared C++ runtime
// even where the compiler links libstdc++ statically by default (our H200
// machines' GCC does: every eager call into libforge.so crashed there, writing
// a number to a stream). Here a wrapper compiler stands in for that toolchain; libforge.so is built with it, loaded into
// Python beside torch, and must still describe the call it hands to stock.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "tests/support.h"

namespace forge {
namespace fs = std::filesystem;
using nlohmann::json;

TEST_SUITE_BEGIN("rules::RuntimeCxx");

namespace {
const fs::path kRepo = fs::path(FORGE_TEST_DIR).parent_path();

json cpu_tensor(std::vector<int64_t> sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t s = 1;
  for (size_t d = sizes.size(); d-- > 0;) strides[d] = s, s *= sizes[d];
  return {{"type", "Tensor"}, {"device", "cpu"}, {"dtype", "float32"},
          {"requires_grad", false}, {"sizes", sizes}, {"strides", strides}};
}
}  // namespace

TEST_CASE("libforge.so built by a static-libstdc++ toolchain describes its fallback calls in full") {
  FORGE_SKIP_WITHOUT_TORCH();
  test::TempDir dir;
  const fs::path venv = kRepo / ".venv" / "bin";
  // Like the H200's GCC: -static-libstdc++, and a library folder searched
  // first that holds only libstdc++.a (so even -Bdynamic -lstdc++ finds it).
  fs::create_directories(dir / "lib");
  REQUIRE(std::system(("cp \"$(g++ -print-file-name=libstdc++.a)\" '" + (dir / "lib").string() + "'").c_str()) == 0);
  test::write_text(dir / "g++", "#!/bin/sh\nexec g++ -static-libstdc++ -L'" + (dir / "lib").string() +
                                    "' \"$@\"\n");
  fs::permissions(dir / "g++", fs::perms::owner_exec, fs::perm_options::add);
  const std::string build = (dir / "build").string();
  const std::string cmd =
      "cd '" + kRepo.string() + "' && CXX='" + (dir / "g++").string() + "' '" + (venv / "cmake").string() +
      "' -S runtime/worker -B '" + build +
      "' -G Ninja -DCMAKE_BUILD_TYPE=Release -DFORGE_WORKER_CUDA=OFF"
      " -DCMAKE_PREFIX_PATH=\"$('" + (venv / "python").string() +
      "' -c 'import torch; print(torch.utils.cmake_prefix_path)')\" > '" + build + ".log' 2>&1 && '" +
      (venv / "cmake").string() + "' --build '" + build + "' --target forge_package >> '" + build +
      ".log' 2>&1";
  REQUIRE_MESSAGE(std::system(cmd.c_str()) == 0, test::read_text(build + ".log"));

  // A package of one CPU group_norm entry whose kernel declines every call
  // (returns nonzero), so each call goes to stock and is counted by signature.
  const fs::path pkg = dir / "pkg";
  fs::create_directories(pkg / "kernels");
  fs::copy_file(fs::path(build) / "libforge.so", pkg / "libforge.so");
  test::write_text(dir / "k.c", "int forge_kernel(const void* call) { (void)call; return 1; }\n");
  REQUIRE(std::system(("gcc -shared -fPIC -o '" + (pkg / "kernels" / "k.so").string() + "' '" +
                       (dir / "k.c").string() + "'").c_str()) == 0);
  json args = json::array({cpu_tensor({1, 8, 4, 4}), cpu_tensor({8}), cpu_tensor({8}),
                           {{"type", "int"}, {"value", 1}}, {{"type", "int"}, {"value", 8}},
                           {{"type", "int"}, {"value", 16}}, {{"type", "int"}, {"value", 2}},
                           {{"type", "float"}, {"value", 1e-5}}});
  json entry = {{"target", "t"}, {"op", "aten::native_group_norm"}, {"overload", ""},
                {"args", args}, {"kernel", "kernels/k.so"},
                {"outputs", {cpu_tensor({1, 8, 4, 4}), cpu_tensor({1, 2}), cpu_tensor({1, 2})}}};
  test::write_text(pkg / "package.json", json{{"backend", "cpu"}, {"entries", {entry}}}.dump());

  const std::string run =
      "cd '" + dir.path().string() + "' && FORGE_PACKAGE_REPORT='" + pkg.string() + "' '" +
      (venv / "python").string() + "' -c \"import torch, torch.nn.functional as F\n"
      "torch.ops.load_library('" + (pkg / "libforge.so").string() + "')\n"
      "x = torch.randn(1, 8, 4, 4)\n"
      "y = F.group_norm(x, 2, torch.ones(8), torch.zeros(8))\n"
      "assert torch.allclose(y, F.group_norm(x.double(), 2).float(), atol=1e-5)\" > run.log 2>&1";
  REQUIRE_MESSAGE(std::system(run.c_str()) == 0, test::read_text(dir / "run.log"));
  json report;
  for (const auto& f : fs::directory_iterator(pkg))
    if (f.path().extension() == ".json" && f.path().filename() != "package.json")
      report = json::parse(test::read_text(f.path()));
  // The float call (the entry's, declined) and the reference's double call.
  std::set<std::string> signatures;
  for (const auto& f : report["fallback"]) signatures.insert(f["signature"].get<std::string>());
  CHECK(signatures.count(
      "Float[1, 8, 4, 4]@cpu, Float[8]@cpu, Float[8]@cpu, 1, 8, 16, 2, 1.0000000000000001e-05"));
  CHECK(signatures.count(
      "Double[1, 8, 4, 4]@cpu, [ Tensor (undefined) ], [ Tensor (undefined) ], 1, 8, 16, 2, 1.0000000000000001e-05"));
  CHECK(report["entries"][0]["kernel_errors"] == 1);
}

TEST_SUITE_END();

}  // namespace forge
