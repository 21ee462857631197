#include "rules/capture/runtime_build.h"

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "store/lock.h"
#include "util/atomic_file.h"
#include "util/hash.h"

namespace forge {
namespace fs = std::filesystem;
using nlohmann::json;

fs::path user_cache_dir() {
  if (const char* d = std::getenv("FORGE_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return fs::path(x) / "forge";
  const char* home = std::getenv("HOME");
  return fs::path(home && *home ? home : "/tmp") / ".cache" / "forge";
}

std::string tree_digest(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  Hasher h;
  for (const auto& f : files) {
    std::string bytes;
    read_file(f, &bytes);
    h.add("file", fs::relative(f, dir).string()).add("content", bytes);
  }
  return h.hex();
}

namespace {

std::string tail(const std::string& s, size_t n = 3000) {
  return s.size() > n ? "…" + s.substr(s.size() - n) : s;
}

// One CMake project of runtime/ built into out/build. `what` names it in
// messages; `products` maps record keys to the files the build must produce.
json build_runtime(BuildContext& ctx, const fs::path& src, const fs::path& out,
                   const std::string& what,
                   const std::vector<std::pair<std::string, std::string>>& products) {
  fs::create_directories(out);
  // Two forges building the same runtime wait for each other instead of racing.
  store::StoreLock lock(out, [&](const std::string& m) { ctx.builder.progress().warn(m); });
  const fs::path build = out / "build";
  json rec{{"status", "ok"}};
  bool have_all = true;
  for (const auto& [key, file] : products) {
    rec[key] = (build / file).string();
    have_all = have_all && fs::exists(build / file);
  }
  // `out` is named by the step key, which digests every source folder the
  // project reads and the toolchain: a finished build there is this build, and
  // configuring again (find_package(Torch) alone takes seconds) is skipped.
  const fs::path finished = out / "finished";
  if (have_all && fs::exists(finished)) return rec;
  std::error_code ec;
  fs::remove(finished, ec);  // a build stopped below leaves no stamp beside its products
  Command configure;
  configure.argv = {"cmake", "-S", src.string(), "-B", build.string(), "-G", "Ninja",
                    "-DCMAKE_BUILD_TYPE=Release",
                    "-DCMAKE_PREFIX_PATH=" + ctx.toolchain.torch_prefix};
  configure.env["PATH"] = forge_path_env();
  configure.timeout_seconds = 900;
  CommandResult r = ctx.runner.run(configure);
  if (!r.ok())
    return failed_record("configuring the " + what + " failed (" + r.describe() + ")",
                         tail(r.out + r.err));
  Command make = configure;
  make.argv = {"cmake", "--build", build.string()};
  r = ctx.runner.run(make);
  if (!r.ok())
    return failed_record("building the " + what + " failed (" + r.describe() + ")",
                         tail(r.out + r.err));
  for (const auto& [key, file] : products)
    if (!fs::exists(build / file))
      return failed_record("the " + what + " build did not produce " + (build / file).string());
  write_file_atomic(finished, "");
  return rec;
}

// The worker project builds the evaluation worker and the package library
// (runtime/package) together: they share the torch-side argument code.
std::optional<json> ensure_worker(BuildContext& ctx) {
  const fs::path runtime = fs::path(FORGE_SOURCE_DIR) / "runtime";
  const fs::path src = runtime / "worker";
  if (!fs::is_directory(src)) {
    ctx.notes.push_back("the evaluation worker's sources (runtime/worker) are missing");
    return std::nullopt;
  }
  StepSpec spec;
  spec.kind = "runtime";
  spec.label = "evaluation worker for torch " + ctx.toolchain.torch_version;
  spec.name = "runtime/worker";
  // The worker includes the candidate ABI header from runtime/abi and the
  // torch-free rules from runtime/common.
  spec.inputs = {{"sources", tree_digest(src)},
                 {"abi", tree_digest(runtime / "abi")},
                 {"common", tree_digest(runtime / "common")},
                 {"package", tree_digest(runtime / "package")},
                 {"cmake", tree_digest(runtime / "cmake")},
                 {"toolchain", ctx.toolchain.fingerprint()},
                 {"torch_prefix", ctx.toolchain.torch_prefix}};
  const std::string key = step_key(spec);
  const fs::path out = user_cache_dir() / "runtime" / key.substr(0, 16);
  spec.run = [&ctx, src, out] {
    return build_runtime(ctx, src, out, "evaluation worker",
                         {{"worker", "forge_worker"},
                          {"runner", "forge_runner"},
                          {"package_lib", "libforge.so"}});
  };
  spec.validate = [](const json& rec) {
    return fs::exists(rec.value("worker", "")) && fs::exists(rec.value("runner", "")) &&
           fs::exists(rec.value("package_lib", ""));
  };
  auto outcome = ctx.step(spec);
  if (!outcome) return std::nullopt;
  if (!record_ok(outcome->record)) {
    ctx.notes.push_back(
        "the evaluation worker did not build: " + outcome->record.value("reason", "") + "\n" +
        outcome->record.value("detail", ""));
    return std::nullopt;
  }
  json rec = outcome->record;
  rec["key"] = key;
  return rec;
}

}  // namespace

std::optional<RuntimeLibs> ensure_runtime(BuildContext& ctx, bool with_worker) {
  if (ctx.toolchain.torch_version.empty()) {
    ctx.failed = true;
    ctx.notes.push_back("torch is not importable by " + ctx.toolchain.python +
                        ": nothing can be captured");
    return std::nullopt;
  }
  const fs::path src = fs::path(FORGE_SOURCE_DIR) / "runtime" / "capture";
  const std::string sources = tree_digest(src);
  const std::string common = tree_digest(src.parent_path() / "common");
  StepSpec spec;
  spec.kind = "runtime";
  spec.label = "capture library for torch " + ctx.toolchain.torch_version;
  spec.name = "runtime/capture";
  spec.inputs = {{"sources", sources},
                 {"cmake", tree_digest(src.parent_path() / "cmake")},
                 // the dtype table (runtime/common/dtypes.h, with runtime/abi's codes)
                 {"common", common},
                 {"abi", tree_digest(src.parent_path() / "abi")},
                 {"toolchain", ctx.toolchain.fingerprint()},
                 {"torch_prefix", ctx.toolchain.torch_prefix}};
  const fs::path out = user_cache_dir() / "runtime" / step_key(spec).substr(0, 16);
  spec.run = [&ctx, src, out] {
    return build_runtime(
        ctx, src, out, "capture library",
        {{"capture_lib", "libforge_capture.so"}, {"torchscript_runner", "forge_run_torchscript"}});
  };
  spec.validate = [](const json& rec) {
    return fs::exists(rec.value("capture_lib", "")) &&
           fs::exists(rec.value("torchscript_runner", ""));
  };
  auto outcome = ctx.step(spec);
  if (!outcome || !record_ok(outcome->record)) return std::nullopt;
  const json& rec = outcome->record;
  RuntimeLibs libs;
  libs.capture_lib = rec["capture_lib"].get<std::string>();
  libs.torchscript_runner = rec["torchscript_runner"].get<std::string>();
  // What the capture library is built from: its folder and the dtype table.
  libs.digest = Hasher().add("capture", sources).add("common", common).hex();
  if (with_worker) {
    auto worker = ensure_worker(ctx);
    if (!worker) return std::nullopt;
    libs.worker = (*worker)["worker"].get<std::string>();
    libs.package_lib = (*worker)["package_lib"].get<std::string>();
    libs.worker_digest = (*worker)["key"].get<std::string>();
  }
  return libs;
}

}  // namespace forge
