// libforge.so (runtime/package) as forge builds it for the torch in .venv,
// for tests that load it into Python: the runtime step of a real build
// (ensure_runtime with the worker, cached in forge's user cache, so a second
// test or run finds it built). FORGE_TEST_PACKAGE_LIB names a libforge.so
// built from this tree by other means instead (a quicker check of a change to
// runtime/package on a slow machine; unset, the tests build their own).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "engine/build.h"
#include "engine/builder.h"
#include "engine/environment.h"
#include "engine/manifest.h"
#include "engine/progress.h"
#include "rules/capture/runtime_build.h"
#include "store/store.h"
#include "tests/support.h"
#include "util/process.h"

namespace forge::test {

// The library's path; empty when it did not build (*why: the build's notes).
inline std::filesystem::path package_library(std::string* why) {
  if (const char* given = std::getenv("FORGE_TEST_PACKAGE_LIB"); given && *given) return given;
  TempDir dir;
  write_text(dir / "forge.yaml", "models:\n  m: {run: python m.py}\n");
  Manifest manifest = load_manifest(dir / "forge.yaml");
  auto store = store::open_local_store(manifest.store, [](const std::string&) {});
  Progress progress{false};
  Builder builder(*store, progress);
  auto runner = make_process_runner();
  Toolchain tc = probe_toolchain(*runner);
  DeviceInfo dev{"cpu", "Test CPU", "x86_64", ""};
  BuildContext ctx{manifest, builder, *runner, tc, dev, {}};
  auto rt = ensure_runtime(ctx, /*with_worker=*/true);
  if (!rt || rt->package_lib.empty()) {
    if (why) {
      why->clear();
      for (const auto& n : ctx.notes) *why += n + "\n";
    }
    return {};
  }
  return rt->package_lib;
}

}  // namespace forge::test
