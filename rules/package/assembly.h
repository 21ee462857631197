// Package, assembly: the shipped kernel of every forged target (not left out)
// into a staged <store>/package: package.json (per entry the captured
// signature, its signature family, output layouts, tolerances, the verified
// bound; a chain its definition and module), libforge.so, forge_compile.py,
// forge_modules.py and kernels/<digest>.so. The
// end-to-end verdict on it is verdict.h; PackageRule (package.cpp) runs both.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "engine/build.h"
#include "rules/capture/runtime_build.h"

namespace forge {

struct Assembly {
  bool empty = true;    // no target left to ship
  bool failed = false;  // libforge.so is not built (ctx.failed too, with a note)
  std::string digest;   // of package.json, the library, compile.py and modules.py
  // The same without the entries' compiled-graph routing (under_compile): what
  // a process that never calls torch.compile runs (verdict.cpp).
  std::string eager_digest;
  // The library to check: the package in use when it is this very one (left
  // in place), else the staged copy.
  std::filesystem::path lib;
  std::optional<RuntimeLibs> rt;
  std::map<std::string, std::vector<const Target*>> forged_by_model;
};

// Assembles the package of every forged target of a model not in `left_out`
// into `staged` (unless the package in use is this very one), and sets
// ctx.package's summary.
Assembly assemble_package(BuildContext& ctx, const std::set<std::string>& left_out,
                          const std::filesystem::path& staged);

// Replaces `dir` by `staged` so a reader never sees half a package.
void swap_in(const std::filesystem::path& staged, const std::filesystem::path& dir);

}  // namespace forge
