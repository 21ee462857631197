// Package: the accepted kernels back into the unmodified program
// (docs/PACKAGE.md). Writes <store>/package/: libforge.so (runtime/package,
// built with the worker against the user's torch), package.json (per forged
// target: the captured signature, its signature family, output layouts,
// tolerances) and kernels/<digest>.so, the very objects the worker verified.
// Then, per model with a forged target, the end-to-end check: the model's
// command once with every forged call re-run by stock and compared, and
// alternating timed runs without and with the library.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "engine/build.h"

namespace forge {

class PackageRule : public Rule {
 public:
  std::string name() const override { return "package"; }
  void apply(BuildContext& ctx) override;
};

// Where `forge package` puts the library: <store>/package.
std::filesystem::path package_dir(const Manifest& manifest);

// In package_dir instead of a library when the last build packaged nothing:
// one line saying why (`forge run` then runs the command without forge).
inline constexpr const char* kNoPackageFile = "none";

// The end-to-end verdict "slower with the library": at least kMinSlowerRuns
// runs each way (with 2, chance alone gives it one time in 6), every forged
// run slower than every stock run, and the medians more than 1% apart.
inline constexpr size_t kMinSlowerRuns = 3;
bool ran_slower(const std::vector<double>& stock, const std::vector<double>& forged);

// When the last end-to-end check of the current package failed for a model
// (<store>/package/checks.json, written by PackageRule): which and why.
std::optional<std::string> failed_package_check(const Manifest& manifest);

// What a package.json entry carries as `vary_max`: the accepted evaluation
// record's verify.vary_max (the largest extent the worker verified per
// signature_family.vary entry, in order), or null when `vary` is empty, the
// record has none (*problem says so) or it is malformed (*problem says how).
// The guard (runtime/common/signature_family.h) then takes no larger call, and
// without it only the captured extent.
nlohmann::json package_vary_max(const nlohmann::json& verify, const nlohmann::json& vary,
                                std::string* problem = nullptr);

// Sums the per-process reports libforge.so writes into `dir`
// (FORGE_PACKAGE_REPORT): {"entries": [...], "fallback": [...], "torch_compile":
// bool}, entries and fallbacks merged by target / (op, signature);
// torch_compile: some process called torch.compile (forge_compile.py's marker).
nlohmann::json merge_package_reports(const std::filesystem::path& dir);

}  // namespace forge
