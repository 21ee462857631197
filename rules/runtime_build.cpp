#include "rules/runtime_build.h"

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

json build_runtime(BuildContext& ctx, const fs::path& src, const fs::path& out) {
  fs::create_directories(out);
  // Two forges building the same runtime wait for each other instead of racing.
  store::StoreLock lock(out, [&](const std::string& m) { ctx.builder.progress().warn(m); });
  const fs::path build = out / "build";
  Command configure;
  configure.argv = {"cmake", "-S", src.string(), "-B", build.string(), "-G", "Ninja",
                    "-DCMAKE_BUILD_TYPE=Release",
                    "-DCMAKE_PREFIX_PATH=" + ctx.toolchain.torch_prefix};
  configure.env["PATH"] = forge_path_env();
  configure.timeout_seconds = 900;
  CommandResult r = ctx.runner.run(configure);
  if (!r.ok())
    return failed_record("configuring the capture library failed (" + r.describe() + ")",
                         tail(r.out + r.err));
  Command make = configure;
  make.argv = {"cmake", "--build", build.string()};
  r = ctx.runner.run(make);
  if (!r.ok())
    return failed_record("building the capture library failed (" + r.describe() + ")",
                         tail(r.out + r.err));
  json rec{{"status", "ok"},
           {"capture_lib", (build / "libforge_capture.so").string()},
           {"torchscript_runner", (build / "forge_run_torchscript").string()}};
  for (const char* key : {"capture_lib", "torchscript_runner"})
    if (!fs::exists(rec[key].get<std::string>()))
      return failed_record(std::string("the runtime build did not produce ") +
                           rec[key].get<std::string>());
  return rec;
}

}  // namespace

std::optional<RuntimeLibs> ensure_runtime(BuildContext& ctx) {
  if (ctx.toolchain.torch_version.empty()) {
    ctx.failed = true;
    ctx.notes.push_back("torch is not importable by " + ctx.toolchain.python +
                        ": nothing can be captured");
    return std::nullopt;
  }
  const fs::path src = fs::path(FORGE_SOURCE_DIR) / "runtime" / "capture";
  const std::string sources = tree_digest(src);
  StepSpec spec;
  spec.kind = "runtime";
  spec.label = "capture library for torch " + ctx.toolchain.torch_version;
  spec.name = "runtime/capture";
  spec.inputs = {{"sources", sources},
                 {"toolchain", ctx.toolchain.fingerprint()},
                 {"torch_prefix", ctx.toolchain.torch_prefix}};
  const fs::path out = user_cache_dir() / "runtime" / step_key(spec).substr(0, 16);
  spec.run = [&ctx, src, out] { return build_runtime(ctx, src, out); };
  spec.validate = [](const json& rec) {
    return fs::exists(rec.value("capture_lib", "")) &&
           fs::exists(rec.value("torchscript_runner", ""));
  };
  auto outcome = ctx.step(spec);
  if (!outcome || !record_ok(outcome->record)) return std::nullopt;
  const json& rec = outcome->record;
  return RuntimeLibs{rec["capture_lib"].get<std::string>(),
                     rec["torchscript_runner"].get<std::string>(), sources};
}

}  // namespace forge
